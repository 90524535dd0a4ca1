"""Keep large buffers in the broker process instead of returning them to the kernel.

A broker moves megabyte-sized buffers all the time (a Produce frame, its records, a Fetch
response). glibc serves allocations above its mmap threshold with fresh mappings and hands
them back on free, so every request faulted its pages in again: ~84k minor faults and a third of
the broker's CPU for 2M produced messages (bench/broker_throughput.py). Raising the mmap and trim
thresholds makes those buffers come from the heap and be reused. Process-wide, so only the
dedicated broker process (``pylog broker start``) does it, never a user's process hosting an
in-process EmbeddedBroker.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

__all__ = ["keep_freed_memory"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

log = logging.getLogger("kafka_spark.broker")


def keep_freed_memory(mmap_threshold: int = 64 << 20, trim_threshold: int = 256 << 20) -> bool:
    """Raise glibc's mmap and trim thresholds; False (and nothing changed) on other C libraries."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1 and mallopt(_M_TRIM_THRESHOLD, trim_threshold) == 1
    if not ok:
        log.debug("mallopt refused the thresholds; the allocator keeps its defaults")
    return ok
