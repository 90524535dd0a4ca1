"""LogCleaner: log compaction for topics with ``cleanup.policy=compact`` (Kafka's LogCleaner in miniature).

What a cleaning pass of one log does, in Kafka's terms:

* **Cleanable range**: the inactive segments below the *first uncleanable offset*, the smallest of
  the active segment's base offset, the first offset of an undecided transaction (data batches
  of a producer with no COMMIT/ABORT marker yet, found by a header scan; also
  ``Log.first_unstable_offset`` when the transaction layer set it) and the base of the first
  segment whose newest timestamp is younger than ``min.compaction.lag.ms``. Only whole segments
  are cleaned.
* **Offset map**: key -> offset of its newest record, built from the *dirty* part of that range
  (segments at or after the cleaner checkpoint ``first_dirty_offset``, kept in memory, so the
  first pass after a start maps everything). Records of aborted transactions never enter the
  map (they cannot shadow committed values) and are dropped; control batches are kept as they are.
* **Rewrite**: every cleanable segment, in groups of consecutive segments whose sizes add up to
  at most ``segment.bytes``, is copied into ``<base>.log.cleaned`` keeping a record when its key
  is not in the map or its offset is the mapped one. Offsets never change: a rewritten batch keeps
  its base offset and ``last_offset_delta`` (records.py), batches left empty are dropped, leaving
  gaps that fetches skip, except (Kafka's ``RETAIN_EMPTY``) a producer id's last batch and the
  last batch of the cleaned range, which stay as 61-byte empty batches: the first keeps the
  idempotent-producer sequence state that is rebuilt from headers at start, the second carries a
  consumer past a compacted-away tail when the active segment is empty. Records without a key
  (possible only when the policy changed later) are kept. The indexes of the cleaned segment are
  built as it is written.
* **Tombstones** (null values) are kept ``delete.retention.ms`` after the pass that first cleaned
  them: that pass stamps their batch with a delete horizon (KIP-534: attribute bit 6, the horizon
  in ``base_timestamp``); a pass at or after the horizon drops them. A pass runs when the dirty
  bytes reach ``min.cleanable.dirty.ratio`` of the cleanable bytes, when the oldest dirty record
  waited ``max.compaction.lag.ms`` (a compacted log's segments also roll that soon) or when a
  tombstone horizon is due.
* **Swap**: ``Log.replace_segments`` renames files under the log's lock (crash-safe:
  ``.cleaned`` -> ``.swap`` -> final; ``Log.open`` finishes or undoes an interrupted swap).

Compressed batches are decompressed and recompressed with their own codec.

Thread-safety: one background thread (``start``), woken every ``backoff_ms`` (Kafka's
``log.cleaner.backoff.ms``); ``clean_now`` may be called from any thread and runs a pass at once
(passes never overlap). Segments are read through duplicated descriptors without the log's lock,
so produce and fetch proceed while a pass reads and writes; only the swap takes the lock.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafka_spark.broker.storage.batch import HEADER_SIZE, BatchHeader
from kafka_spark.broker.storage.errors import CorruptRecordError, StorageError
from kafka_spark.broker.storage.records import (
    DELETE_HORIZON_MASK,
    RecordView,
    decode_records,
    empty_batch,
    rewrite_batch,
)
from kafka_spark.broker.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    INT_MAX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_name,
)

if TYPE_CHECKING:
    from kafka_spark.broker.storage.log import Log

logger = logging.getLogger("kafka_spark.broker.storage")

DEFAULT_BACKOFF_MS = 15_000
_SCAN_CHUNK = 64 * 1024
_WRITE_CHUNK = 1024 * 1024
_CONTROL_COMMIT = 1


@dataclass
class CleanerStats:
    """What a pass did: logs compacted, segment groups swapped, records and bytes removed."""

    logs_cleaned: int = 0
    groups_swapped: int = 0
    records_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0

    def add(self, other: CleanerStats) -> None:
        for name in ("logs_cleaned", "groups_swapped", "records_removed", "bytes_before", "bytes_after"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class _LogState:
    """The cleaner's memory of one log: its checkpoint and when a kept tombstone falls due."""

    first_dirty_offset: int = -1  # -1: not cleaned since start, everything is dirty
    tombstone_horizon: int | None = None


