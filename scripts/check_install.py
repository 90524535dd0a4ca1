"""Install pylog as a user does, into a fresh virtualenv, and check that it works there.

Builds the release artifacts of this checkout (scripts/build_dist.py: the sdist, the pure wheel
and this platform's abi3 wheel), creates a plain virtualenv (no system site-packages), lets pip
pick the wheel for its interpreter from those artifacts as it would from an index, installs it
with the extra ``spark`` and the declared dependencies from the package index (pip's cache makes
repeated runs fast), then, from a directory outside the clone:

1. runs scripts/installed_smoke.py: format("pylog") and format("pylog-files"), batch and
   streaming, against an embedded broker, with no register() call, and says whether `pylog
   consume`'s C extension came with the install;
2. with test paths after ``--``, runs those tests of this checkout against the installed package
   (the tests are copied next to the virtualenv, so kafka_spark comes from the install).

``--pyspark VERSION`` installs that PySpark instead of the newest one the dependencies allow:
``--pyspark 4.0.5`` checks the lowest minor setup.cfg declares. ``--artifact pure`` installs the
pure wheel, what platforms without the abi3 wheel get. ``--sdist`` instead installs the sdist
without dependencies, built from source with a C compiler and then without one, and imports
pylog's Spark formats with no PySpark there.

    python scripts/check_install.py                                  # the wheel pip picks, newest deps
    python scripts/check_install.py --pyspark 4.0.5 -- tests/read/test_stream.py
    python scripts/check_install.py --sdist
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


def build_artifacts(work: Path, env: dict[str, str], *, platform: bool = True) -> dict[str, Path]:
    """The release artifacts in ``work/dist``: {"sdist", "pure", and on Linux "platform": path}
    (``platform=False``: the sdist and the pure wheel only)."""
    dist = work / "dist"
    run(
        [sys.executable, str(ROOT / "scripts" / "build_dist.py"), "--out", str(dist)]
        + ([] if platform else ["--no-platform-wheel"]),
        cwd=work,
        env=env,
        what="building the release artifacts",
    )
    artifacts = {"sdist": one(dist, "pyspark_pylog-*.tar.gz"), "pure": one(dist, "pyspark_pylog-*-py3-none-any.whl")}
    if platform and sys.platform == "linux":
        artifacts["platform"] = one(dist, "pyspark_pylog-*-abi3-manylinux*.whl")
    return artifacts


def one(folder: Path, pattern: str) -> Path:
    (found,) = folder.glob(pattern)
    return found


def chosen_wheel(python: str, artifacts: dict[str, Path], work: Path, env: dict[str, str]) -> Path:
    """The artifact pip installs for ``python`` when an index holds these artifacts."""
    chosen = work / "chosen"
    run(
        [python, "-m", "pip", "download", "-q", "--no-index", "--no-deps"]
        + ["--find-links", str(artifacts["pure"].parent), "-d", str(chosen), "pyspark-pylog"],
        cwd=work,
        env=env,
        what="letting pip pick the artifact for this interpreter",
    )
    return one(chosen, "pyspark_pylog-*")


def make_venv(venv: Path, env: dict[str, str]) -> str:
    """A plain virtualenv from the base interpreter (nothing of the caller's environment leaks
    in); returns its python."""
    base = getattr(sys, "_base_executable", sys.executable)
    run([base, "-m", "venv", str(venv)], cwd=venv.parent, env=env, what=f"creating a fresh virtualenv {venv.name}")
    return str(venv / "bin" / "python")


def check(work: Path, *, pyspark: str | None, tests: list[str], artifact: str = "chosen") -> None:
    env = clean_env(work)
    artifacts = build_artifacts(work, env)
    python = make_venv(work / "venv", env)
    env["PYSPARK_PYTHON"] = python
    wheel = chosen_wheel(python, artifacts, work, env) if artifact == "chosen" else artifacts[artifact]
    print(f"check_install: artifact: {wheel.name}", flush=True)
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
    print(f"check_install: {wheel.name}: C extension {c_extension(python, work, env)}", flush=True)
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


#: Whether `pylog consume` has its C extension here (without it, it reads through confluent-kafka).
C_EXTENSION = "import kafka_spark.cli.console_records as c; print('yes' if c.C_VALUES else 'no')"


def c_extension(python: str, work: Path, env: dict[str, str]) -> str:
    result = subprocess.run([python, "-c", C_EXTENSION], cwd=work, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"check_install: kafka_spark.cli.console_records does not import:\n{result.stderr}")
    return result.stdout.strip()


def check_sdist(work: Path) -> None:
    """The sdist into a fresh virtualenv, without dependencies: built with the C compiler, then
    again with a compiler that fails (CC=false), where the install must go on without the
    extension; and pylog's Spark formats imported in a Python with no PySpark."""
    env = clean_env(work)
    artifacts = build_artifacts(work, env)
    for name, path in artifacts.items():
        print(f"check_install: artifact {name}: {path.name}", flush=True)
    python = make_venv(work / "venv", env)
    # Built here, not in pip's isolated environment, so that no built wheel is cached for reuse.
    run([python, "-m", "pip", "install", "-q", "setuptools>=64", "wheel"], cwd=work, env=env, what="build tools")
    sdist = str(artifacts["sdist"])
    local = ["install", "-q", "--no-deps", "--no-build-isolation", "--no-cache-dir", "--force-reinstall", sdist]
    run([python, "-m", "pip", *local], cwd=work, env=env, what="installing the sdist with a C compiler")
    print(f"check_install: sdist with a C compiler: C extension {c_extension(python, work, env)}", flush=True)
    run(
        [python, "-m", "pip", *local],
        cwd=work,
        env={**env, "CC": "false"},
        what="installing the sdist with a C compiler that fails",
    )
    print(f"check_install: sdist without a C compiler: C extension {c_extension(python, work, env)}", flush=True)
    result = subprocess.run(
        [python, "-c", "import kafka_spark.source"], cwd=work, env=env, capture_output=True, text=True
    )
    lines = result.stderr.splitlines()
    raised = [i for i, line in enumerate(lines) if line.startswith("kafka_spark.")] if result.returncode else []
    error = "\n".join(lines[raised[-1] :]) if raised else f"exit {result.returncode}: {result.stderr[-500:]}"
    print(f"check_install: import kafka_spark.source with no PySpark: {error}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pyspark", help="install this PySpark release (e.g. 4.0.5, the lowest minor supported)")
    parser.add_argument("--work-dir", type=Path, help="where to build (default: a temporary directory, removed)")
    parser.add_argument(
        "--artifact",
        choices=("chosen", "pure", "platform"),
        default="chosen",
        help="the wheel to install: the one pip picks here (default), the pure one, the abi3 one",
    )
    parser.add_argument("--sdist", action="store_true", help="check the sdist instead (no dependencies, no Spark)")
    parser.add_argument("tests", nargs="*", help="test paths (relative to the checkout) to run after --")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pylog-install-") as temporary:
        work = (args.work_dir or Path(temporary)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        if args.sdist:
            check_sdist(work)
        else:
            check(work, pyspark=args.pyspark, tests=args.tests, artifact=args.artifact)
    print(f"check_install: ok in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
