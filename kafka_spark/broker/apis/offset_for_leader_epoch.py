"""OffsetForLeaderEpoch (23): where a leader epoch ended in this partition's log (KIP-101/279).

Followers ask it after a leader change, with their latest epoch, and truncate to the answer;
consumers ask it to validate their position after a leader change (KIP-320). The answer is the
largest epoch <= the one asked for and the start offset of the next one (the log end offset for
the latest epoch), from the partition's leader-epoch cache (storage/epochs.py); the current leader
epoch, when given, must be the partition's (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).

A single node answers from the leader-epoch cache it keeps per partition (a new epoch at every
start, beginning at the recovered log end offset), so a consumer or the pylog source can tell
that a crash lost a tail whose offsets were then reused.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.storage.epochs import current_epoch_error
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
    code = current_epoch_error(partition.current_leader_epoch, log.leader_epoch)
    if code:
        entry["error_code"] = code
    elif log.epochs is not None:
        entry["leader_epoch"], entry["end_offset"] = log.epochs.end_offset_for(
            partition.leader_epoch, log.log_end_offset
        )
    elif partition.leader_epoch == log.leader_epoch:
        entry["leader_epoch"], entry["end_offset"] = log.leader_epoch, log.log_end_offset
