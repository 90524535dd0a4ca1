"""Record batch v2 (magic 2): the header, validation, and the few batches the broker builds.

The layout (the 61-byte header, the attribute bits, the record and control-record formats) is
described once, in kafka_spark.common.record_batch, which the executors' decoder and ``pylog
consume`` read too; its names are re-exported here for the broker's modules.

The broker stores batches verbatim: work here is per batch (a 61-byte header and one C-speed CRC),
never per record, except in :func:`first_offset_at_or_after_timestamp`, which ListOffsets uses.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from typing import NamedTuple

import crc32c

from kafka_spark.broker.storage.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from kafka_spark.common.compression import (  # noqa: F401  (the codec constants, as storage names them)
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NAMES,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    decompress,
)
from kafka_spark.common.record_batch import (  # noqa: F401  (the layout, as the broker's modules name it)
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_MASK,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_KEY,
    CONTROL_MASK,
    CONTROL_VALUE,
    CRC_OFFSET,
    CRC_START,
    CREATE_TIME,
    HEADER,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORD_ATTRIBUTES_SIZE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    read_varint,
)

_MIN_LEGACY_LENGTH = 14  # the smallest magic 0 message; shorter lengths are garbage whatever the magic


class BatchHeader(NamedTuple):
    """The 61-byte header of one stored or produced batch, field for field.

    A named tuple rather than a frozen dataclass: the produce path makes two per batch (the
    producer's, and the stored one with its offset), and a tuple is built from the unpacked fields
    in a fifth of the time a frozen dataclass's ``__init__`` takes."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
        """The header at ``position`` (the caller ensures 61 bytes are there)."""
        return _new_tuple(cls, _unpack_header(buf, position))

    def rebased(self, base_offset: int, partition_leader_epoch: int) -> BatchHeader:
        """This header as stored at ``base_offset`` with ``partition_leader_epoch``: the two
        fields the broker rewrites, which lie outside the CRC."""
        return _new_tuple(BatchHeader, (base_offset, self[1], partition_leader_epoch) + self[3:])

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime (then every record's timestamp is ``max_timestamp``)."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


_new_tuple = tuple.__new__
_unpack_header = HEADER.unpack_from


def validate_batches(
    buf: bytes | bytearray | memoryview, max_message_bytes: int, *, allow_control: bool = False
) -> list[BatchHeader]:
    """Split a produce payload into batches and check each one, without looking at records.

    Checks, in Kafka's order: total size <= ``max_message_bytes`` (RecordTooLargeError, 10); magic 2
    (InvalidRecordError, 87); a complete batch of at least 61 bytes whose ``batch_length`` fits the
    buffer, a matching CRC-32C, codec <= 4, ``records_count >= 1`` and
    ``last_offset_delta == records_count - 1`` (CorruptRecordError, 2). Control batches are refused
    (87) unless ``allow_control`` — only the broker itself writes transaction markers. Kafka takes
    one batch per partition in a v2 produce; several are accepted here. Pure function.
    """
    view = memoryview(buf)
    total = len(view)
    if total > max_message_bytes:
        raise RecordTooLargeError(
            f"the produced records are {total} bytes, above max.message.bytes={max_message_bytes}; "
            "send smaller batches (producer batch.size / message.max.bytes) or raise the topic's max.message.bytes"
        )
    headers: list[BatchHeader] = []
    position = 0
    while position < total:
        header = _check_batch(view, position, total, allow_control)
        headers.append(header)
        position += header.size
    if not headers:
        raise CorruptRecordError("the produce request carries no record batch (empty records)")
    return headers


def _check_batch(view: memoryview, position: int, total: int, allow_control: bool) -> BatchHeader:
    remaining = total - position
    if remaining < HEADER_SIZE:
        _check_short_batch(view, position, remaining)  # raises: which check fails, in Kafka's order
    header = BatchHeader.parse(view, position)
    # batch_length, magic, size, CRC, codec, counts, control: Kafka's order, one test for the usual
    # case; the messages are made only for a batch that fails.
    batch_length = header.batch_length
    size = batch_length + LOG_OVERHEAD
    if batch_length < _MIN_LEGACY_LENGTH:  # Kafka checks the length before the magic
        raise CorruptRecordError(f"batch at byte {position} declares batch_length {batch_length}, less than any batch")
    if header.magic != MAGIC:
        raise InvalidRecordError(
            f"batch at byte {position} has magic {header.magic & 0xFF}; this broker stores only record batch v2 "
            "(magic 2), which every client since Kafka 0.11 sends"
        )
    if size < HEADER_SIZE:
        raise CorruptRecordError(f"batch at byte {position} declares batch_length {batch_length}, less than a header")
    if size > remaining:
        raise CorruptRecordError(
            f"batch at byte {position} is truncated: batch_length says {size} bytes, {remaining} are present"
        )
    actual = crc32c.crc32c(view[position + CRC_START : position + size])
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at byte {position} fails its CRC-32C: stored {header.crc:#010x}, computed {actual:#010x}"
        )
    attributes = header.attributes
    if attributes & COMPRESSION_MASK > CODEC_ZSTD:
        raise CorruptRecordError(
            f"batch at byte {position} names compression codec {attributes & COMPRESSION_MASK}; Kafka knows 0-4"
        )
    if header.records_count < 1 or header.last_offset_delta != header.records_count - 1:
        raise CorruptRecordError(
            f"batch at byte {position} has records_count {header.records_count} and last_offset_delta "
            f"{header.last_offset_delta}; a produced batch needs last_offset_delta == records_count - 1 >= 0"
        )
    if attributes & CONTROL_MASK and not allow_control:
        raise InvalidRecordError(
            f"batch at byte {position} is a control batch; clients may not write transaction markers"
        )
    return header


def _check_short_batch(view: memoryview, position: int, remaining: int) -> None:
    """Raise for a batch with fewer than 61 bytes left: the first of Kafka's checks it fails."""
    where = f"batch at byte {position}"
    if remaining >= LOG_OVERHEAD:
        (batch_length,) = struct.unpack_from(">i", view, position + BATCH_LENGTH_OFFSET)
        if batch_length < _MIN_LEGACY_LENGTH:
            raise CorruptRecordError(f"{where} declares batch_length {batch_length}, less than any batch")
        if remaining > MAGIC_OFFSET and view[position + MAGIC_OFFSET] != MAGIC:
            raise InvalidRecordError(
                f"{where} has magic {view[position + MAGIC_OFFSET]}; this broker stores only record batch v2 "
                "(magic 2), which every client since Kafka 0.11 sends"
            )
    raise CorruptRecordError(f"{where} is truncated: {remaining} bytes left, a batch header needs {HEADER_SIZE}")


class BatchIterator:
    """Iterates the batches of already-stored bytes, stopping at the first bad or torn one.

    After iteration, ``position`` is the end of the last good batch (where recovery truncates) and
    ``error`` says why iteration stopped early (None when the buffer ended cleanly on a batch
    boundary). ``batch_position`` is the start of the batch last yielded.
    """

    def __init__(self, buf: bytes | bytearray | memoryview | mmap.mmap, *, verify_crc: bool = True) -> None:
        self._view = memoryview(buf)
        self._verify_crc = verify_crc
        self.position = 0
        self.batch_position = -1
        self.error: str | None = None

    def __iter__(self) -> BatchIterator:
        return self

    def close(self) -> None:
        """Release the buffer now (an mmap cannot close while a view of it is alive)."""
        self._view.release()
        self._view = memoryview(b"")

    def __next__(self) -> BatchHeader:
        view, position = self._view, self.position
        remaining = len(view) - position
        if remaining == 0 or self.error is not None:
            self._view = memoryview(b"")  # drop the reference: callers may close an mmap under it
            raise StopIteration
        try:
            if remaining < HEADER_SIZE:
                raise CorruptRecordError(f"{remaining} trailing bytes at {position}, less than a batch header")
            header = BatchHeader.parse(view, position)
            if header.magic != MAGIC:
                raise CorruptRecordError(f"batch at {position} has magic {header.magic}")
            if header.size < HEADER_SIZE or header.size > remaining:
                raise CorruptRecordError(
                    f"batch at {position} declares {header.size} bytes, {remaining} are present (torn write?)"
                )
            if self._verify_crc and crc32c.crc32c(view[position + CRC_START : position + header.size]) != header.crc:
                raise CorruptRecordError(f"batch at {position} fails its CRC-32C")
        except CorruptRecordError as error:
            self.error = str(error)
            self._view = memoryview(b"")
            raise StopIteration from None
        self.batch_position = position
        self.position = position + header.size
        return header


def iter_batches(buf: bytes | bytearray | memoryview | mmap.mmap, *, verify_crc: bool = True) -> BatchIterator:
    """Batches of stored data in order; see :class:`BatchIterator` for where and why it stopped."""
    return BatchIterator(buf, verify_crc=verify_crc)


def rewrite_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int = 0) -> None:
    """Set the base offset and partition leader epoch of the batch at ``pos`` in place.

    Both fields lie before byte 21, outside the CRC, so the batch stays valid without recomputing.
    """
    struct.pack_into(">q", buf, pos, base_offset)
    struct.pack_into(">i", buf, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp_ms: int) -> None:
    """Stamp the batch at ``pos`` with LogAppendTime: timestamp-type bit and ``max_timestamp``, as
    Kafka's ``setMaxTimestamp``; both are inside the CRC, which is recomputed."""
    (attributes,) = struct.unpack_from(">h", buf, pos + ATTRIBUTES_OFFSET)
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    struct.pack_into(">q", buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    crc = crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])
    struct.pack_into(">I", buf, pos + CRC_OFFSET, crc)


