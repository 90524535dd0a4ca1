"""librdkafka clients that outlive their test.

A confluent-kafka client whose last reference sits in a reference cycle (a future holding the
exception whose traceback holds the test's frame, a callback closing over its client) lives until
Python's cycle collector happens to run, which can be many tests later. Until then its threads
reconnect to a broker that has stopped, every few seconds, at a port number the kernel is free to
hand to the next listener. Once that listener was the socket on which Spark waits for its Python
worker: the stray client connected first, Spark's authentication handshake failed, and a test
that had nothing to do with the client failed (CI of 6908a18). The suite's leak check
(leaks.py) therefore frees such clients at the end of the test that left them, and fails a test
that leaves a client something still references.

librdkafka names its threads ``rdk:main``, ``rdk:broker-N``, ``rdk:bg``: counting them in
/proc/self/task costs about 0.1 ms, so only a test that left threads behind pays for a collection.
"""

from __future__ import annotations

import gc
import os


def librdkafka_threads() -> int:
    """How many librdkafka threads this process runs."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                count += comm.read().startswith("rdk:")
        except OSError:  # the thread ended while we looked
            pass
    return count


def free_clients_left_behind(threads_before: int) -> None:
    """Run the cycle collector if more librdkafka threads run than ``threads_before``: clients
    kept alive only by reference cycles are destroyed (their threads end before this returns);
    clients still referenced, e.g. by a module-scoped fixture, are left alone."""
    if librdkafka_threads() > threads_before:
        gc.collect()
