"""Acknowledged data survives kill -9; a torn tail is cut at the last valid batch."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.storage.batch import build_record_batch
from kafka_spark.broker.uring import FsyncRing
from tests.support.partition_reads import read_partitions_to_end
from tests.support.waiting import wait_until


def read_values(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    for message in read_partitions_to_end(bootstrap, topic, range(partitions), **{"group.id": "durability"}):
        values[message.partition()].append(message.value())
    return values


def test_acks_all_data_survives_kill_9_and_restart(pylog_broker_process):
    broker = pylog_broker_process()
    bootstrap = broker.bootstrap_servers
    acknowledged: list[bytes] = []
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("durable", num_partitions=3)])["durable"].result(timeout=30)
        producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "message.timeout.ms": 5000, "retries": 0}
        )

        def on_delivery(error, message):
            if error is None:
                acknowledged.append(message.value())

        for i in range(20_000):
            producer.produce("durable", value=b"%d" % i, key=b"%d" % (i % 97), on_delivery=on_delivery)
            if i % 500 == 0:
                producer.poll(0)
            if i == 15_000:
                producer.flush(10)
                broker.kill()  # SIGKILL mid-stream: later sends fail, earlier ones were acked
        producer.flush(10)
    finally:
        broker.kill()
    assert len(acknowledged) >= 15_000
    bootstrap = broker.start().bootstrap_servers
    try:
        stored = read_values(bootstrap, "durable", 3)
        everything = [v for values in stored.values() for v in values]
        assert set(acknowledged) <= set(everything)
        assert len(everything) == len(set(everything))  # nothing duplicated by recovery
        # the restarted broker accepts writes at the right offsets
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        offsets = []
        producer.produce(
            "durable", value=b"after", partition=0, on_delivery=lambda err, msg: offsets.append(msg.offset())
        )
        producer.flush(10)
        assert offsets == [len(stored[0])]
    finally:
        broker.stop()


def test_a_batch_cut_in_half_is_truncated_and_writes_continue_at_the_right_offset(pylog_broker_process):
    broker = pylog_broker_process()
    log_dir = broker.log_dir
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 0})
        for i in range(10):
            producer.produce("torn", value=b"record-%d" % i + b"." * 100, partition=0)
            producer.flush(10)  # ten separate batches
    finally:
        broker.stop()
    segment = sorted((log_dir / "torn-0").glob("*.log"))[-1]
    size = segment.stat().st_size
    batch = size // 10
    with open(segment, "r+b") as handle:
        handle.truncate(size - batch // 2)  # the last batch loses half its bytes
    bootstrap = broker.start().bootstrap_servers
    try:
        values = read_values(bootstrap, "torn", 1)[0]
        assert values == [b"record-%d" % i + b"." * 100 for i in range(9)]
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        offsets = []
        producer.produce("torn", value=b"new", partition=0, on_delivery=lambda err, msg: offsets.append(msg.offset()))
        producer.flush(10)
        assert offsets == [9]
        assert read_values(bootstrap, "torn", 1)[0][-1] == b"new"
    finally:
        broker.stop()


from tests.support.wire import WireClient  # noqa: E402

BATCH = build_record_batch([(b"k", b"v", [], 1_700_000_000_000)])


def choose_fsync_path(monkeypatch: pytest.MonkeyPatch, fsync_path: str) -> None:
    """Brokers started from here on fsync through io_uring or on threads."""
    if fsync_path == "threads":
        monkeypatch.setenv("PYLOG_NO_IO_URING", "1")
    else:
        ring = FsyncRing.create(lambda *_: None)
        if ring is None:
            pytest.skip("this kernel or sandbox offers no io_uring; the thread path is tested alone")
        ring.close()


def produce(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """(error, base offset) per partition of an acks=all produce of one record to partitions 0 and 1."""
    with WireClient(bootstrap, timeout=120) as client:
        response = client.call(
            0,
            7,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout": 5000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": BATCH}, {"index": 1, "records": BATCH}]}
                ],
            },
        )
    return {p.index: (int(p.error_code), p.base_offset) for p in response.responses[0].partition_responses}


def fetch_errors(bootstrap: str, topic: str) -> dict[int, int]:
    with WireClient(bootstrap) as client:
        response = client.call(
            1,
            11,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": p,
                                "current_leader_epoch": -1,
                                "fetch_offset": 0,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                            for p in (0, 1)
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
    return {p.partition_index: int(p.error_code) for p in response.responses[0].partitions}


def metadata(bootstrap: str, topic: str) -> dict[int, tuple[int, int, list[int]]]:
    """(error, leader, offline replicas) per partition, as clients learn them."""
    with WireClient(bootstrap) as client:
        response = client.call(
            3,
            8,
            {
                "topics": [{"name": topic}],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        )
    return {
        p.partition_index: (int(p.error_code), p.leader_id, list(p.offline_replicas))
        for p in response.topics[0].partitions
    }


@pytest.mark.parametrize("fsync_path", ["io_uring", "threads"])
def test_a_failed_fsync_takes_its_partition_offline_until_a_restart(monkeypatch, tmp_path, fsync_path):
    """acks=all is answered only once the data is on disk: when the fsync fails the partition
    gets KAFKA_STORAGE_ERROR (56) and the other partitions of the request their offsets. The
    failed partition stays offline (produce and fetch answer 56) while the others go on: a later
    fsync succeeding would not prove the failed pages reached the disk. A restart recovers it from
    disk. Both ways the broker fsyncs are covered; the failure is real (the fsync is given a
    pipe, which cannot be fsynced: EINVAL)."""
    choose_fsync_path(monkeypatch, fsync_path)
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        assert broker.broker.group_commit.uses_io_uring == (fsync_path == "io_uring")
        broker.create_topic("disk", partitions=2)
        log = broker.broker.logs.get_log("disk", 1)
        real = log.open_sync_handle

        def open_sync_handle() -> tuple[int, int]:
            fd, end = real()
            os.close(fd)
            read_end, write_end = os.pipe()
            os.close(write_end)
            return read_end, end

        monkeypatch.setattr(log, "open_sync_handle", open_sync_handle)
        assert produce(broker.bootstrap_servers, "disk") == {0: (0, 0), 1: (56, -1)}
        monkeypatch.undo()  # fsync works again, but partition 1 stays offline
        assert log.failure is not None and "fsync failed" in log.failure
        assert produce(broker.bootstrap_servers, "disk") == {0: (0, 1), 1: (56, -1)}
        assert fetch_errors(broker.bootstrap_servers, "disk") == {0: 0, 1: 56}
        node = broker.broker.config.node_id
        # Metadata says so too (Kafka's answer for a replica in a failed log directory), so
        # clients hold partition 1's messages instead of retrying them into errors.
        assert metadata(broker.bootstrap_servers, "disk") == {0: (0, node, []), 1: (5, -1, [node])}

    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        # Recovered from disk: the unacknowledged first append is there (it reached the page
        # cache), so a producer retrying without idempotence has it twice, as when any ack is lost.
        assert fetch_errors(broker.bootstrap_servers, "disk") == {0: 0, 1: 0}
        node = broker.broker.config.node_id
        assert metadata(broker.bootstrap_servers, "disk") == {0: (0, node, []), 1: (0, node, [])}
        assert produce(broker.bootstrap_servers, "disk") == {0: (0, 2), 1: (0, 1)}


@pytest.mark.parametrize("fsync_path", ["io_uring", "threads"])
def test_an_fsync_that_never_completes_takes_its_partition_offline_and_answers_the_producer(
    monkeypatch, tmp_path, caplog, fsync_path
):
    """An fsync of partition 1 that does not return (a disk or driver that hangs; simulated: on
    threads ``os.fsync`` blocks for that file, with io_uring its submission is held back from the
    kernel) is given up on after log.flush.timeout.ms: logged with the partition and the wait,
    the partition offline as after a failed fsync, the producer waiting on it answered
    KAFKA_STORAGE_ERROR (56) rather than left hanging, partition 0 served throughout. When the
    fsync finally returns, the partition stays offline and the broker closes normally."""
    choose_fsync_path(monkeypatch, fsync_path)
    release = threading.Event()
    with EmbeddedBroker(log_dir=tmp_path, register=False, log_flush_timeout_ms=1500) as broker:
        commit = broker.broker.group_commit
        assert commit.uses_io_uring == (fsync_path == "io_uring")
        broker.create_topic("hang", partitions=2)
        hanging_dir = str(broker.broker.logs.get_log("hang", 1).directory)

        def of_hanging_partition(fd: int) -> bool:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(hanging_dir + os.sep)

        if fsync_path == "threads":
            real_fsync = os.fsync

            def fsync(fd: int) -> None:
                if of_hanging_partition(fd):
                    release.wait(120)
                real_fsync(fd)

            monkeypatch.setattr(os, "fsync", fsync)
        else:
            ring = commit._ring
            real_submit = ring.submit_fsyncs
            held: list[tuple[int, int]] = []

            def submit_fsyncs(jobs: list[tuple[int, int]]) -> int:
                held.extend(job for job in jobs if of_hanging_partition(job[0]))
                assert real_submit([job for job in jobs if not of_hanging_partition(job[0])]) == len(jobs) - len(
                    [job for job in jobs if of_hanging_partition(job[0])]
                )
                return len(jobs)

            monkeypatch.setattr(ring, "submit_fsyncs", submit_fsyncs)

        started = time.monotonic()
        with caplog.at_level(logging.ERROR, logger="kafka_spark.broker"):
            assert produce(broker.bootstrap_servers, "hang") == {0: (0, 0), 1: (56, -1)}
        assert time.monotonic() - started >= 1.5  # answered once the fsync was given up on, not before
        messages = [record.getMessage() for record in caplog.records]
        assert any(
            message.startswith("fsync of hang-1 has not completed after ") and "log.flush.timeout.ms=1500" in message
            for message in messages
        ), messages
        log = broker.broker.logs.get_log("hang", 1)
        assert log.failure is not None and "log.flush.timeout.ms" in log.failure
        node = broker.broker.config.node_id
        assert metadata(broker.bootstrap_servers, "hang") == {0: (0, node, []), 1: (5, -1, [node])}
        assert produce(broker.bootstrap_servers, "hang") == {0: (0, 1), 1: (56, -1)}  # offline at once now
        assert commit.stats.stuck == 1

        release.set()  # the fsync returns at last: the partition stays offline
        if fsync_path == "io_uring":
            monkeypatch.undo()

            async def submit_held() -> int:  # on the broker's loop, the ring's one thread
                return ring.submit_fsyncs(held)

            assert asyncio.run_coroutine_threadsafe(submit_held(), broker.broker.loop).result(30) == len(held) == 1
        wait_until(lambda: commit.stats.fsyncs >= 3, lambda: f"3 fsyncs, {commit.stats.fsyncs} done")
        assert commit.stats.fsyncs == 3  # partition 0 twice, and the one given up on
        assert fetch_errors(broker.bootstrap_servers, "hang") == {0: 0, 1: 56}


def test_closing_with_an_fsync_in_flight_works_when_the_ring_descriptor_is_above_1023(monkeypatch, tmp_path, caplog):
    """A broker holds three descriptors per partition, so its io_uring eventfd is numbered 1024
    or above once the process has a few hundred partitions open; closing while an fsync is in
    flight waits on that descriptor (select() refuses such numbers). Here the low numbers are
    taken first and one fsync is held back from the kernel while the broker closes: the close
    waits for it up to log.flush.timeout.ms, logs it unfinished and returns."""
    choose_fsync_path(monkeypatch, "io_uring")
    taken = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        broker = EmbeddedBroker(log_dir=tmp_path, register=False, log_flush_timeout_ms=6000).start()
        try:
            commit = broker.broker.group_commit
            assert commit._ring.eventfd >= 1024
            broker.create_topic("held", partitions=2)
            ring, held = commit._ring, []

            def submit_fsyncs(jobs: list[tuple[int, int]]) -> int:
                held.extend(jobs)
                return len(jobs)

            monkeypatch.setattr(ring, "submit_fsyncs", submit_fsyncs)

            def produce_until_closed() -> None:
                with contextlib.suppress(ConnectionError):  # the broker closes before it answers
                    produce(broker.bootstrap_servers, "held")

            producer = threading.Thread(target=produce_until_closed, daemon=True)
            producer.start()
            wait_until(lambda: held, "the produce to reach its fsync", interval=0.02)
        finally:
            with caplog.at_level(logging.ERROR, logger="kafka_spark.broker"):
                broker.close()
        assert any(
            record.getMessage().startswith("closing with ") and "fsync(s) unfinished" in record.getMessage()
            for record in caplog.records
        ), [record.getMessage() for record in caplog.records]
    finally:
        for fd in taken:
            os.close(fd)
