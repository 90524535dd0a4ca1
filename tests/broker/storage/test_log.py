"""Log and LogSegment on real files: append/read, rolling, indexes, KIP-74, retention, recovery,
timestamps. Batches come from kafka-python's producer-side builder, as a client would send them."""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafka_spark.broker.storage.batch import BatchHeader, iter_batches, validate_batches
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.errors import CorruptRecordError, OffsetOutOfRangeError
from kafka_spark.broker.storage.log import LOG_START_OFFSET_FILE, Log

TS = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class Clock:
    """A settable millisecond clock for the log (segment.ms, retention)."""

    def __init__(self, now: int = TS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def client_batch(
    count: int = 5, *, codec: int = 0, ts: int = TS, step_ms: int = 1, value_size: int = 100, tag: int = 0
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=10**8,
    )
    for i in range(count):
        value = (b"%d-%d:" % (tag, i)) + b"v" * value_size
        builder.append(i, timestamp=ts + i * step_ms, key=b"k%d" % i, value=value, headers=[("h", b"1")])
    return bytes(builder.build())


def open_log(path: Path, clock: Clock | None = None, **settings) -> Log:
    return Log.open(path / "orders-0", "orders", 0, LogConfig(**settings), time_ms=clock or Clock())


def decode(data: bytes | memoryview) -> list[tuple[int, bytes]]:
    """(offset, value) of every record, via kafka-python's consumer-side reader (CRC checked)."""
    records = MemoryRecords(bytes(data))
    out = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        out.extend((record.offset, record.value) for record in batch)
    return out


def base_offsets(data: bytes | memoryview) -> list[int]:
    return [header.base_offset for header in iter_batches(data)]


def fill(log: Log, batches: int, **kwargs) -> list[int]:
    """Append ``batches`` batches; returns their base offsets."""
    return [log.append(client_batch(tag=i, **kwargs)).base_offset for i in range(batches)]


# -- append and read -----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_client_batches_read_back_byte_exact_apart_from_offset_and_epoch(tmp_path: Path, codec: int) -> None:
    log = open_log(tmp_path)
    log.append(client_batch(3, tag=9))
    sent = client_batch(10, codec=codec, tag=1)
    result = log.append(sent, headers=validate_batches(sent, 1048588))
    assert (result.base_offset, result.last_offset, result.max_timestamp) == (3, 12, TS + 9)
    stored = bytes(log.read(3, 1 << 20))
    assert len(stored) == len(sent)
    assert stored[8:12] == sent[8:12] and stored[16:] == sent[16:]
    assert struct.unpack(">qi", stored[0:8] + stored[12:16]) == (3, 0)
    assert [offset for offset, _ in decode(stored)] == list(range(3, 13))
    assert decode(stored)[4][1].startswith(b"1-4:")


def test_offsets_continue_from_the_log_end_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.last_stable_offset) == (0, 0, 0, 0)
    assert fill(log, 4) == [0, 5, 10, 15]
    assert log.log_end_offset == log.high_watermark == log.last_stable_offset == 20
    log.first_unstable_offset = 10  # the transaction layer's hook
    assert log.last_stable_offset == 10


def test_corrupt_batch_is_rejected_and_leaves_the_log_unchanged(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 2)
    size = log.size_in_bytes
    bad = bytearray(client_batch())
    bad[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(bytes(bad))
    assert (log.log_end_offset, log.size_in_bytes) == (10, size)
    assert log.append(client_batch()).base_offset == 10


def test_read_at_the_log_end_offset_is_empty(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.read(0, 1000) == b""
    fill(log, 2)
    assert log.read(10, 1000) == b""


def test_read_outside_the_log_raises_offset_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 2)
    with pytest.raises(OffsetOutOfRangeError, match=r"orders-0.*\[0, 10\)") as caught:
        log.read(11, 1000)
    assert (caught.value.error_code, caught.value.offset, caught.value.log_end_offset) == (1, 11, 10)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)


def test_read_starts_with_the_batch_containing_the_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=256)
    fill(log, 50)
    segment_index = log._segments[0].offset_index
    assert len(segment_index) > 10  # the lookup goes through the sparse index, not from byte 0
    for offset in (0, 3, 127, 128, 129, 200, 249):
        data = log.read(offset, 1)
        (header,) = list(iter_batches(data))
        assert header.base_offset <= offset <= header.last_offset


