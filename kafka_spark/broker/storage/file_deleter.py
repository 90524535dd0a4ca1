"""Segment files removed ``file.delete.delay.ms`` after they leave their log, as Kafka deletes
segments asynchronously: a segment that retention or DeleteRecords removed is closed and its files
renamed ``*.deleted-later`` at once (the log no longer lists it; a reader holding its descriptor
reads on), and the files are unlinked once the delay has passed. A log that closes drops its
waiting removals, as Kafka's scheduler drops them at shutdown: files a stop or a crash left behind
are removed when the log is next opened (storage/recovery.py).

One daemon thread sleeps until the next deadline and ends once nothing waits (the next
:func:`schedule` starts another); :func:`schedule` never blocks.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path

logger = logging.getLogger("kafka_spark.broker.storage")

#: The suffix of segment files waiting for their removal.
DELETE_LATER_SUFFIX = ".deleted-later"

_lock = threading.Condition()
_pending: list[tuple[float, int, tuple[Path, ...]]] = []  # (deadline on the monotonic clock, order, paths)
_order = itertools.count()
_thread: threading.Thread | None = None


def schedule(paths: Iterable[Path], delay_ms: int) -> None:
    """Unlink ``paths`` (missing ones are skipped) ``delay_ms`` from now."""
    global _thread
    entry = (time.monotonic() + delay_ms / 1000, next(_order), tuple(paths))
    if not entry[2]:
        return
    with _lock:
        heapq.heappush(_pending, entry)
        if _thread is None:
            _thread = threading.Thread(target=_run, name="pylog-file-deleter", daemon=True)
            _thread.start()
        _lock.notify()


def forget(directory: Path) -> None:
    """Drop the waiting removals of files in ``directory`` (its log closed); the files stay for
    the log's next open to remove."""
    with _lock:
        kept = [entry for entry in _pending if entry[2][0].parent != directory]
        if len(kept) != len(_pending):
            _pending[:] = kept
            heapq.heapify(_pending)
            _lock.notify()


def pending() -> int:
    """How many groups of files wait for their removal (for tests)."""
    with _lock:
        return len(_pending)


def _run() -> None:
    global _thread
    while True:
        with _lock:
            if not _pending:
                _thread = None
                return
            if _pending[0][0] > time.monotonic():
                _lock.wait(_pending[0][0] - time.monotonic())
                continue
            _, _, paths = heapq.heappop(_pending)
        for path in paths:
            try:
                path.unlink(missing_ok=True)
            except OSError as error:  # the next open of the log removes it
                logger.warning("could not remove %s: %s", path, error)
