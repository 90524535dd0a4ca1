"""The source benchmark runs end to end at tiny sizes: the full run is `python bench/source_throughput.py`."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.paths import BENCH

pytestmark = pytest.mark.spark  # Spark runs in a subprocess

SCRIPT = BENCH / "source_throughput.py"


def test_source_benchmark_prints_both_rates_the_ratio_and_latency_percentiles():
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--parts",
            "synthetic",
            "--messages",
            "40000",
            "--rounds",
            "1",
            "--latency-messages",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    read = re.search(
        r"^read\s+pylog\s+([\d,]+) rows/s\s+synthetic\s+([\d,]+) rows/s\s+ratio pylog/synthetic\s+([\d.]+)$",
        result.stdout,
        re.MULTILINE,
    )
    assert read, result.stdout
    assert float(read.group(3)) > 0
    latency = re.search(r"p50 (\d+) ms, p95 (\d+) ms", result.stdout)
    assert latency and int(latency.group(1)) <= int(latency.group(2))