# -- building batches (broker-written markers, internal topics, tests) --------------------------

Header = tuple[str, "bytes | None"]
Record = tuple["bytes | None", "bytes | None", Sequence[Header], int]


def _varint(value: int, out: bytearray) -> None:
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _bytes_field(value: bytes | None, out: bytearray) -> None:
    if value is None:
        _varint(-1, out)
    else:
        _varint(len(value), out)
        out += value


def _encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None, headers: Sequence[Header]
) -> bytes:
    body = bytearray(b"\x00")  # record attributes: unused, always 0
    _varint(timestamp_delta, body)
    _varint(offset_delta, body)
    _bytes_field(key, body)
    _bytes_field(value, body)
    _varint(len(headers), body)
    for header_key, header_value in headers:
        _bytes_field(header_key.encode("utf-8"), body)
        _bytes_field(header_value, body)
    record = bytearray()
    _varint(len(body), record)
    record += body
    return bytes(record)


def build_record_batch(
    records: Sequence[Record],
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    *,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = 0,
) -> bytes:
    """An uncompressed v2 batch of ``(key, value, headers, timestamp_ms)`` records, CRC included.

    ``base_timestamp`` is the first record's timestamp (as Java's and librdkafka's producers do);
    headers are ``(str, bytes | None)`` pairs.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_timestamp = records[0][3]
    payload = b"".join(
        _encode_record(index, timestamp - base_timestamp, key, value, headers)
        for index, (key, value, headers, timestamp) in enumerate(records)
    )
    attributes = (TRANSACTIONAL_MASK if is_transactional else 0) | (CONTROL_MASK if is_control else 0)
    buf = bytearray(HEADER_SIZE) + payload
    HEADER.pack_into(
        buf,
        0,
        base_offset,
        len(buf) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        len(records) - 1,
        base_timestamp,
        max(record[3] for record in records),
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c.crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)


def build_control_batch(
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
) -> bytes:
    """A transaction marker: attributes 0x30, one record whose key is ``(version 0, type)`` with type
    1 COMMIT / 0 ABORT and whose value is ``(version 0, coordinator_epoch)``; occupies one offset."""
    key = CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = CONTROL_VALUE.pack(0, coordinator_epoch)
    return build_record_batch(
        [(key, value, (), timestamp_ms)],
        base_offset,
        producer_id,
        producer_epoch,
        -1,
        is_transactional=True,
        is_control=True,
    )


# -- timestamps inside one batch (ListOffsets by time; not a hot path) ---------------------------


def first_offset_at_or_after_timestamp(batch_bytes: bytes | bytearray | memoryview, target_ts: int) -> int | None:
    """Offset of the batch's first record with timestamp >= ``target_ts``, or None if it has none."""
    found = first_record_at_or_after_timestamp(batch_bytes, target_ts)
    return None if found is None else found[0]


