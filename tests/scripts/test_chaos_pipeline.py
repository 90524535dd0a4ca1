"""Short chaos runs: SIGKILLs of the Spark driver per sink, with a producer writing throughout:
one inside each window between the sink's commit steps and, for the file sink, right after batch
planning and after Spark's commit (aimed by scripts/chaos_hooks), then one at a random moment 4
to 9 s after a driver starts. The file sink's output has no Kafka column, and before
the random kills its checkpoint is lost: a new query from earliest must be refused, then the
pipeline goes on from the output's offsets. The long version is
`python scripts/chaos_pipeline.py --kills 50` (see its docstring)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import SCRIPTS

pytestmark = pytest.mark.spark  # Spark runs in a subprocess

SCRIPT = SCRIPTS / "chaos_pipeline.py"


@pytest.mark.parametrize(
    "sink,phases,seed,extra",
    [
        (
            "files-nokafka",
            "files-written,sidecar-written,manifest-published,batch-planned,spark-committed",
            11,
            ["--new-query-at", "5"],
        ),
        ("topic", "transaction-open,transaction-committed", 12, []),
    ],
)
def test_driver_killed_in_every_commit_window_leaves_every_input_exactly_once(sink, phases, seed, extra):
    """The first kills strike inside each window between the sink's commit steps (random moments
    hit those short windows only now and then; the run checks each aimed kill struck), the rest
    at random moments."""
    kills = len(phases.split(",")) + 1  # each window once, then a random moment
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--sink",
            sink,
            "--kills",
            str(kills),
            "--aim",
            phases,
            "--seed",
            str(seed),
            "--max-seconds",
            "9",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    summary = [line for line in result.stdout.splitlines() if line.startswith("chaos:")]
    assert summary and summary[-1].endswith(" OK"), result.stdout[-2000:] + result.stderr[-2000:]
    assert " duplicates=0 missing=0 unexpected=0 " in summary[-1]
    struck = summary[-1].split("struck=[", 1)[1].split("]", 1)[0].split("; ")
    assert [entry.split()[0] for entry in struck] == phases.split(",")
    if extra:
        assert " new-query=refused,checkpoint-lost " in summary[-1]
    assert result.returncode == 0
