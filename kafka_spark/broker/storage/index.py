"""Sparse indexes of one segment: offset -> file position (.index) and timestamp -> offset (.timeindex).

File formats, as Kafka's (big endian, offsets relative to the segment's base offset):

* ``.index``: 8-byte entries ``int32 relative_offset, int32 position``. An entry is added when more
  than ``index.interval.bytes`` of log were written since the previous one, keyed (as Kafka does) by
  the LAST offset of the batch that starts at ``position``. Offsets and positions both increase.
* ``.timeindex``: 12-byte entries ``int64 timestamp, int32 relative_offset``: the largest timestamp
  seen so far in the segment and the last offset of the batch that carried it; timestamps increase.

Both are kept in memory as two parallel ``array``s (binary search with ``bisect``); new entries
reach their file when the index is flushed or closed (the segment's flush, its roll, the broker's
shutdown), not one ``pwrite`` per entry: as with Kafka's memory-mapped indexes, no system call per
append. That is safe because the file is only ever read back without a rebuild for a segment below
the log's recovery point, and a segment is flushed, indexes included, before the recovery point
moves past it (``Log._roll``); the active segment is always rebuilt from the log at open. They are
derived data: a missing or inconsistent file is rebuilt from the log (``LogSegment.recover``).
Not thread-safe: the owning ``Log`` serialises access.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path


class IndexCorruptError(Exception):
    """An index file that cannot be trusted; the caller rebuilds it from the log."""


def _load(path: Path, entry_size: int, first: str, second: str) -> tuple[array, array]:
    raw = path.read_bytes() if path.exists() else b""
    if len(raw) % entry_size:
        raise IndexCorruptError(f"{path} is {len(raw)} bytes, not a multiple of {entry_size}")
    firsts, seconds = array(first), array(second)
    for a, b in struct.iter_unpack(">" + first + second, raw):
        firsts.append(a)
        seconds.append(b)
    return firsts, seconds


def _increasing(values: array) -> bool:
    return all(values[i] < values[i + 1] for i in range(len(values) - 1))


class _SparseIndex:
    entry_size: int
    _first_type: str
    _second_type: str

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self._entry = struct.Struct(">" + self._first_type + self._second_type)
        # Why the file cannot be used as it is (missing, torn): the segment then rebuilds it.
        self.load_error: str | None = None if self.path.exists() else f"{self.path} is missing"
        try:
            self._firsts, self._seconds = _load(self.path, self.entry_size, self._first_type, self._second_type)
        except IndexCorruptError as error:
            self.load_error = str(error)
            self._firsts, self._seconds = array(self._first_type), array(self._second_type)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._written = len(self._firsts)  # entries in the file; the rest wait for write_pending()

    def __len__(self) -> int:
        return len(self._firsts)

    def _append(self, first: int, second: int) -> None:
        self._firsts.append(first)
        self._seconds.append(second)

    def write_pending(self) -> None:
        """Write the entries appended since the last call to the file (one ``pwrite``)."""
        count = len(self._firsts)
        if self._written == count:
            return
        pack = self._entry.pack
        new = zip(self._firsts[self._written :], self._seconds[self._written :], strict=True)
        data = b"".join(pack(a, b) for a, b in new)
        written = self._written * self.entry_size
        while data:  # a regular file takes it whole; resume after a short write all the same
            done = os.pwrite(self._fd, data, written)
            data = data[done:]
            written += done
        self._written = count

    def _truncate_entries(self, keep: int) -> None:
        del self._firsts[keep:]
        del self._seconds[keep:]
        self._written = min(self._written, keep)
        os.ftruncate(self._fd, self._written * self.entry_size)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._truncate_entries(0)

    def flush(self) -> None:
        self.write_pending()
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.write_pending()
            finally:
                os.close(self._fd)
                self._fd = -1

    def delete(self) -> None:
        self._written = len(self._firsts)  # the file goes: nothing left to write
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_SparseIndex):
    """Sparse map from offsets to the file positions of batches (``.index``)."""

    entry_size = 8
    _first_type = "i"
    _second_type = "i"

    def sanity_check(self, segment_size: int) -> None:
        """Raise IndexCorruptError unless entries increase and point inside the segment."""
        if not (_increasing(self._firsts) and _increasing(self._seconds)):
            raise IndexCorruptError(f"{self.path} has entries out of order")
        if len(self._seconds) and self._seconds[-1] >= segment_size:
            raise IndexCorruptError(f"{self.path} points at byte {self._seconds[-1]} of a {segment_size}-byte segment")
        if len(self._firsts) and self._firsts[0] < 0:
            raise IndexCorruptError(f"{self.path} has a negative relative offset")

    def append(self, offset: int, position: int) -> None:
        """Add ``offset -> position``; both must exceed the last entry's."""
        relative = offset - self.base_offset
        if len(self._firsts) and (relative <= self._firsts[-1] or position <= self._seconds[-1]):
            raise ValueError(f"index entry {offset}@{position} does not follow the last one in {self.path}")
        self._append(relative, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the largest entry with offset <= ``offset``; ``(base, 0)`` if none.

        The batch containing ``offset`` starts at or after that position.
        """
        index = bisect_right(self._firsts, offset - self.base_offset) - 1
        if index < 0:
            return self.base_offset, 0
        return self.base_offset + self._firsts[index], self._seconds[index]

    def position_at_or_before(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 if none): a known batch boundary."""
        index = bisect_right(self._seconds, position) - 1
        return self._seconds[index] if index >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Remove the entries for offsets >= ``offset``."""
        self._truncate_entries(bisect_left(self._firsts, offset - self.base_offset))

    def truncate_to_position(self, position: int) -> None:
        """Remove the entries pointing at ``position`` or beyond."""
        self._truncate_entries(bisect_left(self._seconds, position))

    @property
    def last_entry(self) -> tuple[int, int] | None:
        if not len(self._firsts):
            return None
        return self.base_offset + self._firsts[-1], self._seconds[-1]


class TimeIndex(_SparseIndex):
    """Sparse map from the segment's running maximum timestamp to offsets (``.timeindex``)."""

    entry_size = 12
    _first_type = "q"
    _second_type = "i"

    def sanity_check(self, next_offset: int) -> None:
        if not _increasing(self._firsts) or not all(
            self._seconds[i] <= self._seconds[i + 1] for i in range(len(self._seconds) - 1)
        ):
            raise IndexCorruptError(f"{self.path} has entries out of order")
        if len(self._seconds) and self.base_offset + self._seconds[-1] >= max(next_offset, self.base_offset + 1):
            raise IndexCorruptError(f"{self.path} names an offset beyond the segment's end")

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add ``timestamp -> offset`` if ``timestamp`` exceeds the last entry's (else no-op)."""
        if timestamp < 0 or (len(self._firsts) and timestamp <= self._firsts[-1]):
            return
        self._append(timestamp, offset - self.base_offset)

    def lookup_before(self, timestamp: int) -> int:
        """An offset from which to scan for the first record with timestamp >= ``timestamp``.

        Entries are running maxima, so every record up to the offset of the last entry whose
        timestamp is strictly below ``timestamp`` is older than it; with no such entry, the base.
        """
        index = bisect_left(self._firsts, timestamp) - 1
        if index < 0:
            return self.base_offset
        return self.base_offset + self._seconds[index]

    def truncate_to(self, offset: int) -> None:
        """Remove the entries for offsets >= ``offset``."""
        keep = bisect_left(self._seconds, offset - self.base_offset)
        self._truncate_entries(keep)

    @property
    def last_entry(self) -> tuple[int, int] | None:
        if not len(self._firsts):
            return None
        return self._firsts[-1], self.base_offset + self._seconds[-1]
