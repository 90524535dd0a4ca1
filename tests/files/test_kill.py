"""SIGKILL of the whole driver (JVM and Python workers) mid-stream, then a restart from the
checkpoint: every record is visible exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

from pyarrow.fs import LocalFileSystem

from kafka_spark.files.metadata_log import MetadataLog
from kafka_spark.files.table import committed_source_offsets, vacuum
from tests.support.paths import ROOT
from tests.support.waiting import wait_until

# 20 micro-batches: the kill lands within 1.5 s of the second commit, long before the last one
# even when batches take a tenth of a second.
END, STEP = 200, 10

QUERY = textwrap.dedent(
    """
    import os, sys
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    END, STEP = int(sys.argv[3]), int(sys.argv[4])

    class Reader(DataSourceStreamReader):
        def initialOffset(self):
            return {"t": {"0": 0, "1": 0}}
        next_start = None
        def latestOffset(self, start=None, limit=None):  # PySpark before 4.2 passes no start
            start = start or self.next_start or self.initialOffset()
            self.next_start = {"t": {p: min(o + STEP, END) for p, o in start["t"].items()}}
            return self.next_start
        def partitions(self, start, end):
            self.next_start = end
            return [InputPartition((p, start["t"][p], end["t"][p])) for p in sorted(end["t"])]
        def read(self, partition):
            p, low, high = partition.value
            yield pa.record_batch({"topic": pa.array(["t"] * (high - low)),
                                   "partition": pa.array([int(p)] * (high - low), pa.int32()),
                                   "offset": pa.array(range(low, high), pa.int64())})

    class Source(DataSource):
        @classmethod
        def name(cls):
            return "kill-test-source"
        def schema(self):
            return "topic string, partition int, offset long"
        def streamReader(self, schema):
            return Reader()

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.dataSource.register(Source)
    query = (spark.readStream.format("kill-test-source").load().writeStream.format("pylog-files")
             .option("checkpointLocation", sys.argv[2]).start(sys.argv[1]))
    query.processAllAvailable()
    query.stop()
    """
)


def start_query(script: str, out: str, checkpoint: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, script, out, checkpoint, str(END), str(STEP)],
        cwd=ROOT,
        start_new_session=True,  # its own process group: the kill takes the JVM and workers too
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def kill_within_a_later_batch(driver: subprocess.Popen, out: str) -> None:
    """SIGKILL the query's process group at a random moment of a later batch's write / commit
    cycle (the caller waited for the first manifests), and check the stream was not finished."""
    time.sleep(random.uniform(0, 1.5))
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    killed_at = committed_source_offsets(out)
    assert killed_at is not None and killed_at != {"t": {"0": END, "1": END}}, "kill came too late"


def test_sigkill_mid_stream_then_restart_is_exactly_once(spark, tmp_path):
    script = tmp_path / "query.py"
    script.write_text(QUERY)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "ck")
    metadata = os.path.join(out, "_spark_metadata")

    driver = start_query(str(script), out, checkpoint)
    wait_until(
        lambda: os.path.isdir(metadata) and len(os.listdir(metadata)) >= 2 or driver.poll() is not None,
        "the query's first two manifests",
        timeout=120,
    )
    kill_within_a_later_batch(driver, out)

    restarted = start_query(str(script), out, checkpoint)
    assert restarted.wait(timeout=180) == 0

    rows = sorted((r.partition, r.offset) for r in spark.read.parquet(out).collect())
    assert rows == sorted((p, o) for p in range(2) for o in range(END))
    assert committed_source_offsets(out) == {"t": {"0": END, "1": END}}
    vacuum(out, older_than_seconds=0)  # orphans of the killed batch go; committed files stay
    assert sorted((r.partition, r.offset) for r in spark.read.parquet(out).collect()) == rows
    on_disk = {n for n in os.listdir(out) if n.startswith("part-")}
    logged = {os.path.basename(f.path) for f in MetadataLog(LocalFileSystem(), out).all_files()}
    assert on_disk == logged
