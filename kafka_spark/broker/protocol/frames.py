"""Length-prefixed frames: ``int32 size`` followed by ``size`` bytes (header + body)."""

from __future__ import annotations

import struct

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
    order, as read-only memoryviews (without the size prefix). Once a frame's size prefix has arrived the
    buffer is made large enough for the whole frame, so a megabyte produce request is read by the
    socket straight into the buffer it is parsed from and written to disk from; nothing joins
    chunks. A buffer that frames were handed out of is never written again (the views stay
    valid as long as a request holds them); what follows them moves to another buffer. That is
    the previous buffer again once nothing refers to its frames any more (bytearray refuses to
    resize while a view of it exists, which is the test), so a connection streaming large
    requests alternates between two buffers instead of allocating and zero-filling one per
    request.

    :meth:`feed` is the same for callers that already hold the bytes (it copies them in).
    """

    __slots__ = ("_buffer", "_start", "_end", "_max_frame_bytes", "_spares")

    #: Receive buffer size between frames: a read of many small requests at once.
    CHUNK = 64 * 1024
    #: Frames up to this size get their whole buffer at once; larger ones (up to the limit) grow
    #: by doubling as bytes arrive, so a declared size alone cannot make the broker allocate 100 MB.
    EAGER_BYTES = 16 * 1024 * 1024
    #: Buffers kept for reuse: one a request may still hold while the next one arrives, and the
    #: small one the next request's first bytes went into.
    SPARES = 2

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray(self.CHUNK)
        self._start = 0  # first byte not yet handed out as a frame
        self._end = 0  # first byte not yet received
        self._max_frame_bytes = max_frame_bytes
        self._spares: list[bytearray] = []  # the previous buffers, reused once no view of them is left

    def get_buffer(self) -> memoryview:
        """Where the next read goes (never empty)."""
        if self._end == len(self._buffer) or len(self._buffer) < min(self._frame_bytes(), self.EAGER_BYTES):
            self._move(self._capacity())
        return memoryview(self._buffer)[self._end :]

    def received(self, count: int) -> list[memoryview]:
        """``count`` bytes were written at the start of the last :meth:`get_buffer`; the frames
        now complete. Raises :class:`FrameError` for a size no Kafka request has."""
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
        self._start = position
        if frames:
            self._move(self._capacity())  # the handed-out frames keep this buffer
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

    def _frame_bytes(self) -> int:
        """Bytes (from ``_start``) the frame being received occupies, size prefix included; 4
        while its size is not known yet."""
        if self._end - self._start < 4:
            return 4
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        self._check(size)
        return 4 + size

    def _capacity(self) -> int:
        """The size of buffer to continue in: the whole frame being received, if known and not
        above EAGER_BYTES, else double the current buffer (at least EAGER_BYTES)."""
        wanted = self._frame_bytes()
        if wanted > self.EAGER_BYTES:
            wanted = min(wanted, max(2 * len(self._buffer), self.EAGER_BYTES))
        return max(wanted, self.CHUNK)

    def _check(self, size: int) -> None:
        if size < 8 or size > self._max_frame_bytes:
            # 8 bytes is the smallest possible request header (api key, version, correlation id).
            raise FrameError(f"frame size {size} outside [8, {self._max_frame_bytes}]: not a Kafka request")

    def _move(self, capacity: int) -> None:
        """Continue in a buffer of at least ``capacity`` bytes holding the bytes not yet handed out."""
        held = self._end - self._start
        old = self._buffer
        for index, spare in enumerate(self._spares):
            if len(spare) >= capacity and _unshared(spare):
                fresh = self._spares.pop(index)
                break
        else:
            # Rounded up, so that the next request, a few bytes larger, still fits.
            fresh = bytearray(-(-capacity // self.CHUNK) * self.CHUNK)
        fresh[:held] = memoryview(old)[self._start : self._end]
        self._buffer, self._start, self._end = fresh, 0, held
        if len(old) <= self.EAGER_BYTES:  # beyond that a buffer is rare enough to give back
            self._spares.append(old)
            if len(self._spares) > self.SPARES:
                del self._spares[0]


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
