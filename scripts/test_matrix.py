"""The PySpark matrix (`make test-matrix`): this checkout's wheel, installed with each PySpark
release in a virtualenv of its own, against the Spark-facing tests that matter.

For each ``--pyspark`` release: a plain virtualenv in ``WORK/venvs/pyspark-V-pyXY`` (kept, so
repeat runs only reinstall the wheel; pip's cache serves PySpark's 450 MB after the first
download). ``WORK`` (``--work-dir``) is ``$XDG_CACHE_HOME/pylog/matrix`` (``~/.cache/pylog/matrix``)
by default, as pip keeps its cache: shared by every checkout of this machine, so a fresh clone
does not build three PySpark virtualenvs again; a lock per virtualenv lets one run at a time use
it. Then the
pure wheel of this checkout (scripts/build_dist.py) with the extras ``spark`` and ``test`` and
``pyspark[sql]==V``, then pytest over a copy of tests/ in ``WORK/runs/pyspark-V``, outside the
checkout, so ``kafka_spark`` and its pytest plugin come from the install. Each release is one
pytest subprocess; a release whose install fails (pylog's declared PySpark range excludes it, say)
is reported and the next one runs. Prints one row per release and exits non-zero unless every
release installed and passed.

With ``--connect`` each release's virtualenv also serves Spark Connect: scripts/check_connect.py
runs there, a Connect server of that release driven from a thin-client virtualenv
(``pyspark-client`` of the server's minor, no ``pyspark``), and the row says whether pylog's
formats and helpers worked through it. ``make test-matrix`` adds it.

    python scripts/test_matrix.py                                   # 4.0, 4.1, 4.2: MATRIX_TESTS
    python scripts/test_matrix.py --connect --pyspark 4.0.5 -- tests/test_pyspark_versions.py
    python scripts/test_matrix.py --pyspark 4.1.4 -- tests/read/test_batch.py -x
    python scripts/test_matrix.py --wheel dist/pyspark_pylog-X-py3-none-any.whl --pyspark 4.0.5
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Where the virtualenvs are kept unless --work-dir says otherwise: the user's cache, as pip's.
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pylog" / "matrix"
#: The virtualenvs are this interpreter's version: a venv of another Python is another venv.
PY_TAG = f"py{sys.version_info.major}{sys.version_info.minor}"
#: The newest patch of each PySpark minor before the suite's own (the package index, 2026-11:
#: 4.0.0-4.0.5, 4.1.0-4.1.4, 4.2.0-4.2.1, 4.3.0; `pip index versions pyspark`).
DEFAULT_PYSPARK = ("4.0.5", "4.1.4", "4.2.1")
#: The Spark-facing tests that matter on every release: batch and streaming reads with each kind
#: of offset option, read limits, trigger delay and AvailableNow, startingOffsetsFromOutput, both
#: sinks' exactly-once (the file sink's SIGKILL test among them), Avro, and pylog's pytest
#: fixtures (the topic sink and Avro tests take their broker and topics from them).
MATRIX_TESTS = (
    "tests/test_pyspark_versions.py",
    "tests/read/test_batch.py",
    "tests/read/test_stream.py",
    "tests/read/test_start_from_output.py",
    "tests/files/test_streaming.py",
    "tests/files/test_kill.py",
    "tests/topics/test_sink.py",
    "tests/avro/test_queries.py",
)


@dataclass
class Row:
    pyspark: str
    install: str = "-"
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0
    connect: str = "-"  # scripts/check_connect.py against this release's Connect server: ok, failed, - (not run)
    note: str = ""

    @property
    def ok(self) -> bool:
        return (
            self.install == "ok"
            and self.failed == 0
            and self.errors == 0
            and self.passed > 0
            and self.connect != "failed"
        )


def environment(work: Path, python: str | None = None) -> dict[str, str]:
    """The caller's environment without what would put this checkout or another virtualenv on
    the new interpreter's path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    }
    env["PYLOG_HOME"] = str(work / "pylog-home")
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if python:
        env["PYSPARK_PYTHON"] = python
    return env


def build_wheel(dist: Path) -> Path:
    shutil.rmtree(dist, ignore_errors=True)  # one wheel: this checkout's, at its version
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_dist.py"), "--out", str(dist), "--no-platform-wheel"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"test_matrix: building the wheel failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    (wheel,) = dist.glob("pyspark_pylog-*-py3-none-any.whl")
    return wheel


