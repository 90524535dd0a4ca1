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
from typing import Callable

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
_SQE_SIZE = 64
_CQE_SIZE = 16

_IORING_ENTER_GETEVENTS = 1
_U32 = struct.Struct("=I")
_SQE_HEAD = struct.Struct("=BBHiQQII Q")  # opcode flags ioprio fd off addr len fsync_flags user_data
_CQE = struct.Struct("=Qii")  # user_data res flags


class _SqOffsets(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in
                ("head", "tail", "ring_mask", "ring_entries", "flags", "dropped", "array", "resv1")] + [
        ("resv2", ctypes.c_uint64)]


class _CqOffsets(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in
                ("head", "tail", "ring_mask", "ring_entries", "overflow", "cqes", "flags", "resv1")] + [
        ("resv2", ctypes.c_uint64)]


class _Params(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in
                ("sq_entries", "cq_entries", "flags", "sq_thread_cpu", "sq_thread_idle", "features", "wq_fd")] + [
        ("resv", ctypes.c_uint32 * 3), ("sq_off", _SqOffsets), ("cq_off", _CqOffsets)]


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
    when ``eventfd`` is readable (the caller registers it with its selector).
    """

    def __init__(self, libc: ctypes.CDLL, ring_fd: int, params: _Params, eventfd: int,
                 maps: list[mmap.mmap], done: Callable[[int, OSError | None], None]) -> None:
        self._libc = libc
        self._fd = ring_fd
        self.eventfd = eventfd
        self._maps = maps
        self._done = done
        sq_ring, cq_ring, sqes = maps[0], maps[1], maps[2]
        sq, cq = params.sq_off, params.cq_off
        self._sq_ring = memoryview(sq_ring)
        self._cq_ring = memoryview(cq_ring)
        self._sqes = memoryview(sqes)
        self._sq_tail_at, self._sq_head_at, self._sq_array_at = sq.tail, sq.head, sq.array
        self._sq_mask = _U32.unpack_from(sq_ring, sq.ring_mask)[0]
        self._cq_head_at, self._cq_tail_at, self._cqes_at = cq.head, cq.tail, cq.cqes
        self._cq_mask = _U32.unpack_from(cq_ring, cq.ring_mask)[0]
        # Never more in flight than the completion ring holds, so no completion can be dropped
        # or overwrite one not read yet.
        self.capacity = min(params.sq_entries, params.cq_entries)
        self.in_flight = 0
        self._closed = False

    @classmethod
    def create(cls, done: Callable[[int, OSError | None], None], entries: int = 64) -> FsyncRing | None:
        """A ring, or None (logged at debug) where this kernel or sandbox does not offer io_uring."""
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
            if libc.syscall(ctypes.c_long(_SYS_IO_URING_REGISTER), ctypes.c_long(ring_fd),
                            ctypes.c_long(_IORING_REGISTER_EVENTFD), ctypes.byref(registered), ctypes.c_long(1)) < 0:
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

    def submit_fsyncs(self, jobs: list[tuple[int, int]]) -> None:
        """Submit ``(fd, user_data)`` fsyncs with one system call; at most ``capacity - in_flight``.

        Each ``fd`` must stay open until its completion has been reported.
        """
        if self._closed:
            raise OSError("the fsync ring is closed")
        if len(jobs) > self.capacity - self.in_flight:
            raise ValueError(f"{len(jobs)} fsyncs exceed the ring's free room of {self.capacity - self.in_flight}")
        tail = _U32.unpack_from(self._sq_ring, self._sq_tail_at)[0]
        for fd, user_data in jobs:
            index = tail & self._sq_mask
            at = index * _SQE_SIZE
            self._sqes[at:at + _SQE_SIZE] = bytes(_SQE_SIZE)
            _SQE_HEAD.pack_into(self._sqes, at, _IORING_OP_FSYNC, 0, 0, fd, 0, 0, 0, 0, user_data)
            _U32.pack_into(self._sq_ring, self._sq_array_at + 4 * index, index)
            tail = (tail + 1) & 0xFFFFFFFF
        # The kernel reads the entries in this thread's io_uring_enter, after this store.
        _U32.pack_into(self._sq_ring, self._sq_tail_at, tail)
        submitted = self._enter(len(jobs), 0, 0)
        if submitted != len(jobs):
            error = ctypes.get_errno() if submitted < 0 else 0
            # Entries the kernel did not take are withdrawn, so the ring stays consistent.
            head = _U32.unpack_from(self._sq_ring, self._sq_head_at)[0]
            _U32.pack_into(self._sq_ring, self._sq_tail_at, head)
            taken = max(submitted, 0)
            self.in_flight += taken
            for fd, user_data in jobs[taken:]:
                self._done(user_data, OSError(error, f"io_uring_enter: {os.strerror(error) if error else 'short submit'}"))
            return
        self.in_flight += len(jobs)

    def _enter(self, to_submit: int, min_complete: int, flags: int) -> int:
        return self._libc.syscall(ctypes.c_long(_SYS_IO_URING_ENTER), ctypes.c_long(self._fd), ctypes.c_long(to_submit),
                                  ctypes.c_long(min_complete), ctypes.c_long(flags), None, ctypes.c_long(0))

    def drain(self) -> None:
        """Block until every fsync in flight has completed, reporting each."""
        while self.in_flight and not self._closed:
            if self._enter(0, self.in_flight, _IORING_ENTER_GETEVENTS) < 0 and ctypes.get_errno() != errno.EINTR:
                raise OSError(ctypes.get_errno(), "io_uring_enter(GETEVENTS)")
            self.on_readable()

    def on_readable(self) -> None:
        """Report every completion posted so far."""
        try:
            os.eventfd_read(self.eventfd)
        except BlockingIOError:
            pass
        # The eventfd read above orders the loads below after the kernel's posting.
        head = _U32.unpack_from(self._cq_ring, self._cq_head_at)[0]
        tail = _U32.unpack_from(self._cq_ring, self._cq_tail_at)[0]
        finished = []
        while head != tail:
            user_data, result, _ = _CQE.unpack_from(self._cq_ring, self._cqes_at + (head & self._cq_mask) * _CQE_SIZE)
            finished.append((user_data, None if result >= 0 else OSError(-result, os.strerror(-result))))
            head = (head + 1) & 0xFFFFFFFF
        _U32.pack_into(self._cq_ring, self._cq_head_at, head)
        self.in_flight -= len(finished)
        for user_data, error in finished:
            self._done(user_data, error)

    def close(self) -> None:
        """Release the ring; call ``drain`` first, or completions still in flight are not reported."""
        if self._closed:
            return
        self._closed = True
        self._sq_ring.release()
        self._cq_ring.release()
        self._sqes.release()
        for m in {id(m): m for m in self._maps}.values():
            m.close()
        os.close(self.eventfd)
        os.close(self._fd)
