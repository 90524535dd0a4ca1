"""Writes the checkpoint and pylog-files output that tests/test_layout_resume.py resumes.

They were written once by pylog 0.1.0, whose connector was 33 flat modules (before issue 16's
move into subpackages), and are committed as they came out: that is the point of the test, a
query started before an upgrade of pylog resumes after it. Regenerating them with a newer
pylog would test nothing; the command that made them, from a checkout of 0.1.0
(commit 4689486)::

    PYTHONPATH=<0.1.0 checkout> python tests/data/pre_layout_query/generate.py /tmp/pylog-pre-layout

The topic: ``layout``, 2 partitions, partition p holding values ``"p-i"`` for i in 0..29 (key
``"k<i>"``). The query read all of it (``startingOffsets=earliest``, ``trigger(availableNow)``)
into ``pylog-files`` with columns partition, offset and value. ``base`` holds the absolute
directory they were written in, which Spark's ``_spark_metadata`` and the sink's ``_sink/``
records name; the test moves them under its own directory.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

TOPIC = "layout"
PARTITIONS = 2
PER_PARTITION = 30


def produce(bootstrap_servers: str, start: int, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True})
    for partition in range(PARTITIONS):
        for i in range(start, start + count):
            producer.produce(TOPIC, key=f"k{i}".encode(), value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def run_query(spark, bootstrap_servers: str, checkpoint: str, out: str) -> None:
    """The query, as the test runs it again after the move."""
    query = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("partition", "offset", "cast(value as string) as value")
        .writeStream.format("pylog-files")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(out)
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()


def main(base: str) -> None:
    from pyspark.sql import SparkSession

    from kafka_spark.broker import EmbeddedBroker

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    target = Path(__file__).resolve().parent
    shutil.rmtree(base, ignore_errors=True)
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    with EmbeddedBroker(register=False) as broker:
        broker.create_topic(TOPIC, partitions=PARTITIONS)
        produce(broker.bootstrap_servers, 0, PER_PARTITION)
        run_query(spark, broker.bootstrap_servers, f"{base}/checkpoint", f"{base}/out")
    spark.stop()
    for name in ("checkpoint", "out"):
        shutil.rmtree(target / name, ignore_errors=True)
        shutil.copytree(f"{base}/{name}", target / name, ignore=shutil.ignore_patterns(".*.crc"))
    (target / "base").write_text(base + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
