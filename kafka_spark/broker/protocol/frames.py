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
    """Incremental frame splitter. Not thread-safe: one per connection.

    ``feed(data)`` returns every complete frame (without its size prefix) now available, in
    order, as memoryviews over the received bytes; a partial frame stays buffered until more
    bytes arrive. A large frame arriving in many reads is joined once (one copy), never grown
    byte by byte.
    """

    __slots__ = ("_chunks", "_buffered", "_needed", "_max_frame_bytes")

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._needed = 4  # bytes the head of the buffer needs before it can be split further
        self._max_frame_bytes = max_frame_bytes

    def feed(self, data: bytes) -> list[memoryview]:
        if self._chunks:
            self._chunks.append(data)
            self._buffered += len(data)
            if self._buffered < self._needed:
                return []
            data = b"".join(self._chunks)
            self._chunks = []
            self._buffered = 0
        view = memoryview(data)
        frames: list[memoryview] = []
        position = 0
        end = len(data)
        self._needed = 4
        while end - position >= 4:
            (size,) = _SIZE.unpack_from(data, position)
            if size < 8 or size > self._max_frame_bytes:
                # 8 bytes is the smallest possible request header (api key, version, correlation id).
                raise FrameError(
                    f"frame size {size} outside [8, {self._max_frame_bytes}]: not a Kafka request"
                )
            if end - position - 4 < size:
                self._needed = 4 + size
                break
            frames.append(view[position + 4 : position + 4 + size])
            position += 4 + size
        if position < end:
            self._chunks = [data[position:]]
            self._buffered = end - position
        return frames

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return self._buffered


def encode_frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload
