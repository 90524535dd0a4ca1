"""Log: one topic-partition, a sequence of segments in ``<log_dir>/<topic>-<partition>/``.

Directory contents::

    00000000000000000000.log / .index / .timeindex    one segment per base offset
    log-start-offset    first offset still readable, written when retention advances it
    recovery-point      base offset of the active segment: everything below was flushed whole
    *.cleaned / *.swap / *.deleted   transient files of a compaction swap (see replace_segments)

Offsets: ``log_start_offset`` <= every readable offset < ``log_end_offset`` (LEO, the next offset
to assign). With a single replica the ``high_watermark`` is the LEO; ``last_stable_offset`` is the
high watermark unless the transaction layer sets ``first_unstable_offset`` (the first offset of
the oldest open transaction), which read_committed fetches must not pass.

Thread-safety: every public method takes the log's lock (an ``RLock``), so appends, reads,
retention and close may come from different threads; each call is short (a few ``os.pread`` /
``os.pwrite`` calls, plus an fsync on an acks=all append).

Opening (recovery after a crash) is storage/recovery.py. The rest stays one class of about 750
lines, as Kafka's ``UnifiedLog`` is: every operation (append, read, retention, truncation, the
compaction swap) changes or reads the same list of segments under the same lock, and splitting it
would spread that lock's invariants over modules.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from operator import attrgetter
from pathlib import Path
from struct import Struct, unpack_from
from typing import NamedTuple

from kafka_spark.broker.file_region import FileRegion
from kafka_spark.broker.storage import checkpoint, file_deleter
from kafka_spark.broker.storage.batch import (
    LOG_OVERHEAD,
    BatchHeader,
    first_record_at_or_after_timestamp,
    rewrite_base_offset,
    set_log_append_time,
    validate_batches,
)
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.errors import KafkaStorageError, OffsetOutOfRangeError, StorageError
from kafka_spark.broker.storage.file_deleter import DELETE_LATER_SUFFIX
from kafka_spark.broker.storage.recovery import LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE, recover
from kafka_spark.broker.storage.segment import (
    DELETED_SUFFIX,
    SWAP_SUFFIX,
    LogSegment,
)
from kafka_spark.common.durable import fsync_dir

logger = logging.getLogger("kafka_spark.broker.storage")

#: What the broker rewrites in a stored batch: base offset and partition leader epoch (0), with the
#: batch length between them; all three lie before the CRC-covered bytes.
_BATCH_PREFIX = Struct(">qii")
_pack_prefix = _BATCH_PREFIX.pack
_PREFIX_SIZE = _BATCH_PREFIX.size
_batch_length = attrgetter("batch_length")
_max_timestamp = attrgetter("max_timestamp")


def partition_dir(log_dir: Path, topic: str, partition: int) -> Path:
    """Where a partition's log lives: ``<log_dir>/<topic>-<partition>``, as in Kafka."""
    return Path(log_dir) / f"{topic}-{partition}"


