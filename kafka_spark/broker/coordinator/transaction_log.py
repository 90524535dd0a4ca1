"""The transaction coordinator's durable state: the internal topic ``__transaction_state``.

Why a topic and not a snapshot file: every state change of a transaction (Ongoing, partitions
added, PrepareCommit, CompleteCommit ...) is one small append to a log the broker already knows
how to write, recover (torn tails truncated by CRC), fsync through the group commit and compact
(``cleanup.policy=compact``: the log cleaner keeps the newest record per transactional id, so
the topic stays proportional to the number of ids), which is how Kafka stores it. A snapshot
file would have to be rewritten whole (write, fsync, rename, fsync the directory) on every
change, blocking the event loop several milliseconds per transaction step. Replay at start reads
the records left after compaction (plus the uncompacted tail, about 200 bytes per state change).

Record format (one record per state change, uncompressed batch of one record, no producer id)::

    key   = transactional id, UTF-8
    value = JSON object, version 1:
            {"version": 1, "producer_id": int, "producer_epoch": int, "last_producer_epoch": int,
             "timeout_ms": int, "state": "Empty|Ongoing|PrepareCommit|PrepareAbort|CompleteCommit|
             CompleteAbort", "partitions": [[topic, partition], ...], "groups": [group, ...],
             "pending_offsets": {group: [[topic, partition, offset, metadata|null, leader_epoch], ...]},
             "txn_start_ms": int, "last_update_ms": int}
            null value (tombstone) = the transactional id is forgotten.

The topic is replicated (created through the controller on first use, with
``internal_topics.TRANSACTION_STATE_PARTITIONS`` partitions; a single node made it with one before
issue 39, and keeps it so) and a transactional id's records go to partition
``partition_for(id)`` (internal_topics.py), which its coordinator leads and replays when it becomes the
leader (:meth:`TransactionLog.load`).

JSON rather than Kafka's binary TransactionLogValue schema: only this broker reads it, and a
person debugging can read the segment files. Replay rule: the last record per key wins.
An expired transactional id (Kafka's ``transactional.id.expiration.ms``) is tombstoned.

Thread-safety: event loop only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

from kafka_spark.broker.internal_topics import (
    TRANSACTION_STATE_PARTITIONS,
    TRANSACTION_STATE_TOPIC,
    partition_for,
)
from kafka_spark.broker.storage.batch import HEADER_SIZE, build_record_batch, iter_batches, read_varint
from kafka_spark.broker.storage.log import Log
from kafka_spark.broker.storage.log_manager import LogManager

logger = logging.getLogger("kafka_spark.broker.coordinator.transaction")

_FORMAT_VERSION = 1
_REPLAY_CHUNK = 1 << 20


class TransactionLog:
    """Appends and replays transaction metadata records in ``__transaction_state``, a transactional
    id's in its partition. Writes go to a partition this broker leads (the coordinator checks that
    first); ``partitions()`` is the topic's partition count as the metadata has it."""

    def __init__(self, logs: LogManager, partitions: Callable[[], int] | None = None) -> None:
        self._logs = logs
        self._partitions = partitions or self._local_partitions

    def _local_partitions(self) -> int:
        info = self._logs.topics().get(TRANSACTION_STATE_TOPIC)
        return info.partitions if info is not None else TRANSACTION_STATE_PARTITIONS

    def partitions(self) -> int:
        return self._partitions()

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.partitions())

    def partition_log(self, partition: int) -> Log:
        return self._logs.get_log(TRANSACTION_STATE_TOPIC, partition)

    def append(self, transactional_id: str, value: dict[str, Any] | None, now_ms: int) -> tuple[Log, int]:
        """Write one state record (None: a tombstone); returns ``(log, end offset)`` for a
        durability wait."""
        payload = (
            None
            if value is None
            else json.dumps({"version": _FORMAT_VERSION, **value}, separators=(",", ":")).encode("utf-8")
        )
        batch = build_record_batch([(transactional_id.encode("utf-8"), payload, (), now_ms)])
        log = self.partition_log(self.partition_of(transactional_id))
        result = log.append(batch, acks=1)  # fsync is group-committed by the caller
        return log, result.last_offset + 1

    def load(self, partition: int) -> dict[str, dict[str, Any]]:
        """transactional id -> its latest state record in ``partition`` (tombstoned ids left out)."""
        return replay_log(self.partition_log(partition))

    def replay(self) -> dict[str, dict[str, Any]]:
        """transactional id -> its latest state record, over every partition (for tools and tests)."""
        info = self._logs.topics().get(TRANSACTION_STATE_TOPIC)
        state: dict[str, dict[str, Any]] = {}
        for partition in range(info.partitions if info is not None else 0):
            state.update(self.load(partition))
        return state


def replay_log(log: Log) -> dict[str, dict[str, Any]]:
    """transactional id -> its latest state record in ``log`` (tombstoned ids left out)."""
    state: dict[str, dict[str, Any]] = {}
    count = 0
    for key, value in _records(log):
        count += 1
        name = key.decode("utf-8")
        if value is None:
            state.pop(name, None)
            continue
        document = json.loads(value)
        if document.get("version") != _FORMAT_VERSION:
            raise ValueError(
                f"{TRANSACTION_STATE_TOPIC}: record for {name!r} has unknown format version "
                f"{document.get('version')}; this broker reads version {_FORMAT_VERSION}"
            )
        state[name] = document
    logger.info("replayed %d record(s) of %s: %d transactional id(s)", count, log.name, len(state))
    return state


def _records(log: Log) -> Iterator[tuple[bytes, bytes | None]]:
    """Every (key, value) stored in ``log``, in offset order (uncompressed batches, as written here)."""
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        data = memoryview(log.read(offset, _REPLAY_CHUNK))
        if not data:
            break
        batches = iter_batches(data, verify_crc=False)  # recovery verified the CRCs at open
        for header in batches:
            if header.compression:
                raise ValueError(
                    f"{TRANSACTION_STATE_TOPIC} holds a compressed batch at offset "
                    f"{header.base_offset}; only this broker writes there, uncompressed"
                )
            position = batches.batch_position + HEADER_SIZE
            for _ in range(header.records_count):
                position, key, value = _record(data, position)
                if key is not None:
                    yield key, value
            offset = header.next_offset


def _record(buf: memoryview, position: int) -> tuple[int, bytes | None, bytes | None]:
    length, position = read_varint(buf, position)
    end = position + length
    position += 1  # attributes
    _timestamp_delta, position = read_varint(buf, position)
    _offset_delta, position = read_varint(buf, position)
    key_length, position = read_varint(buf, position)
    key = None if key_length < 0 else bytes(buf[position : position + key_length])
    position += max(key_length, 0)
    value_length, position = read_varint(buf, position)
    value = None if value_length < 0 else bytes(buf[position : position + value_length])
    return end, key, value
