"""Records inside a v2 batch: decode them, rewrite a batch with fewer of them, check them on
produce (keys of compacted topics, timestamps), recompress a batch in the topic's codec.

The broker stores batches verbatim (batch.py works per batch); only compaction, the produce-time
record checks (where a topic's settings call for them) and recompression (a topic whose
compression.type is not "producer") look at single records, laid out as
kafka_spark.common.record_batch describes.

A rewritten batch keeps the original's base offset, ``last_offset_delta``, producer id/epoch, base
sequence and leader epoch (Kafka's ``MemoryRecords.filterTo``), so offsets after it stay where
they were and idempotent-producer state rebuilt from headers is unchanged; only
``records_count``, ``batch_length``, ``max_timestamp``, the CRC and, when a delete horizon is set,
``base_timestamp`` change. Compressed batches are recompressed with their own codec (snappy as
raw snappy, as librdkafka writes it and Java's xerial reader accepts).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING

import crc32c

from kafka_spark.broker.storage.batch import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    HEADER,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    BatchHeader,
    read_varint,
)
from kafka_spark.broker.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidRecordsError,
    InvalidTimestampError,
)
from kafka_spark.common.compression import decompress  # the codec table shared with the executors
from kafka_spark.common.record_batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    CRC_START,
    DELETE_HORIZON_MASK,
    RECORD_ATTRIBUTES_SIZE,
)

_max_timestamp = attrgetter("max_timestamp")

if TYPE_CHECKING:
    from kafka_spark.broker.storage.config import LogConfig


@dataclass(frozen=True, slots=True)
class RecordView:
    """One decoded record: where its bytes lie in the (decompressed) records buffer and what the
    cleaner needs of it. ``start``/``end`` span the whole record including its length prefix;
    ``body_start`` is its attributes byte, ``after_timestamp`` where the bytes after the timestamp
    delta begin."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value_is_null: bool
    start: int
    body_start: int
    after_timestamp: int
    end: int


def write_varint(value: int, out: bytearray) -> None:
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def decode_records(
    batch: bytes | memoryview, header: BatchHeader
) -> tuple[bytes | memoryview, list[RecordView]] | None:
    """``(records buffer, records)`` of one whole batch, decompressing when needed; None when the
    codec cannot be decoded here. Raises CorruptRecordError when the records do not parse."""
    view = memoryview(batch)
    buf = decompress(header.compression, view[HEADER_SIZE : header.size])
    if buf is None:
        return None
    records: list[RecordView] = []
    position = 0
    try:
        for _ in range(header.records_count):
            start = position
            length, position = read_varint(buf, position)
            body_start = position
            end = position + length
            timestamp_delta, cursor = read_varint(buf, position + RECORD_ATTRIBUTES_SIZE)
            after_timestamp = cursor
            offset_delta, cursor = read_varint(buf, cursor)
            key_length, cursor = read_varint(buf, cursor)
            key = None
            if key_length >= 0:
                key = bytes(buf[cursor : cursor + key_length])
                cursor += key_length
            value_length, cursor = read_varint(buf, cursor)
            if end > len(buf) or cursor > end:
                raise ValueError(f"record at byte {start} overruns the records section")
            records.append(
                RecordView(
                    offset_delta, timestamp_delta, key, value_length < 0, start, body_start, after_timestamp, end
                )
            )
            position = end
    except (IndexError, ValueError) as error:
        raise CorruptRecordError(f"batch at offset {header.base_offset} has undecodable records: {error}") from None
    return buf, records


def rewrite_batch(
    header: BatchHeader, buf: bytes | memoryview, kept: Sequence[RecordView], *, delete_horizon_ms: int | None = None
) -> bytes:
    """A copy of the batch holding only ``kept`` records (a non-empty subset, in order).

    With ``delete_horizon_ms`` (and no horizon set yet) the batch gets KIP-534's delete-horizon
    flag and ``base_timestamp = delete_horizon_ms``; record timestamp deltas are rebased so every
    record keeps its timestamp. Raises ValueError when ``kept`` is empty.
    """
    if not kept:
        raise ValueError("a rewritten batch needs at least one record")
    attributes = header.attributes
    base_timestamp = header.base_timestamp
    rebase = delete_horizon_ms is not None and not attributes & DELETE_HORIZON_MASK
    if rebase:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = delete_horizon_ms  # type: ignore[assignment]
    payload = bytearray()
    for record in kept:
        if not rebase:
            payload += buf[record.start : record.end]
            continue
        body = bytearray(buf[record.body_start : record.body_start + 1])  # record attributes
        write_varint(header.base_timestamp + record.timestamp_delta - base_timestamp, body)
        body += buf[record.after_timestamp : record.end]
        write_varint(len(body), payload)
        payload += body
    if header.timestamp_type == LOG_APPEND_TIME:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + max(record.timestamp_delta for record in kept)
    records_section = compress(header.compression, bytes(payload))
    out = bytearray(HEADER_SIZE) + records_section
    HEADER.pack_into(
        out,
        0,
        header.base_offset,
        len(out) - LOG_OVERHEAD,
        header.partition_leader_epoch,
        header.magic,
        0,
        attributes,
        header.last_offset_delta,
        base_timestamp,
        max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(kept),
    )
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def empty_batch(header: BatchHeader) -> bytes:
    """The batch's header with no records (Kafka's ``writeEmptyHeader``): same base offset,
    ``last_offset_delta``, producer id/epoch and base sequence, uncompressed, both timestamps the
    batch's ``max_timestamp``. It keeps an offset range and a producer's sequence state alive when
    compaction removed every record."""
    out = bytearray(HEADER_SIZE)
    attributes = header.attributes & ~COMPRESSION_MASK & ~DELETE_HORIZON_MASK
    HEADER.pack_into(
        out,
        0,
        header.base_offset,
        HEADER_SIZE - LOG_OVERHEAD,
        header.partition_leader_epoch,
        header.magic,
        0,
        attributes,
        header.last_offset_delta,
        header.max_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        0,
    )
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """``data`` compressed with Kafka codec ``codec`` (cramjam; lz4 as a standard LZ4 frame), at
    ``level`` (the codec's default for None, or -1 with gzip, as Kafka's compression.gzip.level)."""
    if codec == CODEC_NONE:
        return data
    import cramjam

    levelled = {} if level is None or level == -1 else {"level": level}
    if codec == CODEC_GZIP:
        return bytes(cramjam.gzip.compress(data, **levelled))
    if codec == CODEC_SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == CODEC_LZ4:
        return bytes(cramjam.lz4.compress(data, **levelled))
    if codec == CODEC_ZSTD:
        return bytes(cramjam.zstd.compress(data, **levelled))
    raise ValueError(f"unknown compression codec {codec}")