def _roll_jitter(config: LogConfig) -> int:
    """Kafka's ``randomSegmentJitter``: 0 without ``segment.jitter.ms``, else a random number of
    milliseconds below ``min(segment.jitter.ms, segment.ms)``."""
    if config.segment_jitter_ms <= 0:
        return 0
    return random.randrange(min(config.segment_jitter_ms, config.segment_ms))


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendResult(NamedTuple):
    """What an append assigned. ``headers`` are the stored batches' headers (offsets assigned);
    ``log_append_time`` is the broker time stamped on LogAppendTime topics, else -1. A named
    tuple: one is made for every partition of every produce."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    log_start_offset: int
    headers: tuple[BatchHeader, ...]
    log_append_time: int = -1


class Log:
    """A partition log. Create or load one with :meth:`Log.open`."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        segments: list[LogSegment],
        log_start_offset: int,
        time_ms: Callable[[], int],
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.name = f"{topic}-{partition}"  # Kafka's spelling, in messages: asked on every produce
        self.config = config
        self._segments = segments
        self._log_start_offset = log_start_offset
        self._time_ms = time_ms
        self._lock = threading.RLock()
        self._closed = False
        self._failure: str | None = None  # set by mark_failed: the partition is offline
        self._unflushed_messages = 0
        self._last_flush_ms = time_ms()
        self.first_unstable_offset: int | None = None  # hook for the transaction layer
        # Replication (kafka_spark.broker.replication): the epoch stamped into appended batches,
        # and the high watermark the replicas agreed on (None: a leader alone in its ISR, or a log
        # no broker leads, whose HW is its LEO).
        self.leader_epoch = 0
        self.replicated_high_watermark: int | None = None
        # segment.jitter.ms: how much sooner than segment.ms the active segment rolls (drawn anew
        # for each segment, as Kafka draws it)
        self._roll_jitter_ms = _roll_jitter(config)
        if config.preallocate and segments and segments[-1].is_empty:
            segments[-1].preallocate(config.segment_size)

    # -- opening and recovery ----------------------------------------------------------------------

    @classmethod
    def open(
        cls, directory: Path, topic: str, partition: int, config: LogConfig, *, time_ms: Callable[[], int] | None = None
    ) -> Log:
        """Load (or create) the log in ``directory``, the partition's own directory.

        Recovery: segments from the recovery point on (normally just the active one) are rescanned
        (headers and CRC) and a torn tail is truncated at the last valid batch; if a segment other
        than the last had to be truncated, the segments after it are deleted, as Kafka does.
        Missing or inconsistent indexes are rebuilt. ``time_ms`` is the clock (tests inject one).
        """
        directory = Path(directory)
        clock = time_ms or _wall_clock_ms
        segments, log_start = recover(directory, f"{topic}-{partition}", config, clock())
        return cls(directory, topic, partition, config, segments, log_start, clock)

    # -- offsets -----------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        """A leader alone in its ISR: everything appended is replicated, so the HW is the LEO.
        Replicated: what the leader computed (the smallest LEO of the in-sync replicas), or what a
        follower learnt from its leader, never above the LEO."""
        log_end = self._segments[-1].next_offset
        replicated = self.replicated_high_watermark
        return log_end if replicated is None else min(replicated, log_end)

    @property
    def last_stable_offset(self) -> int:
        unstable = self.first_unstable_offset
        high_watermark = self.high_watermark
        return high_watermark if unstable is None else min(unstable, high_watermark)

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(segment.size for segment in self._segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        with self._lock:
            return [segment.base_offset for segment in self._segments]

    # -- append ------------------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        headers: Sequence[BatchHeader] | None = None,
        acks: int = -1,
        leader_epoch: int | None = None,
    ) -> AppendResult:
        """Append whole batches at the log end offset; all or nothing.

        ``headers`` are ``validate_batches`` output for ``records`` (the produce path validates
        before calling); without them the batches are validated here, control batches allowed
        (the broker's own writers use this). Offsets are assigned from the LEO by rewriting base
        offset and leader epoch (0): written as a new 16-byte prefix per batch beside the caller's
        bytes, never copied (a LogAppendTime topic, which also stamps timestamps, stamps a copy).
        The active segment rolls first when this append would push it past ``segment_bytes`` or it
        spans more than ``segment_ms`` (measured, as in Kafka, from its first batch's timestamp to
        the incoming batches' max timestamp). With acks=-1 and ``flush_on_ack_all`` the log file is
        fsynced before returning. ``leader_epoch`` is stamped into the batches (default: the log's
        ``leader_epoch``; a follower passes the epoch the leader stamped).
        """
        epoch = self.leader_epoch if leader_epoch is None else leader_epoch
        view = memoryview(records)
        if headers is None:
            headers = validate_batches(view, self.config.max_message_bytes, allow_control=True)
        elif sum(map(_batch_length, headers)) + LOG_OVERHEAD * len(headers) != len(view):
            raise ValueError(
                f"append to {self.name}: the headers describe {sum(h.size for h in headers)} bytes, "
                f"the records are {len(view)}"
            )
        with self._lock:
            self._check_open()
            now = self._time_ms()
            base_offset = offset = self.log_end_offset
            stamp = self.config.message_timestamp_type == "LogAppendTime"
            stored: list[BatchHeader] = []
            parts: list[bytes | bytearray | memoryview] = []
            if stamp:  # LogAppendTime changes bytes under the CRC: stamp a copy
                data = bytearray(view)
                position = 0
                for header in headers:
                    rewrite_base_offset(data, position, offset, epoch)
                    set_log_append_time(data, position, header.size, now)
                    stored.append(BatchHeader.parse(data, position))
                    offset += header.last_offset_delta + 1
                    position += header.size
                parts.append(data)
            else:  # only the 16-byte prefix changes: write it beside the producer's bytes, no copy
                position = 0
                for header in headers:
                    batch_length = header.batch_length
                    parts.append(_pack_prefix(offset, batch_length, epoch))
                    stored.append(header.rebased(offset, epoch))
                    parts.append(view[position + _PREFIX_SIZE : position + batch_length + LOG_OVERHEAD])
                    offset += header.last_offset_delta + 1
                    position += batch_length + LOG_OVERHEAD
            try:
                incoming_max_timestamp = max(map(_max_timestamp, stored))
                self._maybe_roll(len(view), offset - 1, incoming_max_timestamp, now)
                active = self._segments[-1]
                active.append_parts(parts, stored)
                self._unflushed_messages += offset - base_offset
                self._maybe_flush(acks, now)
            except OSError as error:
                self.mark_failed(f"append failed: {error}")
                raise KafkaStorageError(f"append to {self.name} failed: {error}") from error
            return AppendResult(  # base offset, last offset, max timestamp, log start, headers, append time
                base_offset,
                offset - 1,
                incoming_max_timestamp,
                self._log_start_offset,
                tuple(stored),
                now if stamp else -1,
            )

    def _maybe_roll(self, size: int, last_offset: int, max_timestamp: int, now: int) -> None:
        active = self._segments[-1]
        if active.is_empty:
            return
        config = self.config
        if (
            active.size + size > config.segment_size
            or active.time_waited_for_roll(now, max_timestamp) > config.max_segment_ms - self._roll_jitter_ms
            or active.indexes_hold(config.segment_index_bytes)
            or not active.fits_offset(last_offset)
        ):
            self._roll()

    def _roll(self) -> None:
        old = self._segments[-1]
        if old.is_empty:
            return
        old.on_become_inactive()
        new = LogSegment(
            self.directory,
            old.next_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            created_ms=self._time_ms(),
        )
        self._segments.append(new)
        self._roll_jitter_ms = _roll_jitter(self.config)
        if self.config.preallocate:
            new.preallocate(self.config.segment_size)
        checkpoint.write_offset(self.directory / RECOVERY_POINT_FILE, new.base_offset)
        logger.debug("rolled %s to a new segment at offset %d", self.name, new.base_offset)

    def roll(self) -> None:
        """Start a new active segment at the LEO now (no-op when the active one is empty)."""
        with self._lock:
            self._check_open()
            self._roll()

    def _maybe_flush(self, acks: int, now: int) -> None:
        if (
            (acks == -1 and self.config.flush_on_ack_all)
            or self._unflushed_messages >= self.config.flush_messages
            or now - self._last_flush_ms >= self.config.flush_interval_ms
        ):
            self._segments[-1].flush(indexes=False)  # indexes are rebuilt by recovery if need be
            self._unflushed_messages = 0
            self._last_flush_ms = now

    # -- read --------------------------------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, *, max_offset: int | None = None) -> memoryview | bytes:
        """Whole stored batches from the one containing ``fetch_offset``.

        Only batches with ``base_offset < max_offset`` (default: the high watermark; read_committed
        fetches pass the LSO); stops before ``max_bytes`` would be exceeded but always includes the
        first batch (KIP-74), and may continue into the next segments. ``fetch_offset`` equal to the
        LEO gives empty bytes; outside ``[log_start_offset, log_end_offset]`` raises
        OffsetOutOfRangeError. Costs an index search, a header hop and one ``pread`` per segment.
        """
        with self._lock:
            limit = self._read_limit(fetch_offset, max_offset)
            if fetch_offset >= limit:
                return b""
            try:
                return self._read(fetch_offset, max_bytes, limit)
            except OSError as error:
                raise KafkaStorageError(f"read of {self.name} at offset {fetch_offset} failed: {error}") from error

    def read_to_send(
        self, fetch_offset: int, max_bytes: int, *, max_offset: int | None = None, region_bytes: int
    ) -> memoryview | bytes | FileRegion:
        """:meth:`read`'s batches for a Fetch response: when they lie in one segment and make at
        least ``region_bytes``, unread, as a :class:`FileRegion` of the segment file, which the
        connection sends with ``sendfile`` (Kafka's zero-copy transfer)."""
        with self._lock:
            limit = self._read_limit(fetch_offset, max_offset)
            if fetch_offset >= limit:
                return b""
            try:
                return self._read_region(fetch_offset, max_bytes, limit, region_bytes)
            except OSError as error:
                raise KafkaStorageError(f"read of {self.name} at offset {fetch_offset} failed: {error}") from error

    def _read_limit(self, fetch_offset: int, max_offset: int | None) -> int:
        """The offset reads stop before; raises OffsetOutOfRangeError for ``fetch_offset`` outside
        the log. Under the lock."""
        self._check_open()
        log_start, log_end = self._log_start_offset, self.log_end_offset
        if fetch_offset < log_start or fetch_offset > log_end:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is out of range for {self.name}: readable offsets are "
                f"[{log_start}, {log_end}); reset to earliest or latest",
                offset=fetch_offset,
                log_start_offset=log_start,
                log_end_offset=log_end,
            )
        return log_end if max_offset is None else min(max_offset, log_end)

    def _read(self, fetch_offset: int, max_bytes: int, limit: int) -> memoryview | bytes:
        index = bisect_right(self._segments, fetch_offset, key=lambda segment: segment.base_offset) - 1
        chunks: list[bytes | memoryview] = []
        budget = max_bytes
        for segment in self._segments[max(index, 0) :]:
            if segment.base_offset >= limit:
                break
            if not chunks:
                found = segment.find_batch(fetch_offset)
                if found is None:
                    continue  # fetch_offset lies after this segment's last batch
                start, first = found
            else:
                start, first = 0, None
            end = segment.position_of_first_batch_at_or_after(limit)
            if end <= start:
                break
            if end - start <= budget:
                chunks.append(segment.read(start, end - start))
                budget -= end - start
                if end < segment.size:
                    break  # stopped by max_offset inside this segment
                continue
            data = segment.read(start, budget) if budget > 0 else b""
            cut = _whole_batches(segment, start, data)
            if cut:
                chunks.append(memoryview(data)[:cut])
            elif first is not None:  # KIP-74: the first batch goes out even if larger than max_bytes
                chunks.append(segment.read(start, first.size))
            break
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    def _read_region(
        self, fetch_offset: int, max_bytes: int, limit: int, region_bytes: int
    ) -> memoryview | bytes | FileRegion:
        """:meth:`_read`'s range, found without reading the data: a region when it lies in one
        segment and is at least ``region_bytes`` long, else the bytes."""
        index = bisect_right(self._segments, fetch_offset, key=lambda segment: segment.base_offset) - 1
        for segment in self._segments[max(index, 0) :]:
            if segment.base_offset >= limit:
                return b""
            found = segment.find_batch(fetch_offset)
            if found is not None:
                break
        else:
            return b""
        start, first = found
        end = segment.position_of_first_batch_at_or_after(limit)
        if end <= start:
            return b""
        if end - start > max_bytes:  # the whole batches that fit; KIP-74: at least the first
            end = max(segment.end_of_whole_batches(start, start + max_bytes), start + first.size)
        elif end == segment.size and segment is not self._segments[-1]:
            # The range runs to this segment's end: the next segments may add to it. Rare (a
            # fetch that reaches a roll); the general read handles it.
            return self._read(fetch_offset, max_bytes, limit)
        if end - start < region_bytes:
            return segment.read(start, end - start)
        return FileRegion(segment.fileno(), start, end - start)

    # -- ListOffsets by timestamp ------------------------------------------------------------------

    def offset_for_timestamp(self, ts: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``ts``, or None.

        Finds the first segment whose newest timestamp reaches ``ts``, starts from its time index,
        hops batch headers to the first batch whose ``max_timestamp`` reaches ``ts`` and decodes
        that one batch (decompressing if needed).
        """
        with self._lock:
            self._check_open()
            for segment in self._segments:
                if segment.max_timestamp < ts:
                    continue
                start_offset = max(segment.time_index.lookup_before(ts), self._log_start_offset)
                found = segment.find_batch(start_offset)
                if found is None:
                    continue
                for position, header in segment.scan_headers(found[0]):
                    if header.max_timestamp >= ts:
                        result = first_record_at_or_after_timestamp(segment.read(position, header.size), ts)
                        if result is not None and result[0] >= self._log_start_offset:
                            return result
            return None

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the record with the largest timestamp (the first one, when
        several share it), or None for a log without timestamped records: ListOffsets' MAX_TIMESTAMP
        (-3, KIP-734). The segment is found by the maximum each keeps; only that batch is decoded."""
        with self._lock:
            self._check_open()
            newest = None
            for segment in self._segments:
                if segment.max_timestamp >= 0 and (newest is None or segment.max_timestamp > newest.max_timestamp):
                    newest = segment
            if newest is None:
                return None
            found = newest.find_batch(newest.offset_of_max_timestamp)
            if found is None:
                return None
            position, header = found
            return first_record_at_or_after_timestamp(newest.read(position, header.size), newest.max_timestamp)

    # -- retention ---------------------------------------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention: delete the oldest segments past ``retention_ms`` (by their newest record
        timestamp, or file mtime) or beyond ``retention_bytes``. When every segment qualifies the
        log rolls first, so the active segment can go too (as Kafka does); the log start offset
        advances and is checkpointed before files are removed. Returns the segments deleted.
        """
        with self._lock:
            self._check_open()
            if not self.config.deletes:
                return 0
            now = self._time_ms() if now_ms is None else now_ms
            segments = self._segments
            count = 0
            if self.config.retention_ms >= 0:
                while (
                    count < len(segments)
                    and (not segments[count].is_empty or count < len(segments) - 1)
                    and now - segments[count].largest_timestamp > self.config.retention_ms
                ):
                    count += 1
            if self.config.retention_bytes >= 0:
                excess = sum(segment.size for segment in segments) - self.config.retention_bytes
                by_size = 0
                for segment in segments:
                    if (segment.is_empty and segment is segments[-1]) or excess - segment.size < 0:
                        break
                    excess -= segment.size
                    by_size += 1
                count = max(count, by_size)
            if count == 0:
                return 0
            try:
                if count == len(segments):
                    self._roll()
                doomed, self._segments = self._segments[:count], self._segments[count:]
                new_start = max(self._log_start_offset, self._segments[0].base_offset)
                if new_start != self._log_start_offset:
                    checkpoint.write_offset(self.directory / LOG_START_OFFSET_FILE, new_start)
                    self._log_start_offset = new_start
                self._delete_segment_files(doomed)
            except OSError as error:
                raise KafkaStorageError(f"retention on {self.name} failed: {error}") from error
            logger.info(
                "retention deleted %d segment(s) of %s; log start offset is now %d",
                len(doomed),
                self.name,
                self._log_start_offset,
            )
            return len(doomed)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` the log start offset (-1: the high watermark) and delete
        the segments wholly below it; the records below it are gone as after retention (fetching
        them is OFFSET_OUT_OF_RANGE). Returns the log start offset. An offset beyond the high
        watermark raises OffsetOutOfRangeError; one at or below the current start changes nothing.
        The start is checkpointed before any file is removed (Log.open finishes a cut-short delete).
        """
        with self._lock:
            self._check_open()
            high = self.high_watermark
            target = high if offset == -1 else offset
            if not 0 <= target <= high:
                raise OffsetOutOfRangeError(
                    f"cannot delete the records of {self.name} before offset {offset}: its records end at "
                    f"{high}; give an offset up to that (or -1 for all)",
                    offset=offset,
                    log_start_offset=self._log_start_offset,
                    log_end_offset=high,
                )
            if target <= self._log_start_offset:
                return self._log_start_offset
            try:
                checkpoint.write_offset(self.directory / LOG_START_OFFSET_FILE, target)
                self._log_start_offset = target
                count = 0
                while count < len(self._segments) - 1 and self._segments[count + 1].base_offset <= target:
                    count += 1
                doomed, self._segments = self._segments[:count], self._segments[count:]
                self._delete_segment_files(doomed)
            except OSError as error:
                raise KafkaStorageError(f"deleting records of {self.name} failed: {error}") from error
            logger.info("records of %s before offset %d deleted (%d segment(s) removed)", self.name, target, count)
            return target

    def _delete_segment_files(self, doomed: Sequence[LogSegment]) -> None:
        """Remove the files of segments that left the log: at once with ``file.delete.delay.ms=0``,
        else renamed ``*.deleted-later`` now and unlinked once the delay has passed
        (file_deleter.py), as Kafka deletes segments."""
        delay = self.config.file_delete_delay_ms
        if delay <= 0:
            for segment in doomed:
                segment.delete()
            return
        paths = []
        for segment in doomed:
            segment.close()
            segment.rename_files(DELETE_LATER_SUFFIX)
            paths += [segment.log_path, segment.offset_index.path, segment.time_index.path]
        file_deleter.schedule(paths, delay)

    # -- compaction hooks (the cleaner: cleaner.py) ---------------------------------------------------

    def now_ms(self) -> int:
        """The log's clock (tests inject one), which compaction's delete horizons use."""
        return self._time_ms()

    def snapshot_segments(self) -> list[tuple[LogSegment, int, int]]:
        """``(segment, fd, size)`` for every segment, oldest first, the active one last: ``fd`` is
        a duplicate descriptor of its .log (the caller closes it), so the cleaner reads a stable
        view without this log's lock even if retention deletes the segment meanwhile."""
        with self._lock:
            self._check_open()
            return [(segment, os.dup(segment.fileno()), segment.size) for segment in self._segments]

    def replace_segments(self, old: Sequence[LogSegment], sizes: Sequence[int], cleaned: LogSegment) -> bool:
        """Swap ``cleaned`` (built as ``<base>.*.cleaned``, flushed) in for the contiguous inactive
        segments ``old``, whose sizes must still be ``sizes``; returns False, changing nothing,
        when the log moved on (closed, retention or truncation touched them); the caller then
        deletes ``cleaned``. On KafkaStorageError ``cleaned`` is either in the log (the commit
        happened) or already deleted: the caller must not touch it.

        Crash-safe file protocol, Kafka's ``replaceSegments`` (directory fsynced between steps):

        1. every old segment's files are renamed ``*.deleted`` (readers keep their descriptors);
        2. ``cleaned``'s files become ``*.swap``, the ``.log`` last: its ``.log.swap`` existing is
           the commit point;
        3. the ``*.deleted`` files are removed; 4. ``*.swap`` files take their final names.

        On open (storage/recovery.py) a ``.log.swap`` means committed: finish 3 and 4;
        no ``.log.swap`` means not committed: ``*.deleted`` are renamed back, ``*.cleaned`` and
        stray index ``*.swap`` files removed. Offsets never change, so readers see the same
        records at the same offsets (minus the compacted ones) before and after. Takes the log's
        lock for a few renames and fsyncs only.
        """
        with self._lock:
            if self._closed or not old:
                return False
            first = next((i for i, segment in enumerate(self._segments) if segment is old[0]), None)
            if (
                first is None
                or first + len(old) >= len(self._segments)
                or any(a is not b for a, b in zip(self._segments[first : first + len(old)], old, strict=True))
                or any(segment.size != size for segment, size in zip(old, sizes, strict=True))
            ):
                return False
            try:
                renamed: list[LogSegment] = []
                try:
                    for segment in old:
                        segment.rename_files(DELETED_SUFFIX)
                        renamed.append(segment)
                    fsync_dir(self.directory)
                    cleaned.rename_files(SWAP_SUFFIX)
                    fsync_dir(self.directory)
                except OSError:
                    # Not committed (or the commit's fsync failed): remove the new files first,
                    # so no .log.swap can outlive the restored old segments, then restore them.
                    cleaned.delete()
                    fsync_dir(self.directory)
                    for segment in renamed:
                        segment.rename_files("")
                    raise
                self._segments[first : first + len(old)] = [cleaned]
                for segment in old:
                    segment.delete()
                fsync_dir(self.directory)
                cleaned.rename_files("")
                fsync_dir(self.directory)
            except OSError as error:
                raise KafkaStorageError(
                    f"swapping cleaned segment {cleaned.base_offset} into {self.name} "
                    f"failed: {error}; the next open finishes or undoes it"
                ) from error
            return True

    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding an offset >= ``offset`` (whole batches, as Kafka)."""
        with self._lock:
            self._check_open()
            if offset >= self.log_end_offset:
                return
            if offset < self._log_start_offset:
                raise OffsetOutOfRangeError(
                    f"cannot truncate {self.name} to {offset}, below its log start offset {self._log_start_offset}",
                    offset=offset,
                    log_start_offset=self._log_start_offset,
                    log_end_offset=self.log_end_offset,
                )
            while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                self._segments.pop().delete()
            self._segments[-1].truncate_to(offset)
            checkpoint.write_offset(self.directory / RECOVERY_POINT_FILE, self._segments[-1].base_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start empty at ``offset`` (Kafka's truncateFullyAndStartAt): a
        follower whose log ends below its leader's log start offset copies from there."""
        with self._lock:
            self._check_open()
            try:
                checkpoint.write_offset(self.directory / LOG_START_OFFSET_FILE, offset)
                for segment in self._segments:
                    segment.delete()
                self._segments = [
                    LogSegment(
                        self.directory,
                        offset,
                        index_interval_bytes=self.config.index_interval_bytes,
                        created_ms=self._time_ms(),
                    )
                ]
                self._log_start_offset = offset
                checkpoint.write_offset(self.directory / RECOVERY_POINT_FILE, offset)
            except OSError as error:
                self.mark_failed(f"truncation failed: {error}")
                raise KafkaStorageError(f"truncating {self.name} failed: {error}") from error

    # -- lifecycle ---------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the active segment and its indexes (older segments were flushed when they rolled)."""
        with self._lock:
            if self._closed:
                return
            try:
                self._segments[-1].flush()
            except OSError as error:
                self.mark_failed(f"flush failed: {error}")
                raise KafkaStorageError(f"flush of {self.name} failed: {error}") from error
            self._unflushed_messages = 0
            self._last_flush_ms = self._time_ms()

    def close(self) -> None:
        """Flush and release the files. Later calls other than close/delete raise StorageError."""
        with self._lock:
            if self._closed:
                return
            if self._failure is None:  # an offline log's state on disk is left to recovery
                self.flush()
            for segment in self._segments:
                segment.close()
            self._closed = True
            file_deleter.forget(self.directory)

    def delete(self) -> None:
        """Close and remove the partition directory."""
        with self._lock:
            if not self._closed:
                for segment in self._segments:
                    segment.close()
                self._closed = True
            file_deleter.forget(self.directory)
            shutil.rmtree(self.directory, ignore_errors=False)

    def update_config(self, config: LogConfig) -> None:
        """New settings (e.g. an AlterConfigs); they apply from the next operation."""
        with self._lock:
            self.config = config

    def open_sync_handle(self) -> tuple[int, int]:
        """``(fd, offset)``: a duplicate descriptor of the active segment's .log file and the log
        end offset that an fsync of it makes durable (older segments were fsynced when they
        rolled). The caller fsyncs and closes ``fd`` on any thread without holding this log's
        lock, which is how the broker group-commits acks=all produces off its event loop."""
        with self._lock:
            self._check_open()
            return os.dup(self._segments[-1].fileno()), self.log_end_offset

    def batch_headers(self) -> list[BatchHeader]:
        """Headers of every stored batch, oldest first (the idempotent-producer and transaction
        state is rebuilt from these at start; headers only, never records)."""
        with self._lock:
            self._check_open()
            return [header for segment in self._segments for _, header in segment.scan_headers()]

    def mark_failed(self, reason: str) -> None:
        """Take the partition offline until the broker restarts: every later call (other than
        close and delete) raises KafkaStorageError. Called after a failed write or fsync, when
        what is on disk is unknown: a later fsync that succeeds would not bring back pages the
        kernel dropped, so nothing more may be acknowledged. Kafka takes the whole log directory
        offline; here it is the partition, and the broker serves the others. At restart, recovery
        reads the log back from disk (a torn tail is truncated)."""
        with self._lock:
            if self._failure is None:
                self._failure = reason
                logger.error("partition %s is offline until the broker restarts: %s", self.name, reason)

    @property
    def failure(self) -> str | None:
        """Why the partition is offline (see :meth:`mark_failed`), or None."""
        return self._failure

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"the log of {self.name} is closed (the topic was deleted or the broker is stopping)")
        if self._failure is not None:
            raise KafkaStorageError(
                f"{self.name} is offline after an I/O error ({self._failure}); restart the "
                "broker to recover it from disk"
            )

    def __repr__(self) -> str:
        return (
            f"Log({self.name}, log_start_offset={self._log_start_offset}, "
            f"log_end_offset={self.log_end_offset}, segments={len(self._segments)})"
        )


def _whole_batches(segment: LogSegment, start: int, data: bytes) -> int:
    """Bytes of ``data`` (read from ``start``) made of whole batches: hop batch lengths from the
    last indexed batch boundary inside the range, so the walk covers at most an index interval."""
    position = max(segment.offset_index.position_at_or_before(start + len(data)), start) - start
    while position + 12 <= len(data):
        size = unpack_from(">i", data, position + 8)[0] + 12
        if position + size > len(data):
            break
        position += size
    return position
