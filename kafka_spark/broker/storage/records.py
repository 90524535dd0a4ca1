"""Records inside a v2 batch: decode them, rewrite a batch with fewer of them, check their keys.

The broker stores batches verbatim (batch.py works per batch); only compaction and the produce-time
key check of compacted topics look at single records. Record layout (Kafka
``docs/implementation.html`` §5.3.2, varints zigzag-encoded)::

    length varint, attributes int8, timestamp_delta varlong, offset_delta varint,
    key_length varint (-1 = null), key, value_length varint (-1 = null), value,
    headers_count varint, headers

A rewritten batch keeps the original's base offset, ``last_offset_delta``, producer id/epoch, base
sequence and leader epoch (Kafka's ``MemoryRecords.filterTo``), so offsets after it stay where
they were and idempotent-producer state rebuilt from headers is unchanged; only
``records_count``, ``batch_length``, ``max_timestamp``, the CRC and, when a delete horizon is set,
``base_timestamp`` change. Compressed batches are recompressed with their own codec (snappy as
raw snappy, as librdkafka writes it and Java's xerial reader accepts).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

import crc32c

from kafka_spark.broker.storage.batch import (
    read_varint,
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
    _decompress,  # batch.py's codec table (incl. xerial snappy); shared rather than duplicated
)
from kafka_spark.broker.storage.errors import CorruptRecordError, InvalidRecordError

DELETE_HORIZON_MASK = 0x40  # KIP-534: base_timestamp holds the delete horizon of the batch's tombstones
_CRC_OFFSET = 17


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


def decode_records(batch: bytes | memoryview, header: BatchHeader) -> tuple[bytes | memoryview, list[RecordView]] | None:
    """``(records buffer, records)`` of one whole batch, decompressing when needed; None when the
    codec cannot be decoded here. Raises CorruptRecordError when the records do not parse."""
    view = memoryview(batch)
    buf = _decompress(header.compression, view[HEADER_SIZE: header.size])
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
            timestamp_delta, cursor = read_varint(buf, position + 1)  # skip the attributes byte
            after_timestamp = cursor
            offset_delta, cursor = read_varint(buf, cursor)
            key_length, cursor = read_varint(buf, cursor)
            key = None
            if key_length >= 0:
                key = bytes(buf[cursor: cursor + key_length])
                cursor += key_length
            value_length, cursor = read_varint(buf, cursor)
            if end > len(buf) or cursor > end:
                raise ValueError(f"record at byte {start} overruns the records section")
            records.append(RecordView(offset_delta, timestamp_delta, key, value_length < 0, start, body_start,
                                      after_timestamp, end))
            position = end
    except (IndexError, ValueError) as error:
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} has undecodable records: {error}") from None
    return buf, records


def rewrite_batch(header: BatchHeader, buf: bytes | memoryview, kept: Sequence[RecordView], *,
                  delete_horizon_ms: int | None = None) -> bytes:
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
            payload += buf[record.start: record.end]
            continue
        body = bytearray(buf[record.body_start: record.body_start + 1])  # record attributes
        write_varint(header.base_timestamp + record.timestamp_delta - base_timestamp, body)
        body += buf[record.after_timestamp: record.end]
        write_varint(len(body), payload)
        payload += body
    if header.timestamp_type == LOG_APPEND_TIME:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + max(record.timestamp_delta for record in kept)
    records_section = compress(header.compression, bytes(payload))
    out = bytearray(HEADER_SIZE) + records_section
    HEADER.pack_into(
        out, 0, header.base_offset, len(out) - LOG_OVERHEAD, header.partition_leader_epoch, header.magic, 0,
        attributes, header.last_offset_delta, base_timestamp, max_timestamp, header.producer_id,
        header.producer_epoch, header.base_sequence, len(kept),
    )
    struct.pack_into(">I", out, _CRC_OFFSET, crc32c.crc32c(memoryview(out)[21:]))
    return bytes(out)


def empty_batch(header: BatchHeader) -> bytes:
    """The batch's header with no records (Kafka's ``writeEmptyHeader``): same base offset,
    ``last_offset_delta``, producer id/epoch and base sequence, uncompressed, both timestamps the
    batch's ``max_timestamp``. It keeps an offset range and a producer's sequence state alive when
    compaction removed every record."""
    out = bytearray(HEADER_SIZE)
    attributes = header.attributes & ~0x07 & ~DELETE_HORIZON_MASK
    HEADER.pack_into(
        out, 0, header.base_offset, HEADER_SIZE - LOG_OVERHEAD, header.partition_leader_epoch, header.magic, 0,
        attributes, header.last_offset_delta, header.max_timestamp, header.max_timestamp, header.producer_id,
        header.producer_epoch, header.base_sequence, 0,
    )
    struct.pack_into(">I", out, _CRC_OFFSET, crc32c.crc32c(memoryview(out)[21:]))
    return bytes(out)


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed with Kafka codec ``codec`` (cramjam; lz4 as a standard LZ4 frame)."""
    if codec == CODEC_NONE:
        return data
    import cramjam

    if codec == CODEC_GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == CODEC_SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == CODEC_LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == CODEC_ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def validate_keys_for_compaction(records: bytes | memoryview, headers: Sequence[BatchHeader], log_name: str) -> None:
    """Refuse produced batches holding a record without a key, for a compacted topic.

    Kafka's ``LogValidator.validateKey``: INVALID_RECORD (87, ``InvalidRecordError``); per-record
    work, so the produce path calls it only when ``log.config.compacts``. Control batches are not
    checked (only the broker writes them). A batch whose codec cannot be decoded here is refused too.
    """
    view = memoryview(records)
    position = 0
    for header in headers:
        if not header.is_control:
            decoded = decode_records(view[position: position + header.size], header)
            if decoded is None:
                raise InvalidRecordError(
                    f"cannot check the keys of a {header.compression}-compressed batch for compacted topic "
                    f"partition {log_name}; use gzip, snappy, lz4 or zstd")
            for record in decoded[1]:
                if record.key is None:
                    raise InvalidRecordError(
                        f"Compacted topic cannot accept message without key in topic partition {log_name} "
                        f"(record {record.offset_delta} of the batch); give every record a key, or use "
                        "cleanup.policy=delete for keyless data")
        position += header.size
