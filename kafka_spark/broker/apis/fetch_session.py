"""Fetch sessions (KIP-227): incremental Fetch requests and responses.

A consumer that sends ``session_epoch`` 0 asks for a session: the broker answers every requested
partition (a full response) and a new ``session_id``, and remembers the partitions with their
fetch positions. The consumer's next requests carry that id and the next epoch (1, 2, ...) and
list only the partitions whose fetch position or limits changed, plus the ones to drop
(``forgotten_topics_data``); the broker reads every partition of the session and answers only
those with something new: records, an error, or a moved high watermark, last stable offset or
log start offset. Kafka's Java consumer (and with it Spark's built-in connector, Kafka Connect,
Flink) fetches this way from every broker that grants sessions; librdkafka, kafka-python and
aiokafka send sessionless requests (epoch -1), which stay full requests answered in full.

Kafka's rules kept here:
- epoch -1 (FINAL_EPOCH) is a sessionless full fetch; with a session id it also closes that session;
- epoch 0 (INITIAL_EPOCH) closes the named session, if any, and opens a new one; when the cache
  is full and no session has been idle long enough to be evicted, the answer is full and
  sessionless (id 0), as Kafka's is;
- a later epoch names a session that must exist (else FETCH_SESSION_ID_NOT_FOUND, 70) and must be
  the session's next epoch (else INVALID_FETCH_SESSION_EPOCH, 71); both answer no partitions;
- partitions that returned records move to the end of the session's order, so a response cut by
  the request's max_bytes serves the others first next time.

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions (Kafka's default 1,000); a
new session evicts the least recently used one only when that one has been idle for
``min.incremental.fetch.session.eviction.ms`` (120 s).
"""

from __future__ import annotations

import random
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0
_MAX_EPOCH = 2**31 - 1

#: Kafka's max.incremental.fetch.session.cache.slots and min.incremental.fetch.session.eviction.ms.
CACHE_SLOTS = 1000
EVICTION_MS = 120_000

Key = tuple[Any, int]  # (topic name or id, partition)


@dataclass(slots=True)
class SessionPartition:
    """One partition of a session: what the consumer last asked for, and what it was last told
    (None until a response carried the partition)."""

    topic: str | None  # the name (requests before v13); None when named by id
    topic_id: Any  # uuid.UUID from v13; None before
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    high_watermark_sent: int | None = None
    last_stable_sent: int | None = None
    log_start_sent: int | None = None

    @property
    def key(self) -> Key:
        """The partition's key in its session: (topic id, or name before v13; partition)."""
        return (self.topic_id if self.topic_id is not None else self.topic, self.partition)

    def update(self, request: Any) -> None:
        self.fetch_offset = request.fetch_offset
        self.partition_max_bytes = request.partition_max_bytes
        self.current_leader_epoch = getattr(request, "current_leader_epoch", -1)
        self.log_start_offset = getattr(request, "log_start_offset", -1)

    def changed_by(self, entry: dict[str, Any]) -> bool:
        """Whether ``entry`` (a partition of a response) tells the consumer anything new; records
        what it tells. Kafka's rule: records, an error, or a moved HW, LSO or log start offset."""
        moved = (
            entry["high_watermark"] != self.high_watermark_sent
            or entry["last_stable_offset"] != self.last_stable_sent
            or entry["log_start_offset"] != self.log_start_sent
        )
        self.high_watermark_sent = entry["high_watermark"]
        self.last_stable_sent = entry["last_stable_offset"]
        self.log_start_sent = entry["log_start_offset"]
        return bool(moved or entry["error_code"] or len(entry["records"]))


class FetchSession:
    def __init__(self, session_id: int, partitions: OrderedDict[Key, SessionPartition], now: float) -> None:
        self.id = session_id
        self.epoch = 1  # the epoch the consumer's next request must carry
        self.partitions = partitions
        self.last_used = now

    def advance(self) -> None:
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1


class FetchSessionCache:
    """The broker's fetch sessions, by id (one event loop uses it; not thread-safe)."""

    def __init__(self, slots: int = CACHE_SLOTS, eviction_ms: int = EVICTION_MS) -> None:
        self.slots = slots
        self.eviction_seconds = eviction_ms / 1000
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        # counters, for tests and diagnostics
        self.created = 0
        self.evictions = 0
        self.incremental_fetches = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.last_used = time.monotonic()
            self._sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def create(self, partitions: OrderedDict[Key, SessionPartition]) -> FetchSession | None:
        """A new session of ``partitions``, or None when every slot holds a session used within
        the eviction time."""
        now = time.monotonic()
        if len(self._sessions) >= self.slots:
            oldest_id, oldest = next(iter(self._sessions.items()))
            if now - oldest.last_used < self.eviction_seconds:
                return None
            del self._sessions[oldest_id]
            self.evictions += 1
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self._sessions:
            session_id = random.randint(1, 2**31 - 1)
        session = FetchSession(session_id, partitions, now)
        self._sessions[session_id] = session
        self.created += 1
        return session


def requested_partitions(body: Any) -> OrderedDict[Key, SessionPartition]:
    """The partitions a request lists, in its order."""
    partitions: OrderedDict[Key, SessionPartition] = OrderedDict()
    for topic in body.topics:
        name = getattr(topic, "topic", None)
        topic_id = getattr(topic, "topic_id", None)
        for request in topic.partitions:
            cached = SessionPartition(name, topic_id, request.partition, request.fetch_offset, 0)
            cached.update(request)
            partitions[cached.key] = cached
    return partitions


def apply_incremental(session: FetchSession, body: Any) -> None:
    """Fold an incremental request into its session, in Kafka's order: the listed partitions
    added (at the end) or updated in place, then the forgotten ones removed (a partition both
    listed and forgotten leaves the session)."""
    for key, listed in requested_partitions(body).items():
        cached = session.partitions.get(key)
        if cached is None:
            session.partitions[key] = listed
        else:
            cached.fetch_offset = listed.fetch_offset
            cached.partition_max_bytes = listed.partition_max_bytes
            cached.current_leader_epoch = listed.current_leader_epoch
            cached.log_start_offset = listed.log_start_offset
    for forgotten in getattr(body, "forgotten_topics_data", ()) or ():
        topic_id = getattr(forgotten, "topic_id", None)
        key_topic = topic_id if topic_id is not None else getattr(forgotten, "topic", None)
        for partition in forgotten.partitions:
            session.partitions.pop((key_topic, partition), None)


def session_error(body: Any, cache: FetchSessionCache) -> tuple[ErrorCode, FetchSession | None]:
    """The session an incremental request (epoch > 0) continues, or the error that answers it."""
    session = cache.get(body.session_id)
    if session is None:
        return ErrorCode.fetch_session_id_not_found, None
    if session.epoch != body.session_epoch:
        return ErrorCode.invalid_fetch_session_epoch, None
    cache.incremental_fetches += 1
    return ErrorCode.none, session
