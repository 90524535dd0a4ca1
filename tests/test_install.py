"""pylog installed as a user installs it: the built wheel in a fresh virtualenv.

Selected with ``-m install``; part of ``make test``. It builds the wheel, installs it with its
declared dependencies into a plain virtualenv (pip's cache makes this quick after the first run)
and runs scripts/installed_smoke.py there, outside the checkout.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.install
@pytest.mark.spark  # Spark runs in a subprocess
def test_wheel_in_a_fresh_virtualenv_serves_both_formats_without_register(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_install.py"), "--work-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    site = tmp_path / "venv" / "lib"
    assert f"installed: kafka_spark, pyspark_pylog, pyspark_pylog_files in {site}" in result.stdout
    assert "spark.read.format('pylog') -> write.format('pylog-files'): 300 rows" in result.stdout
    assert "readStream.format('pylog') -> writeStream.format('pylog-files'): 300 rows" in result.stdout
    # the wheel carries Spark's auto-registration modules and the distribution's own name
    # A platform wheel where the optional C walk of `pylog consume` compiled (setup.py), else py3-none-any.
    (wheel,) = (tmp_path / "dist").glob("pyspark_pylog-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"pyspark_pylog.py", "pyspark_pylog_files.py"} <= set(names)


#: The lowest PySpark setup.cfg declares (pyspark[sql]>=4.2): the release that brought the
#: admission-control and AvailableNow API of Python streaming sources.
LOWEST_PYSPARK = "4.2.0"


@pytest.mark.install
@pytest.mark.spark  # Spark runs in a subprocess
def test_lowest_declared_pyspark_runs_the_source_and_the_file_sink(tmp_path):
    """The wheel with PySpark 4.2.0: the smoke script, then the streaming source's read-limit,
    trigger-delay and exactly-once tests of this checkout against the installed package.
    (`python scripts/check_install.py --pyspark 4.2.0 -- tests/...` runs more of the suite.)"""
    declared = re.search(r"^\s*pyspark\[sql\]>=([\d.]+),", (ROOT / "setup.cfg").read_text(), re.MULTILINE).group(1)
    assert LOWEST_PYSPARK.startswith(declared + ".")
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "check_install.py"),
            "--work-dir",
            str(tmp_path),
            "--pyspark",
            LOWEST_PYSPARK,
            "--",
            "tests/read/test_stream.py",
            "-k",
            "read_limit or per_trigger or trigger_delay or exactly_once",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"pyspark {LOWEST_PYSPARK}" in result.stdout
    assert "readStream.format('pylog') -> writeStream.format('pylog-files'): 300 rows" in result.stdout
    passed = re.search(r"^(\d+) passed, \d+ deselected", result.stdout, re.MULTILINE)
    assert passed and int(passed.group(1)) >= 5, result.stdout[-2000:]
