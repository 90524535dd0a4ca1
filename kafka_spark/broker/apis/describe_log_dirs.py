"""DescribeLogDirs (35), v1-5: the broker's one log directory (its absolute path, as Kafka names
it, and the path AlterReplicaLogDirs takes) and the size on disk of each partition in it
(kafka-log-dirs, the topic sizes Kafka UIs show). Offset lags are those of "future" replicas,
which a move between directories would create (alter_replica_log_dirs.py): with one directory
there are none, so every lag is 0 and no partition is a future key. Internal topics are listed too,
as Kafka lists them; topics asked for that do not exist are left out, as Kafka does. v4+ add the
size and free space of the directory's volume (statvfs), v5 whether it is cordoned (never: one
directory cannot be taken out of service while the broker runs). With an authorizer: DESCRIBE on the
cluster (31 CLUSTER_AUTHORIZATION_FAILED, with no directories, otherwise)."""

from __future__ import annotations

import os
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext


def log_dir_path(broker: BrokerContext) -> str:
    """The broker's log directory as Kafka names it: its absolute path (``File.getAbsolutePath``)."""
    return os.path.abspath(broker.config.log_dir)


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    if not access.allowed_on_cluster(broker, request, access.DESCRIBE):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "results": []}
    wanted = request.body.topics
    topics = broker.logs.topics()
    if wanted is None:
        asked = {name: range(info.partitions) for name, info in topics.items()}
    else:
        asked = {topic.topic: topic.partitions for topic in wanted if topic.topic in topics}
    described = []
    for name, partitions in sorted(asked.items()):
        rows = []
        for index in partitions:
            if 0 <= index < topics[name].partitions:
                size = broker.logs.get_log(name, index).size_in_bytes
                rows.append({"partition_index": index, "partition_size": size, "offset_lag": 0, "is_future_key": False})
        described.append({"name": name, "partitions": rows})
    volume = os.statvfs(broker.config.log_dir)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "results": [
            {
                "error_code": ErrorCode.none,
                "log_dir": log_dir_path(broker),
                "topics": described,
                "total_bytes": volume.f_blocks * volume.f_frsize,
                "usable_bytes": volume.f_bavail * volume.f_frsize,
                "is_cordoned": False,
            }
        ],
    }
