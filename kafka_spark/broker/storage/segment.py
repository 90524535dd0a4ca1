"""LogSegment: one ``.log`` file of whole record batches plus its two sparse indexes.

Files are named by the segment's base offset, zero-padded to 20 digits, as Kafka's:
``00000000000000000000.log``, ``.index``, ``.timeindex``. The ``.log`` holds batches back to back,
verbatim as produced apart from base offset and leader epoch. Locating an offset costs one index
binary search plus a hop over batch headers (read in small chunks, never whole batches).

Not thread-safe: the owning ``Log`` holds its lock around every call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import mmap
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from kafka_spark.broker.storage.batch import HEADER_SIZE, BatchHeader, iter_batches
from kafka_spark.broker.storage.errors import CorruptRecordError
from kafka_spark.broker.storage.index import IndexCorruptError, OffsetIndex, TimeIndex

logger = logging.getLogger("kafka_spark.broker.storage")

LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX = ".log", ".index", ".timeindex"
# Compaction's file states (Kafka's): built on the side, committed, replaced (see Log.replace_segments).
CLEANED_SUFFIX, SWAP_SUFFIX, DELETED_SUFFIX = ".cleaned", ".swap", ".deleted"
_SCAN_CHUNK = 16 * 1024  # header hops between index entries stay within a chunk or two
INT_MAX = 2**31 - 1


#: Disk blocks an active segment reserves ahead of its end (fallocate with FALLOC_FL_KEEP_SIZE: the
#: file's size stays the data's, so readers and recovery see no difference). A write into reserved
#: blocks costs ~20% less than one that makes ext4 reserve them page by page (delayed
#: allocation). Given back at roll and close.
RESERVE_BYTES = 1024 * 1024
_FALLOC_FL_KEEP_SIZE = 1


def _load_fallocate() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fallocate = libc.fallocate
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fallocate.restype = ctypes.c_int
    return fallocate


_fallocate = _load_fallocate()


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class LogSegment:
    """One segment of a partition log.

    ``next_offset`` is one past the last offset stored (``base_offset`` when empty);
    ``max_timestamp`` the largest batch ``max_timestamp`` (-1 when none carries one).
    Open existing segments with :meth:`open`, which checks or rebuilds the indexes.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        created_ms: int | None = None,
        file_suffix: str = "",
    ) -> None:
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.file_suffix = file_suffix  # "" normally; ".cleaned" while the cleaner builds it
        self.log_path = self._path(LOG_SUFFIX, file_suffix)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        # Blocks reserved up to here (RESERVE_BYTES); sys.maxsize once the file system refused.
        self._reserved = self._size if _fallocate is not None else sys.maxsize
        self._reserved_unknown = False  # recovered after a kill: blocks may be reserved past the data
        self.offset_index = OffsetIndex(self._path(INDEX_SUFFIX, file_suffix), base_offset)
        self.time_index = TimeIndex(self._path(TIME_INDEX_SUFFIX, file_suffix), base_offset)
        self.created_ms = _now_ms() if created_ms is None else created_ms
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp = -1
        self._bytes_since_last_index_entry = 0

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        recover: bool = False,
        created_ms: int | None = None,
    ) -> tuple[LogSegment, int]:
        """Open an existing segment: ``(segment, bytes truncated by recovery)``.

        ``recover=True`` rescans every batch (headers and CRC) and rebuilds both indexes, as after
        an unclean shutdown; otherwise the indexes are sanity-checked and rebuilt only if broken.
        """
        segment = cls(directory, base_offset, index_interval_bytes=index_interval_bytes, created_ms=created_ms)
        if recover:
            return segment, segment.recover()
        load_error = segment.offset_index.load_error or segment.time_index.load_error
        if load_error and not segment.is_empty:
            logger.warning("rebuilding the indexes of %s: %s", segment.log_path, load_error)
            return segment, segment.recover()
        try:
            segment.offset_index.sanity_check(segment._size)
            segment._load_tail_state()
            segment.time_index.sanity_check(segment.next_offset)
        except (IndexCorruptError, CorruptRecordError) as error:
            logger.warning("rebuilding the indexes of %s: %s", segment.log_path, error)
            return segment, segment.recover()
        return segment, 0

    # -- facts -----------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self._size

    @property
    def is_empty(self) -> bool:
        return self._size == 0

    @property
    def last_modified_ms(self) -> int:
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

    @property
    def largest_timestamp(self) -> int:
        """What time retention compares: the newest record timestamp, else the file's mtime."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    def time_waited_for_roll(self, now_ms: int, incoming_max_timestamp: int) -> int:
        """Age of the segment for ``segment.ms``, Kafka's way: the incoming batches' max timestamp
        minus the first batch's timestamp (so replayed old data does not roll on every append),
        or wall-clock time since creation when the first batch carries no timestamp."""
        if self.first_batch_timestamp >= 0:
            return incoming_max_timestamp - self.first_batch_timestamp
        return now_ms - self.created_ms

    def indexes_hold(self, max_index_bytes: int) -> bool:
        """Whether an index is full at ``segment.index.bytes`` (Kafka's ``OffsetIndex.isFull`` /
        ``TimeIndex.isFull``: 8- and 12-byte entries), so the segment must roll."""
        return (
            len(self.offset_index) >= max_index_bytes // OffsetIndex.entry_size
            or len(self.time_index) >= max_index_bytes // TimeIndex.entry_size
        )

    def fits_offset(self, last_offset: int) -> bool:
        """Whether ``last_offset`` is representable in this segment's 32-bit relative index entries."""
        return last_offset - self.base_offset <= INT_MAX

    # -- writes ----------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]) -> None:
        """Write ``data`` (the batches ``headers`` describe, offsets assigned) at the end.

        All or nothing: if the write fails the file and indexes are put back as they were.
        """
        self.append_parts((data,), headers)

    def append_parts(self, parts: Sequence[bytes | bytearray | memoryview], headers: Sequence[BatchHeader]) -> None:
        """:meth:`append` of the concatenation of ``parts``, written with one ``pwritev`` (the
        produce path passes each batch as its rewritten 16-byte prefix and the rest of the
        producer's bytes, so the batches are never copied in memory)."""
        position = self._size
        saved = (
            self.next_offset,
            self.max_timestamp,
            self.offset_of_max_timestamp,
            self.first_batch_timestamp,
            self._bytes_since_last_index_entry,
        )
        index_entries, time_entries = len(self.offset_index), len(self.time_index)
        size = sum([header.size for header in headers])
        if position + size > self._reserved:
            self._reserve(position + size)
        try:
            _pwrite_all(self._fd, parts, position, size)
            for header in headers:
                self._index_batch(header, position)
                position += header.size
        except BaseException:
            os.ftruncate(self._fd, self._size)
            self.offset_index._truncate_entries(index_entries)
            self.time_index._truncate_entries(time_entries)
            (
                self.next_offset,
                self.max_timestamp,
                self.offset_of_max_timestamp,
                self.first_batch_timestamp,
                self._bytes_since_last_index_entry,
            ) = saved
            raise
        self._size = position

    def _reserve(self, end: int) -> None:
        """Reserve disk blocks up to ``end`` + RESERVE_BYTES without changing the file's size. Only
        a saving: a file system that refuses (no fallocate, no space) is written without."""
        assert _fallocate is not None
        start = max(self._reserved, self._size)
        target = end + RESERVE_BYTES
        if _fallocate(self._fd, _FALLOC_FL_KEEP_SIZE, start, target - start) == 0:
            self._reserved = target
        else:
            logger.debug(
                "%s: no blocks reserved ahead (%s); writing without", self.log_path, os.strerror(ctypes.get_errno())
            )
            self._reserved = sys.maxsize

    def preallocate(self, size: int) -> None:
        """Kafka's ``preallocate``: reserve the disk blocks of the whole segment (``size`` bytes)
        now, without changing the file's size; given back at roll and close like the blocks
        reserved ahead of each write."""
        start = max(self._reserved, self._size)
        if _fallocate is None or size <= start or self._reserved == sys.maxsize:
            return
        if _fallocate(self._fd, _FALLOC_FL_KEEP_SIZE, start, size - start) == 0:
            self._reserved = size
        else:
            logger.debug("%s: not preallocated (%s)", self.log_path, os.strerror(ctypes.get_errno()))

    def _release_reserved(self) -> None:
        """Give back the blocks reserved past the data (a truncate to the file's own size does)."""
        if self._fd >= 0 and (self._size < self._reserved < sys.maxsize or self._reserved_unknown):
            try:
                os.ftruncate(self._fd, self._size)
            except OSError as error:  # only space given back late; the data is as it was
                logger.warning("%s: reserved blocks not given back: %s", self.log_path, error)
            self._reserved = self._size
            self._reserved_unknown = False

    def _index_batch(self, header: BatchHeader, position: int) -> None:
        # Kafka's LogSegment.append: index the batch's last offset at its start position once more
        # than index.interval.bytes were written since the previous entry.
        if position == 0:
            self.first_batch_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += header.size
        self.next_offset = header.next_offset

    def on_become_inactive(self) -> None:
        """Called when a newer segment takes over: record the final max timestamp (so a later open
        knows it without a scan) and flush everything."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self._release_reserved()
        self.flush()

    def recover(self) -> int:
        """Rescan every batch (header, CRC, increasing offsets), rebuild the indexes and truncate
        anything after the last valid batch (a torn write). Returns the bytes truncated."""
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.first_batch_timestamp = -1
        self._bytes_since_last_index_entry = 0
        valid = 0
        reason = None
        if self._size:
            with mmap.mmap(self._fd, self._size, access=mmap.ACCESS_READ) as mapped:
                batches = iter_batches(mapped)
                try:
                    for header in batches:
                        if header.base_offset < self.next_offset or not self.fits_offset(header.last_offset):
                            reason = (
                                f"batch at byte {batches.batch_position} has offset {header.base_offset}, "
                                f"expected >= {self.next_offset}"
                            )
                            break
                        self._index_batch(header, batches.batch_position)
                        valid = batches.position
                    else:
                        reason = batches.error
                finally:
                    batches.close()  # the mapping cannot close while the iterator holds a view of it
        truncated = self._size - valid
        if truncated:
            logger.warning(
                "recovery truncated %d byte(s) from %s at byte %d: %s", truncated, self.log_path, valid, reason
            )
            os.ftruncate(self._fd, valid)  # which gives back any blocks reserved past it too
            self._size = valid
            if self._reserved != sys.maxsize:  # not when reserving is off or was refused
                self._reserved = min(self._reserved, valid)
        self._reserved_unknown = not truncated and _fallocate is not None
        # Rebuilt files go back to disk now (appends leave theirs to flush, index.py says why).
        self.offset_index.write_pending()
        self.time_index.write_pending()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove the batches holding offsets >= ``offset`` (the whole batch containing ``offset``
        goes, as in Kafka). Returns the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self._size - position
        os.ftruncate(self._fd, position)  # which gives back any blocks reserved past it too
        self._size = position
        if self._reserved != sys.maxsize:  # not when reserving is off or was refused
            self._reserved = min(self._reserved, position)
        self._reserved_unknown = False
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to(found[1].base_offset)
        self._load_tail_state()
        return removed

    def _load_tail_state(self) -> None:
        """next_offset and max_timestamp of a segment opened without recovery: from the last index
        entries, then a header hop over the few batches after them."""
        self._bytes_since_last_index_entry = 0
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        last_time = self.time_index.last_entry
        if last_time is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_time
        last = self.offset_index.last_entry
        start = last[1] if last is not None else 0
        self.first_batch_timestamp = -1
        if self._size >= HEADER_SIZE:
            self.first_batch_timestamp = BatchHeader.parse(self.read(0, HEADER_SIZE)).max_timestamp
        for _position, header in self.scan_headers(start):
            self.next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = header.max_timestamp, header.last_offset
            self._bytes_since_last_index_entry += header.size

    # -- reads -----------------------------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        """``size`` bytes from ``position`` (fewer at the end of the file)."""
        return os.pread(self._fd, size, position)

    def scan_headers(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each batch from ``start`` (a batch boundary) to ``end``."""
        end = self._size if end is None else min(end, self._size)
        position = start
        chunk, chunk_start = b"", start
        while position + HEADER_SIZE <= end:
            if position + HEADER_SIZE > chunk_start + len(chunk):
                chunk, chunk_start = os.pread(self._fd, _SCAN_CHUNK, position), position
            header = BatchHeader.parse(chunk, position - chunk_start)
            if header.size < HEADER_SIZE:
                raise CorruptRecordError(f"{self.log_path} has a batch of {header.size} bytes at {position}")
            yield position, header
            position += header.size

    def end_of_whole_batches(self, start: int, end: int) -> int:
        """The end of the last whole batch in ``[start, end)`` (``start`` when none fits), ``start``
        a batch boundary: hops batch headers from the last indexed batch at or before ``end``."""
        position = max(self.offset_index.position_at_or_before(end), start)
        for at, header in self.scan_headers(position, end):
            if at + header.size > end:
                break
            position = at + header.size
        return position

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset`` (the batch
        containing it, or the next one after a gap); None if the segment has none."""
        if offset >= self.next_offset:
            return None
        _, start = self.offset_index.lookup(offset)
        for position, header in self.scan_headers(start):
            if header.last_offset >= offset:
                return position, header
        return None

    def position_of_first_batch_at_or_after(self, offset: int) -> int:
        """File position of the first batch with ``base_offset >= offset`` (the size if none):
        where a read bounded by the high watermark or LSO stops."""
        if offset >= self.next_offset:
            return self._size
        _, start = self.offset_index.lookup(offset)
        for position, header in self.scan_headers(start):
            if header.base_offset >= offset:
                return position
        return self._size

    # -- lifecycle -------------------------------------------------------------------------------

    def _path(self, kind: str, file_suffix: str) -> Path:
        return self.directory / (segment_name(self.base_offset) + kind + file_suffix)

    def rename_files(self, file_suffix: str) -> None:
        """Rename the three files to ``<base><kind><file_suffix>`` (open descriptors stay valid):
        the indexes first, the ``.log`` last, because the ``.log`` name is what recovery trusts."""
        for index in (self.offset_index, self.time_index):
            kind = INDEX_SUFFIX if index is self.offset_index else TIME_INDEX_SUFFIX
            target = self._path(kind, file_suffix)
            if index.path.exists():
                os.replace(index.path, target)
            index.path = target
        target = self._path(LOG_SUFFIX, file_suffix)
        os.replace(self.log_path, target)
        self.log_path = target
        self.file_suffix = file_suffix

    def fileno(self) -> int:
        """The .log file's descriptor (valid until close)."""
        return self._fd

    def flush(self, *, indexes: bool = True) -> None:
        """fsync the log file (and the indexes unless ``indexes=False``: they can be rebuilt)."""
        os.fsync(self._fd)
        if indexes:
            self.offset_index.flush()
            self.time_index.flush()

    def close(self) -> None:
        if self._fd >= 0:
            self._release_reserved()
            os.close(self._fd)
            self._fd = -1
        self.offset_index.close()
        self.time_index.close()

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, next_offset={self.next_offset}, size={self._size})"


_IOV_MAX = 1024  # Linux's limit on buffers per pwritev


def _pwrite_all(fd: int, parts: Sequence[bytes | bytearray | memoryview], position: int, size: int) -> None:
    """Write every byte of ``parts`` (``size`` bytes in all) at ``position``, resuming after short
    writes."""
    written = 0
    if len(parts) <= _IOV_MAX:
        written = os.pwritev(fd, parts, position)  # the usual case: all of it, in one call
        if written == size:
            return
    pending = [memoryview(part).cast("B") for part in parts if len(part)]
    first = 0
    position += written
    while first < len(pending) and written >= len(pending[first]):  # what the first call wrote
        written -= len(pending[first])
        first += 1
    if written:
        pending[first] = pending[first][written:]
    while first < len(pending):
        written = os.pwritev(fd, pending[first : first + _IOV_MAX], position)
        position += written
        while first < len(pending) and written >= len(pending[first]):
            written -= len(pending[first])
            first += 1
        if written:
            pending[first] = pending[first][written:]
