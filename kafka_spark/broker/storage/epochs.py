"""The leader-epoch cache of a partition: which leader epoch began at which offset.

Kept in ``<partition dir>/leader-epoch-checkpoint`` in Kafka's format (a version line ``0``, a
count line, then one ``<epoch> <start offset>`` line per epoch), rewritten atomically on every
change. A leader adds an entry when it takes over (its epoch starts at its log end offset); a
follower adds one when it appends the first batch stamped with a newer epoch. Truncating a log
drops the entries from the truncation point on. A broker that restarts leads its partitions anew,
as a KRaft broker does: a single node's controller (a cluster of one) starts each partition from
:func:`last_epoch_used`, so its next leader epoch begins at the recovered log end offset, above
every epoch the log knew, and records written after a recovery that lost a tail carry an epoch
that tells them from the lost ones.

:meth:`LeaderEpochCache.end_offset_for` answers OffsetForLeaderEpoch (API 23) exactly as Kafka's
``LeaderEpochFileCache.endOffsetFor``: the end offset of an epoch is the start offset of the next
higher epoch, or the log end offset for the latest one. A follower asks the new leader for the
end offset of its own latest epoch and truncates there, which removes the records a deposed
leader appended but never replicated (KIP-101, KIP-279).
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

from kio.schema.errors import ErrorCode

from kafka_spark.broker.storage import checkpoint

logger = logging.getLogger("kafka_spark.broker.storage")

CHECKPOINT_FILE = "leader-epoch-checkpoint"
_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


def current_epoch_error(current_leader_epoch: int, leader_epoch: int) -> ErrorCode:
    """KIP-320: what a request carrying the client's current leader epoch of a partition (Fetch,
    ListOffsets v4+, OffsetForLeaderEpoch) gets from its leader at ``leader_epoch``: none when it
    was not given (-1) or matches, FENCED_LEADER_EPOCH when older (the client's metadata is
    stale), UNKNOWN_LEADER_EPOCH when newer (this broker has not caught up yet)."""
    if current_leader_epoch == UNDEFINED_EPOCH or current_leader_epoch == leader_epoch:
        return ErrorCode.none
    if current_leader_epoch < leader_epoch:
        return ErrorCode.fenced_leader_epoch
    return ErrorCode.unknown_leader_epoch


class LeaderEpochCache:
    """``(epoch, start offset)`` pairs, epochs and start offsets both increasing."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CHECKPOINT_FILE
        self._lock = threading.Lock()
        self._entries: list[tuple[int, int]] = self._read()

    def _read(self) -> list[tuple[int, int]]:
        try:
            lines = self.path.read_text().split("\n")
        except FileNotFoundError:
            return []
        try:
            if int(lines[0]) != _VERSION:
                raise ValueError(f"version {lines[0]}")
            count = int(lines[1])
            entries = [tuple(int(part) for part in line.split()) for line in lines[2 : 2 + count]]
            if len(entries) != count or any(len(entry) != 2 for entry in entries):
                raise ValueError("truncated")
            return [(epoch, offset) for epoch, offset in entries]
        except (ValueError, IndexError) as error:
            logger.warning("ignoring the unreadable leader-epoch checkpoint %s (%s)", self.path, error)
            return []

    def _write(self) -> None:
        lines = [str(_VERSION), str(len(self._entries))] + [f"{epoch} {offset}" for epoch, offset in self._entries]
        checkpoint.atomic_write(self.path, ("\n".join(lines) + "\n").encode("ascii"))

    @property
    def entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        with self._lock:
            return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op for an epoch already known or
        older than the latest). An entry starting at or after ``start_offset`` is replaced: the
        log was truncated below it."""
        with self._lock:
            if self._entries and epoch <= self._entries[-1][0]:
                return
            while self._entries and self._entries[-1][1] >= start_offset:
                self._entries.pop()
            self._entries.append((epoch, start_offset))
            self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget the epochs that start at or after ``end_offset`` (the log was truncated there)."""
        with self._lock:
            kept = [entry for entry in self._entries if entry[1] < end_offset]
            if len(kept) != len(self._entries):
                self._entries = kept
                self._write()

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for OffsetForLeaderEpoch: the largest known epoch <= ``requested``
        and the first offset after it; ``(-1, -1)`` when ``requested`` is above every known epoch
        or undefined."""
        with self._lock:
            if requested == UNDEFINED_EPOCH or not self._entries:
                return UNDEFINED_EPOCH, UNDEFINED_OFFSET
            if requested == self._entries[-1][0]:
                return requested, log_end_offset
            epochs = [epoch for epoch, _ in self._entries]
            higher = bisect_right(epochs, requested)
            if higher == len(epochs):
                return UNDEFINED_EPOCH, UNDEFINED_OFFSET
            if higher == 0:  # older than anything we know: it ended where our first epoch began
                return requested, self._entries[0][1]
            return self._entries[higher - 1][0], self._entries[higher][1]

    def rebuild(self, headers: list, log_end_offset: int) -> None:
        """Recreate the entries from stored batch headers (a missing or unreadable checkpoint)."""
        with self._lock:
            entries: list[tuple[int, int]] = []
            for header in headers:
                epoch = header.partition_leader_epoch
                if epoch >= 0 and (not entries or epoch > entries[-1][0]):
                    entries.append((epoch, header.base_offset))
            self._entries = [entry for entry in entries if entry[1] < log_end_offset]
            self._write()


def last_epoch_used(directory: Path, headers: Callable[[], list], log_start_offset: int, log_end_offset: int) -> int:
    """The latest leader epoch a partition's log has known (-1: none), tail lost to recovery
    included: the epoch its next leadership must go above, so that records written after a crash
    that lost a tail carry an epoch that tells them from the lost ones. A missing checkpoint of a
    non-empty log is rebuilt from its batches' stamped epochs (``headers``) first. (The entries past
    the recovered end are dropped when the replica opens, ``LeaderEpochCache.truncate_from_end``.)"""
    cache = LeaderEpochCache(directory)
    if not cache.path.exists() and log_end_offset > log_start_offset:
        cache.rebuild(headers(), log_end_offset)
    return cache.latest_epoch
