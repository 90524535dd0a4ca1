"""Finding the local embedded broker without options, and starting one on demand.

The registry is one JSON file, ``$PYLOG_HOME/broker.json`` (``PYLOG_HOME`` defaults to
``~/.pylog``): ``{"bootstrap_servers", "pid", "log_dir"}`` of the machine's discovery broker, the
one ``pylog broker start`` (or an on-demand start) runs. An ``EmbeddedBroker`` used in-process
(examples, notebooks, tests) never registers: it would hide the discovery broker from the CLI
and from queries without ``kafka.bootstrap.servers``. A registry entry counts only while its
process lives and its port accepts connections, so a crashed broker is never used; a live one is
never replaced (:func:`register` refuses, naming it) and only its own broker removes it.

On-demand brokers run detached (``pylog broker start --registered``) with their data under
``$PYLOG_HOME/data``; ``pylog broker status`` and ``pylog broker stop`` manage them.

This is a single-machine convenience: Spark's planner resolves the address once on the driver
and hands it to executors inside each task, so executors never read this file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

START_TIMEOUT_S = 60.0
DEFAULT_PORT = 9092


@dataclass(frozen=True)
class BrokerInfo:
    bootstrap_servers: str
    pid: int
    log_dir: str


def pylog_home() -> Path:
    return Path(os.environ.get("PYLOG_HOME") or Path.home() / ".pylog")


def registry_path() -> Path:
    return pylog_home() / "broker.json"


def default_data_dir() -> Path:
    return pylog_home() / "data"


class BrokerAlreadyRunning(RuntimeError):
    """Another live broker holds the registry; the message names it and how to stop it."""

    def __init__(self, running: BrokerInfo) -> None:
        super().__init__(
            f"a local broker is already running at {running.bootstrap_servers} (pid {running.pid}, data in "
            f"{running.log_dir}); use it, or stop it first with `pylog broker stop`"
        )
        self.running = running


def register(info: BrokerInfo) -> None:
    """Make ``info`` the discovery broker. Raises :class:`BrokerAlreadyRunning` if another live
    broker is registered (a dead one's entry is replaced). Atomic across processes: the check
    and the write happen under ``$PYLOG_HOME/broker.json.lock``."""
    path = registry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock(_registry_lock()):
        current = _read()
        if current is not None and current != info and _alive(current):
            raise BrokerAlreadyRunning(current)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(asdict(info)))
        os.replace(temporary, path)


def unregister(info: BrokerInfo) -> None:
    """Remove the entry if it is still ``info``: another broker's entry is never touched."""
    if not registry_path().parent.exists():
        return
    with _lock(_registry_lock()):
        if _read() == info:
            with contextlib.suppress(FileNotFoundError):
                registry_path().unlink()


def find_running() -> BrokerInfo | None:
    info = _read()
    if info is None or not _alive(info):
        return None
    return info


def ensure_running() -> BrokerInfo:
    """The running local broker, starting one in the background if there is none."""
    info = find_running()
    if info is not None:
        return info
    home = pylog_home()
    home.mkdir(parents=True, exist_ok=True)
    with _lock(home / "broker.lock"):
        info = find_running()  # another process may have started it while we waited
        if info is not None:
            return info
        log_file = open(home / "broker.log", "ab")
        port = DEFAULT_PORT if _port_free(DEFAULT_PORT) else 0  # Kafka's habitual port when free
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kafka_spark.cli",
                "broker",
                "start",
                "--log-dir",
                str(default_data_dir()),
                "--port",
                str(port),
                "--registered",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,  # survives the Spark worker that started it
            close_fds=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            info = find_running()
            if info is not None:
                return info
            time.sleep(0.1)
    raise RuntimeError(
        f"started an embedded broker but it did not come up within {START_TIMEOUT_S:.0f}s; "
        f"see {home / 'broker.log'}, or set kafka.bootstrap.servers to a running Kafka cluster"
    )


def stop_running(timeout_s: float = 30.0) -> BrokerInfo | None:
    """Stop the registered broker (SIGTERM, then wait). Returns what was stopped, if anything."""
    info = find_running()
    if info is None:
        return None
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _pid_alive(info.pid):
        time.sleep(0.1)
    return info


def _registry_lock() -> Path:
    # Not broker.lock: ensure_running holds that while the broker it started registers.
    return pylog_home() / "broker.json.lock"


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _read() -> BrokerInfo | None:
    try:
        data = json.loads(registry_path().read_text())
        return BrokerInfo(str(data["bootstrap_servers"]), int(data["pid"]), str(data["log_dir"]))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _alive(info: BrokerInfo) -> bool:
    if not _pid_alive(info.pid):
        return False
    for address in info.bootstrap_servers.split(","):  # a cluster (pylog cluster start) lists every broker
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                return True
        except OSError:
            continue
    return False


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
