"""Group commit: acks=all produces wait for an fsync that may cover many of them.

Kafka's default relies on replication rather than fsync; a single embedded node has no
replicas, so by default (``flush_on_ack_all``) an acks=all produce is acknowledged only after
its data is fsynced. Doing that inline would stall the event loop for every request; instead the
append happens at once and the response waits for the partition's next fsync, which runs off the
loop and covers every append made before it started. Requests arriving during an fsync are
covered by the following one, so under load one fsync acknowledges many produces.

Off the loop means io_uring where the kernel offers it (uring.py): the kernel runs the fsyncs
and an eventfd wakes the loop, with no Python thread to hand off to. Elsewhere a small thread
pool runs them; partitions that become due in the same turn of the event loop (the partitions of
one Produce request, typically) are then fsynced by one job: one hand-off to a thread and one
wake-up of the loop per request rather than per partition.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from kafka_spark.broker.storage.errors import KafkaStorageError
from kafka_spark.broker.storage.log import Log
from kafka_spark.broker.uring import FsyncRing


@dataclass
class _PartitionSync:
    durable_offset: int = 0
    in_flight: bool = False
    waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)


class GroupCommit:
    """Runs on the broker's event loop. fsyncs go through io_uring where the kernel offers it
    (uring.py: no thread hand-off at all), else run on a small thread pool."""

    def __init__(self, loop: asyncio.AbstractEventLoop, threads: int = 4, use_io_uring: bool = True,
                 ring_entries: int = 64) -> None:
        self._loop = loop
        # Keyed by the Log object: a re-created topic has new Logs and starts from nothing.
        self._partitions: weakref.WeakKeyDictionary[Log, _PartitionSync] = weakref.WeakKeyDictionary()
        self._due: dict[Log, _PartitionSync] = {}  # to fsync at the end of this loop turn
        self._ring_jobs: dict[int, tuple[Log, _PartitionSync, int, int]] = {}  # user_data -> job
        self._next_job = 0
        self._start_pending = False
        self._closing = False
        self._ring = FsyncRing.create(self._ring_done, ring_entries) if use_io_uring else None
        if self._ring is not None:
            try:
                loop.add_reader(self._ring.eventfd, self._ring.on_readable)
            except NotImplementedError:  # an event loop without add_reader
                self._ring.close()
                self._ring = None
        self._executor = None if self._ring is not None else ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="pylog-fsync")

    @property
    def uses_io_uring(self) -> bool:
        return self._ring is not None

    def wait_durable(self, log: Log, end_offset: int) -> asyncio.Future[None]:
        """A future done once every offset below ``end_offset`` of ``log`` is on disk."""
        state = self._partitions.setdefault(log, _PartitionSync())
        future: asyncio.Future[None] = self._loop.create_future()
        if end_offset <= state.durable_offset:
            future.set_result(None)
            return future
        state.waiters.append((end_offset, future))
        if not state.in_flight:
            self._schedule(log, state)
        return future

    def _schedule(self, log: Log, state: _PartitionSync) -> None:
        self._due[log] = state
        self._start_soon()

    def _start_soon(self) -> None:
        if not self._start_pending:
            self._start_pending = True
            self._loop.call_soon(self._start_due)

    def _start_due(self) -> None:
        self._start_pending = False
        due, self._due = self._due, {}
        room = self._ring.capacity - self._ring.in_flight if self._ring is not None else len(due)
        jobs = []
        for log, state in due.items():
            if state.in_flight or not state.waiters:
                continue
            if len(jobs) == room:  # the ring is full: wait for a completion to make room
                self._due[log] = state
                continue
            try:
                fd, target = log.open_sync_handle()
            except KafkaStorageError as error:
                self._fail(state, error)
                continue
            state.in_flight = True
            jobs.append((log, state, fd, target))
        if not jobs:
            return
        if self._ring is not None:
            submissions = []
            for job in jobs:
                self._next_job += 1
                self._ring_jobs[self._next_job] = job
                submissions.append((job[2], self._next_job))
            self._ring.submit_fsyncs(submissions)
            return
        assert self._executor is not None
        work = self._loop.run_in_executor(self._executor, _fsync_and_close, [fd for _, _, fd, _ in jobs])

        def finished(done: asyncio.Future[list[BaseException | None]]) -> None:
            if done.cancelled():
                errors: list[BaseException | None] = [RuntimeError("the broker is stopping")] * len(jobs)
            elif done.exception() is not None:
                errors = [done.exception()] * len(jobs)
            else:
                errors = done.result()
            for (log, state, _, target), error in zip(jobs, errors):
                self._finished(log, state, target, error)

        work.add_done_callback(finished)

    def _ring_done(self, user_data: int, error: OSError | None) -> None:
        log, state, fd, target = self._ring_jobs.pop(user_data)
        os.close(fd)
        if self._closing:
            return
        self._finished(log, state, target, error)
        if self._due:  # partitions that waited for room in the ring
            self._start_soon()

    def _finished(self, log: Log, state: _PartitionSync, target: int, error: BaseException | None) -> None:
        state.in_flight = False
        if error is not None:
            log.mark_failed(f"fsync failed: {error}")
            self._fail(state, KafkaStorageError(f"fsync of {log.name} failed: {error}"))
            return
        state.durable_offset = max(state.durable_offset, target)
        remaining = []
        for offset, future in state.waiters:
            if offset <= state.durable_offset:
                if not future.done():
                    future.set_result(None)
            else:
                remaining.append((offset, future))
        state.waiters = remaining
        if remaining:
            self._schedule(log, state)

    @staticmethod
    def _fail(state: _PartitionSync, error: Exception) -> None:
        waiters, state.waiters = state.waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_exception(error)

    def close(self) -> None:
        """Wait for the fsyncs in flight and release the ring or the threads (the event loop may
        already be closed; nothing is answered any more)."""
        self._closing = True
        if self._ring is not None:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._ring.eventfd)
            self._ring.drain()
            self._ring.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True)


def _fsync_and_close(fds: list[int]) -> list[BaseException | None]:
    """fsync and close each descriptor; the error of each (None when it is on disk)."""
    errors: list[BaseException | None] = []
    for fd in fds:
        try:
            os.fsync(fd)
            errors.append(None)
        except OSError as error:
            errors.append(error)
        finally:
            os.close(fd)
    return errors
