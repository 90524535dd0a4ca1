"""What the topic configs Kafka 4.3 has beyond the basic ones do to a log: segment.jitter.ms,
segment.index.bytes, preallocate, file.delete.delay.ms, internal.segment.bytes and
max.compaction.lag.ms (on the roll and on the cleaner). Each is accepted with Kafka's meaning."""

from __future__ import annotations

import os
from pathlib import Path

from kafka_spark.broker.storage import file_deleter
from kafka_spark.broker.storage.cleaner import LogCleaner
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.file_deleter import DELETE_LATER_SUFFIX
from kafka_spark.broker.storage.log import Log
from tests.broker.storage.test_cleaner import batch as keyed_batch
from tests.broker.storage.test_log import TS, Clock, client_batch
from tests.broker.storage.test_segment import skip_unless_blocks_can_be_reserved
from tests.broker.test_request_memory import wait_until


def open_log(path: Path, clock: Clock, **configs: str) -> Log:
    return Log.open(path / "orders-0", "orders", 0, LogConfig.from_topic_configs(configs), time_ms=clock)


def test_segment_jitter_rolls_each_segment_up_to_that_much_sooner(tmp_path: Path) -> None:
    """segment.ms=1000 with segment.jitter.ms=1000: each segment rolls after a random age in
    (0, 1000] ms of record time, drawn anew for each segment, instead of at 1000 ms exactly."""
    clock = Clock()
    log = open_log(tmp_path, clock, **{"segment.ms": "1000", "segment.jitter.ms": "1000"})
    timestamp = TS
    while len(log.segment_base_offsets) < 25:
        log.append(client_batch(1, ts=timestamp))
        timestamp += 10
    ages = []
    firsts = {}
    for offset in log.segment_base_offsets:
        firsts[offset] = TS + 10 * offset  # one record per batch, 10 ms apart
    bases = log.segment_base_offsets
    for base, following in zip(bases, bases[1:], strict=False):
        ages.append(firsts[following] - firsts[base])
    assert all(0 < age <= 1010 for age in ages), ages
    assert len(set(ages)) > 5, ages  # not one fixed age: the jitter differs from segment to segment

    plain = open_log(tmp_path / "plain", Clock(), **{"segment.ms": "1000"})
    for i in range(300):
        plain.append(client_batch(1, ts=TS + 10 * i))
    bases = plain.segment_base_offsets
    assert {b - a for a, b in zip(bases, bases[1:], strict=False)} == {101}  # rolls once older than 1000 ms


def test_a_full_index_rolls_the_segment(tmp_path: Path) -> None:
    """segment.index.bytes=24 holds 3 offset-index entries (8 bytes) and 2 time-index entries
    (12 bytes). With index.interval.bytes=0 every batch but a segment's first adds an entry (as
    in Kafka), so the time index is full after 3 batches and the segment rolls, as Kafka's
    ``TimeIndex.isFull`` makes it roll."""
    log = open_log(tmp_path, Clock(), **{"segment.index.bytes": "24", "index.interval.bytes": "0"})
    for i in range(9):
        log.append(client_batch(3, ts=TS + 100 * i))
    bases = log.segment_base_offsets
    assert bases == [0, 9, 18], bases  # 3 batches of 3 records per segment

    roomy = open_log(tmp_path / "roomy", Clock(), **{"index.interval.bytes": "0"})
    for i in range(9):
        roomy.append(client_batch(3, ts=TS + 100 * i))
    assert roomy.segment_base_offsets == [0]


def test_internal_segment_bytes_rolls_below_segment_bytes_minimum(tmp_path: Path) -> None:
    log = open_log(tmp_path, Clock(), **{"internal.segment.bytes": "1000"})
    for i in range(6):
        log.append(client_batch(3, ts=TS + i, value_size=200))
    assert len(log.segment_base_offsets) == 6  # ~700-byte batches: one per segment


