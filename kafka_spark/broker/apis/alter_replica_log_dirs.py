"""AlterReplicaLogDirs (34), v1-2: move replicas of this broker to another of its log directories
(``kafka-reassign-partitions`` with log directories, AdminClient.alter_replica_log_dirs).

A broker has one log directory (``log.dirs`` names exactly one), so every replica already is
where it can be, and the answers are Kafka's for that case, partition by partition: the broker's
own directory (its absolute path, spelled exactly: ``/data/`` is not ``/data``) moves nothing
and succeeds; any other path is LOG_DIR_NOT_FOUND (57), whatever the partition; a partition the
cluster does not have is UNKNOWN_TOPIC_OR_PARTITION (3), one this broker holds no replica of
REPLICA_NOT_AVAILABLE (9). A partition named twice is answered once (the last path wins).
With an authorizer: ALTER on the cluster (31 CLUSTER_AUTHORIZATION_FAILED for every partition).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.apis.describe_log_dirs import log_dir_path


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    wanted: dict[tuple[str, int], str] = {}
    for directory in request.body.dirs:
        for topic in directory.topics:
            for partition in topic.partitions:
                wanted[(topic.name, partition)] = directory.path
    allowed = access.allowed_on_cluster(broker, request, access.ALTER)
    own = log_dir_path(broker)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), path in wanted.items():
        code: int
        if not allowed:
            code = ErrorCode.cluster_authorization_failed
        elif path != own:
            code = ErrorCode.log_dir_not_found
        else:
            code, _, _ = broker.replicas.hosted_replica(topic, partition)
            if code == ErrorCode.not_leader_or_follower:
                code = ErrorCode.replica_not_available
        by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
    return {
        "throttle_time": 0,
        "results": [{"topic_name": topic, "partitions": partitions} for topic, partitions in by_topic.items()],
    }
