"""AlterPartitionReassignments (45, v0-1; ``kafka-reassign-partitions --execute`` / ``--cancel``,
AdminClient.alterPartitionReassignments): the controller moves a partition's replicas to the
target asked for (metadata/controller.py, KIP-455): the new replicas catch up from the leader,
then the partition keeps the target only, its leader moving to a replica of the target if it is
not one. A null target cancels a reassignment under way (NO_REASSIGNMENT_IN_PROGRESS, 85, when
there is none); a target naming an unregistered broker, a broker twice or no broker is
INVALID_REPLICA_ASSIGNMENT (39) with Kafka's message; v1's ``allow_replication_factor_change``
false refuses a change of the replica count (INVALID_REPLICATION_FACTOR, 38, KIP-860). On a
single node, its own controller, the only registered broker is the node. With an authorizer:
ALTER on the cluster (31 for every partition otherwise).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.common.topic_partition import TopicPartition


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    allow_change = getattr(body, "allow_replication_factor_change", True)
    asked = {
        TopicPartition(topic.name, partition.partition_index): partition.replicas
        for topic in body.topics
        for partition in topic.partitions
    }
    if access.allowed_on_cluster(broker, request, access.ALTER):
        results = broker.replicas.reassign(
            {tp: None if replicas is None else list(replicas) for tp, replicas in asked.items()},
            allow_replication_factor_change=allow_change,
        )
    else:
        results = {tp: (ErrorCode.cluster_authorization_failed, None) for tp in asked}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, (code, message) in results.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": code, "error_message": message}
        )
    return {
        "throttle_time": 0,
        "allow_replication_factor_change": allow_change,
        "error_code": ErrorCode.none,
        "error_message": None,
        "responses": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()],
    }
