"""Install pylog as a user does, into a fresh virtualenv, and check that it works there.

Builds the wheel of this checkout, creates a plain virtualenv (no system site-packages), installs
the wheel with its declared dependencies from the package index (pip's cache makes repeated runs
fast), then, from a directory outside the clone:

1. runs scripts/installed_smoke.py: format("pylog") and format("pylog-files"), batch and
   streaming, against an embedded broker, with no register() call;
2. with test paths after ``--``, runs those tests of this checkout against the installed package
   (the tests are copied next to the virtualenv, so kafka_spark comes from the install).

``--pyspark VERSION`` installs that PySpark instead of the newest one the dependencies allow:
``--pyspark 4.2.0`` checks the lowest release setup.cfg declares.

    python scripts/check_install.py                                  # the wheel, newest deps
    python scripts/check_install.py --pyspark 4.2.0 -- tests/read/test_stream.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What the core tests import besides pylog and its dependencies.
TEST_REQUIREMENTS = ("pytest>=8", "chispa>=0.10")


def run(command: list[str], *, cwd: Path, env: dict[str, str], what: str) -> None:
    started = time.monotonic()
    print(f"check_install: {what} ...", flush=True)
    result = subprocess.run(command, cwd=cwd, env=env)
    if result.returncode != 0:
        raise SystemExit(f"check_install: {what} failed (exit {result.returncode}): {' '.join(command)}")
    print(f"check_install: {what}: done in {time.monotonic() - started:.0f} s", flush=True)


def clean_env(work: Path) -> dict[str, str]:
    """The caller's environment without anything that would put this checkout or another
    virtualenv on the new interpreter's path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
    }
    env["PYLOG_HOME"] = str(work / "pylog-home")
    env["SPARK_LOCAL_IP"] = env.get("SPARK_LOCAL_IP", "127.0.0.1")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def build_wheel(work: Path, env: dict[str, str]) -> Path:
    """The wheel of this checkout, in ``work/dist``."""
    dist = work / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(dist)],
        cwd=work,
        env=env,
        what="building the wheel",
    )
    (wheel,) = dist.glob("pyspark_pylog-*.whl")
    return wheel


def make_venv(venv: Path, env: dict[str, str]) -> str:
    """A plain virtualenv from the base interpreter (nothing of the caller's environment leaks
    in); returns its python."""
    base = getattr(sys, "_base_executable", sys.executable)
    run([base, "-m", "venv", str(venv)], cwd=venv.parent, env=env, what=f"creating a fresh virtualenv {venv.name}")
    return str(venv / "bin" / "python")


def check(work: Path, *, pyspark: str | None, tests: list[str]) -> None:
    env = clean_env(work)
    wheel = build_wheel(work, env)
    python = make_venv(work / "venv", env)
    env["PYSPARK_PYTHON"] = python
    # Extra `spark`: pylog declares no PySpark of its own (setup.cfg).
    requirements = [f"{wheel}[spark]"]
    if pyspark:
        requirements.append(f"pyspark[sql]=={pyspark}")
    if tests:
        requirements += TEST_REQUIREMENTS
    run(
        [python, "-m", "pip", "install", "-q", *requirements],
        cwd=work,
        env=env,
        what=f"installing {wheel.name}" + (f" with pyspark {pyspark}" if pyspark else ""),
    )
    run(
        [python, str(ROOT / "scripts" / "installed_smoke.py"), str(work / "smoke")],
        cwd=work,
        env=env,
        what="format('pylog') and format('pylog-files') without register()",
    )
    if tests:
        # The tests import `tests.<module>`; a copy beside the venv keeps the checkout's
        # kafka_spark off the path, so they exercise the installed package.
        shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(ROOT / "setup.cfg", work / "setup.cfg")  # [tool:pytest]: markers, warnings
        run(
            [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
            cwd=work,
            env=env,
            what=f"pytest {' '.join(tests)}",
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pyspark", help="install this PySpark release (e.g. 4.2.0, the lowest supported)")
    parser.add_argument("--work-dir", type=Path, help="where to build (default: a temporary directory, removed)")
    parser.add_argument("tests", nargs="*", help="test paths (relative to the checkout) to run after --")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.work_dir:
        args.work_dir.mkdir(parents=True, exist_ok=True)
        check(args.work_dir.resolve(), pyspark=args.pyspark, tests=args.tests)
    else:
        with tempfile.TemporaryDirectory(prefix="pylog-install-") as work:
            check(Path(work), pyspark=args.pyspark, tests=args.tests)
    print(f"check_install: ok in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
