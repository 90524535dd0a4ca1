"""Group commit: acks=all produces wait for an fsync that may cover many of them.

Kafka's default relies on replication rather than fsync; a single embedded node has no
replicas, so by default (``flush_on_ack_all``) an acks=all produce is acknowledged only after
its data is fsynced. Doing that inline would stall the event loop for every request; instead the
append happens at once and the response waits for the partition's next fsync, which runs off the
loop and covers every append made before it started. Requests arriving during an fsync are
covered by the following one, so under load one fsync acknowledges many produces.

Off the loop means io_uring where the kernel offers it (uring.py): the kernel runs the fsyncs
and an eventfd wakes the loop, with no Python thread to hand off to. Elsewhere a small thread
pool runs them, and the results of fsyncs finishing close together come back to the loop with
one wake-up.

A partition has at most one fsync in flight. One that has not completed within
``log.flush.timeout.ms`` is given up on: logged with the partition and the wait, the partition
taken offline as after a failed fsync (Log.mark_failed: nothing more of it may be acknowledged,
since nobody knows what reached the disk), and the produces waiting on it answered
KAFKA_STORAGE_ERROR, so their clients fail over or retry instead of waiting forever. A timer
that runs while fsyncs are in flight does that check, and also reaps the ring, so a completion
that came without a wake-up is still reported.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import select
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from kafka_spark.broker.storage.errors import KafkaStorageError
from kafka_spark.broker.storage.log import Log
from kafka_spark.broker.uring import FsyncRing

logger = logging.getLogger("kafka_spark.broker")

#: log.flush.io.uring.entries: submission entries of the fsync ring (its completion queue holds
#: twice as many). A partition has one fsync in flight at most, so this many partitions' fsyncs
#: can complete between two reaps without the kernel's overflow list.
DEFAULT_RING_ENTRIES = 256
#: log.flush.timeout.ms: an fsync not done after this long takes its partition offline.
DEFAULT_FLUSH_TIMEOUT_MS = 60_000


@dataclass
class _PartitionSync:
    durable_offset: int = 0
    in_flight: bool = False
    waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)


@dataclass(eq=False)
class _Fsync:
    """One fsync in flight: of ``fd`` (a duplicate of the active segment's), making ``target``
    durable."""

    log: Log
    state: _PartitionSync
    fd: int
    target: int
    started: float  # time.monotonic()
    given_up: bool = False  # timed out: the partition is offline and its result no longer matters


@dataclass
class FsyncStats:
    """What the broker's fsyncs did since it started."""

    method: str  # "io_uring, N entries" or "N threads"
    fsyncs: int = 0
    longest_ms: float = 0.0
    overflows: int = 0  # times completions were found in the kernel's overflow list
    overflow_completions: int = 0  # completions reaped from it
    dropped: int = 0  # completions the kernel could not keep at all
    stuck: int = 0  # fsyncs given up on after log.flush.timeout.ms

    def __str__(self) -> str:
        return (
            f"fsyncs ({self.method}): {self.fsyncs} done, {self.overflows} completion queue overflows, "
            f"{self.overflow_completions} completions reaped from the overflow list, {self.dropped} dropped, "
            f"{self.stuck} stuck, longest {self.longest_ms:.0f} ms"
        )


class GroupCommit:
    """Runs on the broker's event loop. fsyncs go through io_uring where the kernel offers it
    (uring.py: no thread hand-off at all), else run on a small thread pool."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        threads: int = 4,
        use_io_uring: bool = True,
        ring_entries: int = DEFAULT_RING_ENTRIES,
        flush_timeout_ms: int = DEFAULT_FLUSH_TIMEOUT_MS,
    ) -> None:
        self._loop = loop
        # Keyed by the Log object: a re-created topic has new Logs and starts from nothing.
        self._partitions: weakref.WeakKeyDictionary[Log, _PartitionSync] = weakref.WeakKeyDictionary()
        self._due: dict[Log, _PartitionSync] = {}  # to fsync at the end of this loop turn
        self._in_flight: dict[int, _Fsync] = {}  # job id (the ring's user_data) -> fsync
        self._next_job = 0
        self._start_pending = False
        self._closing = False
        self._flush_timeout_ms = flush_timeout_ms
        # Often enough that a stuck fsync is noticed within a quarter of the timeout (at most 1 s late).
        self._check_interval = min(1.0, max(0.01, flush_timeout_ms / 4000))
        self._watchdog: asyncio.TimerHandle | None = None
        self._ring = FsyncRing.create(self._ring_done, ring_entries) if use_io_uring else None
        if self._ring is not None:
            try:
                loop.add_reader(self._ring.eventfd, self._ring.on_readable)
            except NotImplementedError:  # an event loop without add_reader
                self._ring.close()
                self._ring = None
        self._executor = (
            None
            if self._ring is not None
            else ThreadPoolExecutor(max_workers=threads, thread_name_prefix="pylog-fsync")
        )
        # Thread path: results of finished fsyncs, collected by one loop wake-up however many finish.
        self._thread_results: collections.deque[tuple[int, OSError | None]] = collections.deque()
        self._collect_pending = False
        self._stats = FsyncStats(
            f"io_uring, {self._ring.sq_entries} entries" if self._ring is not None else f"{threads} threads"
        )

    @property
    def uses_io_uring(self) -> bool:
        return self._ring is not None

    @property
    def stats(self) -> FsyncStats:
        """The figures so far (a copy)."""
        stats = FsyncStats(**vars(self._stats))
        if self._ring is not None:
            stats.overflows = self._ring.overflows
            stats.overflow_completions = self._ring.overflow_completions
            stats.dropped = self._ring.dropped
        return stats

    def wait_durable(self, log: Log, end_offset: int) -> asyncio.Future[None]:
        """A future done once every offset below ``end_offset`` of ``log`` is on disk; failed with
        KafkaStorageError when its fsync fails or times out."""
        state = self._partitions.setdefault(log, _PartitionSync())
        future: asyncio.Future[None] = self._loop.create_future()
        if end_offset <= state.durable_offset:
            future.set_result(None)
            return future
        state.waiters.append((end_offset, future))
        if not state.in_flight:
            self._schedule(log, state)
        return future

    def durable_offset(self, log: Log) -> int:
        """The offset below which ``log`` is known fsynced by this group commit (0: nothing yet)."""
        state = self._partitions.get(log)
        return 0 if state is None else state.durable_offset

    def _schedule(self, log: Log, state: _PartitionSync) -> None:
        self._due[log] = state
        self._start_soon()

    def _start_soon(self) -> None:
        if not self._start_pending:
            self._start_pending = True
            self._loop.call_soon(self._start_due)

    def _start_due(self) -> None:
        self._start_pending = False
        if self._closing:
            return
        due, self._due = self._due, {}
        jobs = []
        now = time.monotonic()
        for log, state in due.items():
            if state.in_flight or not state.waiters:
                continue
            try:
                fd, target = log.open_sync_handle()
            except KafkaStorageError as error:
                self._fail(state, error)
                continue
            state.in_flight = True
            self._next_job += 1
            job = _Fsync(log, state, fd, target, now)
            self._in_flight[self._next_job] = job
            jobs.append((self._next_job, job))
        if not jobs:
            return
        self._arm_watchdog()
        if self._ring is not None:
            self._submit_to_ring(jobs)
            return
        assert self._executor is not None
        for job_id, job in jobs:
            self._executor.submit(self._fsync_on_thread, job_id, job.fd)

    def _submit_to_ring(self, jobs: list[tuple[int, _Fsync]]) -> None:
        assert self._ring is not None
        failure: OSError | None = None
        try:
            taken = self._ring.submit_fsyncs([(job.fd, job_id) for job_id, job in jobs])
        except OSError as error:
            taken, failure = 0, error
        for job_id, job in jobs[taken:]:
            del self._in_flight[job_id]
            os.close(job.fd)
            job.state.in_flight = False
            if failure is not None:
                self._finished(job.log, job.state, job.target, failure)
            else:  # refused for now: again after the next completion or check
                self._due[job.log] = job.state

    def _ring_done(self, user_data: int, error: OSError | None) -> None:
        job = self._in_flight.pop(user_data)
        os.close(job.fd)
        if self._closing:
            return
        self._completed(job, error)
        if self._due:  # partitions the ring refused for a moment
            self._start_soon()

    # -- the thread path -------------------------------------------------------------------------

    def _fsync_on_thread(self, job_id: int, fd: int) -> None:
        """On a pool thread: fsync and close ``fd``; the loop collects the result."""
        error: OSError | None = None
        try:
            os.fsync(fd)
        except OSError as failure:
            error = failure
        finally:
            os.close(fd)
        self._thread_results.append((job_id, error))
        if not self._collect_pending and not self._closing:
            self._collect_pending = True
            try:
                self._loop.call_soon_threadsafe(self._collect_thread_results)
            except RuntimeError:  # the loop closed while this fsync ran: nobody is answered any more
                pass

    def _collect_thread_results(self) -> None:
        self._collect_pending = False  # first: a result added from now on schedules another call
        while self._thread_results:
            job_id, error = self._thread_results.popleft()
            job = self._in_flight.pop(job_id, None)
            if job is not None and not self._closing:
                self._completed(job, error)

    # -- outcomes --------------------------------------------------------------------------------

    def _completed(self, job: _Fsync, error: BaseException | None) -> None:
        took_ms = (time.monotonic() - job.started) * 1000
        self._stats.fsyncs += 1
        self._stats.longest_ms = max(self._stats.longest_ms, took_ms)
        if job.given_up:
            logger.warning(
                "the fsync of %s given up on completed after %.1f s; the partition stays offline until "
                "the broker restarts",
                job.log.name,
                took_ms / 1000,
            )
            return
        self._finished(job.log, job.state, job.target, error)

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

    # -- stuck fsyncs ----------------------------------------------------------------------------

    def _arm_watchdog(self) -> None:
        if self._watchdog is None and not self._closing:
            self._watchdog = self._loop.call_later(self._check_interval, self._check)

    def _check(self) -> None:
        """While fsyncs are in flight: report completions no wake-up announced, give up on fsyncs
        older than the timeout, retry what the ring refused."""
        self._watchdog = None
        if self._closing:
            return
        if self._ring is not None:
            try:
                self._ring.reap()
            except OSError as error:  # the fsyncs it holds time out below; keep checking
                logger.error("reaping the fsync ring failed: %s", error)
        now = time.monotonic()
        for job in list(self._in_flight.values()):
            if not job.given_up and (now - job.started) * 1000 >= self._flush_timeout_ms:
                self._give_up(job, now - job.started)
        if self._due:
            self._start_soon()
        if self._due or any(not job.given_up for job in self._in_flight.values()):
            self._arm_watchdog()

    def _give_up(self, job: _Fsync, waited_s: float) -> None:
        job.given_up = True
        self._stats.stuck += 1
        logger.error(
            "fsync of %s has not completed after %.1f s (log.flush.timeout.ms=%d): taking the partition "
            "offline; the produces waiting on it get KAFKA_STORAGE_ERROR",
            job.log.name,
            waited_s,
            self._flush_timeout_ms,
        )
        reason = f"fsync did not complete within log.flush.timeout.ms={self._flush_timeout_ms}"
        job.log.mark_failed(reason)
        job.state.in_flight = False
        self._fail(job.state, KafkaStorageError(f"{job.log.name} is offline: {reason}"))

    def close(self) -> None:
        """Wait for the fsyncs in flight (each at most until its timeout; not for those given up
        on) and release the ring or the threads. The event loop may already be closed; nothing
        is answered any more."""
        self._closing = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._ring is not None:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._ring.eventfd)
            self._wait_for_ring()
            self._ring.close()
        if self._executor is not None:
            stuck = any(job.given_up for job in self._in_flight.values())
            self._executor.shutdown(wait=not stuck)

    def _wait_for_ring(self) -> None:
        assert self._ring is not None
        while True:
            pending = [job for job in self._in_flight.values() if not job.given_up]
            if not pending:
                return
            remaining = min(job.started for job in pending) + self._flush_timeout_ms / 1000 - time.monotonic()
            if remaining <= 0:
                logger.error(
                    "closing with %d fsync(s) unfinished after log.flush.timeout.ms (%s)",
                    len(pending),
                    ", ".join(sorted({job.log.name for job in pending})),
                )
                return
            # poll, not select: a broker process holds three descriptors per partition, and
            # select() refuses any descriptor numbered 1024 or above
            waiter = select.poll()
            waiter.register(self._ring.eventfd, select.POLLIN)
            waiter.poll(min(remaining, 1.0) * 1000)
            self._ring.on_readable()
