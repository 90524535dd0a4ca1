"""kafka_spark.spark_env: pylog declares no PySpark (setup.cfg), so its Spark-facing modules check
on import that this Python has one PySpark with Python data sources, and name the command that
fixes it otherwise. Each case runs in a fresh interpreter of the test virtualenv; a virtualenv
with no PySpark at all is checked by tests/test_install.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pyspark
import pytest


def import_in_fresh_python(module: str, *, prelude: str = "", pythonpath: str | None = None):
    env_prefix = f"import sys; sys.path.insert(0, {pythonpath!r})\n" if pythonpath else ""
    code = "import sys\n" + env_prefix + textwrap.dedent(prelude) + f"import {module}\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", ["kafka_spark.source", "kafka_spark.sink", "kafka_spark.lag", "pyspark_pylog"])
def test_a_second_pyspark_distribution_over_the_first_is_named_with_the_fix(module, tmp_path):
    # What `pip install pyspark-client` leaves beside an installed pyspark: its metadata.
    info = tmp_path / "pyspark_client-4.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pyspark-client\nVersion: 4.2.0\n")
    result = import_in_fresh_python(module, pythonpath=str(tmp_path))
    assert result.returncode != 0
    assert "PySparkInstallError" in result.stderr
    assert f"pyspark {pyspark.__version__} and pyspark-client 4.2.0 are installed" in result.stderr
    assert "pip uninstall -y pyspark pyspark-client" in result.stderr
    assert "pip install 'pyspark-pylog[connect]'" in result.stderr


def test_no_pyspark_names_the_install_command_of_each_environment():
    # sys.modules[name] = None is Python's way to make `import name` fail as if it were absent.
    result = import_in_fresh_python("kafka_spark.source", prelude="sys.modules['pyspark'] = None\n")
    assert result.returncode != 0
    assert "pylog's Spark formats need PySpark, and this Python" in result.stderr
    for command in ("pip install 'pyspark-pylog[spark]'", "pip install 'pyspark-pylog[connect]'"):
        assert command in result.stderr


def test_a_pyspark_without_python_data_sources_is_refused_naming_its_version():
    result = import_in_fresh_python("kafka_spark.sink", prelude="sys.modules['pyspark.sql.datasource'] = None\n")
    assert result.returncode != 0
    assert f"PySpark {pyspark.__version__} (" in result.stderr
    assert "has no Python data sources (pyspark.sql.datasource, PySpark 4.0 and later)" in result.stderr


def test_the_broker_and_the_cli_need_no_pyspark():
    result = import_in_fresh_python(
        "kafka_spark.broker, kafka_spark.cli.main, kafka_spark.update_mode", prelude="sys.modules['pyspark'] = None\n"
    )
    assert result.returncode == 0, result.stderr