def test_read_stops_before_max_bytes_with_whole_batches_only(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=512)
    fill(log, 20)
    batch_size = len(client_batch())
    data = log.read(12, batch_size * 3 + batch_size // 2)
    assert base_offsets(data) == [10, 15, 20]
    assert len(data) == 3 * batch_size
    assert iter_batches(data).error is None


def test_first_batch_larger_than_max_bytes_is_returned_whole(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(client_batch(50, value_size=1000))
    log.append(client_batch(1))
    data = log.read(7, 100)
    assert base_offsets(data) == [0]
    assert len(data) > 50_000 and iter_batches(data).error is None
    assert base_offsets(log.read(7, 0)) == [0]


def test_read_stops_at_max_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=300)
    fill(log, 10)
    assert base_offsets(log.read(0, 1 << 20, max_offset=20)) == [0, 5, 10, 15]
    assert base_offsets(log.read(0, 1 << 20, max_offset=21)) == [0, 5, 10, 15, 20]
    assert log.read(20, 1 << 20, max_offset=20) == b""


# -- segments ------------------------------------------------------------------------------------


def test_segment_rolls_when_the_next_batch_would_exceed_segment_bytes(tmp_path: Path) -> None:
    batch_size = len(client_batch())
    log = open_log(tmp_path, segment_bytes=batch_size * 3)
    fill(log, 7)
    assert log.segment_base_offsets == [0, 15, 30]
    names = sorted(path.name for path in (tmp_path / "orders-0").iterdir() if path.suffix == ".log")
    assert names == ["00000000000000000000.log", "00000000000000000015.log", "00000000000000000030.log"]
    assert all(segment.size <= batch_size * 3 for segment in log._segments)


def test_oversized_batch_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1000)
    fill(log, 1)
    log.append(client_batch(20, value_size=200))
    fill(log, 1)
    assert log.segment_base_offsets == [0, 5, 25]


def test_segment_rolls_when_older_than_segment_ms(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path, clock, segment_ms=60_000)
    log.append(client_batch(ts=clock.now, step_ms=0))
    clock.now += 30_000
    log.append(client_batch(ts=clock.now, step_ms=0))
    assert log.segment_base_offsets == [0]
    clock.now += 30_001
    log.append(client_batch(ts=clock.now, step_ms=0))
    assert log.segment_base_offsets == [0, 10]


def test_replayed_old_timestamps_do_not_roll_a_segment_per_append(tmp_path: Path) -> None:
    clock = Clock(TS + 30 * 24 * 3600 * 1000)  # a month after the records' CreateTime
    log = open_log(tmp_path, clock, segment_ms=60_000)
    fill(log, 5, ts=TS)
    assert log.segment_base_offsets == [0]


def test_segments_without_timestamps_roll_by_wall_clock_age(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path, clock, segment_ms=60_000)
    fill(log, 2, ts=-1, step_ms=0)
    clock.now += 60_001
    fill(log, 1, ts=-1, step_ms=0)
    assert log.segment_base_offsets == [0, 10]


def test_read_across_a_segment_boundary(tmp_path: Path) -> None:
    batch_size = len(client_batch())
    log = open_log(tmp_path, segment_bytes=batch_size * 4)
    fill(log, 10)
    assert log.segment_base_offsets == [0, 20, 40]
    assert base_offsets(log.read(19, 1)) == [15]  # last batch of the first segment
    assert base_offsets(log.read(20, 1)) == [20]  # first batch of the second
    spanning = log.read(17, batch_size * 3)
    assert base_offsets(spanning) == [15, 20, 25]
    assert [offset for offset, _ in decode(spanning)] == list(range(15, 30))


# -- recovery ------------------------------------------------------------------------------------


