"""Opening a partition's log directory: recovery after a crash or a clean stop.

* a temporary checkpoint file left by an interrupted atomic write is removed, and so are segment
  files waiting for their delayed removal (file_deleter.py);
* a compaction swap a crash cut short is finished (its ``.log.swap`` present: committed) or undone
  (see ``Log.replace_segments`` for the protocol), and stray ``.cleaned`` files go;
* index files without their segment are removed; segments from the recovery point on (normally
  just the active one) are rescanned (headers and CRC) and a torn tail is truncated at the last
  valid batch; if a segment other than the last had to be truncated, the segments after it are
  deleted, as Kafka does; missing or inconsistent indexes are rebuilt;
* the log start offset checkpoint is honoured, finishing a retention deletion a crash cut short.

Files: ``log-start-offset`` (the first offset still readable, written when retention advances it)
and ``recovery-point`` (the base offset of the active segment: everything below was flushed whole).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from kafka_spark.broker.storage import checkpoint
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.errors import KafkaStorageError
from kafka_spark.broker.storage.file_deleter import DELETE_LATER_SUFFIX
from kafka_spark.broker.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from kafka_spark.common.durable import fsync_dir

logger = logging.getLogger("kafka_spark.broker.storage")

LOG_START_OFFSET_FILE = "log-start-offset"
RECOVERY_POINT_FILE = "recovery-point"


def recover(directory: Path, name: str, config: LogConfig, now_ms: int) -> tuple[list[LogSegment], int]:
    """The segments of the log in ``directory`` (created if missing), recovered, and its log start
    offset. Raises KafkaStorageError when the directory cannot be read or written."""
    try:
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        for leftover in directory.glob("*" + checkpoint.TMP_SUFFIX):
            leftover.unlink()
        for leftover in directory.glob("*" + DELETE_LATER_SUFFIX):  # their removal was pending
            leftover.unlink()
        _finish_interrupted_swap(directory, name)
        bases = sorted(
            int(path.stem) for path in directory.glob("*" + LOG_SUFFIX) if path.stem.isdigit() and len(path.stem) == 20
        )
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            for orphan in directory.glob("*" + suffix):
                if orphan.stem.isdigit() and int(orphan.stem) not in bases:
                    orphan.unlink()
        start_checkpoint = _read_checkpoint(directory / LOG_START_OFFSET_FILE, name)
        recovery_point = _read_checkpoint(directory / RECOVERY_POINT_FILE, name) or 0
        segments = _load_segments(directory, bases, recovery_point, config, name, now_ms)
        if not segments:
            segments = [
                LogSegment(
                    directory,
                    start_checkpoint or 0,
                    index_interval_bytes=config.index_interval_bytes,
                    created_ms=now_ms,
                )
            ]
        log_start = max(start_checkpoint or 0, segments[0].base_offset)
        # Retention writes the checkpoint before deleting files; finish a deletion a crash cut short.
        while len(segments) > 1 and segments[1].base_offset <= log_start:
            segments.pop(0).delete()
        log_start = min(log_start, segments[-1].next_offset)
        if recovery_point != segments[-1].base_offset or created:
            # also makes a new directory's first segment durable (the write fsyncs the directory)
            checkpoint.write_offset(directory / RECOVERY_POINT_FILE, segments[-1].base_offset)
        if created:
            fsync_dir(directory.parent)
    except OSError as error:
        raise KafkaStorageError(f"cannot open the log of {name} in {directory}: {error}") from error
    return segments, log_start


def _finish_interrupted_swap(directory: Path, name: str) -> None:
    """Finish (``.log.swap`` present: committed) or undo (absent) a segment swap a crash cut short;
    see ``Log.replace_segments`` for the protocol."""
    swaps = sorted(directory.glob("*" + LOG_SUFFIX + SWAP_SUFFIX))
    deleted = sorted(directory.glob("*" + DELETED_SUFFIX))
    if swaps:
        for path in deleted:
            path.unlink()
        for kind in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
            for path in directory.glob("*" + kind + SWAP_SUFFIX):
                os.replace(path, path.with_name(path.name[: -len(SWAP_SUFFIX)]))
        logger.warning("%s: finished an interrupted compaction swap of %d segment file(s)", name, len(swaps))
    else:
        for path in deleted:
            original = path.with_name(path.name[: -len(DELETED_SUFFIX)])
            if original.exists():
                path.unlink()
            else:
                os.replace(path, original)
        if deleted:
            logger.warning("%s: undid an interrupted compaction swap (%d file(s) restored)", name, len(deleted))
        for path in directory.glob("*" + SWAP_SUFFIX):
            path.unlink()
    for path in directory.glob("*" + CLEANED_SUFFIX):
        path.unlink()
    if swaps or deleted:
        fsync_dir(directory)


def _read_checkpoint(path: Path, name: str) -> int | None:
    try:
        return checkpoint.read_offset(path)
    except ValueError as error:
        logger.warning("ignoring the checkpoint of %s: %s", name, error)
        return None


def _load_segments(
    directory: Path, bases: list[int], recovery_point: int, config: LogConfig, name: str, now_ms: int
) -> list[LogSegment]:
    segments: list[LogSegment] = []
    for position, base in enumerate(bases):
        last = position == len(bases) - 1
        segment, truncated = LogSegment.open(
            directory,
            base,
            index_interval_bytes=config.index_interval_bytes,
            recover=last or base >= recovery_point,
            created_ms=now_ms,
        )
        segments.append(segment)
        if truncated:
            segment.flush()
        if truncated and not last:
            logger.warning(
                "%s: segment %d was corrupt in the middle of the log; deleting the %d segment(s) "
                "after it, whose offsets no longer follow",
                name,
                base,
                len(bases) - position - 1,
            )
            for later in bases[position + 1 :]:
                LogSegment(directory, later).delete()
            break
    return segments
