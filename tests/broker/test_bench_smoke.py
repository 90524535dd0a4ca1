"""The broker benchmark runs end to end (tiny sizes): the full run is `python bench/broker_throughput.py`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "broker_throughput.py"


def test_broker_benchmark_prints_rates_and_ratios_for_both_brokers():
    result = subprocess.run(
        [sys.executable, str(BENCH), "--messages", "20000", "--consume-per-partition", "2000", "--rounds", "1"],
        capture_output=True, text=True, timeout=300, check=True,
    )
    for phase in ("produce", "consume", "consume-data", "produce-no-fsync"):
        match = re.search(rf"^{phase}\s+pylog\s+([\d,]+) msg/s\s+mock\s+([\d,]+) msg/s\s+ratio pylog/mock\s+([\d.]+)\s+"
                          rf"\(rounds ([\d.]+) to ([\d.]+)\)$",
                          result.stdout, re.MULTILINE)
        assert match, result.stdout
        assert int(match.group(1).replace(",", "")) > 0 and int(match.group(2).replace(",", "")) > 0
        low, median, high = float(match.group(4)), float(match.group(3)), float(match.group(5))
        assert 0 < low <= median <= high
    cpu = re.search(r"^CPU seconds per produce run \(median\): kcat ([\d.]+) into pylog, ([\d.]+) into the mock; "
                    r"brokers: pylog ([\d.]+), pylog without fsync ([\d.]+), mock ([\d.]+)$", result.stdout, re.MULTILINE)
    assert cpu, result.stdout
    assert float(cpu.group(1)) > 0 and float(cpu.group(2)) > 0  # kcat did the work both times
