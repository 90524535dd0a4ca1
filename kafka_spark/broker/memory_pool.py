"""queued.max.request.bytes: the memory every connection's requests may hold together.

Kafka bounds the bytes of the requests it holds in memory with one pool shared by every
connection (``queued.max.request.bytes``; unbounded by default there): a connection whose next
request does not fit is muted until memory comes back, so a flood of large or half-sent requests
slows clients down rather than exhausting the heap. pylog does the same with the receive buffers
of its frame decoders (protocol/frames.py), which grow as bytes arrive: this pool counts every
buffer larger than the 64 KiB chunk each connection reads small requests into — a large request
being received, one received and not answered yet (an acks=all produce keeps its frame until its
fsync), the spare buffers connections keep for reuse — from its allocation until Python frees it
(a weak reference tells), so a frame a handler still holds still counts. The chunks themselves
are a fixed cost per connection, as the sockets' kernel buffers are.

Like Kafka's pool it is not strict: an allocation succeeds while any memory is left, even if it
takes the pool past its size, so a request larger than the whole pool is still received once the
others are done. When nothing is left, :meth:`allocate` returns None; the connection stops reading
and :meth:`wait`\\ s, and waiters are called back in order as buffers are freed.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import weakref
from collections.abc import Callable

__all__ = ["DEFAULT_QUEUED_MAX_REQUEST_BYTES", "MemoryPool"]

#: Kafka's default is -1 (no bound). An embedded broker shares its process and machine, so pylog
#: bounds it: room for two requests of the largest size (socket.request.max.bytes, 100 MiB) and
#: then some. Set -1 for Kafka's behaviour.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 256 * 1024 * 1024


class PooledBuffer(bytearray):
    """A receive buffer counted by a :class:`MemoryPool` until it is freed."""

    __slots__ = ("__weakref__",)


class MemoryPool:
    """Bytes of receive buffers, bounded by ``capacity`` (-1: counted, never refused).

    Allocations and waits happen on the event loop ``loop``; a buffer may be freed on any thread
    (its count is given back under a lock, and waiters are called on the loop).
    """

    def __init__(self, capacity: int, loop: asyncio.AbstractEventLoop) -> None:
        self.capacity = capacity
        self.used = 0
        self.peak = 0
        self.refusals = 0  # allocations refused: how often connections waited for memory
        self._loop = loop
        # Reentrant: an allocation can set off a garbage collection that frees another buffer.
        self._lock = threading.RLock()
        # id of a weak reference -> (the reference, bytes): a bytearray is unhashable, so its
        # reference is too, and is kept here until its callback gives the bytes back.
        self._held: dict[int, tuple[weakref.ref[PooledBuffer], int]] = {}
        self._waiters: collections.OrderedDict[int, Callable[[], None]] = collections.OrderedDict()
        self._wake_pending = False

    @property
    def exhausted(self) -> bool:
        return 0 <= self.capacity <= self.used

    @property
    def tight(self) -> bool:
        """Over half used: connections stop keeping spare buffers."""
        return 0 <= self.capacity < 2 * self.used

    @property
    def waiting(self) -> int:
        """Connections waiting for memory."""
        return len(self._waiters)

    def allocate(self, size: int, force: bool = False) -> PooledBuffer | None:
        """A zeroed buffer of ``size`` bytes, counted until freed; None while the pool is
        exhausted, unless ``force`` (for bytes already received, which must go somewhere)."""
        if self.exhausted and not force:
            self.refusals += 1
            return None
        buffer = PooledBuffer(size)
        ref = weakref.ref(buffer, self._freed)
        with self._lock:
            self._held[id(ref)] = (ref, size)
            self.used += size
            self.peak = max(self.peak, self.used)
        return buffer

    def wait(self, key: int, callback: Callable[[], None]) -> None:
        """Call ``callback`` on the loop once memory is free again (once per ``key``, in order)."""
        self._waiters[key] = callback
        self._wake_soon()

    def cancel(self, key: int) -> None:
        self._waiters.pop(key, None)

    def _freed(self, ref: weakref.ref[PooledBuffer]) -> None:
        with self._lock:
            self.used -= self._held.pop(id(ref))[1]
        if self._waiters:
            self._wake_soon()

    def _wake_soon(self) -> None:
        if self._wake_pending or self.exhausted:
            return
        self._wake_pending = True
        try:
            self._loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the loop is closed: nobody is served any more
            self._wake_pending = False

    def _wake(self) -> None:
        self._wake_pending = False
        while self._waiters and not self.exhausted:
            _, callback = self._waiters.popitem(last=False)
            callback()
