"""The cluster's chaos scripts run end to end at a small size; the full runs are
`python scripts/cluster_chaos.py --kills 10 [--topic-sink]` (one broker at a time, in-process)
and `python scripts/cluster_sigkill.py --kills 10` (SIGKILL of the whole cluster process, with
pylog-files and the exactly-once topic sink reading through it)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.paths import SCRIPTS


def run(script: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(SCRIPTS / script), *args], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return result.stdout


def test_broker_kills_lose_and_repeat_no_acknowledged_record():
    out = run("cluster_chaos.py", "--kills", "2", "--seed", "3")
    assert len(re.findall(r"^kill \d+: broker \d", out, re.MULTILINE)) == 2, out
    summary = re.search(r"^acknowledged (\d+)  failed 0  consumed (\d+)  missing 0  duplicate values 0$", out, re.M)
    assert summary and int(summary.group(1)) > 0 and summary.group(1) == summary.group(2), out


@pytest.mark.spark  # Spark runs in a subprocess
def test_a_sigkilled_cluster_loses_and_repeats_nothing_in_either_sink():
    out = run("cluster_sigkill.py", "--kills", "1", "--seed", "3")
    assert re.search(r"^kill 1: SIGKILL", out, re.MULTILINE), out
    acknowledged = re.search(r"^acknowledged (\d+)  failed 0$", out, re.MULTILINE)
    assert acknowledged and int(acknowledged.group(1)) > 0, out
    for sink in ("topic sink", "pylog-files"):
        exact = rf"^{sink}: (\d+) records  lost 0  duplicates 0  not acknowledged 0 .* query error None$"
        line = re.search(exact, out, re.MULTILINE)
        assert line and line.group(1) == acknowledged.group(1), out
