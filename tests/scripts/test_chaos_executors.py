"""Task retries and speculative copies on a multi-host Spark cluster, exactly once for both sinks:
scripts/chaos_executors.py at its smallest size, on the session's standalone cluster
(tests/support/spark_standalone.py: two workers of one core on 127.0.0.2 and 127.0.0.3) and the
session's broker. For each sink (pylog-files, then the transactional topic sink), four tasks are
struck in the middle of their write, each on its first attempt: one stalls until Spark runs a
speculative copy on the other host, which wins; one is slow on every attempt, so that it goes on
writing after its copy started (the topic sink's copy fenced it: it must not fail) and both
finish (only one attempt's files or rows may be visible); one has its Python worker SIGKILLed;
one its executor JVM. The run checks from Spark's event log and from the tasks' own record of
``TaskContext.attemptNumber()`` that each struck task ended through a later attempt, so the test
cannot pass without the failures happening. The long version is
``python scripts/chaos_executors.py --random-kills 20`` (see its docstring)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.paths import SCRIPTS
from tests.support.spark_standalone import executors
from tests.support.waiting import wait_until

SCRIPT = SCRIPTS / "chaos_executors.py"


@pytest.fixture(scope="module")
def reports(spark_standalone, pylog_broker, tmp_path_factory):
    report = tmp_path_factory.mktemp("chaos-executors") / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--master",
            spark_standalone.master_url,
            "--bootstrap-server",
            pylog_broker.bootstrap_servers,
            "--sink",
            "files,topic",
            "--aim",
            "stall,slow,kill-worker,kill-executor",
            "--rate",
            "50",
            "--report",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert report.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return {r["sink"]: r for r in json.loads(report.read_text())}, done


@pytest.mark.parametrize("sink", ["files", "topic"])
def test_each_record_once_through_a_speculative_copy_and_killed_workers_and_executors(reports, sink):
    by_sink, done = reports
    report = by_sink[sink]
    assert report["ok"], done.stdout[-3000:]
    assert [(s["action"], s["outcome"]) for s in report["struck"]] == [
        ("stall", "speculated"),
        ("slow", "fenced-without-failure"),
        ("kill-worker", "retried"),
        ("kill-executor", "retried"),
    ]
    assert report["input"] > 0 and report["output"] == report["input"]
    assert (report["duplicates"], report["missing"], report["unexpected"]) == (0, 0, 0)
    # Spark's own count (the event log): the two kills failed attempts that a retry replaced, and
    # speculative copies ran; the tasks' count: at least those four ran past their first attempt.
    assert report["failed"] >= 2 and report["retried"] >= 2 and report["speculative"] >= 2
    assert report["speculative_won"] >= 1
    assert report["task_side_later_attempts"] >= 4
    assert report["hosts"] == ["127.0.0.2", "127.0.0.3"]
    if sink == "files":
        # The killed and the losing attempts left part files that no manifest lists (the stalled
        # one's, the slow task's loser's and the killed worker's at least): never read, and
        # removed by vacuum.
        assert report["orphans"] >= 3 and report["vacuumed"] == report["orphans"]
        assert report["visible_orphans"] == 0 and report["left_after_vacuum"] == 0
    assert done.returncode == 0


def test_the_application_leaves_no_executor_behind(reports):
    by_sink, _ = reports
    app_id = by_sink["files"]["app_id"]
    wait_until(
        lambda: executors(app_id) == [], lambda: f"executors of {app_id} still running: {executors(app_id)}", 120
    )
