"""LogSegment on its own, and the recovery rules a Log applies across segments."""

from __future__ import annotations

import os
from pathlib import Path

from kafka_spark.broker.storage.batch import build_record_batch, rewrite_base_offset, validate_batches
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.log import RECOVERY_POINT_FILE, Log
from kafka_spark.broker.storage.segment import LogSegment

TS = 1_700_000_000_000


def stored_batch(base_offset: int, count: int = 4, ts: int = TS) -> tuple[bytes, list]:
    data = bytearray(build_record_batch([(b"k", b"x" * 200, (), ts + i) for i in range(count)]))
    rewrite_base_offset(data, 0, base_offset)
    return bytes(data), validate_batches(data, 1 << 20)


def filled_segment(directory: Path, base: int = 100, batches: int = 10) -> LogSegment:
    segment = LogSegment(directory, base, index_interval_bytes=1000)
    for i in range(batches):
        data, headers = stored_batch(base + 4 * i, ts=TS + 10 * i)
        segment.append(data, headers)
    return segment


def test_segment_tracks_offsets_timestamps_and_index_entries(tmp_path: Path) -> None:
    segment = filled_segment(tmp_path)
    assert (segment.base_offset, segment.next_offset) == (100, 140)
    assert (segment.max_timestamp, segment.offset_of_max_timestamp, segment.first_batch_timestamp) == (
        TS + 93,
        139,
        TS + 3,
    )
    assert len(segment.offset_index) >= 2
    assert (tmp_path / "00000000000000000100.log").stat().st_size == segment.size


def test_find_batch_returns_the_batch_containing_an_offset(tmp_path: Path) -> None:
    segment = filled_segment(tmp_path)
    for offset in (100, 103, 117, 139):
        position, header = segment.find_batch(offset)
        assert header.base_offset <= offset <= header.last_offset
        assert segment.read(position, 8) == header.base_offset.to_bytes(8, "big")
    assert segment.find_batch(140) is None
    assert segment.position_of_first_batch_at_or_after(118) == segment.find_batch(120)[0]
    assert segment.position_of_first_batch_at_or_after(140) == segment.size


def test_recover_truncates_a_torn_tail_and_rebuilds_the_same_indexes(tmp_path: Path) -> None:
    segment = filled_segment(tmp_path)
    whole = segment.size
    segment.close()  # writes the index entries (appends leave them in memory)
    index_before = (tmp_path / "00000000000000000100.index").read_bytes()
    assert index_before
    os.truncate(tmp_path / "00000000000000000100.log", whole - 10)
    reopened, truncated = LogSegment.open(tmp_path, 100, index_interval_bytes=1000, recover=True)
    batch_size = len(stored_batch(0)[0])
    assert truncated == batch_size - 10
    assert (reopened.size, reopened.next_offset) == (whole - batch_size, 136)
    assert index_before.startswith((tmp_path / "00000000000000000100.index").read_bytes())


def test_truncate_to_drops_whole_batches_and_index_entries(tmp_path: Path) -> None:
    segment = filled_segment(tmp_path)
    position, _ = segment.find_batch(121)
    removed = segment.truncate_to(121)
    assert segment.size == position and removed > 0
    assert segment.next_offset == 120
    assert all(offset < 120 for offset in [segment.offset_index.lookup(10**6)[0]])
    data, headers = stored_batch(120)
    segment.append(data, headers)
    assert segment.next_offset == 124


def test_corruption_in_an_older_segment_drops_the_segments_after_it(tmp_path: Path) -> None:
    batch_size = len(stored_batch(0)[0])
    config = LogConfig(segment_bytes=batch_size * 2)
    log = Log.open(tmp_path / "t-0", "t", 0, config, time_ms=lambda: TS)
    for _ in range(6):
        log.append(build_record_batch([(b"k", b"x" * 200, (), TS + i) for i in range(4)]))
    assert log.segment_base_offsets == [0, 8, 16]
    log.close()
    with open(tmp_path / "t-0" / "00000000000000000008.log", "r+b") as handle:
        handle.seek(batch_size + 70)
        handle.write(b"\xff")
    (tmp_path / "t-0" / RECOVERY_POINT_FILE).unlink()  # as after a crash before any checkpoint

    log = Log.open(tmp_path / "t-0", "t", 0, config, time_ms=lambda: TS)
    assert log.segment_base_offsets == [0, 8]
    assert log.log_end_offset == 12
    assert not (tmp_path / "t-0" / "00000000000000000016.log").exists()
    assert log.append(build_record_batch([(None, b"after", (), TS)])).base_offset == 12


def test_restart_without_close_keeps_everything_written(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=2000))
    for i in range(10):
        log.append(build_record_batch([(None, b"v" * 300, (), TS + i)]), acks=1)
    # no close(): a restart after kill -9 (the page cache still holds the writes)
    again = Log.open(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=2000))
    assert again.log_end_offset == 10
    assert again.segment_base_offsets == log.segment_base_offsets
    assert again.offset_for_timestamp(TS + 7) == (7, TS + 7)
