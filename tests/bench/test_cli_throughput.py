"""The CLI benchmark runs end to end at a small size: the full run is `python bench/cli_throughput.py`."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.paths import BENCH

SCRIPT = BENCH / "cli_throughput.py"


def test_cli_benchmark_runs_kcat_and_pylog_side_by_side_and_prints_the_ratios():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--messages", "5000", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    for phase in ("produce", "consume", "consume -e"):
        line = re.search(
            rf"^{phase}\s+pylog\s+([\d,]+) msg/s\s+kcat\s+([\d,]+) msg/s\s+ratio pylog/kcat\s+([\d.]+)",
            result.stdout,
            re.MULTILINE,
        )
        assert line, result.stdout
        assert float(line.group(3)) > 0
        print(line.group(0))  # the ratio at this size, for the record; timing is not asserted
