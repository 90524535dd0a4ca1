"""Committed offsets of consumer groups, kept durable in the internal topic ``__consumer_offsets``.

Each commit appends one record per partition to ``__consumer_offsets`` (created on first use, with
``cleanup.policy=compact`` so compaction keeps only the newest commit per key). A group always
writes to the same partition of that topic (``java_string_hash(group) % partitions``, as Kafka
places it), so one partition holds a group's history in commit order. Record layouts are Kafka's
own (``OffsetCommitKey`` v1 and ``OffsetCommitValue`` v3, big endian)::

    key   : version int16 = 1 | group string | topic string | partition int32
    value : version int16 = 3 | offset int64 | leader_epoch int32 | metadata string | commit_timestamp int64
    (string = int16 length + UTF-8; a null value is a tombstone: the commit was deleted)

Replay rule: when its broker becomes the leader of a partition of the topic,
:meth:`GroupOffsetStore.load_partition` reads it from its log start to its end and applies records in
order; the last record per key wins and a tombstone removes the key. Records of other kinds go to
the caller's ``other`` (the consumer-protocol groups' membership, consumer_group_log.py); those it
does not take (Kafka's classic group metadata, type 2) are skipped.

The topic is created through the controller (on a single node too: a cluster of one), this broker
holds the groups of the partitions it leads only (:meth:`GroupOffsetStore.load_partition` when it
becomes the leader, :meth:`GroupOffsetStore.unload_partition` when it stops), and a transaction's
offsets are written as transactional records of its producer (:meth:`GroupOffsetStore.stage`) that
apply when the producer's COMMIT marker follows in the partition (ABORT drops them). Not
thread-safe: used on the broker's event loop only.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from kafka_spark.broker.internal_topics import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS, partition_for
from kafka_spark.broker.storage.batch import HEADER_SIZE, build_record_batch, iter_batches, read_varint
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.broker.storage.log import Log
from kafka_spark.broker.storage.log_manager import LogManager
from kafka_spark.broker.storage.txn_index import CONTROL_COMMIT, control_type
from kafka_spark.common.topic_partition import TopicPartition

_KEY_VERSION = 1
_VALUE_VERSION = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqi")  # version, offset, leader_epoch
_I64 = struct.Struct(">q")
_READ_CHUNK = 1 << 20


class CorruptOffsetsRecordError(StorageError):
    """A record of ``__consumer_offsets`` that does not decode: the topic was written by something
    else than this broker, or its data is damaged. Move the topic's directories away to start over
    (committed offsets are then lost)."""


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """What a group committed for one partition. ``leader_epoch`` -1 means unknown;
    ``metadata`` is the client's free-form string ("" when it sent null)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0


def encode_key(group_id: str, topic_partition: TopicPartition) -> bytes:
    return (
        _I16.pack(_KEY_VERSION)
        + _string(group_id)
        + _string(topic_partition.topic)
        + _I32.pack(topic_partition.partition)
    )


def encode_value(committed: CommittedOffset) -> bytes:
    return (
        _VALUE_HEAD.pack(_VALUE_VERSION, committed.offset, committed.leader_epoch)
        + _string(committed.metadata)
        + _I64.pack(committed.commit_timestamp)
    )


def decode_key(raw: bytes) -> tuple[str, TopicPartition] | None:
    """``(group, topic-partition)`` of an offset-commit key; None for other key kinds."""
    (version,) = _I16.unpack_from(raw, 0)
    if version not in (0, 1):
        return None  # 2 = group metadata: not stored by this broker
    group, position = _read_string(raw, 2)
    topic, position = _read_string(raw, position)
    (partition,) = _I32.unpack_from(raw, position)
    return group, TopicPartition(topic, partition)


def decode_value(raw: bytes) -> CommittedOffset:
    version, offset, leader_epoch = _VALUE_HEAD.unpack_from(raw, 0)
    if version != _VALUE_VERSION:
        raise CorruptOffsetsRecordError(f"offset-commit value version {version}; this broker reads only version 3")
    metadata, position = _read_string(raw, _VALUE_HEAD.size)
    (timestamp,) = _I64.unpack_from(raw, position)
    return CommittedOffset(offset, leader_epoch, metadata, timestamp)


