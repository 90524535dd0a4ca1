"""pylog installed as a user installs it: the release artifacts in fresh virtualenvs.

Selected with ``-m install``; part of ``make test``. scripts/check_install.py builds the release
artifacts (scripts/build_dist.py: sdist, pure wheel, abi3 wheel), installs one with its declared
dependencies into a plain virtualenv (pip's cache makes this quick after the first run) and runs
scripts/installed_smoke.py there, outside the checkout.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = "kafka_spark/cli/_console_values.abi3.so"


def check_install(tmp_path: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_install.py"), "--work-dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.mark.install
@pytest.mark.spark  # Spark runs in a subprocess
def test_the_wheel_pip_picks_here_serves_both_formats_without_register(tmp_path):
    out = check_install(tmp_path)
    site = tmp_path / "venv" / "lib"
    assert f"installed: kafka_spark, pyspark_pylog, pyspark_pylog_files in {site}" in out
    assert "spark.read.format('pylog') -> write.format('pylog-files'): 300 rows" in out
    assert "readStream.format('pylog') -> writeStream.format('pylog-files'): 300 rows" in out
    # On Linux x86_64 with glibc pip takes the abi3 manylinux wheel over the pure one, as it would
    # from an index, and `pylog consume` has its C extension.
    (chosen,) = (tmp_path / "chosen").glob("pyspark_pylog-*.whl")
    assert f"check_install: artifact: {chosen.name}" in out
    if sysconfig.get_platform() == "linux-x86_64":
        assert re.fullmatch(
            r"pyspark_pylog-[\d.]+-cp311-abi3-(manylinux\w+\.)*manylinux_2_\d+_x86_64\.whl", chosen.name
        )
        assert f"check_install: {chosen.name}: C extension yes" in out
    # the wheel carries Spark's auto-registration modules and the distribution's own name
    names = zipfile.ZipFile(chosen).namelist()
    assert {"pyspark_pylog.py", "pyspark_pylog_files.py"} <= set(names)


@pytest.mark.install
def test_release_artifacts_install_from_source_with_and_without_a_compiler(tmp_path):
    """The sdist and two wheels (`make dist`): the pure wheel has no compiled code, the abi3 one
    the extension only; the sdist builds it where a compiler works and installs without it
    where none does. In that virtualenv (no dependencies, so no PySpark) the Spark formats refuse
    to import, naming the install commands."""
    out = check_install(tmp_path, "--sdist")
    dist = tmp_path / "dist"
    version = re.search(r'^__version__ = "([^"]+)"', (ROOT / "kafka_spark" / "__init__.py").read_text(), re.M).group(1)
    pure, sdist = dist / f"pyspark_pylog-{version}-py3-none-any.whl", dist / f"pyspark_pylog-{version}.tar.gz"
    assert f"check_install: artifact pure: {pure.name}" in out and f"check_install: artifact sdist: {sdist.name}" in out
    pure_names = zipfile.ZipFile(pure).namelist()
    assert "kafka_spark/cli/console_records.py" in pure_names
    assert not [n for n in pure_names if n.endswith((".so", ".c", ".pyd"))]
    assert "Root-Is-Purelib: true" in zipfile.ZipFile(pure).read(f"pyspark_pylog-{version}.dist-info/WHEEL").decode()
    if sys.platform == "linux":
        (platform,) = dist.glob(f"pyspark_pylog-{version}-cp311-abi3-*manylinux_2_*.whl")
        assert f"check_install: artifact platform: {platform.name}" in out
        compiled = [n for n in zipfile.ZipFile(platform).namelist() if n.endswith(".so")]
        assert compiled == [EXTENSION]
    assert "check_install: sdist with a C compiler: C extension yes" in out
    assert "check_install: sdist without a C compiler: C extension no" in out
    assert re.search(
        r"^check_install: import kafka_spark.source with no PySpark: kafka_spark.spark_env.PySparkInstallError: "
        r"pylog's Spark formats need PySpark, and this Python \(.*\) has none",
        out,
        re.M,
    ), out[-2000:]
    assert "  pip install 'pyspark-pylog[spark]'" in out and "  pip install 'pyspark-pylog[connect]'" in out
