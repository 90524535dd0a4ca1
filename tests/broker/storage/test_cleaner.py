"""Log compaction on real files: newest value per key, original offsets, tombstones and their
delete horizon, transactions, compression, the cleanable range, and crash-safe swaps.

Batches come from kafka-python's producer-side builder (as a client sends them); reads are
decoded with kafka-python's consumer-side reader (CRC checked), so what is verified here is what
a client would see."""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafka_spark.broker.storage import checkpoint
from kafka_spark.broker.storage.batch import build_control_batch, validate_batches
from kafka_spark.broker.storage.cleaner import LogCleaner
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.errors import InvalidRecordError
from kafka_spark.broker.storage.log import Log
from kafka_spark.broker.storage.log_manager import LogManager
from kafka_spark.broker.storage.records import DELETE_HORIZON_MASK, validate_records
from tests.support.waiting import wait_until

TS = 1_700_000_000_000
DAY = 24 * 3600 * 1000
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class Clock:
    def __init__(self, now: int = TS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(
    records: list[tuple[bytes | None, bytes | None]],
    *,
    codec: int = 0,
    ts: int = TS,
    producer_id: int = -1,
    transactional: bool = False,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=10**8,
    )
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=ts + i, key=key, value=value, headers=[])
    return bytes(builder.build())


def open_log(path: Path, clock: Clock, **settings) -> Log:
    settings.setdefault("cleanup_policy", "compact")
    settings.setdefault("segment_bytes", 700)
    settings.setdefault("index_interval_bytes", 100)
    return Log.open(path / "table-0", "table", 0, LogConfig(**settings), time_ms=clock)


