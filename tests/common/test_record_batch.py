"""The one record-batch v2 layout (kafka_spark.common.record_batch): its offsets are the header
struct's, the broker, the executors' numba decoder and `pylog consume` read the same fields with
it, and the C walk of `pylog consume` is built from the header generated from it."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from kafka_spark.broker.storage.batch import BatchHeader, build_control_batch, build_record_batch
from kafka_spark.broker.storage.records import write_varint
from kafka_spark.cli import console_records
from kafka_spark.common import record_batch as layout
from kafka_spark.read import record_decoder
from tests.support.paths import ROOT

HEADER_FILE = ROOT / "kafka_spark" / "cli" / "_record_layout.h"


def test_the_c_header_is_the_one_the_module_generates():
    assert HEADER_FILE.read_text() == layout.c_header(), (
        "kafka_spark/cli/_record_layout.h differs from kafka_spark/common/record_batch.py: regenerate it with "
        "`python -m kafka_spark.common.record_batch > kafka_spark/cli/_record_layout.h` and rebuild the extension"
    )


def test_every_named_offset_reads_its_field_of_the_header_struct():
    batch = build_record_batch(
        [(b"k", b"v", [("h", b"x")], 1_700_000_000_123), (None, None, [], 1_700_000_000_456)],
        base_offset=1234,
        producer_id=77,
        producer_epoch=3,
        base_sequence=9,
        is_transactional=True,
        partition_leader_epoch=5,
    )
    fields = dict(zip((name for name, _ in layout.FIELDS), layout.HEADER.unpack_from(batch), strict=True))
    codes = dict(layout.FIELDS)
    for name, value in fields.items():
        offset = getattr(layout, f"{name.upper()}_OFFSET")
        assert struct.unpack_from(">" + codes[name], batch, offset)[0] == value, name
    assert layout.HEADER_SIZE == 61 and layout.LOG_OVERHEAD == 12 and layout.CRC_START == 21
    assert fields["batch_length"] == len(batch) - layout.LOG_OVERHEAD and fields["magic"] == layout.MAGIC
    assert fields["attributes"] == layout.TRANSACTIONAL_MASK


def test_the_broker_the_executors_decoder_and_the_console_read_the_same_header():
    batches = build_record_batch(
        [(b"a", b"1", [], 1_000), (b"b", b"2", [], 1_005)], base_offset=40
    ) + build_control_batch(42, producer_id=8, producer_epoch=1, commit=False, coordinator_epoch=6, timestamp_ms=2_000)
    first = BatchHeader.parse(batches, 0)
    stored = [first, BatchHeader.parse(batches, first.size)]
    index = record_decoder.scan_batches(np.frombuffer(batches, np.uint8))
    console = console_records.scan(batches)
    for i, header in enumerate(stored):
        assert int(index.base_offset[i]) == console[i].base_offset == header.base_offset
        assert int(index.last_offset[i]) == console[i].last_offset == header.last_offset
        assert int(index.attributes[i]) == console[i].attributes == header.attributes
        assert int(index.producer_id[i]) == console[i].producer_id == header.producer_id
        assert int(index.records[i]) == console[i].count == header.records_count
        assert int(index.max_timestamp[i]) == console[i].max_timestamp == header.max_timestamp
    assert stored[1].is_control and console[1].control and index.attributes[1] & layout.CONTROL_MASK


@pytest.mark.parametrize("commit", [True, False])
def test_control_type_reads_the_marker_the_broker_writes(commit):
    marker = build_control_batch(7, producer_id=1, producer_epoch=0, commit=commit, coordinator_epoch=3, timestamp_ms=1)
    expected = layout.CONTROL_COMMIT if commit else layout.CONTROL_ABORT
    assert layout.control_type(marker) == expected
    assert layout.control_type(b"\0" * 10 + marker, 10) == expected  # at a position in a larger buffer


def test_a_record_key_too_short_for_a_marker_is_named():
    not_a_marker = build_record_batch([(b"k", b"v", [], 1)], is_control=True)
    with pytest.raises(ValueError, match="control record key of 1 bytes; a marker key has 4"):
        layout.control_type(not_a_marker)


@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, 300, -301, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)])
def test_read_varint_reads_what_the_broker_writes(value):
    out = bytearray(b"\xff")
    write_varint(value, out)
    assert layout.read_varint(out, 1) == (value, len(out))


def test_a_varint_longer_than_ten_bytes_is_refused():
    with pytest.raises(ValueError, match="longer than 10 bytes"):
        layout.read_varint(b"\xff" * 11, 0)
