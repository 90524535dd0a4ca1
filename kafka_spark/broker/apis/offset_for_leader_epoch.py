"""OffsetForLeaderEpoch (23): where a leader epoch ended in this partition's log (KIP-101/279).

Followers ask it after a leader change, with their latest epoch, and truncate to the answer;
consumers ask it to validate their position after a leader change (KIP-320). The answer is the
largest epoch <= the one asked for and the start offset of the next one (the log end offset for
the latest epoch), from the partition's leader-epoch cache (cluster/epochs.py); the current leader
epoch, when given, must be the partition's (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).

Advertised by the brokers of a cluster only. A single node (which stamps every batch with epoch 0)
answers it too: epoch 0 ends at its log end offset.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.storage.errors import StorageError


def handle(broker: Any, request: Any) -> dict[str, Any]:
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
            elif broker.cluster is not None:
                entry["error_code"], entry["leader_epoch"], entry["end_offset"] = broker.cluster.end_offset_for(
                    topic.topic, partition.partition, partition.current_leader_epoch, partition.leader_epoch, replica_id
                )
            else:
                _single_node(broker, topic.topic, partition, entry)
            partitions.append(entry)
        topics.append({"topic": topic.topic, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _single_node(broker: Any, topic: str, partition: Any, entry: dict[str, Any]) -> None:
    try:
        log = broker.logs.get_log(topic, partition.partition)
    except StorageError as error:
        entry["error_code"] = error.error_code
        return
    if partition.current_leader_epoch > 0:
        entry["error_code"] = ErrorCode.unknown_leader_epoch
    elif partition.leader_epoch == 0:
        entry["leader_epoch"], entry["end_offset"] = 0, log.log_end_offset