def validate_records(
    records: bytes | memoryview, headers: Sequence[BatchHeader], log_name: str, config: LogConfig, now_ms: int
) -> None:
    """Kafka's ``LogValidator`` record checks, each record of each produced batch: in a compacted
    topic every record needs a key (87 INVALID_RECORD); in a CreateTime topic every timestamp must
    lie within ``[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]``
    (32 INVALID_TIMESTAMP). A batch with such records is refused whole, with the index and reason
    of each (KIP-467), in Kafka's words.

    Per-record work only where it can find something: keys only for compacted topics; timestamps
    only when a batch's newest timestamp lies beyond the window (or the older bound is set), which
    the batch header tells. Control batches are not checked (only the broker writes them).
    """
    compacts = config.compacts
    before_max_ms = config.message_timestamp_before_max_ms
    latest = now_ms + config.message_timestamp_after_max_ms
    if not compacts and before_max_ms >= (1 << 62) and max(map(_max_timestamp, headers), default=latest) <= latest:
        return  # the usual case, on every produce: nothing per record to look at
    earliest = now_ms - before_max_ms if before_max_ms < (1 << 62) else None
    create_time = config.message_timestamp_type == "CreateTime"
    view = memoryview(records)
    position = 0
    key_errors: list[tuple[int, str]] = []
    time_errors: list[tuple[int, str]] = []
    for header in headers:
        batch = view[position : position + header.size]
        position += header.size
        check_time = create_time and (earliest is not None or header.max_timestamp > latest)
        if header.is_control or not (compacts or check_time):
            continue
        decoded = decode_records(batch, header)
        if decoded is None:
            raise InvalidRecordError(
                f"cannot check the records of a {header.compression}-compressed batch for topic partition "
                f"{log_name}; use gzip, snappy, lz4 or zstd"
            )
        for index, record in enumerate(decoded[1]):
            if compacts and record.key is None:
                key_errors.append(
                    (index, f"Compacted topic cannot accept message without key in topic partition {log_name}.")
                )
                continue
            timestamp = header.base_timestamp + record.timestamp_delta
            if check_time and (timestamp > latest or (earliest is not None and timestamp < earliest)):
                time_errors.append(
                    (
                        index,
                        f"Timestamp {timestamp} of message with offset {record.offset_delta} is "
                        f"out of range. The timestamp should be within "
                        f"[{earliest if earliest is not None else -(1 << 63)}, {latest}]",
                    )
                )
    errors = sorted(key_errors + time_errors)
    if time_errors:
        raise InvalidTimestampError("One or more records have been rejected due to invalid timestamp", errors)
    if key_errors:
        shown = ", ".join(f"RecordError(batchIndex={index}, message='{message}')" for index, message in errors[:3])
        raise InvalidRecordsError(
            f"One or more records have been rejected due to {len(errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]",
            errors,
        )


def recompress(
    records: bytes | memoryview, headers: Sequence[BatchHeader], codec: int, levels: Mapping[int, int]
) -> bytes:
    """``records`` with every batch in ``codec`` (Kafka's compression.type of the topic): batches
    in another codec are decompressed and compressed again, everything else of them (producer id,
    epoch, sequence, offsets, timestamps) kept; ``levels`` gives the level per codec. Raises
    InvalidRecordError for a batch whose codec cannot be decoded here."""
    view = memoryview(records)
    out = bytearray()
    position = 0
    for header in headers:
        batch = view[position : position + header.size]
        position += header.size
        if header.compression == codec or header.is_control:
            out += batch
            continue
        plain = decompress(header.compression, batch[HEADER_SIZE:])
        if plain is None:
            raise InvalidRecordError(f"cannot recompress a batch in codec {header.compression}: it does not decode")
        body = compress(codec, bytes(plain), levels.get(codec))
        rebuilt = bytearray(batch[:HEADER_SIZE]) + body
        struct.pack_into(">i", rebuilt, BATCH_LENGTH_OFFSET, len(rebuilt) - LOG_OVERHEAD)
        attributes = (header.attributes & ~COMPRESSION_MASK) | codec
        struct.pack_into(">h", rebuilt, ATTRIBUTES_OFFSET, attributes)
        struct.pack_into(">I", rebuilt, CRC_OFFSET, crc32c.crc32c(memoryview(rebuilt)[CRC_START:]))
        out += rebuilt
    return bytes(out)
