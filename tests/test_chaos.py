"""Short chaos runs (10 SIGKILLs of the Spark driver per sink, a producer writing throughout);
the long version is `python scripts/chaos_pipeline.py --kills 50` (see its docstring)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "chaos_pipeline.py"


@pytest.mark.parametrize("sink,seed", [("files", 11), ("topic", 12)])
def test_driver_killed_ten_times_leaves_every_input_exactly_once(sink, seed):
    result = subprocess.run([sys.executable, str(SCRIPT), "--sink", sink, "--kills", "10", "--seed", str(seed)],
                            capture_output=True, text=True, timeout=1200)
    summary = [line for line in result.stdout.splitlines() if line.startswith("chaos:")]
    assert summary and summary[-1].endswith(" OK"), result.stdout[-2000:] + result.stderr[-2000:]
    assert " duplicates=0 missing=0 unexpected=0 " in summary[-1]
    assert result.returncode == 0
