"""Sparse offset and time indexes: Kafka's file formats, lookups, truncation, reload."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from kafka_spark.broker.storage.index import IndexCorruptError, OffsetIndex, TimeIndex


def test_offset_index_file_is_kafka_format_relative_to_the_base(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000100.index", 100)
    index.append(105, 4200)
    index.append(130, 9000)
    index.close()
    raw = (tmp_path / "00000000000000000100.index").read_bytes()
    assert raw == struct.pack(">ii", 5, 4200) + struct.pack(">ii", 30, 9000)


def test_offset_lookup_returns_the_largest_entry_at_or_below(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 100)
    for offset, position in [(110, 1000), (120, 2000), (130, 3000)]:
        index.append(offset, position)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(109) == (100, 0)
    assert index.lookup(110) == (110, 1000)
    assert index.lookup(125) == (120, 2000)
    assert index.lookup(10**9) == (130, 3000)
    assert index.position_at_or_before(2999) == 2000
    assert index.position_at_or_before(999) == 0


def test_offset_index_reloads_and_truncates(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0)
    for i in range(1, 6):
        index.append(i * 10, i * 100)
    index.close()
    reloaded = OffsetIndex(path, 0)
    assert reloaded.load_error is None and len(reloaded) == 5
    reloaded.truncate_to(30)  # removes entries for offsets >= 30
    assert reloaded.last_entry == (20, 200)
    reloaded.truncate_to_position(200)
    assert reloaded.last_entry == (10, 100)
    reloaded.close()
    assert path.stat().st_size == 8


def test_offset_index_refuses_entries_out_of_order(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0)
    index.append(10, 100)
    with pytest.raises(ValueError):
        index.append(10, 200)


def test_torn_or_unordered_index_files_are_reported_corrupt(tmp_path: Path) -> None:
    torn = tmp_path / "torn.index"
    torn.write_bytes(b"\x00" * 12)
    loaded = OffsetIndex(torn, 0)
    assert "multiple of 8" in loaded.load_error and len(loaded) == 0
    unordered = tmp_path / "unordered.index"
    unordered.write_bytes(struct.pack(">iiii", 5, 500, 3, 600))
    with pytest.raises(IndexCorruptError, match="out of order"):
        OffsetIndex(unordered, 0).sanity_check(10_000)
    beyond = tmp_path / "beyond.index"
    beyond.write_bytes(struct.pack(">ii", 5, 500))
    with pytest.raises(IndexCorruptError, match="points at byte 500"):
        OffsetIndex(beyond, 0).sanity_check(400)


def test_time_index_keeps_only_increasing_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    index = TimeIndex(path, 1000)
    index.maybe_append(5_000, 1010)
    index.maybe_append(4_000, 1020)  # an older timestamp is no new maximum
    index.maybe_append(5_000, 1030)
    index.maybe_append(7_000, 1040)
    index.close()
    assert path.read_bytes() == struct.pack(">qi", 5_000, 10) + struct.pack(">qi", 7_000, 40)


def test_time_index_lookup_starts_after_entries_strictly_older(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 1000)
    index.maybe_append(5_000, 1010)
    index.maybe_append(7_000, 1040)
    assert index.lookup_before(5_000) == 1000  # records up to 1010 may carry exactly 5000
    assert index.lookup_before(5_001) == 1010
    assert index.lookup_before(10_000) == 1040
    index.truncate_to(1040)
    assert index.last_entry == (5_000, 1010)


def test_entries_reach_the_file_at_flush_and_close_not_per_append(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100)
    index.append(105, 4200)
    index.append(130, 9000)
    assert path.read_bytes() == b""  # kept in memory, as a memory-mapped index is
    assert index.lookup(131) == (130, 9000)
    index.flush()
    assert path.read_bytes() == struct.pack(">ii", 5, 4200) + struct.pack(">ii", 30, 9000)
    assert index.lookup(131) == (130, 9000)
    index.append(140, 9500)
    index.truncate_to(135)  # the unwritten entry goes; the written ones stay
    index.append(150, 9600)
    index.close()
    entries = [struct.pack(">ii", 5, 4200), struct.pack(">ii", 30, 9000), struct.pack(">ii", 50, 9600)]
    assert path.read_bytes() == b"".join(entries)
    index = OffsetIndex(path, 100)
    index.truncate_to(130)  # cuts into what is on disk
    index.close()
    assert path.read_bytes() == entries[0]
