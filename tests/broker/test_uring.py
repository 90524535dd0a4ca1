"""fsync through io_uring (uring.py) and the group commit that uses it, on the real kernel ring.

Skipped, with the reason, where the kernel or a sandbox offers no io_uring: the broker then
fsyncs on threads, which tests/broker/test_durability.py covers too.
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
import time

import pytest

from kafka_spark.broker.durability import GroupCommit
from kafka_spark.broker.storage.batch import build_record_batch
from kafka_spark.broker.storage.log_manager import LogManager
from kafka_spark.broker.uring import FsyncRing
from tests.support.waiting import wait_until


@pytest.fixture
def ring_results():
    results: list[tuple[int, OSError | None]] = []
    ring = FsyncRing.create(lambda user_data, error: results.append((user_data, error)), entries=8)
    if ring is None:
        pytest.skip("this kernel or sandbox offers no io_uring (the broker fsyncs on threads there)")
    yield ring, results
    ring.close()


def wait_for(ring: FsyncRing, results: list, count: int) -> None:
    poller = select.epoll()
    poller.register(ring.eventfd, select.EPOLLIN)

    def completed() -> bool:
        if len(results) >= count:
            return True
        poller.poll(0.01)
        ring.on_readable()
        return False

    try:
        wait_until(completed, lambda: f"{count} completions, {len(results)} reaped", 5, interval=0)
    finally:
        poller.close()


def test_each_fsync_is_reported_once_with_its_own_result(ring_results, tmp_path):
    ring, results = ring_results
    assert (ring.sq_entries, ring.cq_entries) == (8, 16)
    files = [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT) for i in range(6)]
    read_end, write_end = os.pipe()
    try:
        for fd in files:
            os.write(fd, b"x" * 70_000)
        jobs = [(fd, 100 + i) for i, fd in enumerate(files)] + [(read_end, 7), (987_654, 8)]
        assert ring.submit_fsyncs(jobs) == 8
        assert ring.in_flight == 8
        wait_for(ring, results, 8)
        outcome = dict(results)
        assert len(results) == 8 and set(outcome) == {100, 101, 102, 103, 104, 105, 7, 8}
        assert all(outcome[100 + i] is None for i in range(6))
        assert outcome[7].errno == errno.EINVAL  # a pipe cannot be fsynced
        assert outcome[8].errno == errno.EBADF
        assert ring.in_flight == 0
        # The ring goes round many times over.
        for round_index in range(10):
            ring.submit_fsyncs([(fd, 1000 * round_index + i) for i, fd in enumerate(files)])
            wait_for(ring, results, 8 + 6 * (round_index + 1))
        assert [error for _, error in results[8:]] == [None] * 60
        assert sorted(user_data for user_data, _ in results[8:]) == sorted(
            1000 * r + i for r in range(10) for i in range(6)
        )
    finally:
        for fd in files + [read_end, write_end]:
            os.close(fd)


def test_completions_beyond_the_completion_queue_are_reaped_from_the_kernels_overflow_list(tmp_path):
    """Forty fsyncs on a ring whose completion queue holds four: the kernel keeps the rest in its
    overflow list (IORING_FEAT_NODROP) without signalling the eventfd for them, and a reap
    flushes them into the queue (io_uring_enter with GETEVENTS) until every one is reported."""
    results: list[tuple[int, OSError | None]] = []
    ring = FsyncRing.create(lambda user_data, error: results.append((user_data, error)), entries=2)
    if ring is None:
        pytest.skip("this kernel or sandbox offers no io_uring (the broker fsyncs on threads there)")
    files = [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT) for i in range(40)]
    try:
        assert (ring.sq_entries, ring.cq_entries) == (2, 4)
        for fd in files:
            os.write(fd, b"z" * 4096)
        assert ring.submit_fsyncs([(fd, 500 + i) for i, fd in enumerate(files)]) == 40  # 2 per system call
        deadline = time.monotonic() + 60  # one bound for both waits
        wait_until(lambda: ring.overflowing, "a completion on the overflow list", 60, interval=0.01)

        def reaped() -> bool:
            if len(results) >= 40:
                return True
            ring.reap()
            return False

        wait_until(reaped, lambda: f"40 completions reaped, {len(results)} are", deadline - time.monotonic(), 0.01)
        assert sorted(user_data for user_data, _ in results) == list(range(500, 540))
        assert all(error is None for _, error in results)
        assert ring.overflows >= 1 and ring.overflow_completions >= 1
        assert ring.in_flight == 0 and not ring.overflowing and ring.dropped == 0
    finally:
        ring.close()
        for fd in files:
            os.close(fd)


def test_drain_waits_for_every_fsync_in_flight(ring_results, tmp_path):
    ring, results = ring_results
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"y" * 1_000_000)
        ring.submit_fsyncs([(fd, 1), (fd, 2)])
        ring.drain()
        assert sorted(results) == [(1, None), (2, None)] and ring.in_flight == 0
    finally:
        os.close(fd)


def test_group_commit_answers_every_partition_when_more_are_due_than_the_ring_holds(tmp_path):
    """Twenty partitions become due at once on a ring with room for four: the rest wait for
    completions to make room, and every waiter is answered once its data is fsynced."""
    loop = asyncio.new_event_loop()
    logs = LogManager(tmp_path)
    commit = GroupCommit(loop, ring_entries=4)
    try:
        if not commit.uses_io_uring:
            pytest.skip("this kernel or sandbox offers no io_uring (the broker fsyncs on threads there)")
        logs.create_topic("t", 20)
        batch = build_record_batch([(b"k", b"v" * 1000, [], 1_700_000_000_000)])
        before = len(os.listdir("/proc/self/fd"))

        async def produce_everywhere() -> None:
            waits = []
            for partition in range(20):
                log = logs.get_log("t", partition)
                log.append(batch)
                waits.append(commit.wait_durable(log, log.log_end_offset))
            await asyncio.wait_for(asyncio.gather(*waits), 10)
            # Already durable: answered at once, with no fsync.
            assert commit.wait_durable(logs.get_log("t", 3), 1).done()

        loop.run_until_complete(produce_everywhere())
        assert len(os.listdir("/proc/self/fd")) == before  # every duplicated descriptor closed
    finally:
        commit.close()
        logs.close()
        loop.close()
