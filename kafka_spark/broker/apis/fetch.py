"""Fetch (1): slices of stored batches, with long polling.

Returns whole batches starting with the one containing ``fetch_offset`` (clients skip the
records below it), at least one batch per partition even when it exceeds the byte limits
(KIP-74), and never null ``records`` (librdkafka rejects MessageSetSize -1). Fetch sessions
(KIP-227) are not granted: session_id 0 and every requested partition echoed, which all clients
accept as a sessionless full response.

read_committed (isolation_level 1) reads stop at the last stable offset (LSO: the first offset of
the oldest open transaction, else the high watermark) and carry ``aborted_transactions``: the
aborted transactions ``{producer_id, first_offset}`` overlapping the returned batches (ABORT
marker at or after ``fetch_offset``, first offset at or below the last offset returned), from
which clients drop the aborted records. read_uncommitted gets every batch and an empty list.

With an authorizer, a topic the principal may not READ answers TOPIC_AUTHORIZATION_FAILED (29).
From v13 topics are named by id (KIP-516); an id no topic has is answered UNKNOWN_TOPIC_ID (100)
on each of its partitions, which makes clients refresh their metadata.
"""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.file_region import FileRegion
from kafka_spark.broker.storage.epochs import current_epoch_error
from kafka_spark.broker.storage.errors import OffsetOutOfRangeError, StorageError
from kafka_spark.broker.storage.txn_index import last_offset_of

_READ_COMMITTED = 1
#: A partition's records of at least this many bytes are answered as a FileRegion of the segment
#: file, which the connection sends with ``sendfile`` (Kafka's zero-copy transfer); smaller ones
#: are read, as joining them into the response costs less than a system call of their own.
REGION_BYTES = 64 * 1024


async def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    if getattr(body, "session_id", 0) not in (0, -1):
        # We never grant sessions, so a client naming one is confused; make it start over.
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.fetch_session_id_not_found,
            "session_id": 0,
            "responses": (),
        }
    max_wait = body.max_wait.total_seconds()
    deadline = time.monotonic() + max_wait
    while True:
        responses, total_bytes, has_error = _read(broker, request)
        remaining = deadline - time.monotonic()
        if total_bytes >= body.min_bytes or has_error or remaining <= 0:
            return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": responses}
        await broker.notifier.wait(remaining)


def _read(broker: BrokerContext, request: Any) -> tuple[list[dict[str, Any]], int, bool]:
    body = request.body
    read_committed = getattr(body, "isolation_level", 0) == _READ_COMMITTED
    replica_id = getattr(body, "replica_id", -1)  # a follower's fetch in a cluster (Fetch v4-14)
    budget = body.max_bytes
    total = 0
    has_error = False
    responses = []
    for topic in body.topics:
        topic_id = getattr(topic, "topic_id", None)
        name = broker.logs.topic_name(topic_id) if topic_id is not None else topic.topic
        denied = broker.authorizer is not None and not access.allowed(
            broker, request, access.READ, access.TOPIC, name or ""
        )
        partitions = []
        for fetch_partition in topic.partitions:
            if denied or name is None:
                entry = _empty_entry(fetch_partition.partition)
                entry["error_code"] = ErrorCode.topic_authorization_failed if denied else ErrorCode.unknown_topic_id
            else:
                entry = _read_partition(broker, name, fetch_partition, read_committed, budget, total, replica_id)
            if entry["error_code"]:
                has_error = True
            total += len(entry["records"])
            partitions.append(entry)
        responses.append({"topic": name, "topic_id": topic_id, "partitions": partitions})
    return responses, total, has_error


def _empty_entry(partition: int) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "error_code": ErrorCode.none,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": (),
        "preferred_read_replica": -1,
        "records": b"",
    }


def _read_partition(
    broker: BrokerContext, topic: str, request: Any, read_committed: bool, budget: int, used: int, replica_id: int = -1
) -> dict[str, Any]:
    entry = _empty_entry(request.partition)
    leader_epoch = getattr(request, "current_leader_epoch", -1)
    if broker.cluster is not None:  # the leader only; a follower's fetch reports its log end offset
        code = broker.cluster.check_fetch(topic, request.partition, replica_id, request.fetch_offset, leader_epoch)
        if code:
            entry["error_code"] = code
            return entry
    try:
        log = broker.logs.get_log(topic, request.partition)
    except StorageError as error:
        entry["error_code"] = error.error_code
        return entry
    high_watermark = log.high_watermark
    last_stable = log.last_stable_offset
    entry["high_watermark"] = high_watermark
    entry["last_stable_offset"] = last_stable
    entry["log_start_offset"] = log.log_start_offset
    if broker.cluster is None:  # KIP-320
        code = current_epoch_error(leader_epoch, log.leader_epoch)
        if code:
            entry["error_code"] = code
            return entry
    # KIP-74: the first partition with data may exceed max_bytes; later ones share what is left.
    limit = min(request.partition_max_bytes, max(budget - used, 0)) if used else request.partition_max_bytes
    if used and limit <= 0:
        return entry
    try:
        data = log.read_to_send(
            request.fetch_offset,
            limit,
            max_offset=log.log_end_offset if replica_id >= 0 else last_stable if read_committed else high_watermark,
            region_bytes=REGION_BYTES,
        )
    except OffsetOutOfRangeError:
        entry["error_code"] = ErrorCode.offset_out_of_range
        return entry
    except StorageError as error:
        entry["error_code"] = error.error_code
        return entry
    entry["records"] = data  # bytes, a memoryview of them, or a FileRegion: written out without another copy
    if read_committed and data:
        index = broker.producer_state(log).txn_index
        # Hop the returned batches for their last offset only when an abort could overlap them.
        if index is not None and index.aborted and index.aborted[-1].last_offset >= request.fetch_offset:
            stored = data.read() if isinstance(data, FileRegion) else data
            aborted = index.aborted_transactions(request.fetch_offset, last_offset_of(stored) + 1)
            entry["aborted_transactions"] = [
                {"producer_id": txn.producer_id, "first_offset": txn.first_offset} for txn in aborted
            ]
    return entry
