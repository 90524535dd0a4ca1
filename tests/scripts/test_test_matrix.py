"""The PySpark matrix's representative subset, in `make test`: this checkout's wheel installed with
the newest patch of each PySpark minor before the suite's own (scripts/test_matrix.py, a
virtualenv per release kept in .cache/matrix), running tests/test_pyspark_versions.py there in one
pytest subprocess per release. `make test-matrix` runs the whole matrix."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.paths import ROOT, SCRIPTS

#: scripts/test_matrix.py's DEFAULT_PYSPARK (checked below): the newest patch of 4.0, 4.1 and 4.2.
RELEASES = ("4.0.5", "4.1.4", "4.2.1")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    command = [sys.executable, str(SCRIPTS / "build_dist.py"), "--out", str(out), "--no-platform-wheel"]
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    (built,) = out.glob("pyspark_pylog-*-py3-none-any.whl")
    return built


def test_the_matrix_defaults_to_these_releases():
    text = (SCRIPTS / "test_matrix.py").read_text()
    assert re.search(r"^DEFAULT_PYSPARK = \((.*)\)$", text, re.M).group(1) == ", ".join(f'"{v}"' for v in RELEASES)


@pytest.mark.install
@pytest.mark.spark  # Spark runs in a subprocess
@pytest.mark.parametrize("release", RELEASES)
def test_the_installed_wheel_reads_and_writes_on_pyspark(release, wheel):
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "test_matrix.py"), "--wheel", str(wheel), "--pyspark", release]
        + ["--work-dir", str(ROOT / ".cache" / "matrix"), "--", "tests/test_pyspark_versions.py"],
        capture_output=True,
        text=True,
        timeout=1500,  # the first run downloads and builds PySpark (~450 MB); later ones reuse the venv
    )
    out = result.stdout + result.stderr
    # both tests of the file ran and passed on this release, from the installed wheel
    assert re.search(rf"^\| {re.escape(release)} \| ok \| 2 \| 0 \| 0 \| 0 \|", result.stdout, re.M), out[-4000:]
    assert result.returncode == 0, out[-4000:]
