"""Length-prefixed frames: ``int32 size`` followed by ``size`` bytes (header + body)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafka_spark.broker.memory_pool import MemoryPool

#: Kafka's ``socket.request.max.bytes`` default (100 MiB). A larger declared size is an attack or
#: a client speaking another protocol (HTTP, TLS hello), never a request to honour.
MAX_FRAME_BYTES = 104_857_600

_SIZE = struct.Struct(">i")


class FrameError(ValueError):
    """The byte stream is not Kafka framing; the connection must be closed."""


class FrameDecoder:
    """Incremental frame splitter that receives into the frames' own memory. Not thread-safe:
    one per connection.

    Used as asyncio's BufferedProtocol is: :meth:`get_buffer` gives the memory the next read goes
    into, :meth:`received` says how many bytes arrived and returns every frame now complete, in
    order, as read-only memoryviews (without the size prefix). Nothing joins chunks: a frame is
    read by the socket into the buffer it is parsed from and written to disk from.

    Memory follows the bytes received, never the size a frame declares: a frame starts in a
    64 KiB chunk, and each time its buffer fills the rest moves to one that holds what has
    arrived of it — here and, if ``pending`` tells, waiting in the socket — or, if the frame
    needs more, up to GROWTH times what is here (capped at the frame). While the pool is less than
    half used, a connection may also have at once as much as the largest frame it has sent whole
    before, and after handing out frames the next one starts in a buffer that size (up to
    KEEP_BYTES, what an idle connection may keep). So a client
    streaming large requests gets its whole frame's buffer after its first large request (one copy
    of 64 KiB), and later ones are read whole into their buffer, with no copy and one read fewer, as
    if the declared size had been trusted; a connection that
    declares 100 MB and stalls holds at most twice what it sent (or, with memory to spare, what
    it sent in one piece before). Buffers
    above the chunk come from the broker's :class:`~kafka_spark.broker.memory_pool.MemoryPool`
    (queued.max.request.bytes); when it refuses, the decoder is :attr:`starved` — no room for the
    next read — until :meth:`make_room` succeeds, and the connection stops reading meanwhile.

    A buffer that frames were handed out of is never written again (the views stay valid as long
    as a request holds them); what follows them moves to another buffer. That is one of the
    previous buffers again once nothing refers to its frames any more (bytearray refuses to
    resize while a view of it exists, which is the test), and one large enough for the whole
    frame is taken at once, so a connection streaming large requests alternates between two
    buffers instead of allocating, zero-filling and growing one per request.

    :meth:`feed` is the same for callers that already hold the bytes (it copies them in).
    """

    __slots__ = ("_buffer", "_start", "_end", "_max_frame_bytes", "_spares", "_pool", "_pending", "_proven")

    #: Receive buffer size between frames: a read of many small requests at once.
    CHUNK = 64 * 1024
    #: Buffers kept for reuse: one a request may still hold while the next one arrives, and the
    #: small one the next request's first bytes went into.
    SPARES = 2
    #: Larger buffers are rare enough to give back rather than keep as spares.
    KEEP_BYTES = 16 * 1024 * 1024
    #: A frame's buffer is at most this many times what has arrived of it.
    GROWTH = 2

    def __init__(
        self,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        pool: MemoryPool | None = None,
        pending: Callable[[], int] | None = None,
    ) -> None:
        """``pending``: the bytes waiting in the socket (FIONREAD), asked only when a frame outgrows
        its buffer."""
        self._buffer = bytearray(self.CHUNK)
        self._start = 0  # first byte not yet handed out as a frame
        self._end = 0  # first byte not yet received
        self._max_frame_bytes = max_frame_bytes
        self._spares: list[bytearray] = []  # the previous buffers, reused once no view of them is left
        self._pool = pool
        self._pending = pending
        self._proven = 0  # the largest frame this connection has sent whole, size prefix included

    def get_buffer(self) -> memoryview:
        """Where the next read goes (never empty: a starved decoder takes memory beyond the pool
        rather than fail a read its connection had no time to stop)."""
        if self._end == len(self._buffer):
            self.make_room(force=True)
        return memoryview(self._buffer)[self._end :]

    def received(self, count: int) -> list[memoryview]:
        """``count`` bytes were written at the start of the last :meth:`get_buffer`; the frames
        now complete. Raises :class:`FrameError` for a size no Kafka request has or one above
        the limit (socket.request.max.bytes)."""
        self._end += count
        frames: list[memoryview] = []
        buffer, position, end = self._buffer, self._start, self._end
        view = None
        while end - position >= 4:
            (size,) = _SIZE.unpack_from(buffer, position)
            self._check(size)
            if end - position - 4 < size:
                break
            view = view or memoryview(buffer).toreadonly()  # handlers read requests, never write them
            frames.append(view[position + 4 : position + 4 + size])
            position += 4 + size
            if size >= self._proven:
                self._proven = size + 4
        self._start = position
        if frames:
            self._move(self._capacity(), force=True)  # the handed-out frames keep this buffer
        elif end == len(buffer):
            self.make_room()
        return frames

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """Every frame completed by ``data``."""
        frames: list[memoryview] = []
        view = memoryview(data)
        while view:
            target = self.get_buffer()
            count = min(len(target), len(view))
            target[:count] = view[:count]
            view = view[count:]
            frames += self.received(count)
        return frames

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return self._end - self._start

    @property
    def starved(self) -> bool:
        """No room for the next read: the memory pool refused a larger buffer (see make_room)."""
        return self._end == len(self._buffer)

    def make_room(self, force: bool = False) -> bool:
        """Continue the frame being received in a larger buffer if this one is full; False when
        the pool refuses (and not ``force``)."""
        if self._end < len(self._buffer):
            return True
        return self._move(self._capacity(), force)

    def release(self) -> None:
        """Drop every buffer (the connection is gone)."""
        self._buffer = bytearray(0)
        self._start = self._end = 0
        self._spares.clear()

    def _frame_bytes(self) -> int:
        """Bytes (from ``_start``) the frame being received occupies, size prefix included; 4
        while its size is not known yet."""
        if self._end - self._start < 4:
            return 4
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        self._check(size)
        return 4 + size

    def _capacity(self) -> int:
        """The size of buffer to continue in: the whole frame being received, but at most what has
        arrived of it (here and in the socket) or GROWTH times what is here (at least a chunk)."""
        wanted = self._frame_bytes()
        here = self._end - self._start
        tight = self._pool is not None and self._pool.tight
        if here < 4 and not tight:
            # The next frame's size is not known yet: make room for one as large as the largest
            # this connection has sent whole, so that it is read in one piece, without a copy.
            # Up to KEEP_BYTES: an idle connection holds this buffer, as it may hold its spares.
            return max(min(self._proven, self.KEEP_BYTES), self.CHUNK)
        allowed = self.GROWTH * here
        if wanted > allowed and self._proven > allowed and not tight:
            allowed = self._proven  # it has sent this much whole before, and memory is plentiful
        if wanted > allowed and wanted > self.CHUNK and self._pending is not None:
            allowed = max(allowed, here + self._pending())
        return max(min(wanted, allowed), self.CHUNK)

    def _check(self, size: int) -> None:
        if size > self._max_frame_bytes:
            raise FrameError(f"request of {size} bytes is larger than socket.request.max.bytes={self._max_frame_bytes}")
        if size < 8:
            # 8 bytes is the smallest possible request header (api key, version, correlation id).
            raise FrameError(f"frame size {size} is below 8 bytes, the smallest request: not a Kafka request")

    def _move(self, capacity: int, force: bool) -> bool:
        """Continue in a buffer of at least ``capacity`` bytes holding the bytes not yet handed
        out; False when the pool refuses one (the decoder then stays where it is)."""
        held = self._end - self._start
        old = self._buffer
        fresh = self._spare(max(self._frame_bytes(), capacity)) or self._spare(capacity)
        if fresh is None:
            size = -(-capacity // self.CHUNK) * self.CHUNK  # rounded up, so the next request, a bit larger, fits
            if size <= self.CHUNK or self._pool is None:
                fresh = bytearray(size)
            else:
                fresh = self._pool.allocate(size)
                if fresh is None and force:
                    # The bytes must go somewhere: room for them and a little more, never an empty read.
                    fresh = self._pool.allocate(-(-(held + 1) // self.CHUNK) * self.CHUNK, force=True)
                if fresh is None:
                    return False
        fresh[:held] = memoryview(old)[self._start : self._end]
        self._buffer, self._start, self._end = fresh, 0, held
        if len(old) <= self.CHUNK or (len(old) <= self.KEEP_BYTES and not (self._pool and self._pool.tight)):
            self._spares.append(old)
            if len(self._spares) > self.SPARES:
                del self._spares[0]
        return True

    def _spare(self, capacity: int) -> bytearray | None:
        for index, spare in enumerate(self._spares):
            if len(spare) >= capacity and _unshared(spare):
                return self._spares.pop(index)
        return None


def _unshared(buffer: bytearray) -> bool:
    """True when no memoryview of ``buffer`` exists: a bytearray with views refuses to resize."""
    try:
        last = buffer.pop()  # a shrink by one byte never reallocates; the append restores it
    except BufferError:
        return False
    buffer.append(last)
    return True


def encode_frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
