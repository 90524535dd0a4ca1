"""Running the `pylog` command line as a user does, for the CLI tests (the `running_broker`
fixture in conftest.py, a broker started with `pylog broker start`, gives its ``env``)."""

from __future__ import annotations

import subprocess
import sys


def pylog(*args: str, env: dict, stdin: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafka_spark.cli", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
        check=check,
    )