@dataclass
class _Source:
    """One segment as the pass sees it: the object (identity checked at swap), a duplicated
    descriptor, its size when the pass began, and its batch headers."""

    segment: LogSegment
    fd: int
    size: int
    headers: list[tuple[int, BatchHeader]] = field(default_factory=list)


class _Aborted(Exception):
    """The log is being deleted or the cleaner stopped: drop the pass's work."""


class LogCleaner:
    """Compacts the compacted logs that ``logs()`` returns. See the module docstring."""

    def __init__(self, logs: Callable[[], list[Log]], *, backoff_ms: int = DEFAULT_BACKOFF_MS) -> None:
        self._logs = logs
        self.backoff_ms = backoff_ms
        self._states: dict[Log, _LogState] = {}
        self._pass_lock = threading.Lock()  # one pass at a time
        self._condition = threading.Condition()
        self._current: Log | None = None
        self._paused: set[Log] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._retain_empty: set[int] = set()  # of the log being cleaned

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the background thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="pylog-log-cleaner", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread, abandoning a pass in progress (its ``.cleaned`` files are removed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.backoff_ms / 1000):
            try:
                self.clean_now()
            except (StorageError, OSError) as error:  # one bad pass must not end the thread
                logger.warning("log cleaner pass failed: %s", error)

    def abort(self, log: Log) -> None:
        """Stop cleaning ``log`` for good (it is being deleted): waits until a pass in progress on
        it has removed its files. Safe from any thread."""
        with self._condition:
            self._paused.add(log)
            while self._current is log:
                self._condition.wait()

    # -- passes ----------------------------------------------------------------------------------

    def clean_now(self, *, force: bool = False) -> CleanerStats:
        """Run one pass over every compacted log now; ``force`` ignores min.cleanable.dirty.ratio."""
        stats = CleanerStats()
        with self._pass_lock:
            logs = self._logs()
            live = set(logs)
            for gone in [log for log in self._states if log not in live]:
                del self._states[gone]
            self._paused &= live
            for log in logs:
                if self._stop.is_set():
                    break
                if not log.config.compacts:
                    continue
                with self._condition:
                    if log in self._paused:
                        continue
                    self._current = log
                try:
                    stats.add(self._clean_log(log, self._states.setdefault(log, _LogState()), force))
                except _Aborted:
                    logger.info("cleaning of %s abandoned", log.name)
                except (StorageError, OSError) as error:
                    logger.warning("cleaning of %s failed, will retry: %s", log.name, error)
                finally:
                    with self._condition:
                        self._current = None
                        self._condition.notify_all()
        return stats

    def _check_abort(self, log: Log) -> None:
        if self._stop.is_set() or log in self._paused:
            raise _Aborted()

    def _clean_log(self, log: Log, state: _LogState, force: bool) -> CleanerStats:
        stats = CleanerStats()
        try:
            snapshot = log.snapshot_segments()
        except StorageError:
            return stats  # closed meanwhile (deleted topic, stopping broker)
        sources = [_Source(segment, fd, size) for segment, fd, size in snapshot]
        try:
            config, now = log.config, log.now_ms()
            for source in sources:
                source.headers = list(_scan_headers(source.fd, source.size))
            fates, first_undecided = _transaction_fates(sources)
            limit = sources[-1].segment.base_offset
            for candidate in (first_undecided, log.first_unstable_offset):
                if candidate is not None:
                    limit = min(limit, candidate)
            cleanable: list[_Source] = []
            for source, following in zip(sources, sources[1:], strict=False):
                if following.segment.base_offset > limit:
                    break
                if (
                    config.min_compaction_lag_ms > 0
                    and source.segment.largest_timestamp > now - config.min_compaction_lag_ms
                ):
                    break
                cleanable.append(source)
            if not cleanable:
                return stats
            first_dirty = max(state.first_dirty_offset, cleanable[0].segment.base_offset)
            dirty = [source for source in cleanable if source.segment.base_offset >= first_dirty]
            total_bytes = sum(source.size for source in cleanable)
            dirty_bytes = sum(source.size for source in dirty)
            due = state.tombstone_horizon is not None and now >= state.tombstone_horizon
            ratio_reached = dirty_bytes > 0 and dirty_bytes >= config.min_cleanable_dirty_ratio * total_bytes
            overdue = bool(dirty) and _compaction_overdue(dirty[0], config.max_compaction_lag_ms, now)
            if not (due or ratio_reached or overdue or (force and dirty_bytes > 0)):
                return stats
            offset_map = self._build_offset_map(log, dirty, fates)
            self._retain_empty = _batches_to_keep_as_empty(sources, cleanable)
            horizons: list[int] = []
            complete = True
            for group in _group_segments(cleanable, config.segment_size):
                self._check_abort(log)
                swapped, horizon = self._clean_group(log, group, offset_map, fates, now, stats)
                complete = complete and swapped is not False
                if horizon is not None:
                    horizons.append(horizon)
            end = sources[len(cleanable)].segment.base_offset
            if complete:
                state.first_dirty_offset = end
            state.tombstone_horizon = min(horizons) if horizons else None
            stats.logs_cleaned = 1
            logger.info(
                "cleaned %s up to offset %d: %d record(s), %d byte(s) removed",
                log.name,
                end,
                stats.records_removed,
                stats.bytes_before - stats.bytes_after,
            )
            return stats
        finally:
            for source in sources:
                os.close(source.fd)

    def _build_offset_map(self, log: Log, dirty: list[_Source], fates: dict[int, bool]) -> dict[bytes, int]:
        offset_map: dict[bytes, int] = {}
        for source in dirty:
            for position, header in source.headers:
                self._check_abort(log)
                if header.is_control or fates.get(header.base_offset, True) is False:
                    continue
                decoded = _decode(_read_batch(source, position, header), header, log)
                if decoded is None:
                    continue
                for record in decoded[1]:
                    if record.key is not None:
                        offset_map[record.key] = header.base_offset + record.offset_delta
        return offset_map

    def _clean_group(
        self,
        log: Log,
        group: list[_Source],
        offset_map: dict[bytes, int],
        fates: dict[int, bool],
        now: int,
        stats: CleanerStats,
    ) -> tuple[bool | None, int | None]:
        """Write the group's surviving batches into a ``.cleaned`` segment and swap it in.
        Returns ``(swapped: True / False when the log moved on / None when nothing changed,
        earliest delete horizon of a kept tombstone)``."""
        base = group[0].segment.base_offset
        for kind in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (log.directory / (segment_name(base) + kind + CLEANED_SUFFIX)).unlink(missing_ok=True)
        cleaned = LogSegment(
            log.directory,
            base,
            index_interval_bytes=log.config.index_interval_bytes,
            created_ms=now,
            file_suffix=CLEANED_SUFFIX,
        )
        changed = len(group) > 1
        horizon_seen: int | None = None
        removed = 0
        try:
            pending, pending_headers = bytearray(), []
            for source in group:
                for position, header in source.headers:
                    self._check_abort(log)
                    out, dropped, horizon = self._clean_batch(log, source, position, header, offset_map, fates, now)
                    removed += dropped
                    if horizon is not None:
                        horizon_seen = horizon if horizon_seen is None else min(horizon_seen, horizon)
                    if (
                        out is None
                        or dropped
                        or len(out) != header.size
                        or (horizon is not None and not header.attributes & DELETE_HORIZON_MASK)
                    ):
                        changed = True
                    if out is None:
                        continue
                    pending_headers.append(BatchHeader.parse(out))
                    pending += out
                    if len(pending) >= _WRITE_CHUNK:
                        cleaned.append(pending, pending_headers)
                        pending, pending_headers = bytearray(), []
            if pending:
                cleaned.append(pending, pending_headers)
            if not changed:
                cleaned.delete()
                return None, horizon_seen
            cleaned.on_become_inactive()  # final time-index entry, fsync of log and indexes
            # Kafka keeps the newest modification time of the group: retention ages a segment
            # without timestamps (or emptied by cleaning) by its mtime, which a rewrite must not reset.
            newest_mtime = max(os.fstat(source.fd).st_mtime_ns for source in group)
            os.utime(cleaned.log_path, ns=(newest_mtime, newest_mtime))
        except BaseException:
            cleaned.delete()
            raise
        before = sum(source.size for source in group)
        # From here on the files belong to the swap protocol: on an error they are in the log or gone.
        swapped = log.replace_segments([s.segment for s in group], [s.size for s in group], cleaned)
        if not swapped:
            cleaned.delete()
            return False, horizon_seen
        stats.groups_swapped += 1
        stats.records_removed += removed
        stats.bytes_before += before
        stats.bytes_after += cleaned.size
        return True, horizon_seen

    def _clean_batch(
        self,
        log: Log,
        source: _Source,
        position: int,
        header: BatchHeader,
        offset_map: dict[bytes, int],
        fates: dict[int, bool],
        now: int,
    ) -> tuple[bytes | None, int, int | None]:
        """``(batch to write or None, records dropped, delete horizon if it keeps tombstones)``."""
        if header.is_control:
            return os.pread(source.fd, header.size, position), 0, None
        if fates.get(header.base_offset, True) is False:  # aborted: never visible, never kept
            return self._emptied(header), header.records_count, None
        batch = _read_batch(source, position, header)
        decoded = _decode(batch, header, log)
        if decoded is None:
            return batch, 0, None
        buf, records = decoded
        horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None
        kept = []
        tombstones = False
        for record in records:
            if record.key is not None:
                newest = offset_map.get(record.key)
                if newest is not None and header.base_offset + record.offset_delta < newest:
                    continue
                if record.value_is_null:
                    if horizon is not None and now >= horizon:
                        continue
                    tombstones = True
            kept.append(record)
        if not kept:
            return self._emptied(header), len(records), None
        new_horizon = None
        if tombstones and horizon is None:
            new_horizon = horizon = now + log.config.delete_retention_ms
        if len(kept) == len(records) and new_horizon is None:
            return batch, 0, horizon if tombstones else None
        out = rewrite_batch(header, buf, kept, delete_horizon_ms=new_horizon)
        return out, len(records) - len(kept), horizon if tombstones else None

    def _emptied(self, header: BatchHeader) -> bytes | None:
        """What replaces a batch that lost every record: nothing, or its empty header when it is
        a producer's last batch or the last batch of the cleaned range."""
        if header.base_offset not in self._retain_empty:
            return None
        return empty_batch(header)


