"""Record batch v2: golden vectors, validation rules, and batches written by a real client
(kafka-python's DefaultRecordBatchBuilder) with every codec."""

from __future__ import annotations

import struct
import sys

import cramjam
import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafka_spark.broker.storage.batch import (
    BatchHeader,
    build_control_batch,
    build_record_batch,
    first_offset_at_or_after_timestamp,
    first_record_at_or_after_timestamp,
    iter_batches,
    rewrite_base_offset,
    set_log_append_time,
    validate_batches,
)
from kafka_spark.broker.storage.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError

# kafka-protocol-subset.md §3.4, decoded and CRC-checked there with kafka-python.
GOLDEN_DATA = bytes.fromhex(
    "00000000000000000000003a0000000002bbcc41150000000000000000018bcfe568000000018bcfe56800ffff"
    "ffffffffffffffffffffffff00000001100000000104686900"
)
GOLDEN_COMMIT = bytes.fromhex(
    "0000000000000005000000420000000002a1ac499f0030000000000000018bcfe568000000018bcfe568000000"
    "0000000003e80000ffffffff000000012000000008000000010c00000000000000"
)
TS = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
MAX = 1048588


def client_batch(
    codec: int,
    count: int = 10,
    *,
    base_ts: int = TS,
    step_ms: int = 1,
    producer_id: int = -1,
    is_transactional: bool = False,
) -> bytes:
    """A batch as kafka-python's producer builds it (compressible values, so codecs do compress)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=is_transactional,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=10**7,
    )
    for i in range(count):
        builder.append(i, timestamp=base_ts + i * step_ms, key=b"key-%d" % i, value=b"value " * 40, headers=[])
    return bytes(builder.build())


def with_fixed_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def recompress(batch: bytes, codec: int, compress) -> bytes:
    """The same batch with its records section compressed by ``compress`` (e.g. raw snappy, as
    librdkafka writes it), lengths and CRC fixed up."""
    body = bytes(compress(batch[61:]))
    out = bytearray(batch[:61]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, (struct.unpack_from(">h", out, 21)[0] & ~7) | codec)
    return with_fixed_crc(out)


def test_data_batch_matches_golden_vector() -> None:
    assert build_record_batch([(None, b"hi", (), TS)]) == GOLDEN_DATA


def test_commit_marker_matches_golden_vector() -> None:
    assert build_control_batch(5, 1000, 0, True, 0, TS) == GOLDEN_COMMIT


def test_abort_marker_decodes_as_a_control_batch_in_kafka_python() -> None:
    marker = build_control_batch(9, 1000, 3, False, 7, TS)
    batch = MemoryRecords(marker).next_batch()
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.base_offset, batch.producer_id, batch.producer_epoch) == (9, 1000, 3)
    (record,) = list(batch)
    assert struct.unpack(">hh", record.key) == (0, 0)
    assert struct.unpack(">hi", record.value) == (0, 7)


def test_golden_vectors_validate_and_parse() -> None:
    data, commit = validate_batches(GOLDEN_DATA + GOLDEN_COMMIT, MAX, allow_control=True)
    assert (data.base_offset, data.size, data.records_count, data.crc) == (0, 70, 1, 0xBBCC4115)
    assert (commit.base_offset, commit.size, commit.producer_id) == (5, 78, 1000)
    assert commit.is_control and commit.is_transactional and not data.is_control
    assert commit.attributes == 0x30 and commit.last_offset == 5


def test_built_batch_with_headers_and_nulls_decodes_in_kafka_python() -> None:
    built = build_record_batch(
        [(b"k", b"v", [("h", b"x"), ("n", None)], TS), (None, None, (), TS - 1000)], base_offset=7
    )
    batch = MemoryRecords(built).next_batch()
    assert batch.validate_crc()
    decoded = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    assert decoded == [(7, TS, b"k", b"v", [("h", b"x"), ("n", None)]), (8, TS - 1000, None, None, [])]


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_client_batches_validate_for_every_codec(codec: int) -> None:
    batch = client_batch(codec)
    (header,) = validate_batches(batch, MAX)
    reference = MemoryRecords(batch).next_batch()
    assert header.compression == codec == reference.compression_type
    assert header.size == len(batch)
    assert (header.records_count, header.last_offset_delta) == (10, 9)
    assert (header.base_timestamp, header.max_timestamp) == (TS, TS + 9)
    assert header.crc == reference.crc


def test_flipped_byte_fails_the_crc() -> None:
    batch = bytearray(client_batch(0))
    batch[-5] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC") as caught:
        validate_batches(bytes(batch), MAX)
    assert caught.value.error_code == 2


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    batch = bytearray(client_batch(1))
    rewrite_base_offset(batch, 0, 123_456, leader_epoch=0)
    (header,) = validate_batches(bytes(batch), MAX)
    assert header.base_offset == 123_456 and header.partition_leader_epoch == 0
    decoded = MemoryRecords(bytes(batch)).next_batch()
    assert decoded.validate_crc()
    assert [record.offset for record in decoded] == list(range(123_456, 123_466))


def test_a_rebased_header_is_the_header_of_the_rewritten_bytes() -> None:
    """The produce path writes a new 16-byte prefix beside the producer's bytes and keeps the
    stored header without parsing the bytes again: it must be what parsing them would give."""
    batch = bytearray(client_batch(1))
    (produced,) = validate_batches(bytes(batch), MAX)
    rewrite_base_offset(batch, 0, 9_876_543_210, leader_epoch=7)
    stored = BatchHeader.parse(batch)
    assert produced.rebased(9_876_543_210, 7) == stored
    assert stored != produced and (stored.base_offset, stored.partition_leader_epoch) == (9_876_543_210, 7)
    assert stored.last_offset == 9_876_543_210 + produced.last_offset_delta and stored.crc == produced.crc


def test_truncated_batch_is_corrupt() -> None:
    batch = client_batch(0)
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batches(batch[:-1], MAX)
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batches(batch[:40], MAX)


def test_trailing_garbage_after_a_batch_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        validate_batches(GOLDEN_DATA + b"\x00" * 20, MAX)


def test_old_magic_is_an_invalid_record() -> None:
    batch = bytearray(GOLDEN_DATA)
    batch[16] = 1
    with pytest.raises(InvalidRecordError, match="magic 1") as caught:
        validate_batches(bytes(batch), MAX)
    assert caught.value.error_code == 87


def test_payload_above_max_message_bytes_is_too_large() -> None:
    batch = client_batch(0)
    with pytest.raises(RecordTooLargeError, match="max.message.bytes") as caught:
        validate_batches(batch, len(batch) - 1)
    assert caught.value.error_code == 10
    assert validate_batches(batch, len(batch))


def test_unknown_codec_is_corrupt() -> None:
    batch = bytearray(GOLDEN_DATA)
    struct.pack_into(">h", batch, 21, 5)
    with pytest.raises(CorruptRecordError, match="codec 5"):
        validate_batches(with_fixed_crc(batch), MAX)


def test_last_offset_delta_must_match_records_count() -> None:
    batch = bytearray(client_batch(0, count=3))
    struct.pack_into(">i", batch, 23, 5)
    with pytest.raises(CorruptRecordError, match="last_offset_delta"):
        validate_batches(with_fixed_crc(batch), MAX)


def test_control_batches_from_clients_are_refused() -> None:
    with pytest.raises(InvalidRecordError, match="control"):
        validate_batches(GOLDEN_COMMIT, MAX)
    assert validate_batches(GOLDEN_COMMIT, MAX, allow_control=True)[0].is_control


def test_empty_payload_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        validate_batches(b"", MAX)


def test_several_batches_are_split_in_order() -> None:
    first, second = client_batch(0, count=2), client_batch(3, count=4)
    headers = validate_batches(first + second, MAX)
    assert [(h.size, h.records_count, h.compression) for h in headers] == [(len(first), 2, 0), (len(second), 4, 3)]


def test_iter_batches_stops_at_a_torn_tail_and_says_where() -> None:
    batches = [client_batch(0, count=2) for _ in range(3)]
    whole = b"".join(batches)
    scan = iter_batches(whole[: len(whole) - 7])
    assert len(list(scan)) == 2
    assert scan.position == len(batches[0]) * 2
    assert "torn" in scan.error


def test_iter_batches_stops_at_a_crc_mismatch() -> None:
    data = bytearray(GOLDEN_DATA * 3)
    data[70 + 65] ^= 0xFF  # a record byte of the second batch
    scan = iter_batches(bytes(data))
    assert [header.size for header in scan] == [70]
    assert scan.position == 70 and "CRC" in scan.error


def test_iter_batches_ends_cleanly_on_a_boundary() -> None:
    scan = iter_batches(GOLDEN_DATA + GOLDEN_COMMIT)
    assert [header.base_offset for header in scan] == [0, 5]
    assert scan.error is None and scan.position == 148


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_timestamp_lookup_decodes_records_of_every_codec(codec: int) -> None:
    batch = bytearray(client_batch(codec, count=10, step_ms=100))
    rewrite_base_offset(batch, 0, 1000)
    assert first_record_at_or_after_timestamp(batch, TS + 250) == (1003, TS + 300)
    assert first_record_at_or_after_timestamp(batch, TS - 5) == (1000, TS)
    assert first_offset_at_or_after_timestamp(batch, TS + 900) == 1009
    assert first_offset_at_or_after_timestamp(batch, TS + 901) is None


def test_timestamp_lookup_reads_raw_snappy_as_librdkafka_writes_it() -> None:
    batch = recompress(client_batch(0, count=10, step_ms=100), 2, cramjam.snappy.compress_raw)
    assert validate_batches(batch, MAX)[0].compression == 2
    assert not batch[61:].startswith(b"\x82SNAPPY")
    assert first_record_at_or_after_timestamp(batch, TS + 450) == (5, TS + 500)


def test_timestamp_lookup_falls_back_to_the_base_offset_without_a_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cramjam", None)  # as if cramjam were not installed
    batch = client_batch(1, count=10, step_ms=100)
    assert first_record_at_or_after_timestamp(batch, TS + 450) == (0, TS + 900)
    assert first_record_at_or_after_timestamp(client_batch(0, count=10, step_ms=100), TS + 450) == (5, TS + 500)


def test_log_append_time_applies_the_batch_max_timestamp_to_every_record() -> None:
    batch = bytearray(client_batch(4, count=5, step_ms=100))
    set_log_append_time(batch, 0, len(batch), TS + 10_000)
    header = BatchHeader.parse(batch)
    assert header.timestamp_type == 1 and header.max_timestamp == TS + 10_000
    assert validate_batches(bytes(batch), MAX)  # CRC recomputed
    assert MemoryRecords(bytes(batch)).next_batch().validate_crc()
    assert first_record_at_or_after_timestamp(batch, TS + 5) == (0, TS + 10_000)
