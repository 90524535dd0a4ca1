"""Fetch (1): slices of stored batches, with long polling.

Returns whole batches starting with the one containing ``fetch_offset`` (clients skip the
records below it), at least one batch per partition even when it exceeds the byte limits
(KIP-74), and never null ``records`` (librdkafka rejects MessageSetSize -1). Fetch sessions
(KIP-227, fetch_session.py): epoch 0 opens one, a later epoch is an incremental fetch of it
answered with the partitions that changed only, epoch -1 is a sessionless full fetch.

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
from collections import OrderedDict
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.apis.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchSession,
    Key,
    SessionPartition,
    apply_incremental,
    requested_partitions,
    session_error,
)
from kafka_spark.broker.file_region import FileRegion
from kafka_spark.broker.storage.errors import OffsetOutOfRangeError, StorageError
from kafka_spark.broker.storage.txn_index import last_offset_of

_READ_COMMITTED = 1
#: A partition's records of at least this many bytes are answered as a FileRegion of the segment
#: file, which the connection sends with ``sendfile`` (Kafka's zero-copy transfer); smaller ones
#: are read, as joining them into the response costs less than a system call of their own.
REGION_BYTES = 64 * 1024


async def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    sessions = broker.fetch_sessions
    # Fetch v4-6 have no sessions: sessionless, as epoch -1 (FINAL_EPOCH) asks from v7.
    session_id = getattr(body, "session_id", INVALID_SESSION_ID)
    epoch = getattr(body, "session_epoch", FINAL_EPOCH)
    session: FetchSession | None = None
    if epoch > INITIAL_EPOCH:  # an incremental fetch of an existing session
        error, session = session_error(body, sessions)
        if session is None:
            return {"throttle_time": 0, "error_code": error, "session_id": INVALID_SESSION_ID, "responses": ()}
        apply_incremental(session, body)
        partitions = list(session.partitions.values())
    else:
        if session_id != INVALID_SESSION_ID:
            sessions.remove(session_id)  # epoch 0 or -1 closes the session it names
        partitions = list(requested_partitions(body).values())
    max_wait = body.max_wait.total_seconds()
    deadline = time.monotonic() + max_wait
    while True:
        entries, total_bytes, has_error = _read(broker, request, partitions)
        remaining = deadline - time.monotonic()
        if total_bytes >= body.min_bytes or has_error or remaining <= 0:
            break
        await broker.notifier.wait(remaining)
    answered_id = INVALID_SESSION_ID
    if session is not None:
        session.advance()
        entries = [(cached, entry) for cached, entry in entries if cached.changed_by(entry)]
        for cached, entry in entries:  # served now: the others go first next time (max_bytes)
            if len(entry["records"]):
                session.partitions.move_to_end(cached.key)
        answered_id = session.id
    elif epoch == INITIAL_EPOCH and partitions:
        created = sessions.create(_keyed(partitions))
        if created is not None:
            for cached, entry in entries:
                cached.changed_by(entry)  # what the full response tells, for the next incremental one
            answered_id = created.id
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "session_id": answered_id,
        "responses": _by_topic(broker, entries),
    }


def _keyed(partitions: list[SessionPartition]) -> OrderedDict[Key, SessionPartition]:
    return OrderedDict((cached.key, cached) for cached in partitions)


def _by_topic(broker: BrokerContext, entries: list[tuple[SessionPartition, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The response's topics: consecutive partitions of one topic in one entry (Kafka's grouping)."""
    responses: list[dict[str, Any]] = []
    previous: tuple[Any, Any] | None = None
    for cached, entry in entries:
        topic = (cached.topic, cached.topic_id)
        if topic != previous:
            name = broker.logs.topic_name(cached.topic_id) if cached.topic_id is not None else cached.topic
            responses.append({"topic": name, "topic_id": cached.topic_id, "partitions": []})
            previous = topic
        responses[-1]["partitions"].append(entry)
    return responses


def _read(
    broker: BrokerContext, request: Any, partitions: list[SessionPartition]
) -> tuple[list[tuple[SessionPartition, dict[str, Any]]], int, bool]:
    body = request.body
    read_committed = getattr(body, "isolation_level", 0) == _READ_COMMITTED
    replica_id = getattr(body, "replica_id", -1)  # a follower's fetch in a cluster (Fetch v4-14)
    budget = body.max_bytes
    total = 0
    has_error = False
    entries = []
    topics: dict[tuple[Any, Any], tuple[str | None, bool]] = {}  # (name, id) -> resolved name, denied
    for cached in partitions:
        known = topics.get((cached.topic, cached.topic_id))
        if known is None:
            name = broker.logs.topic_name(cached.topic_id) if cached.topic_id is not None else cached.topic
            denied = broker.authorizer is not None and not access.allowed(
                broker, request, access.READ, access.TOPIC, name or ""
            )
            known = topics[(cached.topic, cached.topic_id)] = (name, denied)
        name, denied = known
        if denied or name is None:
            entry = _empty_entry(cached.partition)
            entry["error_code"] = ErrorCode.topic_authorization_failed if denied else ErrorCode.unknown_topic_id
        else:
            entry = _read_partition(broker, name, cached, read_committed, budget, total, replica_id)
        if entry["error_code"]:
            has_error = True
        total += len(entry["records"])
        entries.append((cached, entry))
    return entries, total, has_error


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
    # The leader only, in the client's current leader epoch (KIP-320); a follower's fetch reports its LEO.
    code = broker.replicas.check_fetch(topic, request.partition, replica_id, request.fetch_offset, leader_epoch)
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