def test_preallocate_reserves_the_whole_segment_on_disk(tmp_path: Path) -> None:
    skip_unless_blocks_can_be_reserved(tmp_path, "nothing can be preallocated")
    size = 8 * 1024 * 1024
    log = open_log(tmp_path, Clock(), **{"preallocate": "true", "segment.bytes": str(size)})
    active = tmp_path / "orders-0" / "00000000000000000000.log"
    assert os.stat(active).st_blocks * 512 >= size and os.path.getsize(active) == 0
    log.append(client_batch(5))
    log.roll()  # the roll gives back what the data did not use, as Kafka trims a preallocated file
    assert os.stat(active).st_blocks * 512 < 64 * 1024
    rolled_to = tmp_path / "orders-0" / f"{log.segment_base_offsets[-1]:020d}.log"
    assert os.stat(rolled_to).st_blocks * 512 >= size

    plain = open_log(tmp_path / "plain", Clock(), **{"segment.bytes": str(size)})
    plain.append(client_batch(5))
    assert os.stat(tmp_path / "plain" / "orders-0" / "00000000000000000000.log").st_blocks * 512 < size
    log.close()
    plain.close()


def test_retention_leaves_segment_files_for_file_delete_delay_ms(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path, clock, **{"internal.segment.bytes": "1000", "retention.ms": "60000"})
    log.update_config(LogConfig.from_topic_configs({"file.delete.delay.ms": "300"}, log.config))
    for i in range(4):
        log.append(client_batch(3, ts=TS + i, value_size=200))
    clock.now = TS + 120_000
    assert log.delete_old_segments() == 4
    directory = tmp_path / "orders-0"
    waiting = sorted(path.name for path in directory.glob("*" + DELETE_LATER_SUFFIX))
    assert "00000000000000000000.log" + DELETE_LATER_SUFFIX in waiting and len(waiting) == 12
    assert not (directory / "00000000000000000000.log").exists()  # the log no longer has it
    wait_until(lambda: not list(directory.glob("*" + DELETE_LATER_SUFFIX)), "the delayed removal", 30)

    log.update_config(LogConfig.from_topic_configs({"file.delete.delay.ms": "0"}, log.config))
    log.append(client_batch(3, ts=TS + 100_000, value_size=200))
    clock.now = TS + 240_000
    assert log.delete_old_segments() == 1
    assert not list(directory.glob("*" + DELETE_LATER_SUFFIX))  # removed at once
    log.close()


def test_files_waiting_for_removal_are_removed_when_the_log_opens_again(tmp_path: Path) -> None:
    clock = Clock()
    settings = {"internal.segment.bytes": "1000", "retention.ms": "60000", "file.delete.delay.ms": "3600000"}
    log = open_log(tmp_path, clock, **settings)
    for i in range(3):
        log.append(client_batch(3, ts=TS + i, value_size=200))
    clock.now = TS + 120_000
    assert log.delete_old_segments() == 3 and file_deleter.pending() >= 1
    log.close()
    directory = tmp_path / "orders-0"
    assert list(directory.glob("*" + DELETE_LATER_SUFFIX))
    again = open_log(tmp_path, clock, **settings)
    assert not list(directory.glob("*" + DELETE_LATER_SUFFIX))
    assert again.log_start_offset == 9
    again.close()


def test_max_compaction_lag_rolls_and_cleans_a_log_below_its_dirty_ratio(tmp_path: Path) -> None:
    """With min.cleanable.dirty.ratio=NaN (which Kafka accepts: no ratio is ever reached) a
    compacted log is cleaned only once its oldest dirty record waited max.compaction.lag.ms, and
    its active segment rolls that soon so the records become cleanable."""
    clock = Clock()
    configs = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "NaN", "max.compaction.lag.ms": "60000"}
    log = open_log(tmp_path, clock, **configs)
    for i in range(6):
        log.append(keyed_batch([(b"k", b"v%d" % i)], ts=TS + i * 20_000))  # 20 s apart
    assert len(log.segment_base_offsets) == 2  # rolled past max.compaction.lag.ms, not at segment.ms (7 days)
    cleaner = LogCleaner(lambda: [log])
    clock.now = TS + 50_000
    assert cleaner.clean_now().logs_cleaned == 0  # below the ratio (never reached) and not overdue
    clock.now = TS + 70_000
    assert cleaner.clean_now().logs_cleaned == 1  # the oldest dirty record waited 70 s > 60 s
    log.close()