def test_torn_last_batch_is_truncated_on_reopen_and_appends_continue(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 5)
    log.close()
    segment_file = tmp_path / "orders-0" / "00000000000000000000.log"
    batch_size = len(client_batch())
    os.truncate(segment_file, 4 * batch_size + batch_size // 2)  # kill -9 in the middle of a write

    log = open_log(tmp_path)
    assert log.log_end_offset == 20
    assert segment_file.stat().st_size == 4 * batch_size
    assert [offset for offset, _ in decode(log.read(0, 1 << 20))] == list(range(20))
    assert log.append(client_batch(tag=7)).base_offset == 20
    assert decode(log.read(20, 1 << 20))[0] == (20, b"7-0:" + b"v" * 100)


def test_corrupt_byte_in_the_active_segment_truncates_from_that_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 5)
    log.close()
    segment_file = tmp_path / "orders-0" / "00000000000000000000.log"
    batch_size = len(client_batch())
    with open(segment_file, "r+b") as handle:
        handle.seek(2 * batch_size + 100)
        byte = handle.read(1)
        handle.seek(2 * batch_size + 100)
        handle.write(bytes([byte[0] ^ 0x40]))
    log = open_log(tmp_path)
    assert log.log_end_offset == 10


def test_deleted_index_is_rebuilt_on_reopen(tmp_path: Path) -> None:
    batch_size = len(client_batch())
    log = open_log(tmp_path, index_interval_bytes=batch_size, segment_bytes=batch_size * 8)
    fill(log, 12)
    log.close()
    index_file = tmp_path / "orders-0" / "00000000000000000000.index"
    original = index_file.read_bytes()
    assert len(original) >= 3 * 8
    index_file.unlink()
    (tmp_path / "orders-0" / "00000000000000000000.timeindex").unlink()

    log = open_log(tmp_path, index_interval_bytes=batch_size, segment_bytes=batch_size * 8)
    assert index_file.read_bytes() == original
    assert base_offsets(log.read(33, 1)) == [30]
    assert log.log_end_offset == 60


def test_garbage_index_is_rebuilt_on_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=200)
    fill(log, 10)
    log.roll()
    fill(log, 1)
    log.close()
    index_file = tmp_path / "orders-0" / "00000000000000000000.index"
    original = index_file.read_bytes()
    index_file.write_bytes(original[:-3])  # not a whole number of entries
    log = open_log(tmp_path, index_interval_bytes=200)
    assert index_file.read_bytes() == original
    assert base_offsets(log.read(41, 1)) == [40]


def test_reopen_keeps_offsets_timestamps_and_data(tmp_path: Path) -> None:
    batch_size = len(client_batch())
    log = open_log(tmp_path, segment_bytes=batch_size * 2)
    fill(log, 5, step_ms=10)
    before = bytes(log.read(0, 1 << 20))
    log.close()
    log = open_log(tmp_path, segment_bytes=batch_size * 2)
    assert log.segment_base_offsets == [0, 10, 20]
    assert bytes(log.read(0, 1 << 20)) == before
    assert log._segments[0].max_timestamp == TS + 40
    assert log.offset_for_timestamp(TS + 15) == (2, TS + 20)


# -- timestamps ----------------------------------------------------------------------------------


def test_offset_for_timestamp_finds_the_first_record_at_or_after(tmp_path: Path) -> None:
    batch_size = len(client_batch())
    log = open_log(tmp_path, segment_bytes=batch_size * 3, index_interval_bytes=1)
    for i in range(9):
        log.append(client_batch(ts=TS + i * 1000, step_ms=100))  # records at +0, +100, ... +400
    assert log.offset_for_timestamp(0) == (0, TS)
    assert log.offset_for_timestamp(TS + 4_150) == (22, TS + 4_200)
    assert log.offset_for_timestamp(TS + 4_401) == (25, TS + 5_000)  # between batches
    assert log.offset_for_timestamp(TS + 8_400) == (44, TS + 8_400)
    assert log.offset_for_timestamp(TS + 8_401) is None


def test_offset_for_timestamp_inside_a_compressed_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(client_batch(ts=TS))
    log.append(client_batch(100, codec=4, ts=TS + 1_000, step_ms=10))
    assert log.offset_for_timestamp(TS + 1_555) == (61, TS + 1_560)


def test_log_append_time_topics_stamp_the_broker_clock(tmp_path: Path) -> None:
    clock = Clock(TS + 99_000)
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    result = log.append(client_batch(ts=TS))
    assert result.log_append_time == result.max_timestamp == TS + 99_000
    (header,) = list(iter_batches(log.read(0, 1 << 20)))
    assert header.timestamp_type == 1 and header.max_timestamp == TS + 99_000
    assert log.offset_for_timestamp(TS + 50_000) == (0, TS + 99_000)


# -- retention -----------------------------------------------------------------------------------


