"""Fetch and ListOffsets at the edges: mid-segment, segment boundary, below log start, at the
high watermark (long poll), and retention moving the log start forward."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka.record import MemoryRecords

from tests.support.waiting import wait_until
from tests.support.wire import WireClient

FETCH, LIST_OFFSETS = 1, 2


def produce_batches(bootstrap: str, topic: str, count: int, size: int = 200) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(count):
        producer.produce(topic, value=f"{i:06d}".encode() + b"." * size, partition=0)
        producer.flush(10)  # one message per batch, so batches and offsets line up
    assert producer.flush(10) == 0


def fetch(client: WireClient, topic: str, offset: int, *, max_wait_ms: int = 0, max_bytes: int = 1 << 20):
    response = client.call(
        FETCH,
        11,
        {
            "replica_id": -1,
            "max_wait": max_wait_ms,
            "min_bytes": 1,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "log_start_offset": -1,
                            "partition_max_bytes": max_bytes,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
    return response.responses[0].partitions[0]


def offsets_of(records: bytes) -> list[int]:
    memory = MemoryRecords(records)
    offsets = []
    while True:
        batch = memory.next_batch()
        if batch is None:
            return offsets
        offsets += [record.offset for record in batch]


def list_offset(client: WireClient, topic: str, timestamp: int) -> int:
    response = client.call(
        LIST_OFFSETS,
        5,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}],
                }
            ],
        },
    )
    partition = response.topics[0].partitions[0]
    assert partition.error_code == 0
    return partition.offset


def segment_base_offsets(log_dir: Path, topic: str) -> list[int]:
    return sorted(int(p.stem) for p in (log_dir / f"{topic}-0").glob("*.log"))


@pytest.fixture
def segmented_topic(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=1, config={"internal.segment.bytes": "4096"})
    produce_batches(pylog_broker.bootstrap_servers, topic, 60)
    return topic


def test_fetch_from_the_middle_of_a_segment_starts_with_the_batch_containing_the_offset(pylog_broker, segmented_topic):
    with WireClient(pylog_broker.bootstrap_servers) as client:
        partition = fetch(client, segmented_topic, 7, max_bytes=1)
    assert partition.error_code == 0
    assert partition.high_watermark == 60
    # KIP-74: even with max_bytes=1 the first whole batch is returned.
    assert offsets_of(partition.records) == [7]


def test_fetch_at_a_segment_boundary_returns_that_segments_first_batch(pylog_broker, segmented_topic):
    bases = segment_base_offsets(pylog_broker.log_dir, segmented_topic)
    assert len(bases) >= 3, bases
    boundary = bases[1]
    with WireClient(pylog_broker.bootstrap_servers) as client:
        partition = fetch(client, segmented_topic, boundary)
        assert offsets_of(partition.records)[0] == boundary
        # and reading across segments is seamless
        everything = []
        offset = 0
        while offset < 60:
            got = offsets_of(fetch(client, segmented_topic, offset).records)
            everything += [o for o in got if o >= offset]
            offset = everything[-1] + 1
    assert everything == list(range(60))


def test_fetch_at_high_watermark_long_polls_until_data_arrives(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=1)
    produce_batches(pylog_broker.bootstrap_servers, topic, 3)
    threading.Timer(0.5, produce_batches, args=(pylog_broker.bootstrap_servers, topic, 1)).start()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        start = time.monotonic()
        partition = fetch(client, topic, 3, max_wait_ms=10_000)
        elapsed = time.monotonic() - start
    assert offsets_of(partition.records) == [3]
    assert 0.4 < elapsed < 5, f"answered after {elapsed:.2f}s; the long poll must end when data arrives"


def test_fetch_at_high_watermark_with_no_data_waits_max_wait_and_returns_empty(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=1)
    produce_batches(pylog_broker.bootstrap_servers, topic, 2)
    with WireClient(pylog_broker.bootstrap_servers) as client:
        start = time.monotonic()
        partition = fetch(client, topic, 2, max_wait_ms=300)
        elapsed = time.monotonic() - start
    assert partition.error_code == 0 and partition.records == b""
    assert 0.25 < elapsed < 3


def test_the_fixture_broker_keeps_old_records_a_ticking_retention_check_deletes(
    pylog_broker, pylog_topic, pylog_broker_factory
):
    """Records stamped in 2023 are older than the default retention.ms (7 days). A broker with a
    periodic retention check deletes them at its next tick; the session fixture's broker has no
    periodic check, so event-time fixtures stay for the whole session (a 5-minute tick firing
    mid-test once made a suite flaky)."""

    old = 1_672_531_200_000  # 2023-01-01

    def produce_old(bootstrap: str, topic: str) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
        for i in range(40):
            producer.produce(topic, value=b"." * 200, partition=0, timestamp=old + i)
            producer.flush(10)  # one batch each: several segments of 4096 bytes
        assert producer.flush(10) == 0

    config = {"internal.segment.bytes": "4096"}
    kept = pylog_topic(partitions=1, config=config)
    produce_old(pylog_broker.bootstrap_servers, kept)
    ticking = pylog_broker_factory(retention_check_interval_ms=100)
    ticking.create_topic("old", partitions=1, config=config)
    produce_old(ticking.bootstrap_servers, "old")
    with WireClient(ticking.bootstrap_servers) as client:
        wait_until(lambda: list_offset(client, "old", -2) != 0, "the retention tick", interval=0.1)
        assert list_offset(client, "old", -2) > 0  # the tick deleted the old segments
    assert pylog_broker._retention is None  # no periodic check is scheduled on the fixture's broker
    with WireClient(pylog_broker.bootstrap_servers) as client:
        assert (list_offset(client, kept, -2), list_offset(client, kept, -1)) == (0, 40)
    pylog_broker.run_retention()  # asked for, retention applies there too
    with WireClient(pylog_broker.bootstrap_servers) as client:
        assert list_offset(client, kept, -2) > 0


def test_retention_deletes_old_segments_and_earliest_moves_forward(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=1, config={"internal.segment.bytes": "4096", "retention.bytes": "8192"})
    produce_batches(pylog_broker.bootstrap_servers, topic, 80)
    with WireClient(pylog_broker.bootstrap_servers) as client:
        assert list_offset(client, topic, -2) == 0
        pylog_broker.run_retention()
        earliest = list_offset(client, topic, -2)
        assert earliest > 0
        assert earliest == segment_base_offsets(pylog_broker.log_dir, topic)[0]
        assert list_offset(client, topic, -1) == 80
        below = fetch(client, topic, earliest - 1)
        assert below.error_code == 1  # OFFSET_OUT_OF_RANGE
        assert below.log_start_offset == earliest
        assert offsets_of(fetch(client, topic, earliest).records)[0] == earliest


def test_fetch_beyond_the_log_end_is_out_of_range(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=1)
    produce_batches(pylog_broker.bootstrap_servers, topic, 2)
    with WireClient(pylog_broker.bootstrap_servers) as client:
        assert fetch(client, topic, 5).error_code == 1


def test_list_offsets_by_timestamp_finds_first_record_at_or_after(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=1)
    producer = Producer({"bootstrap.servers": pylog_broker.bootstrap_servers, "linger.ms": 50})
    for i in range(100):
        producer.produce(topic, value=b"v", partition=0, timestamp=1_000_000 + i * 10)
    producer.flush(10)
    with WireClient(pylog_broker.bootstrap_servers) as client:
        assert list_offset(client, topic, 1_000_000 + 425) == 43
        assert list_offset(client, topic, 1_000_000 + 430) == 43
        assert list_offset(client, topic, 0) == 0
        assert list_offset(client, topic, 9_999_999_999) == -1