class GroupOffsetStore:
    """The committed offsets of every group: an in-memory map backed by ``__consumer_offsets``."""

    def __init__(
        self,
        logs: LogManager,
        *,
        partitions: Callable[[], int] | None = None,
        time_ms: Callable[[], int] | None = None,
    ) -> None:
        """``partitions()``: the topic's partition count, as the metadata has it (default: the
        local log directory's)."""
        self._logs = logs
        self._partitions = partitions or self._local_partitions
        self._time_ms = time_ms or (lambda: int(time.time() * 1000))
        self._offsets: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        # Offsets staged by transactions (TxnOffsetCommit), written to the group's
        # partition as transactional records and applied when the transaction's marker arrives there:
        # partition -> producer id -> group -> offsets.
        self._pending: dict[int, dict[int, dict[str, dict[TopicPartition, CommittedOffset]]]] = {}

    def _apply(self, group_id: str, topic_partition: TopicPartition, value: bytes | None) -> None:
        """One replayed commit: the last one per key wins; a tombstone (None) removes the key."""
        if value is None:
            self._offsets.get(group_id, {}).pop(topic_partition, None)
            if not self._offsets.get(group_id, True):
                del self._offsets[group_id]
        else:
            self._offsets.setdefault(group_id, {})[topic_partition] = decode_value(value)

    # -- the partitions this broker leads -----------------------------------------------------------

    def _local_partitions(self) -> int:
        info = self._logs.topics().get(OFFSETS_TOPIC)
        return info.partitions if info is not None else OFFSETS_TOPIC_PARTITIONS

    def partitions(self) -> int:
        return self._partitions()

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions())

    def load_partition(self, partition: int, other: Callable[[bytes, bytes | None], object] | None = None) -> int:
        """Replay one partition of ``__consumer_offsets`` (this broker became its leader): plain
        commits apply in order; transactional ones wait for their producer's marker (COMMIT
        applies them, ABORT drops them) and stay staged when none follows yet. Records that are
        not offset commits go to ``other(key, value)`` in offset order."""
        log = self._logs.get_log(OFFSETS_TOPIC, partition)
        pending: dict[int, dict[str, dict[TopicPartition, CommittedOffset]]] = {}
        applied = 0
        for producer_id, commit, key, value in _events(log):
            if key is None:  # a marker of ``producer_id``
                staged = pending.pop(producer_id, {})
                if commit:
                    for group_id, offsets in staged.items():
                        self._offsets.setdefault(group_id, {}).update(offsets)
                continue
            decoded = decode_key(key)
            if decoded is None:
                if other is not None and producer_id < 0:
                    other(key, value)
                continue
            group_id, topic_partition = decoded
            applied += 1
            if producer_id >= 0 and value is not None:
                pending.setdefault(producer_id, {}).setdefault(group_id, {})[topic_partition] = decode_value(value)
            else:
                self._apply(group_id, topic_partition, value)
        self._pending[partition] = pending
        return applied

    def unload_partition(self, partition: int) -> list[str]:
        """Forget the groups of ``partition`` (another broker leads it now); returns them."""
        gone = [group_id for group_id in self._offsets if self.partition_of(group_id) == partition]
        for group_id in gone:
            del self._offsets[group_id]
        self._pending.pop(partition, None)
        return gone

    def stage(
        self, group_id: str, producer_id: int, producer_epoch: int, offsets: Mapping[TopicPartition, CommittedOffset]
    ) -> tuple[Log, int] | None:
        """Write a transaction's offsets as transactional records of ``producer_id``; they apply
        when its COMMIT marker reaches the partition (:meth:`complete`)."""
        if not offsets:
            return None
        log = self._log_for(group_id)
        now = self._time_ms()
        batch = build_record_batch(
            [(encode_key(group_id, tp), encode_value(committed), (), now) for tp, committed in offsets.items()],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            is_transactional=True,
        )
        log.append(batch, acks=1)
        partition = self._pending.setdefault(log.partition, {})
        partition.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)
        return log, log.log_end_offset

    def complete(self, partition: int, producer_id: int, commit: bool) -> None:
        """The marker of ``producer_id``'s transaction reached ``partition``."""
        staged = self._pending.get(partition, {}).pop(producer_id, {})
        if commit:
            for group_id, offsets in staged.items():
                self._offsets.setdefault(group_id, {}).update(offsets)

    def staged_partitions(self, group_id: str) -> set[TopicPartition]:
        """Partitions of ``group_id`` whose offsets an open transaction has staged here."""
        producers = self._pending.get(self.partition_of(group_id), {})
        return {tp for groups in producers.values() for tp in groups.get(group_id, {})}

    # -- reads -----------------------------------------------------------------------------------

    def groups(self) -> list[str]:
        """Groups with at least one committed offset."""
        return sorted(self._offsets)

    def fetch(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        """A copy of every committed offset of ``group_id`` (empty when it has none)."""
        return dict(self._offsets.get(group_id, {}))

    # -- writes ----------------------------------------------------------------------------------

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> tuple[Log, int] | None:
        """Append ``offsets`` as one batch, then make them visible to :meth:`fetch`.

        Returns ``(log, end_offset)`` so the caller can wait for the fsync (``GroupCommit``), or
        None when there was nothing to write. Raises StorageError when the append fails; memory
        is then unchanged.
        """
        if not offsets:
            return None
        records = [(encode_key(group_id, tp), encode_value(committed)) for tp, committed in offsets.items()]
        result = self._append(group_id, records)
        self._offsets.setdefault(group_id, {}).update(offsets)
        return result

    def delete(self, group_id: str, partitions: Iterable[TopicPartition] | None = None) -> tuple[Log, int] | None:
        """Write tombstones for ``partitions`` (default: all) of ``group_id`` and forget them."""
        committed = self._offsets.get(group_id, {})
        targets = list(committed) if partitions is None else [tp for tp in partitions if tp in committed]
        if not targets:
            return None
        result = self._append(group_id, [(encode_key(group_id, tp), None) for tp in targets])
        for tp in targets:
            del committed[tp]
        if not committed:
            self._offsets.pop(group_id, None)
        return result

    def delete_topic(self, topic: str) -> list[tuple[Log, int]]:
        """Forget (with tombstones) every group's commits for a deleted topic; returns what was
        written, per group (``(log, end offset)``)."""
        written = []
        for group_id in list(self._offsets):
            result = self.delete(group_id, [tp for tp in self._offsets[group_id] if tp.topic == topic])
            if result is not None:
                written.append(result)
        return written

    def append_records(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]]) -> tuple[Log, int]:
        """Append records of ``group_id`` other than offsets (its membership) to its partition, as
        one batch; returns ``(log, end_offset)`` for the durability wait. Raises StorageError."""
        return self._append(group_id, records)

    def _append(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]]) -> tuple[Log, int]:
        log = self._log_for(group_id)
        now = self._time_ms()
        batch = build_record_batch([(key, value, (), now) for key, value in records])
        log.append(batch, acks=1)  # the fsync is group-committed by the caller, off the loop
        return log, log.log_end_offset

    def _log_for(self, group_id: str) -> Log:
        """The group's partition (created through the controller; its coordinator leads it)."""
        return self._logs.get_log(OFFSETS_TOPIC, self.partition_of(group_id))


