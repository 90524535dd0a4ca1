"""ElectLeaders (43, v0-2; kafka-leader-election, AdminClient.elect_leaders).

The controller elects (metadata/controller.py): a preferred election makes each partition's
first replica its leader where it is alive and in sync (ELECTION_NOT_NEEDED, 84, when it leads
already, as on a single node, where the node is every partition's only replica;
PREFERRED_LEADER_NOT_AVAILABLE, 80, when it cannot); an unclean one gives an offline partition a
live out-of-sync replica (ELIGIBLE_LEADERS_NOT_AVAILABLE, 83, when none is alive). A partition
whose leader's log failed (an I/O error) and that no other replica can take over answers 80 (83
for an unclean election); an unknown one UNKNOWN_TOPIC_OR_PARTITION (3). ``topic_partitions``
null means every partition, and Kafka then lists only the partitions an election was attempted
for. With an authorizer: ALTER on the cluster (31).
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
    # The controller elects: the preferred replica, or any live one (unclean).
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "replica_election_results": broker.replicas.elect_leaders(body.topic_partitions, unclean),
    }
