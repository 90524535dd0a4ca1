"""ListOffsets (2): an offset per partition for a timestamp, or for one of Kafka's special
timestamps:

- LATEST (-1): the high watermark for read_uncommitted, the last stable offset for read_committed
  (librdkafka's default isolation level relies on that);
- EARLIEST (-2) and, from v8, EARLIEST_LOCAL (-4): the log start offset (all of a log is local
  here: there is no tiered storage);
- MAX_TIMESTAMP (-3, v7+, KIP-734): the offset and timestamp of the record with the largest
  timestamp;
- LATEST_TIERED (-5, v9+) and EARLIEST_PENDING_UPLOAD (-6, v11+): offset -1, as Kafka answers
  for a topic without tiered storage;
- a timestamp >= 0: the first offset whose record has a timestamp at or after it.

A consumer's lookup (replica id -1) sees the records below the high watermark (the last stable
offset for read_committed); a lookup by timestamp or MAX_TIMESTAMP that finds a record at or past
that point answers offset -1, as for a timestamp past every record. Any other replica id (a
follower's broker id, or -2 for debugging) sees the whole log: its LATEST is the log end offset.

From v4 a partition may carry the client's current leader epoch (-1: not given): one older than
the leader's is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (KIP-320), as Fetch and
OffsetForLeaderEpoch answer. On a cluster the partition's leader answers, with its leader epoch;
while a new leader's high watermark is still below the start offset of its epoch, a consumer's
LATEST, and its timestamp or MAX_TIMESTAMP lookups that find no record it may read, are
OFFSET_NOT_AVAILABLE (KIP-207: answering from that high watermark could move a consumer's
offsets backwards; clients retry). EARLIEST is answered then too.

A special timestamp older than the request version is INVALID_REQUEST, as Kafka refuses it; with
an authorizer, a topic the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.storage.errors import StorageError

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
#: special timestamp -> first ListOffsets version that may ask for it
_FIRST_VERSION = {
    LATEST: 0,
    EARLIEST: 0,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}
_READ_COMMITTED = 1
#: the replica id of a consumer's request (a replica sends its broker id)
CONSUMER_REPLICA_ID = -1


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    read_committed = getattr(body, "isolation_level", 0) == _READ_COMMITTED
    topics = []
    for topic in body.topics:
        partitions = []
        denied = not access.allowed(broker, request, access.DESCRIBE, access.TOPIC, topic.name)
        for partition in topic.partitions:
            if denied:
                partitions.append(
                    {
                        "partition_index": partition.partition_index,
                        "timestamp": -1,
                        "offset": -1,
                        "error_code": ErrorCode.topic_authorization_failed,
                        "leader_epoch": -1,
                    }
                )
                continue
            partitions.append(
                _lookup(
                    broker,
                    topic.name,
                    partition.partition_index,
                    partition.timestamp,
                    read_committed,
                    request.api_version,
                    getattr(body, "replica_id", CONSUMER_REPLICA_ID),
                    getattr(partition, "current_leader_epoch", -1),
                )
            )
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time": 0, "topics": topics}


def _lookup(
    broker: BrokerContext,
    topic: str,
    partition: int,
    timestamp: int,
    read_committed: bool,
    version: int,
    replica_id: int = CONSUMER_REPLICA_ID,
    current_leader_epoch: int = -1,
) -> dict[str, Any]:
    entry = {
        "partition_index": partition,
        "error_code": ErrorCode.none,
        "timestamp": -1,
        "offset": -1,
        "leader_epoch": -1,
    }
    code, epoch, lagging = broker.replicas.list_offsets_check(topic, partition, current_leader_epoch)
    if code:  # answered by the leader, in the client's current leader epoch (KIP-320)
        entry["error_code"] = code
        return entry
    try:
        log = broker.logs.get_log(topic, partition)
    except StorageError as error:
        entry["error_code"] = error.error_code
        return entry
    entry["leader_epoch"] = epoch
    consumer = replica_id == CONSUMER_REPLICA_ID
    lagging = lagging and consumer
    if consumer:
        last_fetchable = log.last_stable_offset if read_committed else log.high_watermark
    else:
        last_fetchable = log.log_end_offset
    if timestamp < 0 and version < _FIRST_VERSION.get(timestamp, 1 << 15):
        entry["error_code"], entry["leader_epoch"] = ErrorCode.invalid_request, -1
    elif timestamp in (EARLIEST, EARLIEST_LOCAL):
        entry["offset"] = log.log_start_offset
    elif timestamp == LATEST:
        if lagging:
            entry["error_code"], entry["leader_epoch"] = ErrorCode.offset_not_available, -1
        else:
            entry["offset"] = last_fetchable
    elif timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        entry["leader_epoch"] = -1
    else:  # MAX_TIMESTAMP or a timestamp: a record the client may read, if any
        found = log.offset_of_max_timestamp() if timestamp == MAX_TIMESTAMP else log.offset_for_timestamp(timestamp)
        if found is not None and found[0] < last_fetchable:
            entry["offset"], entry["timestamp"] = found
        elif lagging:
            entry["error_code"], entry["leader_epoch"] = ErrorCode.offset_not_available, -1
    return entry
