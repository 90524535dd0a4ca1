"""The benchmarks' scratch directories (bench/_harness.py): a benchmark killed by a signal never
cleans up after itself, so the next one removes what it left (its brokers' data, gigabytes), and
nothing that is in use or that it did not make."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from tests.support.paths import BENCH

sys.path.insert(0, str(BENCH))

from _harness import remove_scratch_dir, scratch_dir  # noqa: E402


def test_a_killed_benchmarks_directories_are_removed_by_the_next_and_nothing_else_is():
    prefix = f"pylog-scratch-test-{uuid.uuid4().hex[:8]}-"
    # A benchmark killed with SIGKILL: its scratch directory and owner file stay behind.
    killed = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys, time; sys.path.insert(0, sys.argv[1]); from _harness import scratch_dir; "
            "d = scratch_dir(sys.argv[2]); open(os.path.join(d, 'segment.log'), 'wb').write(b'x' * 4096); "
            "print(d, flush=True); time.sleep(600)",
            str(BENCH),
            prefix,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert killed.stdout is not None
    left = killed.stdout.readline().strip()
    assert os.path.isfile(os.path.join(left, "segment.log")) and os.path.isfile(left + ".owner")
    # The running one's directory is in use: another benchmark starting now must keep it.
    mine = scratch_dir(prefix)
    assert os.path.isdir(left)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(30)
    # A directory of the same prefix that no benchmark made (no owner file), and one whose owner
    # file names a pid now used by another process (this one), with another start time.
    foreign = tempfile.mkdtemp(prefix=prefix)
    reused = tempfile.mkdtemp(prefix=prefix)
    Path(reused + ".owner").write_text(f"{os.getpid()} 1")
    newer = scratch_dir(prefix)  # the next benchmark
    try:
        assert not os.path.exists(left) and not os.path.exists(left + ".owner")
        assert not os.path.exists(reused) and not os.path.exists(reused + ".owner")
        assert os.path.isdir(mine) and os.path.isdir(foreign) and os.path.isdir(newer)
        remove_scratch_dir(newer)
        assert not os.path.exists(newer) and not os.path.exists(newer + ".owner")
    finally:
        for path in (mine, foreign, reused, left, newer):
            remove_scratch_dir(path)
