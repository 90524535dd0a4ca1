"""Sustained acks=all load on a deliberately tiny fsync ring: every acknowledged record is stored
once and the broker keeps answering. The long version (the scenario that once wedged the broker
after ~11 minutes) is `python scripts/soak_acks_all.py --minutes 11 --producers 2`."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from kafka_spark.broker.uring import FsyncRing
from tests.support.paths import SCRIPTS

SCRIPT = SCRIPTS / "soak_acks_all.py"


def run_soak(*args: str, env: dict[str, str] | None = None) -> dict[str, str]:
    result = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=900, env=env)
    summary = [line for line in result.stdout.splitlines() if line.startswith("soak:")]
    assert summary, result.stdout[-2000:] + result.stderr[-3000:]
    assert summary[-1].endswith(" OK") and result.returncode == 0, summary[-1] + "\n" + result.stderr[-3000:]
    return dict(re.findall(r"(\w+)=(\S+)", summary[-1]))


def test_a_tiny_fsync_ring_overflows_and_every_acked_record_is_stored_once(tmp_path):
    """Sixteen partitions' fsyncs on a ring whose completion queue holds four: completions pile
    up in the kernel's overflow list all the time, and the broker reaps them (its own count says
    so, so this cannot pass without the overflow path running)."""
    ring = FsyncRing.create(lambda *_: None)
    if ring is None:
        pytest.skip("this kernel or sandbox offers no io_uring: nothing to overflow (the thread path is tested below)")
    ring.close()
    figures = run_soak(
        "--seconds",
        "20",
        "--producers",
        "2",
        "--partitions",
        "16",
        "--override",
        "log.flush.io.uring.entries=2",
        "--broker-log",
        str(tmp_path / "broker.log"),
    )
    assert int(figures["acked"]) > 0 and figures["duplicates"] == figures["missing"] == figures["failed"] == "0"
    assert figures["broker_answering"] == "True"
    assert int(figures["overflows"]) > 0 and int(figures["overflow_completions"]) > 0, figures
    assert figures["stuck_fsyncs"] == figures["dropped_completions"] == "0"


def test_acks_all_load_on_the_thread_path_stores_every_acked_record_once(tmp_path):
    """Where io_uring is not offered the broker fsyncs on threads: the same load, the same
    guarantee."""
    env = dict(os.environ, PYLOG_NO_IO_URING="1")
    figures = run_soak(
        "--seconds",
        "10",
        "--producers",
        "2",
        "--partitions",
        "8",
        "--broker-log",
        str(tmp_path / "broker.log"),
        env=env,
    )
    assert int(figures["acked"]) > 0 and int(figures["fsyncs"]) > 0
    assert figures["overflows"] == "-1"  # no ring: the thread path ran
