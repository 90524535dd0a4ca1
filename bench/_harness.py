"""Shared pieces of the benchmarks: start a pylog broker process and librdkafka's mock cluster."""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kafka_spark.testing import BrokerProcess


class BrokerAddress(str):
    """Bootstrap servers of a broker process, with its ``pid`` (for its CPU time)."""

    pid: int


def scratch_dir(prefix: str) -> str:
    """A new temporary directory owned by this process, made after removing those that earlier
    benchmarks left: a run killed by a signal never reaches its cleanup, and its brokers' data (a
    gigabyte and more a round) would stay in the temporary directory for good. Beside each
    directory an owner file (``<directory>.owner``) holds its process's pid and start time; a
    directory whose process is no longer running is removed, one without an owner file is left
    alone. :func:`remove_scratch_dir` removes one at the end of its run."""
    for owner in glob.glob(os.path.join(glob.escape(tempfile.gettempdir()), glob.escape(prefix) + "*.owner")):
        if not _owner_running(owner):
            remove_scratch_dir(owner.removesuffix(".owner"))
    path = tempfile.mkdtemp(prefix=prefix)
    with open(path + ".owner", "w") as out:
        out.write(_process_identity(os.getpid()) or str(os.getpid()))
    return path


def remove_scratch_dir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        os.remove(path + ".owner")


def _process_identity(pid: int) -> str | None:
    """``"<pid> <start time>"`` of a running process (its start time tells a reused pid apart), or
    None when it is not running; None too where there is no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return f"{pid} {fields[19]}"  # field 22 of stat: the start time, in clock ticks after boot


def _owner_running(owner: str) -> bool:
    if not os.path.isdir("/proc"):
        return True  # no way to tell here: never remove what may be in use
    try:
        with open(owner) as found:
            identity = found.read().strip()
        pid = int(identity.split()[0])
    except (OSError, ValueError, IndexError):
        return True  # not an owner file this module wrote: leave it
    return _process_identity(pid) == identity


@contextmanager
def pylog_broker_process(
    log_dir: str | None = None, partitions: int = 4, overrides: tuple[str, ...] = (), stderr_path: str | None = None
) -> Iterator[BrokerAddress]:
    """A `pylog broker start` process on a free port with data on disk; yields its bootstrap
    servers. ``overrides``: broker settings as ``KEY=VALUE`` (``--override``); ``stderr_path``:
    a file that receives the broker's log (discarded by default). The tests' launcher
    (kafka_spark.testing.BrokerProcess), with the benchmarks' scratch directories."""
    own_dir = log_dir is None
    log_dir = log_dir or scratch_dir("pylog-bench-")
    home = scratch_dir("pylog-bench-home-")  # its own discovery registry, removed after
    try:
        broker = BrokerProcess(
            "--partitions",
            str(partitions),
            *(arg for item in overrides for arg in ("--override", item)),
            home=home,
            log_dir=log_dir,
            stderr=stderr_path or subprocess.DEVNULL,
            # Its own session, as Apache Kafka's is (tests/interop/references.py) and as a broker
            # started from its own terminal or service is: Linux's scheduler (autogroup) then shares
            # the CPU between the broker and the benchmark's clients as separate programs, instead of
            # counting the broker's one event-loop thread as one more thread of the client's session.
            new_session=True,
            # A benchmark killed by a signal never reaches the ``finally`` below: the kernel then
            # ends the broker (SIGTERM when this process dies), instead of leaving it running.
            end_with_parent=True,
        )
        with broker:
            address = BrokerAddress(broker.bootstrap_servers)
            address.pid = broker.pid
            yield address
    finally:
        if own_dir:
            remove_scratch_dir(log_dir)
        remove_scratch_dir(home)


@contextmanager
def mock_cluster(partitions: int = 4) -> Iterator[str]:
    """librdkafka's built-in mock cluster (a Kafka-protocol broker by others, in-memory).

    It is started by any librdkafka client with ``test.mock.num.brokers``; its address appears
    only in the client's debug log, which we read through a logger.
    """
    import logging

    from confluent_kafka import Producer

    found = threading.Event()
    address: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            match = re.search(r"replaced with (\S+)", record.getMessage())
            if match and not address:
                address.append(match.group(1).rstrip(","))
                found.set()

    logger = logging.getLogger("pylog.bench.mock")
    logger.addHandler(Grab())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    holder = Producer(
        {
            "test.mock.num.brokers": 1,
            "bootstrap.servers": "unused:9092",
            "debug": "mock",
            "logger": logger,
            "topic.metadata.refresh.interval.ms": 3_600_000,
        }
    )
    holder.poll(0)
    if not found.wait(10):
        holder.poll(0.5)
    if not address:
        raise RuntimeError("could not find the mock cluster's address in librdkafka's debug log")
    try:
        yield address[0]
    finally:
        del holder


def process_cpu_seconds(pid: int | None = None) -> float:
    """User plus system CPU seconds of process ``pid`` (all its threads), or of this process."""
    if pid is None:
        return time.process_time()
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU seconds of this process's finished children (the commands ``timed`` ran)."""
    times = os.times()
    return times.children_user + times.children_system


def timed(command: list[str], stdin_path: str | None = None) -> float:
    start = time.perf_counter()
    if stdin_path is None:
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        with open(stdin_path, "rb") as stdin:
            subprocess.run(command, check=True, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def make_input(path: str, count: int) -> None:
    """``count`` lines of 100 bytes each (a 100-byte record per line) into ``path``."""
    line = b"x" * 100 + b"\n"
    with open(path, "wb") as out:
        chunk = line * 10_000
        for _ in range(count // 10_000):
            out.write(chunk)
        out.write(line * (count % 10_000))


def tree_cpu_seconds(root: int | None = None) -> float:
    """User plus system CPU seconds of process ``root`` (default: this one) and every live
    descendant (Spark's JVM, its Python workers, a broker started here), including what their
    finished children left them. Less sensitive to other work on the machine than wall time."""
    root = root or os.getpid()
    procs: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        procs[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]))
    total = 0
    for pid, (_, ticks) in procs.items():
        at = pid
        while at in procs and at != root:
            at = procs[at][0]
        if at == root:
            total += ticks
    return total / os.sysconf("SC_CLK_TCK")
