"""ElectLeaders (43, v0-2; kafka-leader-election, AdminClient.elect_leaders).

One node leads every partition and is its only replica, so there is never a leader to elect:
each partition asked for answers ELECTION_NOT_NEEDED (84), as Kafka answers a partition already
led by its preferred replica; a partition taken offline by an I/O error answers
PREFERRED_LEADER_NOT_AVAILABLE (80), or ELIGIBLE_LEADERS_NOT_AVAILABLE (83) for an unclean
election, since its one replica cannot lead; an unknown one UNKNOWN_TOPIC_OR_PARTITION (3).
``topic_partitions`` null means every partition, and Kafka then lists only the partitions an
election was attempted for: none here. With an authorizer: ALTER on the cluster (31).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext

_UNCLEAN = 1


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    if not access.allowed_on_cluster(broker, request, access.ALTER):
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.cluster_authorization_failed,
            "replica_election_results": [
                {
                    "topic": entry.topic,
                    "partition_result": [
                        {
                            "partition_id": partition,
                            "error_code": ErrorCode.cluster_authorization_failed,
                            "error_message": None,
                        }
                        for partition in entry.partitions
                    ],
                }
                for entry in body.topic_partitions or ()
            ],
        }
    unclean = getattr(body, "election_type", 0) == _UNCLEAN
    if broker.cluster is not None:  # the controller elects: the preferred replica, or any live one (unclean)
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "replica_election_results": broker.cluster.elect_leaders(body.topic_partitions, unclean),
        }
    results = []
    for entry in body.topic_partitions or ():
        info = broker.logs.topic_info(entry.topic)
        partitions = []
        for partition in entry.partitions:
            code, message = ErrorCode.election_not_needed, "Leader election not needed for topic partition."
            if info is None or not 0 <= partition < info.partitions:
                code, message = ErrorCode.unknown_topic_or_partition, f"{entry.topic}-{partition} does not exist"
            elif broker.logs.get_log(entry.topic, partition).failure is not None:
                code = ErrorCode.eligible_leaders_not_available if unclean else ErrorCode.preferred_leader_not_available
                message = f"{entry.topic}-{partition} is offline: its only replica's log failed"
            partitions.append({"partition_id": partition, "error_code": code, "error_message": message})
        results.append({"topic": entry.topic, "partition_result": partitions})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "replica_election_results": results}