# -- helpers -------------------------------------------------------------------------------------


def _batches_to_keep_as_empty(sources: list[_Source], cleanable: list[_Source]) -> set[int]:
    """Base offsets of batches kept (as empty batches) even when compaction removes every record,
    as Kafka's ``BatchRetention.RETAIN_EMPTY``: the last batch of each producer id, so the
    idempotent-producer state rebuilt from headers after a restart keeps its sequence numbers;
    and the last batch of the cleaned range, so a consumer positioned after the last kept record
    still finds a batch that moves it to the next offset when the active segment is empty."""
    last_of_producer: dict[int, int] = {}
    for source in sources:
        for _, header in source.headers:
            if header.producer_id >= 0 and not header.is_control:
                last_of_producer[header.producer_id] = header.base_offset
    keep = set(last_of_producer.values())
    for source in reversed(cleanable):
        if source.headers:
            keep.add(source.headers[-1][1].base_offset)
            break
    return keep


def _read_batch(source: _Source, position: int, header: BatchHeader) -> bytes:
    return os.pread(source.fd, header.size, position)


def _decode(batch: bytes, header: BatchHeader, log: Log) -> tuple[bytes | memoryview, list[RecordView]] | None:
    """Decoded records of a batch, or None (logged) when they cannot be decoded: then the batch
    is kept whole and its keys shadow nothing."""
    try:
        decoded = decode_records(batch, header)
    except CorruptRecordError as error:
        logger.warning("compaction keeps batch %d of %s whole: %s", header.base_offset, log.name, error)
        return None
    if decoded is None:
        logger.warning(
            "compaction keeps batch %d of %s whole: codec %d cannot be decoded here",
            header.base_offset,
            log.name,
            header.compression,
        )
    return decoded


