"""fsync through io_uring: the kernel runs it and signals an eventfd, with no Python thread involved.

Group commit (durability.py) used to run each fsync on a thread pool. The fsync itself releases
the GIL, but the worker thread has to take the GIL to start the job and again to hand the result
back, and under load each of those hand-offs costs a futex wake and a context switch on both
threads. Measured under kcat's produce benchmark, an executor job doing nothing cost as much
throughput as the fsync itself. With io_uring the event loop writes a submission entry into a
shared ring and makes one ``io_uring_enter`` call; the kernel runs the fsync on its own worker and
posts a completion, and a registered eventfd wakes the loop through the selector it already polls.

Only the few pieces fsync needs are bound, with ctypes and mmap (Linux's io_uring ABI, which is
the same on every architecture). Submission and completion happen on the event-loop thread only.
``FsyncRing.create()`` returns None wherever io_uring cannot be used (not Linux, an old kernel,
``kernel.io_uring_disabled``, a seccomp profile that forbids it); the caller then keeps its thread
pool.

Completions beyond what the completion queue (CQ) holds: with IORING_FEAT_NODROP (required here)
the kernel keeps them in an overflow list of its own and raises IORING_SQ_CQ_OVERFLOW in the
submission ring's flags; they reach the CQ only when ``io_uring_enter`` is called with
IORING_ENTER_GETEVENTS, and the eventfd is not signalled for them (no CQ tail moved). So every
reap ends by looking at that flag and, while it is up, flushing the list into the CQ and reading
on; and the owner also reaps on a timer (durability.py), which catches whatever a missed wake-up
would leave behind. More fsyncs may be in flight than the CQ holds: the ring's size bounds what
waits in shared memory, not the work (the kernel's bounded io-wq pool runs at most
min(entries, 4 x CPUs) fsyncs at once whatever is queued).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import mmap
import os
import struct
import sys
from collections.abc import Callable

__all__ = ["FsyncRing"]

log = logging.getLogger("kafka_spark.broker")

_SYS_IO_URING_SETUP = 425  # one number on every architecture (asm-generic and x86 alike)
_SYS_IO_URING_ENTER = 426
_SYS_IO_URING_REGISTER = 427
_IORING_OFF_SQ_RING = 0
_IORING_OFF_CQ_RING = 0x8000000
_IORING_OFF_SQES = 0x10000000
_IORING_FEAT_SINGLE_MMAP = 1 << 0
_IORING_FEAT_NODROP = 1 << 1
_IORING_REGISTER_EVENTFD = 4
_IORING_OP_FSYNC = 3
_IORING_SQ_CQ_OVERFLOW = 1 << 1  # in the submission ring's flags: completions wait in the overflow list
_SQE_SIZE = 64
_CQE_SIZE = 16

_IORING_ENTER_GETEVENTS = 1
#: A submission refused for now (older kernels refuse while completions overflow; any may run out
#: of request memory): reap, then try again.
_RETRY_ERRNOS = frozenset({errno.EBUSY, errno.EAGAIN, errno.EINTR})
_SQE_HEAD = struct.Struct("=BBHiQQII Q")  # opcode flags ioprio fd off addr len fsync_flags user_data
_CQE = struct.Struct("=Qii")  # user_data res flags


class _SqOffsets(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint32)
        for name in ("head", "tail", "ring_mask", "ring_entries", "flags", "dropped", "array", "resv1")
    ] + [("resv2", ctypes.c_uint64)]


class _CqOffsets(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint32)
        for name in ("head", "tail", "ring_mask", "ring_entries", "overflow", "cqes", "flags", "resv1")
    ] + [("resv2", ctypes.c_uint64)]


class _Params(ctypes.Structure):
    _fields_ = [
        *(
            (name, ctypes.c_uint32)
            for name in ("sq_entries", "cq_entries", "flags", "sq_thread_cpu", "sq_thread_idle", "features", "wq_fd")
        ),
        ("resv", ctypes.c_uint32 * 3),
        ("sq_off", _SqOffsets),
        ("cq_off", _CqOffsets),
    ]


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.syscall.restype = ctypes.c_long
        return libc
    except (OSError, AttributeError):
        return None


class FsyncRing:
    """fsyncs submitted from the event loop, each finishing with ``done(user_data, error)``.

    ``error`` is None when the file is on disk, else an OSError. ``on_readable`` must be called
    when ``eventfd`` is readable (the caller registers it with its selector), and ``reap`` now
    and then besides (see the module's docstring). Not thread-safe: one thread submits and reaps.
    """

    def __init__(
        self,
        libc: ctypes.CDLL,
        ring_fd: int,
        params: _Params,
        eventfd: int,
        maps: list[mmap.mmap],
        done: Callable[[int, OSError | None], None],
    ) -> None:
        self._libc = libc
        self._fd = ring_fd
        self.eventfd = eventfd
        self._maps = maps
        self._done = done
        sq_ring, cq_ring, sqes = maps[0], maps[1], maps[2]
        sq, cq = params.sq_off, params.cq_off
        # The rings' indices as 32-bit words: each load and store is one aligned instruction. The
        # kernel's io-wq workers read the CQ head while this thread writes it; written a byte at a
        # time (as struct.pack_into does) a head crossing a 256 boundary is briefly 248 behind,
        # the kernel takes the CQ for full and parks the completion in its overflow list, and from
        # then on every completion goes there, with no eventfd signal.
        self._sq_words = memoryview(sq_ring).cast("I")
        self._cq_words = memoryview(cq_ring).cast("I")
        self._cq_ring = memoryview(cq_ring)
        self._sqes = memoryview(sqes)
        self._sq_tail, self._sq_head, self._sq_flags = sq.tail // 4, sq.head // 4, sq.flags // 4
        self._sq_array = sq.array // 4
        self._sq_mask = self._sq_words[sq.ring_mask // 4]
        self._cq_head, self._cq_tail, self._cqes_at = cq.head // 4, cq.tail // 4, cq.cqes
        self._cq_dropped = cq.overflow // 4  # completions the kernel could not keep at all
        self._cq_mask = self._cq_words[cq.ring_mask // 4]
        self.sq_entries = params.sq_entries  # submissions per io_uring_enter
        self.cq_entries = params.cq_entries  # completions the shared ring holds
        self.in_flight = 0
        #: Times completions were found waiting in the kernel's overflow list, and how many were
        #: reaped from it; completions the kernel dropped (it could not allocate their entry).
        self.overflows = 0
        self.overflow_completions = 0
        self.dropped = 0
        self._closed = False

    @classmethod
    def create(cls, done: Callable[[int, OSError | None], None], entries: int = 256) -> FsyncRing | None:
        """A ring of ``entries`` submission entries (a power of two up to 32768; the kernel gives
        the completion queue twice as many), or None (logged at debug) where this kernel or
        sandbox does not offer io_uring."""
        if not sys.platform.startswith("linux") or os.environ.get("PYLOG_NO_IO_URING"):
            return None
        libc = _libc()
        if libc is None:
            return None
        params = _Params()
        ring_fd = libc.syscall(ctypes.c_long(_SYS_IO_URING_SETUP), ctypes.c_long(entries), ctypes.byref(params))
        if ring_fd < 0:
            log.debug("io_uring unavailable (%s); fsyncs run on threads", os.strerror(ctypes.get_errno()))
            return None
        maps: list[mmap.mmap] = []
        eventfd = -1
        try:
            if not params.features & _IORING_FEAT_NODROP:
                raise OSError("io_uring without NODROP (kernel older than 5.5)")
            sq_size = params.sq_off.array + params.sq_entries * 4
            cq_size = params.cq_off.cqes + params.cq_entries * _CQE_SIZE
            if params.features & _IORING_FEAT_SINGLE_MMAP:
                shared = mmap.mmap(ring_fd, max(sq_size, cq_size), offset=_IORING_OFF_SQ_RING)
                maps += [shared, shared]
            else:
                maps.append(mmap.mmap(ring_fd, sq_size, offset=_IORING_OFF_SQ_RING))
                maps.append(mmap.mmap(ring_fd, cq_size, offset=_IORING_OFF_CQ_RING))
            maps.append(mmap.mmap(ring_fd, params.sq_entries * _SQE_SIZE, offset=_IORING_OFF_SQES))
            eventfd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
            registered = ctypes.c_int32(eventfd)
            if (
                libc.syscall(
                    ctypes.c_long(_SYS_IO_URING_REGISTER),
                    ctypes.c_long(ring_fd),
                    ctypes.c_long(_IORING_REGISTER_EVENTFD),
                    ctypes.byref(registered),
                    ctypes.c_long(1),
                )
                < 0
            ):
                raise OSError(ctypes.get_errno(), "io_uring_register(EVENTFD)")
            return cls(libc, ring_fd, params, eventfd, maps, done)
        except (OSError, ValueError) as error:
            log.debug("io_uring unusable (%s); fsyncs run on threads", error)
            for m in {id(m): m for m in maps}.values():
                m.close()
            if eventfd >= 0:
                os.close(eventfd)
            os.close(ring_fd)
            return None

    def submit_fsyncs(self, jobs: list[tuple[int, int]]) -> int:
        """Submit ``(fd, user_data)`` fsyncs, ``sq_entries`` per system call; how many the kernel
        took, from the first. The rest it refused for now (it is out of request memory, or an
        older kernel will not take work while completions overflow): submit them again later.
        Raises OSError when the ring itself fails. Each ``fd`` must stay open until its
        completion has been reported.
        """
        if self._closed:
            raise OSError("the fsync ring is closed")
        if self.overflowing:  # completions wait beyond the CQ: take them before adding more work
            self.reap()
        taken = 0
        refusals = 0
        while taken < len(jobs):
            chunk = jobs[taken : taken + self.sq_entries]
            submitted = self._submit(chunk)
            if submitted < 0:
                error = -submitted
                if error not in _RETRY_ERRNOS:
                    raise OSError(error, f"io_uring_enter: {os.strerror(error)}")
                refusals += 1
                if refusals > 3:
                    break
                self.reap()  # makes room: flushes overflowed completions to the CQ and reads them
                continue
            taken += submitted
            self.in_flight += submitted
            if submitted < len(chunk):
                break
        return taken

    def _submit(self, chunk: list[tuple[int, int]]) -> int:
        """Write ``chunk`` into the submission ring and enter it: how many the kernel took, or
        -errno. Entries it did not take are withdrawn, so the ring stays consistent."""
        words = self._sq_words
        tail = words[self._sq_tail]
        for fd, user_data in chunk:
            index = tail & self._sq_mask
            at = index * _SQE_SIZE
            self._sqes[at : at + _SQE_SIZE] = bytes(_SQE_SIZE)
            _SQE_HEAD.pack_into(self._sqes, at, _IORING_OP_FSYNC, 0, 0, fd, 0, 0, 0, 0, user_data)
            words[self._sq_array + index] = index
            tail = (tail + 1) & 0xFFFFFFFF
        # The kernel reads the entries in this thread's io_uring_enter, after this store.
        words[self._sq_tail] = tail
        submitted = self._enter(len(chunk), 0, 0)
        result = submitted if submitted >= 0 else -ctypes.get_errno()
        if submitted != len(chunk):
            words[self._sq_tail] = words[self._sq_head]
        return result

    def _enter(self, to_submit: int, min_complete: int, flags: int) -> int:
        return self._libc.syscall(
            ctypes.c_long(_SYS_IO_URING_ENTER),
            ctypes.c_long(self._fd),
            ctypes.c_long(to_submit),
            ctypes.c_long(min_complete),
            ctypes.c_long(flags),
            None,
            ctypes.c_long(0),
        )

    def drain(self) -> None:
        """Block until every fsync in flight has completed, reporting each."""
        while self.in_flight and not self._closed:
            if self._enter(0, 1, _IORING_ENTER_GETEVENTS) < 0 and ctypes.get_errno() != errno.EINTR:
                raise OSError(ctypes.get_errno(), "io_uring_enter(GETEVENTS)")
            self.reap()

    def on_readable(self) -> None:
        """The eventfd fired: report every completion posted so far."""
        try:
            os.eventfd_read(self.eventfd)
        except BlockingIOError:
            pass
        # The eventfd read above orders the loads in reap after the kernel's posting.
        self.reap()

    @property
    def overflowing(self) -> bool:
        """Completions wait in the kernel's overflow list (the next reap takes them)."""
        return bool(self._sq_words[self._sq_flags] & _IORING_SQ_CQ_OVERFLOW)

    def reap(self) -> int:
        """Report every completion the kernel has, those in its overflow list included; how many.

        The overflow flag is looked at after the CQ is read: a completion that overflows later
        does so because the CQ filled up again, and the completions that filled it signalled the
        eventfd, so the next ``on_readable`` comes and looks again.
        """
        reaped = self._read_cq()
        while self.overflowing:
            # GETEVENTS with nothing to wait for: the kernel moves what fits into the CQ and returns.
            if self._enter(0, 0, _IORING_ENTER_GETEVENTS) < 0 and ctypes.get_errno() not in _RETRY_ERRNOS:
                raise OSError(ctypes.get_errno(), "io_uring_enter(GETEVENTS)")
            flushed = self._read_cq()
            if not flushed:
                break  # nothing moved (yet): the next reap tries again
            self.overflows += 1
            self.overflow_completions += flushed
            reaped += flushed
        dropped = self._cq_words[self._cq_dropped]
        if dropped != self.dropped:
            # Their fsyncs never report; the owner's timeout takes their partitions offline.
            log.error(
                "the kernel dropped %d fsync completion(s) it could not keep", (dropped - self.dropped) & 0xFFFFFFFF
            )
            self.dropped = dropped
        return reaped

    def _read_cq(self) -> int:
        head = self._cq_words[self._cq_head]
        tail = self._cq_words[self._cq_tail]
        finished = []
        while head != tail:
            user_data, result, _ = _CQE.unpack_from(self._cq_ring, self._cqes_at + (head & self._cq_mask) * _CQE_SIZE)
            finished.append((user_data, None if result >= 0 else OSError(-result, os.strerror(-result))))
            head = (head + 1) & 0xFFFFFFFF
        if not finished:
            return 0
        self._cq_words[self._cq_head] = head  # one store: see __init__
        self.in_flight -= len(finished)
        for user_data, error in finished:
            self._done(user_data, error)
        return len(finished)

    def close(self) -> None:
        """Release the ring; call ``drain`` first, or completions still in flight are not reported."""
        if self._closed:
            return
        self._closed = True
        for view in (self._sq_words, self._cq_words, self._cq_ring, self._sqes):
            view.release()
        for m in {id(m): m for m in self._maps}.values():
            m.close()
        os.close(self.eventfd)
        os.close(self._fd)