def test_retention_by_time_deletes_old_segments_and_persists_log_start(tmp_path: Path) -> None:
    clock = Clock()
    batch_size = len(client_batch())
    settings = dict(segment_bytes=batch_size * 2, retention_ms=10_000)
    log = open_log(tmp_path, clock, **settings)
    for i in range(6):
        log.append(client_batch(ts=TS + i * 5_000))  # segments: [+0,+5s] [+10s,+15s] [+20s,+25s]
    assert log.segment_base_offsets == [0, 10, 20]
    assert log.delete_old_segments(now_ms=TS + 25_000) == 1  # only the first ends more than 10 s ago
    assert (log.log_start_offset, log.segment_base_offsets) == (10, [10, 20])
    assert not (tmp_path / "orders-0" / "00000000000000000000.log").exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(5, 1000)
    assert base_offsets(log.read(10, 1)) == [10]
    log.close()

    log = open_log(tmp_path, clock, **settings)
    assert log.log_start_offset == 10
    assert (tmp_path / "orders-0" / LOG_START_OFFSET_FILE).read_text().strip() == "10"


def test_retention_by_time_removes_the_active_segment_by_rolling(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path, clock, retention_ms=1_000)
    fill(log, 3)
    assert log.delete_old_segments(now_ms=TS + 60_000) == 1
    assert (log.log_start_offset, log.log_end_offset, log.segment_base_offsets) == (15, 15, [15])
    assert log.read(15, 100) == b""
    assert log.append(client_batch()).base_offset == 15


def test_retention_by_size_keeps_the_newest_segments(tmp_path: Path) -> None:
    batch_size = len(client_batch())
    log = open_log(tmp_path, segment_bytes=batch_size * 2, retention_bytes=batch_size * 3)
    fill(log, 7)  # segments of 2, 2, 2, 1 batches
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 20 and log.size_in_bytes == batch_size * 3
    assert log.delete_old_segments() == 0


def test_segments_without_timestamps_expire_by_file_mtime(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=1_000)
    fill(log, 2, ts=-1, step_ms=0)
    log.roll()
    mtime_ms = log._segments[0].last_modified_ms
    assert log.delete_old_segments(now_ms=mtime_ms + 500) == 0
    assert log.delete_old_segments(now_ms=mtime_ms + 1_500) == 1


def test_compacted_topics_are_kept_whole(tmp_path: Path) -> None:
    log = open_log(tmp_path, retention_ms=1, retention_bytes=1, cleanup_policy="compact")
    fill(log, 3)
    assert log.delete_old_segments(now_ms=TS + 10**9) == 0
    assert log.log_start_offset == 0


# -- odds and ends -------------------------------------------------------------------------------


def test_truncate_to_removes_whole_batches_from_the_offset(tmp_path: Path) -> None:
    batch_size = len(client_batch())
    log = open_log(tmp_path, segment_bytes=batch_size * 2)
    fill(log, 6)
    log.truncate_to(12)  # inside the batch 10-14: that batch goes, segment 20 too
    assert log.log_end_offset == 10 and log.segment_base_offsets == [0, 10]
    assert log.append(client_batch()).base_offset == 10
    log.close()
    assert open_log(tmp_path, segment_bytes=batch_size * 2).log_end_offset == 15


def test_concurrent_appends_and_reads_get_distinct_contiguous_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=20_000, index_interval_bytes=1024)
    bases: list[int] = []
    errors: list[BaseException] = []

    def produce() -> None:
        for _ in range(50):
            bases.append(log.append(client_batch(), acks=1).base_offset)

    def consume() -> None:
        try:
            for _ in range(200):
                end = log.log_end_offset
                if end:
                    data = log.read(end - 1, 1 << 16)
                    assert iter_batches(data).error is None
        except BaseException as error:  # noqa: BLE001 surfaced below: a thread's failure must fail the test
            errors.append(error)

    threads = [threading.Thread(target=produce) for _ in range(4)] + [threading.Thread(target=consume)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sorted(bases) == list(range(0, 1000, 5))
    assert [offset for offset, _ in decode(log.read(0, 1 << 30))] == list(range(1000))


def test_closed_log_refuses_appends(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.close()
    with pytest.raises(Exception, match="closed"):
        log.append(client_batch())


def test_stored_headers_describe_the_stored_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 1)
    result = log.append(client_batch(codec=1) + client_batch(codec=3))
    assert [h.base_offset for h in result.headers] == [5, 10]
    assert [h.partition_leader_epoch for h in result.headers] == [0, 0]
    stored = log.read(5, 1 << 20)
    assert list(iter_batches(stored)) == list(result.headers)
    assert BatchHeader.parse(stored).compression == 1


def test_append_writes_the_producers_bytes_without_changing_them(tmp_path):
    """The append rewrites base offset and leader epoch in what it writes, not in the caller's
    buffer (the received frame); stored batches differ from the produced ones in those bytes only."""
    log = open_log(tmp_path)
    log.append(client_batch(3))
    batches = [bytearray(client_batch(count, tag=count)) for count in (7, 1, 40)]
    for batch in batches:  # a producer's own base offset and epoch are overwritten, as in Kafka
        struct.pack_into(">q", batch, 0, 999)
        struct.pack_into(">i", batch, 12, 17)
    produced = bytearray(b"".join(batches))
    original = bytes(produced)
    result = log.append(memoryview(produced), acks=1)
    assert bytes(produced) == original
    stored = bytes(log.read(result.base_offset, 1 << 20))
    assert len(stored) == len(original)
    assert base_offsets(stored) == [3, 10, 11]
    position = 0
    for batch in batches:
        size = len(batch)
        assert struct.unpack_from(">i", stored, position + 12)[0] == 0  # leader epoch
        assert stored[position + 8 : position + 12] == batch[8:12]
        assert stored[position + 16 : position + size] == batch[16:]
        position += size
    assert [offset for offset, _ in decode(stored)] == list(range(3, 51))
    log.close()


def test_a_failed_flush_takes_the_partition_offline_and_a_reopen_recovers_it(tmp_path, monkeypatch):
    """After an I/O error what is on disk is unknown: appends and reads refuse with
    KAFKA_STORAGE_ERROR (56) even once the disk works again, close still releases the files, and
    opening the log again (a broker restart) recovers what reached the disk."""
    from kafka_spark.broker.storage.errors import KafkaStorageError

    log = open_log(tmp_path)
    log.append(client_batch(3))
    segment = log._segments[-1]

    def broken_flush() -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(segment, "flush", broken_flush)
    with pytest.raises(KafkaStorageError, match="flush of orders-0 failed"):
        log.flush()
    monkeypatch.undo()
    assert "flush failed" in log.failure
    for call in (lambda: log.append(client_batch(1)), lambda: log.read(0, 1 << 20)):
        with pytest.raises(KafkaStorageError, match="offline after an I/O error") as raised:
            call()
        assert raised.value.error_code == 56
    log.close()

    reopened = open_log(tmp_path)
    assert reopened.failure is None and reopened.log_end_offset == 3
    assert reopened.append(client_batch(1)).base_offset == 3
    reopened.close()


def test_a_killed_broker_reopens_with_every_index_entry_of_its_rolled_segments(tmp_path: Path) -> None:
    """Index entries of the active segment stay in memory until a flush; a segment is flushed,
    indexes included, before the recovery point passes it. So the files a kill leaves behind
    (copied here from under an open log: what the page cache holds) reopen with the rolled
    segments' indexes whole, and the active segment is rebuilt from its data."""
    import shutil

    batch_size = len(client_batch())
    log = open_log(tmp_path, index_interval_bytes=batch_size, segment_bytes=batch_size * 4)
    fill(log, 10)  # segments at 0, 20 (rolled) and 40 (active, two batches)
    assert log.segment_base_offsets == [0, 20, 40]
    expected = [log.read(offset, 1) for offset in range(50)]
    killed = tmp_path / "killed"
    shutil.copytree(tmp_path / "orders-0", killed / "orders-0")
    for segment in log._segments[:-1]:
        on_disk = (killed / "orders-0" / segment.offset_index.path.name).read_bytes()
        assert len(segment.offset_index) > 0 and len(on_disk) == 8 * len(segment.offset_index), segment
    assert (killed / "orders-0" / "00000000000000000040.index").read_bytes() == b""  # not flushed yet
    log.close()
    reopened = open_log(killed, index_interval_bytes=batch_size, segment_bytes=batch_size * 4)
    assert reopened.log_end_offset == 50
    assert [base_offsets(reopened.read(offset, 1)) for offset in range(50)] == [base_offsets(x) for x in expected]