def _scan_headers(fd: int, size: int) -> Iterator[tuple[int, BatchHeader]]:
    position, chunk, chunk_start = 0, b"", 0
    while position + HEADER_SIZE <= size:
        if position + HEADER_SIZE > chunk_start + len(chunk):
            chunk, chunk_start = os.pread(fd, _SCAN_CHUNK, position), position
        header = BatchHeader.parse(chunk, position - chunk_start)
        if header.size < HEADER_SIZE or position + header.size > size:
            raise CorruptRecordError(f"batch at byte {position} declares {header.size} bytes; cannot clean past it")
        yield position, header
        position += header.size


def _transaction_fates(sources: list[_Source]) -> tuple[dict[int, bool], int | None]:
    """``({base offset of a transactional data batch: committed?}, first undecided offset)`` from
    the whole log: a data batch belongs to its producer's open transaction, which the producer's
    next control batch commits or aborts."""
    fates: dict[int, bool] = {}
    open_batches: dict[int, list[int]] = {}
    for source in sources:
        for position, header in source.headers:
            if header.is_control:
                pending = open_batches.pop(header.producer_id, None)
                if pending:
                    commit = _control_type(source, position, header) == _CONTROL_COMMIT
                    for base_offset in pending:
                        fates[base_offset] = commit
            elif header.is_transactional:
                open_batches.setdefault(header.producer_id, []).append(header.base_offset)
    first_undecided = min((batches[0] for batches in open_batches.values()), default=None)
    return fates, first_undecided


