"""A batch read on local-cluster[2,1,1024]: two executor JVMs, each with its own Python workers,
as on a real cluster, written on with the file sink. Both formats are found by Spark's
auto-registration (the pyspark_pylog and pyspark_pylog_files modules), with no register() call.
Runs in a subprocess: a process can hold only one SparkContext."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.source_fixtures import kafka_cluster, mock_kafka  # noqa: F401

pytestmark = pytest.mark.spark  # Spark runs in a subprocess

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from pyspark.sql import SparkSession

    bootstrap, topic, out = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    try:
        # No register() call: Spark finds format("pylog") through the pyspark_pylog module.
        df = (spark.read.format("pylog")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("minPartitions", "6")
              .load())
        rows = df.selectExpr("partition", "offset", "cast(value as string) v").collect()
        # No register() call either: Spark finds format("pylog-files") through pyspark_pylog_files.
        df.selectExpr("partition", "offset", "cast(value as string) v").write.format("pylog-files") \
            .mode("append").save(out)
        written = spark.read.parquet(out).collect()
        executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        print("RESULT " + json.dumps({
            "partitions": df.rdd.getNumPartitions(),
            "executors": executors,
            "rows": sorted([r.partition, r.offset, r.v] for r in rows),
            "written": sorted([r.partition, r.offset, r.v] for r in written),
        }))
    finally:
        spark.stop()
    """
)


def test_batch_read_on_two_executor_jvms(kafka_cluster, tmp_path):
    topic = kafka_cluster.new_topic("cluster")
    kafka_cluster.produce_values(topic, 0, 5)
    kafka_cluster.produce_values(topic, 3, 4, start=5)
    script = tmp_path / "read.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, str(script), kafka_cluster.bootstrap_servers, topic, str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["executors"] == 2
    assert result["partitions"] == 6
    assert result["rows"] == [[0, i, f"v{i}"] for i in range(5)] + [[3, i, f"v{5 + i}"] for i in range(4)]
    assert result["written"] == result["rows"]