# -- record decoding (only this broker's own uncompressed batches are ever in this topic) -------


def _events(log: Log) -> Iterator[tuple[int, bool, bytes | None, bytes | None]]:
    """``(producer id, commit, key, value)`` per record of ``log`` (producer id -1 for plain
    commits), and ``(producer id, commit, None, None)`` per transaction marker."""
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        data = bytes(log.read(offset, _READ_CHUNK))
        if not data:
            break
        batches = iter_batches(data)
        for header in batches:
            offset = header.next_offset
            start = batches.batch_position
            if header.is_control:
                yield header.producer_id, control_type(data[start : start + header.size]) == CONTROL_COMMIT, None, None
                continue
            if header.compression != 0:
                raise CorruptOffsetsRecordError(
                    f"{log.name} holds a compressed batch at offset {header.base_offset}; "
                    "only the broker writes this topic, uncompressed"
                )
            producer_id = header.producer_id if header.is_transactional else -1
            for key, value in _decode_records(data[start + HEADER_SIZE : start + header.size], header.records_count):
                yield producer_id, False, key, value
        if batches.error is not None:
            raise CorruptOffsetsRecordError(f"{log.name} near offset {offset}: {batches.error}")


def _decode_records(records: bytes, count: int) -> Iterator[tuple[bytes | None, bytes | None]]:
    """``(key, value)`` of each record (Kafka record v2: varint-framed, zigzag varints)."""
    position = 0
    for _ in range(count):
        length, position = read_varint(records, position)
        end = position + length
        cursor = position + 1  # attributes
        _timestamp_delta, cursor = read_varint(records, cursor)
        _offset_delta, cursor = read_varint(records, cursor)
        key_length, cursor = read_varint(records, cursor)
        key = None if key_length < 0 else records[cursor : cursor + key_length]
        cursor += max(key_length, 0)
        value_length, cursor = read_varint(records, cursor)
        value = None if value_length < 0 else records[cursor : cursor + value_length]
        yield key, value
        position = end


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _read_string(raw: bytes, position: int) -> tuple[str, int]:
    (length,) = _I16.unpack_from(raw, position)
    position += 2
    if length < 0:
        return "", position
    return raw[position : position + length].decode("utf-8"), position + length
