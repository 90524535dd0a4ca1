"""A broker or cluster restarted on its log directory is the same cluster to its clients: the
cluster id comes from the directory's meta.properties (as Kafka's does), and a directory of
another cluster is refused, naming it."""

from __future__ import annotations

from pathlib import Path

import confluent_kafka.admin
import pytest

from kafka_spark import EmbeddedBroker, EmbeddedCluster
from kafka_spark.broker.meta_properties import ClusterIdMismatch


def cluster_id_seen(bootstrap: str) -> str:
    """The cluster id a client reads from Metadata."""
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    return admin.list_topics(timeout=30).cluster_id


def test_a_broker_restarted_on_its_log_dir_keeps_its_cluster_id(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        first = cluster_id_seen(broker.bootstrap_servers)
    assert f"cluster.id={first}" in (tmp_path / "meta.properties").read_text()
    with EmbeddedBroker(log_dir=tmp_path) as broker:
        assert cluster_id_seen(broker.bootstrap_servers) == first
    with EmbeddedBroker(log_dir=tmp_path / "other") as broker:
        assert cluster_id_seen(broker.bootstrap_servers) != first, "a new directory is a new cluster"


def test_a_log_dir_of_another_cluster_is_refused_naming_it(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path):
        pass
    with pytest.raises(ClusterIdMismatch, match=f"{tmp_path} belongs to cluster"):
        EmbeddedBroker(log_dir=tmp_path, cluster_id="AAAAAAAAAAAAAAAAAAAAAA").start()


def test_a_cluster_keeps_its_id_through_a_broker_restart_and_a_whole_restart(tmp_path: Path) -> None:
    with EmbeddedCluster(brokers=3, log_dir=tmp_path) as cluster:
        first = cluster_id_seen(cluster.bootstrap_servers)
        cluster.kill_broker(0)
        cluster.restart_broker(0)
        assert cluster_id_seen(f"127.0.0.1:{cluster.nodes[0].port}") == first
    with EmbeddedCluster(brokers=3, log_dir=tmp_path) as cluster:
        assert {cluster_id_seen(f"127.0.0.1:{node.port}") for node in cluster.nodes.values()} == {first}
    (tmp_path / "broker-2" / "meta.properties").write_text("version=1\ncluster.id=BBBBBBBBBBBBBBBBBBBBBB\nnode.id=2\n")
    with pytest.raises(ClusterIdMismatch, match="belong to different clusters"):
        EmbeddedCluster(brokers=3, log_dir=tmp_path).start()
