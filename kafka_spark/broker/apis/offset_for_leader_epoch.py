"""OffsetForLeaderEpoch (23): where a leader epoch ended in this partition's log (KIP-101/279).

Followers ask it after a leader change, with their latest epoch, and truncate to the answer;
consumers ask it to validate their position after a leader change (KIP-320). The answer is the
largest epoch <= the one asked for and the start offset of the next one (the log end offset for
the latest epoch), from the partition's leader-epoch cache (storage/epochs.py); the current leader
epoch, when given, must be the partition's (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).

A single node, which starts a new epoch at every start, beginning at the recovered log end offset,
answers the same way, so a consumer or the pylog source can tell that a crash lost a tail whose
offsets were then reused.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    replica_id = getattr(body, "replica_id", -1)
    topics = []
    for topic in body.topics:
        denied = not access.allowed(broker, request, access.DESCRIBE, access.TOPIC, topic.topic)
        partitions = []
        for partition in topic.partitions:
            entry = {
                "error_code": ErrorCode.none,
                "partition": partition.partition,
                "leader_epoch": -1,
                "end_offset": -1,
            }
            if denied:
                entry["error_code"] = ErrorCode.topic_authorization_failed
            else:  # the leader answers, from its leader-epoch cache
                entry["error_code"], entry["leader_epoch"], entry["end_offset"] = broker.replicas.end_offset_for(
                    topic.topic, partition.partition, partition.current_leader_epoch, partition.leader_epoch, replica_id
                )
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}