def first_record_at_or_after_timestamp(
    batch_bytes: bytes | bytearray | memoryview, target_ts: int
) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the batch's first record with timestamp >= ``target_ts``.

    Decodes the records of this one batch, decompressing with cramjam when the batch is compressed
    (snappy in either xerial framing, as Java clients write it, or raw, as librdkafka does). When
    the codec cannot be decoded the answer falls back to the batch's base offset, as Kafka allows.
    LogAppendTime batches give every record the batch's ``max_timestamp``.
    """
    view = memoryview(batch_bytes)
    header = BatchHeader.parse(view, 0)
    if header.max_timestamp < target_ts:
        return None
    if header.timestamp_type == LOG_APPEND_TIME:
        return header.base_offset, header.max_timestamp
    records = decompress(header.compression, view[HEADER_SIZE : header.size])
    if records is None:
        fallback_ts = header.base_timestamp if header.base_timestamp >= target_ts else header.max_timestamp
        return header.base_offset, fallback_ts
    position = 0
    for _ in range(header.records_count):
        length, position = read_varint(records, position)
        end = position + length
        timestamp_delta, cursor = read_varint(records, position + RECORD_ATTRIBUTES_SIZE)
        offset_delta, _ = read_varint(records, cursor)
        timestamp = header.base_timestamp + timestamp_delta
        if timestamp >= target_ts:
            return header.base_offset + offset_delta, timestamp
        position = end
    return None
