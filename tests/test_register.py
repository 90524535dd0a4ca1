"""``kafka_spark.register(spark)`` registers every pylog data source: the ``pylog`` source and
topic sink and the ``pylog-files`` file sink.

It is the README's fix for "Failed to find the data source", i.e. for a Python where Spark's
auto-registration (which lists top-level ``pyspark_*`` modules in a Python worker) does not see
pylog, as with setuptools' strict editable installs. The test makes such a session: a
sitecustomize, loaded by Spark's Python workers only, hides pylog's directory from the worker
that looks the data sources up, while the workers that run them can still import pylog.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kafka_spark

pytestmark = pytest.mark.spark  # Spark runs in a subprocess

HIDE_FROM_LOOKUP = textwrap.dedent(
    """
    import os
    import sys

    _root = {root!r}
    if os.environ.get("PYLOG_TEST_HIDE_FROM_LOOKUP") == "1":
        import pyspark.sql.worker.lookup_data_sources as _lookup
        _main = _lookup._main

        def _hidden(infile, outfile):
            sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _root]
            return _main(infile, outfile)

        _lookup._main = _hidden
    """
)

SESSION = textwrap.dedent(
    """
    import os, sys, tempfile
    from pyspark.sql import SparkSession
    from kafka_spark.broker import EmbeddedBroker
    from confluent_kafka import Producer

    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    out = tempfile.mkdtemp()
    with EmbeddedBroker(register=False) as broker:
        broker.create_topic("registered", partitions=1)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce("registered", value=b"hello")
        producer.flush(10)

        def use_both():
            df = (spark.read.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap_servers)
                  .option("subscribe", "registered").load().selectExpr("cast(value as string) v"))
            df.write.format("pylog-files").mode("append").save(out + "/copy")
            return [r.v for r in spark.read.parquet(out + "/copy").collect()]

        for name in ("pylog", "pylog-files"):
            try:
                if name == "pylog":
                    spark.read.format(name).load()
                else:
                    spark.range(1).write.format(name).mode("append").save(out + "/probe")
                print(f"BEFORE {name}: found")
            except Exception as exc:
                missing = 'Failed to find the data source' in str(exc) or 'DATA_SOURCE_NOT_FOUND' in str(exc)
                print(f"BEFORE {name}: {'not found' if missing else exc}")
        import kafka_spark
        kafka_spark.register(spark)
        print("AFTER:", use_both())
    spark.stop()
    """
)


def test_register_makes_both_formats_available_where_auto_registration_does_not_find_them(tmp_path):
    root = str(Path(kafka_spark.__file__).resolve().parents[1])
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HIDE_FROM_LOOKUP.format(root=root))
    script = tmp_path / "session.py"
    script.write_text(SESSION)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(hooks), os.environ.get("PYTHONPATH", "")]),
        PYLOG_TEST_HIDE_FROM_LOOKUP="1",
        PYSPARK_PYTHON=sys.executable,
    )
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith(("BEFORE", "AFTER"))]
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    # Without register(), Spark does not know either format in this session...
    assert lines[:2] == ["BEFORE pylog: not found", "BEFORE pylog-files: not found"], lines
    # ...and register() makes both work: a batch read with pylog, written with pylog-files.
    assert lines[2] == "AFTER: ['hello']"
