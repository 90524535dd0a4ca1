"""A byte range of a file, to go to a socket without passing through Python (Kafka's FileRecords).

The broker answers a Fetch with stored batches as they lie in a segment file. Read into memory,
each megabyte is copied twice on its way out: ``pread`` into a Python buffer, then ``send`` into
the socket. A :class:`FileRegion` names the range instead, and the connection hands it to the
kernel with ``sendfile``: the socket takes the page cache's pages, and the broker copies nothing.
Where the range cannot go out that way (a TLS connection, a socket whose buffer is full, a
response joined into one bytes object) it is read with :meth:`FileRegion.read`.

The region holds a duplicate of the segment's descriptor, taken when the Fetch is answered: the
segment may be deleted (retention) or replaced (the cleaner) before the answer is written, and
the duplicate keeps the file's data readable until the region is closed. A file truncated under
a region (a follower's log cut back) is detected: :meth:`read` and :meth:`send_to` raise
:class:`RegionTruncatedError` rather than let a response go out shorter than its length says.
"""

from __future__ import annotations

import os


class RegionTruncatedError(OSError):
    """The file ended before the region did: it was truncated after the region was taken."""


class FileRegion:
    """``size`` bytes of a file from ``position``; owns ``fd`` (a duplicate) until :meth:`close`.

    ``len()`` is its size; :meth:`send_to` writes what a non-blocking socket takes now and
    :meth:`read` returns the bytes not sent yet. Not thread-safe (used on the broker's loop)."""

    __slots__ = ("_fd", "position", "size", "sent")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self._fd = os.dup(fd)
        self.position = position
        self.size = size
        self.sent = 0  # bytes already handed to a socket

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRegion(fd={self._fd}, position={self.position}, size={self.size}, sent={self.sent})"

    def send_to(self, socket_fd: int) -> bool:
        """``sendfile`` the rest of the region into ``socket_fd`` (non-blocking); True once all of
        it is sent, False when the socket would block first (the rest is still to send)."""
        while self.sent < self.size:
            try:
                count = os.sendfile(socket_fd, self._fd, self.position + self.sent, self.size - self.sent)
            except BlockingIOError:
                return False
            if count == 0:
                raise RegionTruncatedError(
                    f"file region ends at byte {self.position + self.sent} of its file, "
                    f"{self.size - self.sent} bytes short: the file was truncated under a fetch"
                )
            self.sent += count
        return True

    def read(self) -> bytes:
        """The bytes of the region not sent yet."""
        start, wanted = self.position + self.sent, self.size - self.sent
        data = os.pread(self._fd, wanted, start)
        if len(data) < wanted:  # a short pread of a regular file is its end
            raise RegionTruncatedError(
                f"file region ends at byte {start + len(data)} of its file, {wanted - len(data)} bytes "
                "short: the file was truncated under a fetch"
            )
        return data

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # a response dropped unwritten (the connection closed) lets go of its file
        self.close()


def materialize(data: bytes | memoryview | FileRegion) -> bytes | memoryview:
    """``data`` as bytes: a region is read (and closed)."""
    if type(data) is FileRegion:
        try:
            return data.read()
        finally:
            data.close()
    return data  # type: ignore[return-value]