def read_all(log: Log, start: int | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every data record from ``start`` (default: log start) to the LEO,
    fetching as a consumer does: from the next offset after the last record returned."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        data = bytes(log.read(offset, 1000))
        records = MemoryRecords(data)
        assert records.has_next(), f"a read at {offset} below the LEO {log.log_end_offset} returned nothing"
        while records.has_next():
            stored = records.next_batch()
            assert stored.validate_crc()
            offset = max(offset, stored.base_offset + stored.last_offset_delta + 1)
            if stored.is_control_batch:
                continue
            out.extend((r.offset, r.key, r.value) for r in stored if r.offset >= (start or 0))
    return out


def newest(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, tuple[int, bytes | None]]:
    latest: dict[bytes | None, tuple[int, bytes | None]] = {}
    for offset, key, value in records:
        latest[key] = (offset, value)
    return latest


def write_history(
    log: Log, *, seed: int = 7, batches: int = 40, keys: int = 12, codec: int = 0, delete_every: int = 5, pad: int = 0
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Updates and deletes over ``keys`` keys; returns every record with its assigned offset."""
    rng = random.Random(seed)
    written = []
    for n in range(batches):
        records = []
        for _ in range(rng.randint(1, 4)):
            key = b"k%02d" % rng.randrange(keys)
            value = None if rng.randrange(delete_every) == 0 else b"v%d-" % n + key + b"x" * pad
            records.append((key, value))
        result = log.append(batch(records, codec=codec, ts=TS + n))
        written.extend((result.base_offset + i, key, value) for i, (key, value) in enumerate(records))
    return written


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_cleaning_keeps_the_newest_value_per_key_at_its_original_offset(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock)
    written = write_history(log)
    log.roll()
    before_headers = {(h.base_offset, h.last_offset_delta) for h in log.batch_headers()}
    segments_before = log.segment_base_offsets
    stats = LogCleaner(lambda: [log]).clean_now()
    assert stats.records_removed > 0 and stats.groups_swapped > 0
    after = read_all(log)
    # exactly one record per key, the newest, at the offset it was written at (tombstones too:
    # delete.retention.ms has not passed)
    assert {key: (offset, value) for offset, key, value in after} == newest(written)
    assert len(after) == len(newest(written))
    # rewritten batches keep their base offset and last offset delta; segments keep their bases
    assert {(h.base_offset, h.last_offset_delta) for h in log.batch_headers()} <= before_headers
    assert set(log.segment_base_offsets) <= set(segments_before)
    assert log.log_start_offset == 0 and log.log_end_offset == written[-1][0] + 1


def test_a_read_from_inside_a_gap_returns_the_next_kept_record(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock)
    written = write_history(log)
    log.roll()
    LogCleaner(lambda: [log]).clean_now()
    kept = read_all(log)
    for offset in range(0, log.log_end_offset):
        expected = [record for record in kept if record[0] >= offset]
        assert read_all(log, offset) == expected
    assert written  # the history was not empty


def test_tombstones_stay_for_delete_retention_after_the_first_cleaning_then_go(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock, delete_retention_ms=DAY)
    written = write_history(log)
    log.roll()
    deleted = {key for key, (_, value) in newest(written).items() if value is None}
    assert deleted, "the history should delete some keys"
    timestamps_written = timestamps(log)
    cleaner = LogCleaner(lambda: [log])
    cleaner.clean_now()
    assert {key for _, key, value in read_all(log) if value is None} == deleted
    tombstone_offsets = [offset for offset, _, value in read_all(log) if value is None]
    for header in log.batch_headers():
        if any(header.base_offset <= offset <= header.last_offset for offset in tombstone_offsets):
            assert header.attributes & DELETE_HORIZON_MASK and header.base_timestamp == TS + DAY
    clock.now += DAY - 1
    cleaner.clean_now()
    assert {key for _, key, value in read_all(log) if value is None} == deleted
    clock.now += 1
    assert cleaner.clean_now().records_removed == len(deleted)
    survivors = {key: (offset, value) for offset, key, value in read_all(log)}
    assert survivors == {key: entry for key, entry in newest(written).items() if entry[1] is not None}
    # every record keeps its timestamp through the delete-horizon rebase of base_timestamp
    after = timestamps(log)
    assert after and all(after[offset] == timestamps_written[offset] for offset in after)


def timestamps(log: Log) -> dict[int, int]:
    records = MemoryRecords(bytes(log.read(0, 1 << 20)))
    out = {}
    while records.has_next():
        stored = records.next_batch()
        if not stored.is_control_batch:
            out.update((record.offset, record.timestamp) for record in stored)
    return out


def test_the_active_segment_is_never_cleaned(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=1 << 20)
    written = write_history(log, batches=10)
    assert LogCleaner(lambda: [log]).clean_now().groups_swapped == 0
    assert read_all(log) == written


def test_min_compaction_lag_holds_back_young_segments(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock, min_compaction_lag_ms=60_000)
    written = write_history(log)
    log.roll()
    cleaner = LogCleaner(lambda: [log])
    clock.now = TS + 30_000  # every record is younger than the lag
    assert cleaner.clean_now().groups_swapped == 0
    assert read_all(log) == written
    clock.now = TS + 10 * 60_000
    assert cleaner.clean_now().groups_swapped > 0
    assert {key: (o, v) for o, key, v in read_all(log)} == newest(written)


def test_a_log_whose_policy_is_delete_is_not_compacted(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock, cleanup_policy="delete", retention_ms=-1)
    written = write_history(log)
    log.roll()
    assert LogCleaner(lambda: [log]).clean_now().logs_cleaned == 0
    assert read_all(log) == written


def test_a_clean_log_is_not_rewritten_until_it_gets_dirty_enough(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock, delete_retention_ms=DAY, segment_bytes=100_000)
    for n in range(20):
        log.append(batch([(b"k%d" % (n % 5), b"v%d" % n)]))
        log.roll()
    cleaner = LogCleaner(lambda: [log])
    assert cleaner.clean_now().groups_swapped == 1  # all 20 segments merged into one
    assert cleaner.clean_now().logs_cleaned == 0  # nothing dirty: no rewrite
    log.append(batch([(b"k0", b"new")]))
    log.roll()
    assert cleaner.clean_now().logs_cleaned == 0  # 1 dirty segment is below the 0.5 ratio
    assert cleaner.clean_now(force=True).logs_cleaned == 1
    assert newest(read_all(log))[b"k0"][1] == b"new" and len(read_all(log)) == 5


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_compressed_batches_are_recompressed_with_their_own_codec(tmp_path: Path, clock: Clock, codec: int) -> None:
    log = open_log(tmp_path, clock, segment_bytes=2000)
    written = write_history(log, codec=codec, delete_every=1000, pad=300)
    log.roll()
    codec_of = {h.base_offset: h.compression for h in log.batch_headers()}
    assert codec in codec_of.values()  # (the client builder leaves a batch uncompressed when that is smaller)
    assert LogCleaner(lambda: [log]).clean_now().records_removed > 0
    assert {key: (o, v) for o, key, v in read_all(log)} == newest(written)
    kept = log.batch_headers()
    assert all(h.compression == codec_of[h.base_offset] for h in kept)
    assert any(h.compression == codec and h.records_count < h.last_offset_delta + 1 for h in kept)


def test_aborted_transaction_data_never_shadows_a_committed_value(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock)
    log.append(batch([(b"k", b"committed-1")]))
    log.append(batch([(b"k", b"aborted")], producer_id=7, transactional=True))
    log.append(build_control_batch(0, 7, 0, commit=False, coordinator_epoch=0, timestamp_ms=TS))
    log.append(batch([(b"j", b"txn-committed")], producer_id=8, transactional=True))
    log.append(batch([(b"j", b"plain-older")]))  # interleaved: older than the commit, newer offset
    log.append(build_control_batch(0, 8, 0, commit=True, coordinator_epoch=0, timestamp_ms=TS))
    log.roll()
    LogCleaner(lambda: [log]).clean_now()
    values = [(key, value) for _, key, value in read_all(log)]
    assert (b"k", b"committed-1") in values and (b"k", b"aborted") not in values
    assert values[-1] == (b"j", b"plain-older")  # the newest offset wins, as in Kafka
    assert sum(1 for h in log.batch_headers() if h.is_control) == 2  # markers are kept


def test_an_open_transaction_holds_cleaning_back(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock, segment_bytes=200)
    log.append(batch([(b"k", b"v1")]))
    log.append(batch([(b"k", b"v2")]))
    log.append(batch([(b"k", b"in-flight")], producer_id=9, transactional=True))
    log.append(batch([(b"k", b"v3")]))
    log.roll()
    cleaner = LogCleaner(lambda: [log])
    cleaner.clean_now()
    values = [value for _, _, value in read_all(log)]
    assert values[-3:] == [b"v2", b"in-flight", b"v3"]  # nothing from the transaction on was cleaned
    log.append(build_control_batch(0, 9, 0, commit=True, coordinator_epoch=0, timestamp_ms=TS))
    log.roll()
    cleaner.clean_now(force=True)
    assert [value for _, _, value in read_all(log)] == [b"v3"]


def test_a_segment_emptied_by_compaction_does_not_stop_retention(tmp_path: Path, clock: Clock) -> None:
    clock.now = time.time_ns() // 1_000_000  # empty segments are aged by file mtime, a wall-clock time
    log = open_log(tmp_path, clock, cleanup_policy="compact,delete", retention_ms=60_000, segment_bytes=150)
    for n in range(3):
        log.append(batch([(b"a", b"v%d" % n + b"x" * 40)]))
    log.roll()
    assert len(log.segment_base_offsets) == 4
    LogCleaner(lambda: [log]).clean_now()
    assert [value[:2] for _, _, value in read_all(log)] == [b"v2"]
    assert log.segment_base_offsets == [0, 1, 2, 3]  # offsets 0 and 1 now live in empty segments
    clock.now += 120_000
    assert log.delete_old_segments() == 3
    assert log.log_start_offset == 3


def test_a_batch_emptied_at_the_end_of_the_cleaned_range_stays_as_an_empty_batch(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock, delete_retention_ms=0)
    log.append(batch([(b"a", b"1"), (b"b", b"2")]))
    log.append(batch([(b"b", None)]))
    log.roll()
    cleaner = LogCleaner(lambda: [log])
    cleaner.clean_now()
    clock.now += 1
    cleaner.clean_now()
    headers = log.batch_headers()
    assert [(h.base_offset, h.last_offset_delta, h.records_count) for h in headers] == [(0, 1, 1), (2, 0, 0)]
    assert read_all(log) == [(0, b"a", b"1")]
    assert len(log.read(2, 1000)) == headers[1].size  # a reader at 2 is carried to offset 3
    log.append(batch([(b"c", b"3")]))
    log.roll()
    cleaner.clean_now(force=True)  # no longer the last batch of the range: gone
    assert [h.records_count for h in log.batch_headers()] == [1, 1]


def test_a_producers_last_batch_survives_as_an_empty_batch_with_its_sequence(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock)
    log.append(batch([(b"k", b"by-producer-5")], producer_id=5))
    log.append(batch([(b"k", b"newer")]))
    log.append(batch([(b"j", b"last")]))
    log.roll()
    LogCleaner(lambda: [log]).clean_now()
    emptied = [h for h in log.batch_headers() if h.producer_id == 5]
    assert [(h.base_offset, h.records_count, h.base_sequence, h.producer_epoch) for h in emptied] == [(0, 0, 0, 0)]
    assert [value for _, _, value in read_all(log)] == [b"newer", b"last"]


def test_a_keyless_record_is_refused_for_a_compacted_topic() -> None:
    compacted = LogConfig(cleanup_policy="compact", message_timestamp_after_max_ms=1 << 62)
    good = batch([(b"k", b"v")])
    validate_records(good, validate_batches(good, 1 << 20), "table-0", compacted, 0)
    for codec in (0, 3):
        bad = batch([(b"k", b"v"), (None, b"no key")], codec=codec)
        with pytest.raises(InvalidRecordError, match="without key in topic partition table-0") as error:
            validate_records(bad, validate_batches(bad, 1 << 20), "table-0", compacted, 0)
        assert error.value.error_code == 87
        assert [index for index, _ in error.value.record_errors] == [1]  # KIP-467: which record


def test_a_cleaned_log_reopens_with_the_same_records_and_sound_indexes(tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path, clock)
    write_history(log, batches=60)
    log.roll()
    LogCleaner(lambda: [log]).clean_now()
    expected = read_all(log)
    log.close()
    reopened = open_log(tmp_path, clock)
    assert read_all(reopened) == expected
    for offset, _, _ in expected:
        assert read_all(reopened, offset)[0][0] == offset
    assert not [p for p in (tmp_path / "table-0").iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]


def test_log_manager_cleaner_thread_compacts_compacted_topics(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, cleaner_backoff_ms=50)
    try:
        manager.create_topic(
            "table",
            1,
            {"cleanup.policy": "compact", "internal.segment.bytes": "300", "min.cleanable.dirty.ratio": "0.01"},
        )
        manager.create_topic("events", 1, {"internal.segment.bytes": "300"})
        for name in ("table", "events"):
            log = manager.get_log(name, 0)
            for n in range(30):
                log.append(batch([(b"k%d" % (n % 3), b"v%d" % n)]))
            log.roll()
        table, events = manager.get_log("table", 0), manager.get_log("events", 0)
        wait_until(lambda: len(read_all(table)) <= 3, "the cleaner to compact the table", 10)
        assert sorted(v for _, _, v in read_all(table)) == [b"v27", b"v28", b"v29"]
        assert len(read_all(events)) == 30
        manager.delete_topic("table")  # aborts and pauses the cleaner for it
    finally:
        manager.close()


# -- crash safety of the swap -------------------------------------------------------------------------


class SimulatedCrash(BaseException):
    """Raised in place of a file operation: nothing after it runs, as in a power cut."""


def build_dirty_log(path: Path, clock: Clock) -> Log:
    log = open_log(path, clock)
    write_history(log, seed=3, batches=30)
    log.roll()
    log.append(batch([(b"tail", b"active")]))
    return log


@pytest.fixture
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[list, list]:
    """Records of the reference log before and after a cleaning that completes."""
    path = tmp_path_factory.mktemp("reference")
    log = build_dirty_log(path, Clock())
    before = read_all(log)
    LogCleaner(lambda: [log]).clean_now()
    after = read_all(log)
    log.close()
    assert before != after
    return before, after


def test_a_crash_at_any_step_of_the_swap_recovers_to_before_or_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: tuple[list, list]
) -> None:
    before, after = reference
    real_replace, real_fsync_dir, real_unlink = os.replace, checkpoint.fsync_dir, os.unlink
    real_swap = Log.replace_segments
    outcomes = []
    for crash_at in range(100):
        directory = tmp_path / f"run{crash_at}"
        clock = Clock()
        log = build_dirty_log(directory, clock)
        steps = {"armed": False, "count": 0}

        def step(real, steps=steps, crash_at=crash_at):  # type: ignore[no-untyped-def]
            def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
                if steps["armed"]:
                    if steps["count"] == crash_at:
                        raise SimulatedCrash()
                    steps["count"] += 1
                return real(*args, **kwargs)

            return wrapped

        def armed_swap(self, *args, steps=steps, **kwargs):  # type: ignore[no-untyped-def]
            steps["armed"] = True
            try:
                return real_swap(self, *args, **kwargs)
            finally:
                steps["armed"] = False

        monkeypatch.setattr(os, "replace", step(real_replace))
        monkeypatch.setattr(os, "unlink", step(real_unlink))
        monkeypatch.setattr(checkpoint, "fsync_dir", step(real_fsync_dir))
        monkeypatch.setattr(Log, "replace_segments", armed_swap)
        crashed = False
        try:
            LogCleaner(lambda log=log: [log]).clean_now()
        except SimulatedCrash:
            crashed = True
        monkeypatch.undo()
        for segment in log._segments:  # abandon the process's view without any cleanup
            segment.close()
        reopened = open_log(directory, Clock())
        records = read_all(reopened)
        leftovers = [
            p.name for p in (directory / "table-0").iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))
        ]
        reopened.close()
        assert not leftovers, f"crash at step {crash_at} left {leftovers}"
        # each segment group is either swapped or not: what survives lies between the two states,
        # and always holds the newest record of every key at its original offset
        assert set(after) <= set(records) <= set(before), f"crash at step {crash_at}: records lost or invented"
        assert newest(records) == newest(before), f"crash at step {crash_at}: a newest value was lost"
        outcomes.append(records)
        if not crashed:
            break
    assert len(outcomes) > 10 and outcomes[0] == before and outcomes[-1] == after
    assert any(records != before for records in outcomes[:-1])  # some crashes land after a commit point


def test_leftover_cleaned_and_swap_files_are_finished_or_discarded_on_open(tmp_path: Path, clock: Clock) -> None:
    log = build_dirty_log(tmp_path, clock)
    before = read_all(log)
    directory = log.directory
    log.close()
    # a crash while writing: only .cleaned files exist -> discarded
    for name in ("00000000000000000000.log.cleaned", "00000000000000000000.index.cleaned"):
        (directory / name).write_bytes(b"garbage")
    reopened = open_log(tmp_path, clock)
    assert read_all(reopened) == before
    # a committed swap whose old segments were renamed .deleted: finished
    LogCleaner(lambda: [reopened]).clean_now()
    after = read_all(reopened)
    first_old = directory / "00000000000000000000.log"
    cleaned_copy = first_old.read_bytes()
    reopened.close()
    shutil.copy(first_old, directory / "00000000000000000000.log.swap")
    first_old.rename(directory / "00000000000000000000.log.deleted")
    (directory / "00000000000000000000.index").rename(directory / "00000000000000000000.index.swap")
    assert read_all(open_log(tmp_path, clock)) == after
    assert (directory / "00000000000000000000.log").read_bytes() == cleaned_copy