def install(row: Row, venv: Path, wheel: Path, env: dict[str, str], *, connect: bool = False) -> str | None:
    """The wheel with PySpark ``row.pyspark`` in ``venv`` (created once, then reused); returns its
    python, or None with ``row`` saying why the install failed. ``connect``: also ``build``, with
    which scripts/check_connect.py builds the client's wheel there."""
    python = venv / "bin" / "python"
    if not python.exists():
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(venv)], check=True, env=env)
    steps = (
        # the declared dependencies, resolved with this PySpark (a no-op when the venv has them) ...
        ["install", "-q", f"{wheel}[spark,test]", f"pyspark[sql]=={row.pyspark}", *(["build"] if connect else [])],
        # ... and this build of pylog, which the first step leaves alone when the version matches
        ["install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
    )
    for step in steps:
        result = subprocess.run([str(python), "-m", "pip", *step], env=env, capture_output=True, text=True)
        if result.returncode != 0:
            row.install = "failed"
            lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
            # pip's resolver names the conflicting requirements ("... depends on pyspark<5,>=4.2")
            named = [line for line in lines if "depends on" in line or "Cannot install" in line]
            row.note = "; ".join(named or lines[-3:]).replace("|", "/")[:400]
            return None
    version = subprocess.run(
        [str(python), "-c", "import pyspark; print(pyspark.__version__)"], env=env, capture_output=True, text=True
    ).stdout.strip()
    if version != row.pyspark:
        row.install, row.note = "failed", f"the venv holds pyspark {version or '(none)'}"
        return None
    row.install = "ok"
    return str(python)


def run_tests(row: Row, python: str, run: Path, tests: list[str], env: dict[str, str]) -> None:
    """pytest over a fresh copy of tests/ in ``run``; the counts from its JUnit report."""
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    shutil.copytree(ROOT / "tests", run / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "setup.cfg", run / "setup.cfg")  # [tool:pytest]: markers, warnings
    report = run / "junit.xml"
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *tests]
    print(f"test_matrix: pyspark {row.pyspark}: pytest {' '.join(tests)}", flush=True)
    started = time.monotonic()
    result = subprocess.run(command, cwd=run, env=env)
    row.seconds = time.monotonic() - started
    if not report.exists():
        row.errors, row.note = 1, f"pytest exited {result.returncode} without a report"
        return
    for suite in ET.parse(report).getroot().iter("testsuite"):
        total = int(suite.get("tests", 0))
        row.failed += int(suite.get("failures", 0))
        row.errors += int(suite.get("errors", 0))
        row.skipped += int(suite.get("skipped", 0))
        row.passed += total - int(suite.get("failures", 0)) - int(suite.get("errors", 0)) - int(suite.get("skipped", 0))
    if result.returncode not in (0, 1):  # 1: tests failed, counted above; else a usage or collection error
        row.note = f"pytest exited {result.returncode}"
        row.errors = max(row.errors, 1)


def run_connect(row: Row, python: str, run: Path, client_venv: Path, env: dict[str, str]) -> None:
    """scripts/check_connect.py with this release's python: its Connect server, a thin client."""
    print(f"test_matrix: pyspark {row.pyspark}: Spark Connect (scripts/check_connect.py)", flush=True)
    command = [python, str(ROOT / "scripts" / "check_connect.py"), "--work-dir", str(run / "connect")]
    result = subprocess.run([*command, "--client-venv", str(client_venv)], env=env)
    row.connect = "ok" if result.returncode == 0 else "failed"
    if result.returncode != 0:
        row.note = (row.note + "; " if row.note else "") + f"check_connect exited {result.returncode}"


def table(rows: list[Row]) -> str:
    lines = [
        "| PySpark | install | passed | failed | errors | skipped | pytest time | Connect | note |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        cells = (r.pyspark, r.install, r.passed, r.failed, r.errors, r.skipped)
        time_cell = f"{r.seconds:.0f} s" if r.seconds else "-"
        lines.append("| " + " | ".join(str(c) for c in (*cells, time_cell, r.connect, r.note)) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pyspark", nargs="+", default=list(DEFAULT_PYSPARK), help="PySpark releases to install")
    parser.add_argument("--work-dir", type=Path, default=CACHE, help=f"venvs, runs, the wheel (default {CACHE})")
    parser.add_argument("--wheel", type=Path, help="install this wheel instead of building one")
    parser.add_argument(
        "--connect", action="store_true", help="also run scripts/check_connect.py on each release's Connect server"
    )
    parser.add_argument("tests", nargs="*", help="pytest arguments after -- (default: MATRIX_TESTS)")
    args = parser.parse_args(argv)
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    # this checkout's wheel, in the checkout (the work dir is shared by every checkout)
    wheel = args.wheel.resolve() if args.wheel else build_wheel(ROOT / ".cache" / "matrix-dist")
    print(f"test_matrix: {wheel.name}", flush=True)
    tests = args.tests or list(MATRIX_TESTS)
    rows = []
    for version in args.pyspark:
        row = Row(version)
        rows.append(row)
        env = environment(work / "runs" / f"pyspark-{version}")
        (work / "venvs").mkdir(exist_ok=True)
        # One run at a time per release (`make test` and `make test-matrix` share the venvs).
        with open(work / "venvs" / f"pyspark-{version}-{PY_TAG}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            started = time.monotonic()
            python = install(row, work / "venvs" / f"pyspark-{version}-{PY_TAG}", wheel, env, connect=args.connect)
            took = time.monotonic() - started
            print(f"test_matrix: pyspark {version}: install {row.install} in {took:.0f} s", flush=True)
            if python is not None:
                run = work / "runs" / f"pyspark-{version}"
                run_tests(row, python, run, tests, {**env, "PYSPARK_PYTHON": python})
                if args.connect:
                    client = work / "venvs" / f"connect-client-{version}-{PY_TAG}"
                    run_connect(row, python, run, client, {**env, "PYSPARK_PYTHON": python})
    print(table(rows), flush=True)
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
