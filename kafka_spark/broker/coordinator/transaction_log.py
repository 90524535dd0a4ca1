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

On a cluster the topic is replicated (created through the controller with
``CLUSTER_TRANSACTION_STATE_PARTITIONS`` partitions) and a transactional id's records go to
partition ``transactional_id_partition(id)``, which its coordinator leads and replays when it
becomes the leader (:func:`replay_log`).

JSON rather than Kafka's binary TransactionLogValue schema: only this broker reads it, and a
person debugging can read the segment files. Replay rule: the last record per key wins.
Transactional ids are never expired (Kafka's ``transactional.id.expiration.ms``): none is
tombstoned yet.

Thread-safety: event loop only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from kafka_spark.broker.internal_topics import (
    TRANSACTION_STATE_CONFIGS,
    TRANSACTION_STATE_PARTITIONS,
    TRANSACTION_STATE_TOPIC,
    partition_for,
)
from kafka_spark.broker.storage.batch import HEADER_SIZE, build_record_batch, iter_batches, read_varint
from kafka_spark.broker.storage.errors import TopicExistsError
from kafka_spark.broker.storage.log import Log
from kafka_spark.broker.storage.log_manager import LogManager

logger = logging.getLogger("kafka_spark.broker.coordinator.transaction")

CLUSTER_TRANSACTION_STATE_PARTITIONS = TRANSACTION_STATE_PARTITIONS
_FORMAT_VERSION = 1
_REPLAY_CHUNK = 1 << 20


class TransactionLog:
    """Appends and replays transaction metadata records in ``__transaction_state`` (partition 0:
    one coordinator owns every transactional id on a one-node broker; on a cluster, see
    :class:`ClusterTransactionLog`)."""

    def __init__(self, logs: LogManager, *, replay: bool = True) -> None:
        self._logs = logs
        self._log: Log | None = None
        if replay and TRANSACTION_STATE_TOPIC in logs.topics():
            self._log = logs.get_log(TRANSACTION_STATE_TOPIC, 0)

    @property
    def log(self) -> Log:
        """The partition log, created (compacted, one partition) on first use."""
        if self._log is None:
            try:
                self._logs.create_topic(TRANSACTION_STATE_TOPIC, 1, TRANSACTION_STATE_CONFIGS)
            except TopicExistsError:
                pass
            self._log = self._logs.get_log(TRANSACTION_STATE_TOPIC, 0)
        return self._log

    def append(self, transactional_id: str, value: dict[str, Any] | None, now_ms: int) -> tuple[Log, int]:
        """Write one state record; returns ``(log, end offset)`` for a durability wait."""
        payload = (
            None
            if value is None
            else json.dumps({"version": _FORMAT_VERSION, **value}, separators=(",", ":")).encode("utf-8")
        )
        batch = build_record_batch([(transactional_id.encode("utf-8"), payload, (), now_ms)])
        result = self.log.append(batch, acks=1)  # fsync is group-committed by the caller
        return self.log, result.last_offset + 1

    def replay(self) -> dict[str, dict[str, Any]]:
        """transactional id -> its latest state record (tombstoned ids left out)."""
        return replay_log(self._log) if self._log is not None else {}


class ClusterTransactionLog(TransactionLog):
    """``__transaction_state`` on a broker of a cluster: a replicated topic created through the
    controller, whose partition ``transactional_id_partition(id)`` this broker writes while it
    leads it (the coordinator checks that first)."""

    def __init__(self, logs: LogManager) -> None:
        super().__init__(logs, replay=False)

    def partitions(self) -> int:
        info = self._logs.topics().get(TRANSACTION_STATE_TOPIC)
        return info.partitions if info is not None else CLUSTER_TRANSACTION_STATE_PARTITIONS

    def partition_log(self, partition: int) -> Log:
        return self._logs.get_log(TRANSACTION_STATE_TOPIC, partition)

    def append(self, transactional_id: str, value: dict[str, Any] | None, now_ms: int) -> tuple[Log, int]:
        self._log = self.partition_log(transactional_id_partition(transactional_id, self.partitions()))
        return super().append(transactional_id, value, now_ms)


transactional_id_partition = partition_for


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
