"""Short chaos runs: ten SIGKILLs of the Spark driver per sink, with a producer writing
throughout: seven (files) or eight (topic) at random moments, and one inside each window between
the sink's commit steps (aimed by scripts/chaos_hooks). The long version is
`python scripts/chaos_pipeline.py --kills 50` (see its docstring)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "chaos_pipeline.py"


@pytest.mark.parametrize("sink,kills,seed", [("files", 7, 11), ("topic", 8, 12)])
def test_driver_killed_at_random_moments_leaves_every_input_exactly_once(sink, kills, seed):
    result = subprocess.run([sys.executable, str(SCRIPT), "--sink", sink, "--kills", str(kills), "--seed", str(seed)],
                            capture_output=True, text=True, timeout=1200)
    summary = [line for line in result.stdout.splitlines() if line.startswith("chaos:")]
    assert summary and summary[-1].endswith(" OK"), result.stdout[-2000:] + result.stderr[-2000:]
    assert " duplicates=0 missing=0 unexpected=0 " in summary[-1]
    assert result.returncode == 0


@pytest.mark.parametrize("sink,phases", [
    ("files", "files-written,sidecar-written,manifest-published"),
    ("topic", "transaction-open,transaction-committed"),
])
def test_driver_killed_at_each_commit_phase_leaves_every_input_exactly_once(sink, phases):
    """Random kills hit the short windows between a sink's commit steps only now and then; here
    each driver is killed inside one of them (scripts/chaos_hooks), and the run checks it was."""
    result = subprocess.run([sys.executable, str(SCRIPT), "--sink", sink, "--kills", str(len(phases.split(","))),
                             "--aim", phases, "--seed", "21"],
                            capture_output=True, text=True, timeout=1200)
    summary = [line for line in result.stdout.splitlines() if line.startswith("chaos:")]
    assert summary and summary[-1].endswith(" OK"), result.stdout[-2000:] + result.stderr[-2000:]
    assert " duplicates=0 missing=0 unexpected=0 " in summary[-1]
    struck = summary[-1].split("struck=[", 1)[1].split("]", 1)[0].split("; ")
    assert [entry.split()[0] for entry in struck] == phases.split(",")
    assert result.returncode == 0
