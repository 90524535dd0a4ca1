"""ListPartitionReassignments (46, v0; ``kafka-reassign-partitions --list`` and ``--verify``,
AdminClient.listPartitionReassignments): the partitions whose reassignment (AlterPartition-
Reassignments, alter_partition_reassignments.py) is under way, with their replicas and the ones
being added and removed, as Kafka's controller lists them: every such partition when ``topics``
is null, else those asked for (a partition asked for with none under way is left out). Needs
DESCRIBE on the cluster with an authorizer, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    if not access.allowed_on_cluster(broker, request, access.DESCRIBE):
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.cluster_authorization_failed,
            "error_message": None,
            "topics": [],
        }
    asked = request.body.topics
    wanted = None if asked is None else {(topic.name, p) for topic in asked for p in topic.partition_indexes}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, state in sorted(broker.replicas.reassignments().items()):
        if wanted is None or (tp.topic, tp.partition) in wanted:
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "replicas": list(state.replicas),
                    "adding_replicas": list(state.adding),
                    "removing_replicas": list(state.removing),
                }
            )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "topics": [{"name": name, "partitions": partitions} for name, partitions in by_topic.items()],
    }
