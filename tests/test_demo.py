"""`make demo` (python -m kafka_spark.demo) runs, and a second run resumes without duplicates."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark  # Spark runs in a subprocess


def run_demo(cwd) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "kafka_spark.demo"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def totals(out: str) -> tuple[int, int, int]:
    rows_in = int(re.search(r"rows in \(this run\):\s+([\d,]+)", out).group(1).replace(",", ""))
    rows_out, covered = re.search(r"rows out \(total\):\s+([\d,]+) closed .* covering ([\d,]+) orders", out).groups()
    return rows_in, int(rows_out.replace(",", "")), int(covered.replace(",", ""))


def test_demo_runs_twice_and_resumes_without_duplicates(tmp_path):
    first = run_demo(tmp_path)
    assert "DUPLICATES" not in first
    in1, out1, covered1 = totals(first)
    assert in1 == 5000 and out1 > 0 and 0 < covered1 <= 5000
    second = run_demo(tmp_path)
    assert "DUPLICATES" not in second
    in2, out2, covered2 = totals(second)
    assert in2 == 5000, "the second run reads only the new orders (resumed from its checkpoint)"
    assert out2 > out1 and covered1 < covered2 <= 10000
    assert "offsets committed" in second and '"orders"' in second
