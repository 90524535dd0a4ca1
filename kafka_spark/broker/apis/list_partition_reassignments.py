"""ListPartitionReassignments (46, v0; kafka-reassign-partitions --list and --verify,
AdminClient.listPartitionReassignments): this broker, and a pylog cluster, never move a
partition's replicas, so no reassignment is ever in progress and the answer lists none.

AlterPartitionReassignments (45) is not served: ``kafka-reassign-partitions --execute`` is told the
broker does not support it (a pylog cluster places replicas when a topic is created and keeps
them). Needs DESCRIBE on the cluster with an authorizer, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    allowed = access.allowed_on_cluster(broker, request, access.DESCRIBE)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none if allowed else ErrorCode.cluster_authorization_failed,
        "error_message": None,
        "topics": [],
    }
