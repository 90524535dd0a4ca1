"""ListOffsets (2): earliest (-2), latest (-1), or the first offset at or after a timestamp.

Latest is the high watermark for read_uncommitted and the last stable offset for
read_committed (librdkafka's default isolation level relies on that).
"""

from __future__ import annotations

from typing import Any

from kafka_spark.broker.storage.errors import StorageError

LATEST = -1
EARLIEST = -2
_READ_COMMITTED = 1


def handle(broker: Any, request: Any) -> dict[str, Any]:
    body = request.body
    read_committed = getattr(body, "isolation_level", 0) == _READ_COMMITTED
    topics = []
    for topic in body.topics:
        partitions = []
        for partition in topic.partitions:
            partitions.append(_lookup(broker, topic.name, partition.partition_index, partition.timestamp, read_committed))
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _lookup(broker: Any, topic: str, partition: int, timestamp: int, read_committed: bool) -> dict[str, Any]:
    entry = {"partition_index": partition, "error_code": 0, "timestamp": -1, "offset": -1, "leader_epoch": 0}
    try:
        log = broker.logs.get_log(topic, partition)
    except StorageError as error:
        entry["error_code"] = error.error_code
        return entry
    if timestamp == EARLIEST:
        entry["offset"] = log.log_start_offset
    elif timestamp == LATEST:
        entry["offset"] = log.last_stable_offset if read_committed else log.high_watermark
    elif timestamp < 0:
        entry["error_code"] = 42  # INVALID_REQUEST: -3 (max timestamp) needs ListOffsets v7
    else:
        found = log.offset_for_timestamp(timestamp)
        if found is not None:
            entry["offset"], entry["timestamp"] = found
    return entry