def _control_type(source: _Source, position: int, header: BatchHeader) -> int:
    decoded = decode_records(_read_batch(source, position, header), header)
    if decoded is None or not decoded[1] or decoded[1][0].key is None or len(decoded[1][0].key) < 4:
        raise CorruptRecordError(f"control batch at offset {header.base_offset} has no marker key")
    _version, kind = struct.unpack_from(">hh", decoded[1][0].key)
    return kind


def _compaction_overdue(first_dirty: _Source, max_lag_ms: int, now: int) -> bool:
    """``max.compaction.lag.ms``: the oldest dirty record (by its batch's timestamp) waited that
    long, so the log is cleaned whatever its dirty ratio (Kafka's ``maxCompactionLagMs``)."""
    first_timestamp = first_dirty.segment.first_batch_timestamp
    return first_timestamp >= 0 and now - first_timestamp >= max_lag_ms


def _group_segments(sources: list[_Source], segment_bytes: int) -> Iterator[list[_Source]]:
    """Consecutive segments whose sizes add up to at most ``segment_bytes`` and whose offsets fit
    the first one's 32-bit relative index (Kafka's ``groupSegmentsBySize``)."""
    group: list[_Source] = []
    size = 0
    for source in sources:
        last_offset = source.headers[-1][1].last_offset if source.headers else source.segment.base_offset
        if group and (size + source.size > segment_bytes or last_offset - group[0].segment.base_offset > INT_MAX):
            yield group
            group, size = [], 0
        group.append(source)
        size += source.size
    if group:
        yield group
