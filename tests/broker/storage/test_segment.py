"""LogSegment on its own, and the recovery rules a Log applies across segments."""

from __future__ import annotations

import os
from pathlib import Path

from kafka_spark.broker.storage.batch import build_record_batch, rewrite_base_offset, validate_batches
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.log import RECOVERY_POINT_FILE, Log
from kafka_spark.broker.storage.segment import LogSegment
from tests.support.paths import ROOT

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


def test_a_write_the_kernel_cuts_short_is_resumed_where_it_stopped(tmp_path: Path, monkeypatch) -> None:
    """pwritev may write less than asked (a signal, a limit). The append writes in one call when it
    can and resumes after the bytes written when not. A short count cannot be had from the kernel
    on demand, so each call here is cut to 1,000 bytes of the real write."""
    from kafka_spark.broker.storage import segment as segment_module

    real_pwritev = os.pwritev
    calls: list[int] = []

    def short_pwritev(fd: int, buffers, offset: int) -> int:
        left, cut = 1000, []
        for buffer in buffers:
            view = memoryview(buffer).cast("B")[:left]
            cut.append(view)
            left -= len(view)
            if not left:
                break
        calls.append(offset)
        return real_pwritev(fd, cut, offset)

    (tmp_path / "whole").mkdir()
    (tmp_path / "cut").mkdir()
    whole, cut = LogSegment(tmp_path / "whole", 0), LogSegment(tmp_path / "cut", 0)
    data, headers = stored_batch(0, count=20)  # ~4.5 KB
    parts = [data[:16], memoryview(data)[16:2500], data[2500:]]  # a prefix and the rest, as produce writes
    whole.append_parts(parts, headers)
    monkeypatch.setattr(segment_module.os, "pwritev", short_pwritev)
    cut.append_parts(parts, headers)
    monkeypatch.undo()
    assert len(calls) == -(-len(data) // 1000)  # the first call, then resumed until every byte was written
    assert calls == [i * 1000 for i in range(len(calls))]
    assert cut.size == whole.size == len(data)
    assert cut.read(0, cut.size) == whole.read(0, whole.size) == data
    assert cut.next_offset == whole.next_offset == 20


def test_a_write_stopped_by_the_file_size_limit_leaves_the_segment_as_it_was(tmp_path: Path) -> None:
    """A real short write: past RLIMIT_FSIZE the kernel writes what fits and then refuses (EFBIG).
    The append raises and the segment's file, offsets and index are as before it. In a child
    process, so that the limit binds nothing else."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import errno, os, resource, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.broker.storage.test_segment import stored_batch
        from kafka_spark.broker.storage.segment import LogSegment
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        segment = LogSegment({str(tmp_path)!r}, 0)
        first, headers = stored_batch(0, count=4)
        segment.append(first, headers)
        before = (segment.size, segment.next_offset, segment.read(0, segment.size))
        second, headers = stored_batch(4, count=20)
        resource.setrlimit(resource.RLIMIT_FSIZE, (segment.size + 1000, resource.RLIM_INFINITY))
        try:
            segment.append_parts([second[:16], second[16:]], headers)
        except OSError as error:
            assert error.errno == errno.EFBIG, error
        else:
            raise AssertionError("the append past the limit did not fail")
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        assert (segment.size, segment.next_offset, segment.read(0, segment.size)) == before
        assert os.path.getsize(segment.log_path) == before[0]
        segment.append(second, headers)  # and the next append goes where the failed one would have
        assert segment.next_offset == 24 and segment.read(before[0], len(second)) == second
        print("ok")
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def skip_unless_blocks_can_be_reserved(directory: Path, consequence: str) -> None:
    """Skip the test where ``directory``'s file system reserves no blocks (no fallocate)."""
    import pytest

    from kafka_spark.broker.storage import segment as segment_module

    probe = os.open(directory / "probe", os.O_RDWR | os.O_CREAT)
    try:
        if segment_module._fallocate is None or segment_module._fallocate(probe, 1, 0, 4096) != 0:
            pytest.skip(f"this file system reserves no blocks (no fallocate): {consequence}")
    finally:
        os.close(probe)


def _allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


def test_an_active_segment_reserves_blocks_ahead_and_gives_them_back(tmp_path: Path) -> None:
    """Appends reserve RESERVE_BYTES of disk blocks past the data (cheaper writes than ext4's
    page-by-page reservation) without changing the file's size; rolling and closing give them
    back, and a segment recovered after a kill gives back what the killed broker had reserved."""
    from kafka_spark.broker.storage import segment as segment_module

    skip_unless_blocks_can_be_reserved(tmp_path, "appends write without")
    reserve = segment_module.RESERVE_BYTES
    (tmp_path / "rolled").mkdir()
    rolled = LogSegment(tmp_path / "rolled", 0)
    data, headers = stored_batch(0, count=8)
    rolled.append(data, headers)
    assert os.path.getsize(rolled.log_path) == rolled.size == len(data)  # readers see the data only
    assert _allocated(rolled.log_path) >= len(data) + reserve
    assert rolled.read(0, rolled.size) == data
    rolled.on_become_inactive()  # a roll
    assert _allocated(rolled.log_path) < len(data) + 64 * 1024
    assert os.path.getsize(rolled.log_path) == len(data)

    (tmp_path / "killed").mkdir()
    killed = LogSegment(tmp_path / "killed", 0)
    killed.append(data, headers)
    assert _allocated(killed.log_path) >= len(data) + reserve
    # The broker dies here: no roll, no close. The next start recovers the active segment.
    reopened, truncated = LogSegment.open(tmp_path / "killed", 0, recover=True)
    assert truncated == 0 and reopened.size == len(data) and reopened.next_offset == 8
    reopened.close()
    assert _allocated(reopened.log_path) < len(data) + 64 * 1024
    assert reopened.log_path.read_bytes() == data


def test_appends_go_on_where_the_file_system_reserves_nothing(tmp_path: Path, monkeypatch) -> None:
    """A file system without fallocate (or out of space for the reservation) is written without:
    the reservation is an optimisation only. Here fallocate answers EOPNOTSUPP, as on such a file
    system; the writes and the data are those of any segment."""
    import errno

    from kafka_spark.broker.storage import segment as segment_module

    refusals: list[int] = []

    def refusing_fallocate(fd: int, mode: int, offset: int, length: int) -> int:
        refusals.append(offset)
        import ctypes

        ctypes.set_errno(errno.EOPNOTSUPP)
        return -1

    monkeypatch.setattr(segment_module, "_fallocate", refusing_fallocate)
    segment = LogSegment(tmp_path, 0)
    written = b""
    for i in range(3):
        data, headers = stored_batch(8 * i, count=8)
        segment.append(data, headers)
        written += data
    assert refusals == [0]  # asked once, then never again for this segment
    assert segment.read(0, segment.size) == written and segment.next_offset == 24
    segment.close()
    assert segment.log_path.read_bytes() == written
