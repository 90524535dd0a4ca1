"""A Spark standalone cluster of the installed PySpark on this machine, for tests and scripts that
need executors on distinct hosts: a master on 127.0.0.1 and one worker per loopback address
(127.0.0.2, 127.0.0.3, ...). Linux routes all of 127.0.0.0/8 to the loopback interface, so every
worker, and every executor it launches, is a host of its own to Spark's scheduler.

``local-cluster[N,C,M]`` gives executors of their own JVM and Python workers too, but all on one
host, and Spark never launches a speculative copy of a task on a host that already runs an
attempt of it: speculation needs this cluster.

    with StandaloneCluster(directory) as cluster:
        SparkSession.builder.master(cluster.master_url)...

The master and the workers are started from the installed PySpark's ``bin/spark-class``
(``org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), each in a session of its own;
executors and their Python daemons stay in their worker's session (the daemons make process
groups of their own, not sessions). :meth:`StandaloneCluster.close` SIGKILLs every process of
those sessions, an executor orphaned by a killed worker included, and each JVM is also set to
die with the process that started it (``PR_SET_PDEATHSIG``), so a killed test run leaks no JVM.
Logs and work directories are kept under ``directory``.

``spark_standalone`` is the session-wide pytest fixture (two workers, one core each), made
available to every test by tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"

#: How long the master and the workers may take to start (Spark starts slowly under load).
START_TIMEOUT_S = 240.0


class StandaloneClusterError(RuntimeError):
    """The cluster did not start; the message names the log to read."""


@dataclass(frozen=True)
class Process:
    """A process of this machine, as /proc tells it."""

    pid: int
    ppid: int
    session: int
    command: str


def processes() -> list[Process]:
    """Every process of this machine (Linux's /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
            continue
        found.append(Process(int(entry), int(fields[1]), int(fields[3]), command))
    return found


def executors(app_id: str) -> list[Process]:
    """The executor JVMs of application ``app_id`` running on this machine now."""
    return [p for p in processes() if EXECUTOR_CLASS in p.command and f"--app-id {app_id}" in p.command]


def python_workers(executor_pids: set[int]) -> list[Process]:
    """The Python workers of those executors now: children of their Python daemons (forked for
    a task, or idle between tasks when Spark reuses them)."""
    every = processes()
    daemons = {p.pid for p in every if p.ppid in executor_pids and "pyspark.daemon" in p.command}
    return [p for p in every if p.ppid in daemons]


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the process that started it dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG


def spark_class() -> Path:
    """``bin/spark-class`` of the installed PySpark."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()) / "bin" / "spark-class"


def _check_loopback(host: str) -> None:
    with socket.socket() as probe:
        try:
            probe.bind((host, 0))
        except OSError as error:
            raise StandaloneClusterError(
                f"cannot bind {host}: {error}. The workers need loopback addresses of their own "
                "(all of 127.0.0.0/8 is loopback on Linux; elsewhere add aliases to the loopback interface)"
            ) from None


class StandaloneCluster:
    """A master on 127.0.0.1 and a worker on each of ``hosts``, ``cores`` cores and ``memory``
    each. Not thread-safe; one owner starts and closes it."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        hosts: tuple[str, ...] = ("127.0.0.2", "127.0.0.3"),
        cores: int = 1,
        memory: str = "1g",
    ) -> None:
        self.directory = Path(directory)
        self.hosts = hosts
        self.cores = cores
        self.memory = memory
        self.master_url = ""
        self._started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> StandaloneCluster:
        for host in ("127.0.0.1", *self.hosts):
            _check_loopback(host)
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            master_log = self._launch("master", "127.0.0.1", [MASTER_CLASS, "--host", "127.0.0.1"])
            self.master_url = self._wait_for(master_log, r"Starting Spark master at (spark://\S+)")
            logs = [
                self._launch(
                    f"worker-{host}",
                    host,
                    [WORKER_CLASS, "--host", host, "--cores", str(self.cores), "--memory", self.memory]
                    + ["--work-dir", str(self.directory / f"work-{host}"), self.master_url],
                )
                for host in self.hosts
            ]
            for log in logs:
                self._wait_for(log, r"(Successfully registered with master)")
        except BaseException:
            self.close()
            raise
        return self

    def _launch(self, name: str, host: str, args: list[str]) -> Path:
        log = self.directory / f"{name}.log"
        env = dict(
            os.environ,
            SPARK_LOCAL_IP=host,
            SPARK_DAEMON_MEMORY="256m",
            SPARK_LOG_DIR=str(self.directory),
            SPARK_WORKER_DIR=str(self.directory / f"work-{host}"),
        )
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [str(spark_class()), *args, "--port", "0", "--webui-port", "0"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        self._started.append((process, log))
        return log

    def _wait_for(self, log: Path, pattern: str) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        process = next(p for p, path in self._started if path == log)
        while time.monotonic() < deadline:
            match = re.search(pattern, log.read_text(errors="replace"))
            if match:
                return match.group(1)
            if process.poll() is not None:
                raise StandaloneClusterError(f"{log.name[:-4]} exited with {process.returncode}; see {log}")
            time.sleep(0.2)
        raise StandaloneClusterError(f"{log.name[:-4]} did not start in {START_TIMEOUT_S:.0f} s; see {log}")

    def sessions(self) -> set[int]:
        """The session ids of the master and the workers (their pids)."""
        return {process.pid for process, _ in self._started}

    def members(self) -> list[Process]:
        """Every live process of the cluster: master, workers, executors, Python daemons and workers."""
        sessions = self.sessions()
        return [p for p in processes() if p.session in sessions]

    def close(self) -> None:
        """SIGKILL every process of the cluster and wait for the master and workers to go."""
        sessions = self.sessions()
        for _ in range(3):  # a dying worker's executor may be caught mid-fork: look again
            left = [p for p in processes() if p.session in sessions]
            if not left:
                break
            for member in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(member.pid, signal.SIGKILL)
            time.sleep(0.1)
        for process, _ in self._started:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
        self._started.clear()


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """One standalone cluster for the test session: two workers on 127.0.0.2 and 127.0.0.3, one
    core each. Tests run their Spark application on it in a subprocess (one SparkContext per
    process) with ``master_url``."""
    with StandaloneCluster(tmp_path_factory.mktemp("spark-standalone")) as cluster:
        yield cluster
