"""Running the `pylog` command line as a user does, for the CLI tests (the `running_broker`
fixture, a broker started with `pylog broker start`, is in conftest.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


def pylog(*args: str, env: dict, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafka_spark.cli", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
        check=check,
    )


@contextlib.contextmanager
def broker_process(server: Path, workdir: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """`pylog broker start SERVER` in a process of its own (its PYLOG_HOME and log directory under
    ``workdir``): ``(process, bootstrap servers)``. Stopped on exit; its log is then
    ``process.stderr.read()``."""
    env = dict(os.environ, PYLOG_HOME=str(workdir / "home"))
    process = subprocess.Popen(
        [sys.executable, "-m", "kafka_spark.cli", "broker", "start", str(server), "--log-dir", str(workdir / "data")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        yield process, process.stdout.readline().strip().split("=", 1)[1]
    finally:
        process.terminate()
        process.wait(30)
