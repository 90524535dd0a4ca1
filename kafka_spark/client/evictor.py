"""The thread that closes a Python worker's idle pooled clients.

PySpark keeps its Python workers between tasks and queries, and the worker's pools (consumers,
offset readers, the topic sink's producers) keep their clients so that the next batch finds them
connected. A client nobody uses any more (its query stopped, its cluster is gone) would otherwise
live as long as the worker, with its threads and connections, reconnecting every few seconds to
an address that may now be someone else's. As Spark's own pools do
(``spark.kafka.consumer.cache.evictorThreadRunInterval``,
``spark.kafka.producer.cache.evictorThreadRunInterval``), a daemon thread per pool and process
closes the clients idle past the pool's timeout, once a minute.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

log = logging.getLogger("kafka_spark")

#: How often an evictor looks for idle clients (Spark's evictorThreadRunInterval default, 1m).
INTERVAL_S = 60.0

#: What an evictor calls: ``evict_ref()`` gives the eviction function, or None once its pool is
#: gone (a ``weakref.WeakMethod``), which ends the thread.
EvictRef = Callable[[], "Callable[[], object] | None"]


class Evictor:
    """Starts its pool's evictor thread, once per process: a worker forked from a process whose
    evictor runs has no such thread (fork copies only the forking thread), and starts its own."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._pid: int | None = None

    def ensure_running(self, evict_ref: EvictRef, interval_s: float = INTERVAL_S) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
        thread = threading.Thread(target=_run, args=(self.name, evict_ref, interval_s), name=self.name)
        thread.daemon = True
        thread.start()

    def running(self) -> bool:
        """Whether this process runs the thread (for tests and diagnostics)."""
        return self._pid == os.getpid() and any(t.name == self.name for t in threading.enumerate())


def _run(name: str, evict_ref: EvictRef, interval_s: float) -> None:
    while True:
        time.sleep(interval_s)
        evict = evict_ref()
        if evict is None:
            return
        try:
            evict()
        except Exception:  # never let the evictor die; the next round tries again
            log.exception("pylog: %s could not close idle clients", name)
        del evict
