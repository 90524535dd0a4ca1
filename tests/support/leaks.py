"""No client or broker outlives its test: what a test left running, found when it ends.

A client that outlives its test keeps its threads and reconnects, every few seconds, to a port
its stopped broker held, which the kernel is free to hand to the next listener: once that was the
socket on which Spark waits for its Python worker, the stray client connected first, Spark's
handshake failed, and a test that had nothing to do with the client failed (CI of 6908a18). A
broker left running keeps its port and threads for the rest of the run. So the suite's autouse
fixture (``no_leaks``, registered by tests/conftest.py) takes a :class:`Snapshot` of this process
before each test and fails the test, at teardown, if after it (and its fixtures) ended the process
runs more of any of:

- librdkafka clients: their threads, ``rdk:main``, ``rdk:broker-N`` ... (clients that only a
  reference cycle keeps alive are freed first by the cycle collector: see settled_leaks);
- Python threads (an embedded broker's loop, a producer thread, an evictor);
- listening TCP sockets (an embedded broker or a server a test started);
- child processes (a ``pylog broker start`` or Spark driver a test started);
- active Spark streaming queries, when the session exists.

What lives as long as the process by design is not a leak: threads started before the test
(session and module fixtures are set up before it), py4j's threads (Spark's gateway and its
callback connections, which the session keeps), the pools' evictor threads, one per pool and
process (kafka_spark.client.evictor) — the clients *in* those pools are counted — and the log
storage's file deleter, one per process, which removes deleted segments' files
``file.delete.delay.ms`` later (kafka_spark.broker.storage.file_deleter) and ends once none wait. Things end
asynchronously (a closed client's threads, a terminated process), so the check waits up to
:data:`SETTLE_S` for the count to come down before it fails; a clean test pays nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.support.client_threads import free_clients_left_behind, librdkafka_threads

#: How long what a test started may take to end after it, before it counts as left behind.
SETTLE_S = 10.0


@dataclass(frozen=True)
class Snapshot:
    """What runs in this process at one moment."""

    rdkafka_threads: int
    threads: frozenset[int] = field(default_factory=frozenset)  # Thread objects' ids
    listening: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    children: frozenset[int] = field(default_factory=frozenset)
    streaming_queries: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def take(cls) -> Snapshot:
        return cls(
            rdkafka_threads=librdkafka_threads(),
            threads=frozenset(id(thread) for thread in threading.enumerate()),
            listening=frozenset(listening_sockets()),
            children=frozenset(child_processes()),
            streaming_queries=frozenset(active_streaming_queries()),
        )


def _lifetime_thread(thread: threading.Thread) -> bool:
    if thread.name.startswith("pylog-") and thread.name.endswith("-evictor"):  # one per pool and process
        return True
    if thread.name == "pylog-file-deleter":  # one per process
        return True
    module = type(thread).__module__ or ""
    target = getattr(thread, "_target", None)
    target_module = getattr(target, "__module__", "") or ""
    return module.startswith("py4j") or target_module.startswith("py4j")


def _ended_foreign_thread(thread: threading.Thread) -> bool:
    """A thread Python did not start (librdkafka's, calling a token callback or a logger) gets a
    ``_DummyThread`` entry the first time it runs Python code that asks for the current thread
    (a log record does), and Python 3.11 keeps the entry after the thread ended. Such a thread is
    gone when the OS no longer lists it; librdkafka's live threads are counted apart."""
    return isinstance(thread, threading._DummyThread) and not os.path.exists(f"/proc/self/task/{thread.native_id}")


def left_behind(before: Snapshot) -> list[str]:
    """What runs now that did not at ``before``, each item named for the failure message."""
    found = []
    rdkafka = librdkafka_threads()
    if rdkafka > before.rdkafka_threads:
        found.append(f"{rdkafka - before.rdkafka_threads} librdkafka client thread(s) (a client not closed)")
    threads = [
        thread
        for thread in threading.enumerate()
        if id(thread) not in before.threads
        and thread.is_alive()
        and not _lifetime_thread(thread)
        and not _ended_foreign_thread(thread)
    ]
    if threads:
        found.append("thread(s) " + ", ".join(f"{thread.name!r} ({_started_by(thread)})" for thread in threads))
    ports = sorted(set(listening_sockets()) - before.listening)
    if ports:
        found.append("listening socket(s) " + ", ".join(f"{host}:{port}" for host, port in ports))
    children = sorted(set(child_processes()) - before.children)
    if children:
        found.append("child process(es) " + ", ".join(f"{pid} ({_command(pid)})" for pid in children))
    queries = sorted(set(active_streaming_queries()) - before.streaming_queries)
    if queries:
        found.append("active streaming query(ies) " + ", ".join(queries))
    return found


def settled_leaks(before: Snapshot, settle_s: float | None = None) -> list[str]:
    """:func:`left_behind`, after giving what is still ending up to ``settle_s`` to end.

    A librdkafka client that only a reference cycle keeps alive is freed first, by the cycle
    collector (client_threads.py): such cycles come with exceptions (a future's exception holds
    its traceback, whose frames hold the test's locals; confluent-kafka's AdminClient has no
    close()), the client is unreachable, and once collected it is gone. A client something
    still references (a module, a pool, a fixture of a wider scope, a thread) survives the
    collection and is reported."""
    found = left_behind(before)
    if not found:
        return found
    free_clients_left_behind(before.rdkafka_threads)
    deadline = time.monotonic() + (SETTLE_S if settle_s is None else settle_s)
    while found and time.monotonic() < deadline:
        found = left_behind(before)
        if found:
            time.sleep(0.05)
    return found


def _started_by(thread: threading.Thread) -> str:
    target = getattr(thread, "_target", None)
    if target is not None:
        return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', target)}"
    return f"{type(thread).__module__}.{type(thread).__qualname__}"


def listening_sockets() -> set[tuple[str, int]]:
    """(address, port) of the TCP sockets this process listens on (Linux: /proc)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/self/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    if not inodes:
        return set()
    found = set()
    for table, width in (("/proc/self/net/tcp", 8), ("/proc/self/net/tcp6", 32)):
        with contextlib.suppress(OSError), open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                    continue
                address, port = fields[1].split(":")
                found.add((_address(address, width), int(port, 16)))
    return found


def _address(hexadecimal: str, width: int) -> str:
    if width == 8:
        return ".".join(str(int(hexadecimal[i : i + 2], 16)) for i in (6, 4, 2, 0))
    return "[" + hexadecimal + "]"  # IPv6: shown raw, only compared


def child_processes() -> set[int]:
    """Pids of this process's live (not zombie) children."""
    found = set()
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/children") as children:
                found.update(int(pid) for pid in children.read().split())
    return {pid for pid in found if _state(pid) not in ("Z", "X", None)}


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return "?"


def active_streaming_queries() -> set[str]:
    """Names (or ids) of the Spark streaming queries active in this process's session, if the
    test run has started one; no session is started for this."""
    session_module = sys.modules.get("pyspark.sql.session")
    if session_module is None:
        return set()
    session = getattr(session_module.SparkSession, "_instantiatedSession", None)
    if session is None or session.sparkContext._jsc is None:
        return set()
    return {query.name or str(query.id) for query in session.streams.active}


@pytest.fixture(autouse=True)
def no_leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test (an error at its teardown) if it left a client, thread, listening socket,
    child process or streaming query running: see this module's docstring. Set up before, and
    so torn down after, the test's other function-scoped fixtures (its brokers, its clients)."""
    before = Snapshot.take()
    yield
    found = settled_leaks(before)
    if not found:
        return
    for pid in child_processes() - before.children:  # so that they burden no later test
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    pytest.fail(f"{request.node.nodeid} left running after it ended: {'; '.join(found)}", pytrace=False)
