"""The PySpark matrix's representative subset, in `make test`: this checkout's wheel installed with
the newest patch of each PySpark minor before the suite's own (scripts/test_matrix.py, a
virtualenv per release kept in the user's cache, ~/.cache/pylog/matrix, so a fresh clone reuses
them), running tests/test_pyspark_versions.py there in one pytest subprocess per release, and on
the releases without admission control (4.0, 4.1; the lowest one setup.cfg declares among them)
tests/read/test_without_admission_control.py, whose Spark tests skip where Spark passes the read
limits. `make test-matrix` runs the whole matrix, with each release's Spark Connect server
(scripts/test_matrix.py --connect; not here: the suite's time)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

from tests.support.paths import ROOT, SCRIPTS

#: scripts/test_matrix.py's DEFAULT_PYSPARK (checked below): the newest patch of 4.0, 4.1 and 4.2.
RELEASES = ("4.0.5", "4.1.4", "4.2.1")
#: Releases whose Spark calls latestOffset() without a read limit (kafka_spark/spark_api.py).
WITHOUT_ADMISSION_CONTROL = ("4.0.5", "4.1.4")
EVERY_RELEASE = "tests/test_pyspark_versions.py"
OLDER_API = "tests/read/test_without_admission_control.py"


def _count_tests(path: str) -> int:
    return len(re.findall(r"^def test_", (ROOT / path).read_text(), re.MULTILINE))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    command = [sys.executable, str(SCRIPTS / "build_dist.py"), "--out", str(out), "--no-platform-wheel"]
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    (built,) = out.glob("pyspark_pylog-*-py3-none-any.whl")
    return built


def _test_matrix_module():
    """scripts/test_matrix.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("pylog_test_matrix", SCRIPTS / "test_matrix.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_release_whose_connect_check_failed_fails_the_matrix():
    """``--connect`` (make test-matrix): the Connect column, and a failed check fails the row."""
    matrix = _test_matrix_module()
    row = matrix.Row("4.0.5", install="ok", passed=2, seconds=40.0)
    assert row.ok and "| 4.0.5 | ok | 2 | 0 | 0 | 0 | 40 s | - |" in matrix.table([row])
    row.connect = "failed"
    assert not row.ok and "| 4.0.5 | ok | 2 | 0 | 0 | 0 | 40 s | failed |" in matrix.table([row])


def test_the_matrix_defaults_to_these_releases_from_the_lowest_declared_minor():
    text = (SCRIPTS / "test_matrix.py").read_text()
    assert re.search(r"^DEFAULT_PYSPARK = \((.*)\)$", text, re.M).group(1) == ", ".join(f'"{v}"' for v in RELEASES)
    declared = re.search(r"^\s*pyspark\[sql\]>=([\d.]+),", (ROOT / "setup.cfg").read_text(), re.MULTILINE).group(1)
    assert RELEASES[0].startswith(declared + "."), f"setup.cfg declares pyspark>={declared}"


@pytest.mark.install
@pytest.mark.spark  # Spark runs in a subprocess
@pytest.mark.parametrize("release", RELEASES)
def test_the_installed_wheel_reads_and_writes_on_pyspark(release, wheel):
    files = [EVERY_RELEASE] + ([OLDER_API] if release in WITHOUT_ADMISSION_CONTROL else [])
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "test_matrix.py"), "--wheel", str(wheel), "--pyspark", release, "--", *files],
        capture_output=True,
        text=True,
        timeout=1500,  # the first run downloads and builds PySpark (~450 MB); later ones reuse the venv
    )
    out = result.stdout + result.stderr
    # every test of the files ran and passed on this release, from the installed wheel: none skipped
    # (the older API's Spark tests skip where Spark has admission control)
    expected = sum(_count_tests(f) for f in files)
    row = rf"^\| {re.escape(release)} \| ok \| {expected} \| 0 \| 0 \| 0 \|"
    assert re.search(row, result.stdout, re.M), out[-4000:]
    assert result.returncode == 0, out[-4000:]
