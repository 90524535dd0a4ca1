"""A log directory's ``meta.properties``: the cluster it belongs to and the node that owns it.

Kafka writes this file into every log directory when it formats the storage, and a broker refuses
to start on a directory that belongs to another cluster ("The broker is trying to join the wrong
cluster"). pylog writes it on a directory's first start and reads the cluster id back on every
later one, so a broker or cluster restarted on its log directory answers Metadata, ApiVersions and
DescribeCluster with the same cluster id as before: clients that remember it (librdkafka warns
"reports different ClusterId", Kafka Streams and Connect check it) see the same cluster.
"""

from __future__ import annotations

from pathlib import Path

from kafka_spark.broker.storage import checkpoint

FILE_NAME = "meta.properties"


class ClusterIdMismatch(ValueError):
    """A log directory belongs to another cluster than the one asked for."""


def stored_cluster_id(log_dir: Path) -> str | None:
    """The ``cluster.id`` in ``log_dir/meta.properties``, or None when there is no such file."""
    path = Path(log_dir) / FILE_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "cluster.id" and value.strip():
            return value.strip()
    raise ClusterIdMismatch(f"{path} has no cluster.id line; restore it or move the directory away")


def claim(log_dir: Path, cluster_id: str, node_id: int) -> None:
    """Record that ``log_dir`` belongs to ``cluster_id`` (node ``node_id``); raise
    :class:`ClusterIdMismatch` if it already belongs to another cluster."""
    stored = stored_cluster_id(log_dir)
    if stored is None:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        text = f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n"
        checkpoint.atomic_write(Path(log_dir) / FILE_NAME, text.encode("utf-8"))
    elif stored != cluster_id:
        raise ClusterIdMismatch(
            f"the log directory {log_dir} belongs to cluster {stored}, not {cluster_id} (its {FILE_NAME}); "
            "start the broker on its own directory, or on an empty one to begin a new cluster"
        )
