"""What every supported PySpark release must run: the few Spark-facing paths `make test` checks on
the newest patch of each minor (tests/scripts/test_test_matrix.py runs this file against the installed
wheel in a virtualenv per release, scripts/test_matrix.py) and on the suite's own PySpark here.

Through Spark's public API only, so the same file runs on each release: a batch read of an offset
slice written with format("pylog-files"), and a streaming read bounded by maxOffsetsPerTrigger
into format("pylog-files"), stopped and restarted from its checkpoint, exactly once. The broker
and topics come from pylog's pytest plugin (kafka_spark.testing), loaded from the install.
"""

from __future__ import annotations

import json

import pyspark
import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.spark


def _produce(bootstrap: str, topic: str, partition: int, first: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for n in range(first, first + count):
        producer.produce(topic, value=f"p{partition}-{n}".encode(), partition=partition)
    assert producer.flush(30) == 0


def _written(spark, path) -> list[tuple[int, int, str]]:
    rows = spark.read.parquet(str(path)).collect()
    return sorted((r.partition, r.offset, r.value) for r in rows)


def test_batch_read_of_an_offset_slice_round_trips_through_the_file_sink(spark, pylog_broker, pylog_topic, tmp_path):
    topic = pylog_topic(partitions=2)
    _produce(pylog_broker.bootstrap_servers, topic, 0, 0, 6)
    _produce(pylog_broker.bootstrap_servers, topic, 1, 0, 4)
    (
        spark.read.format("pylog")
        .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": 2, "1": -2}}))
        .option("endingOffsets", json.dumps({topic: {"0": 5, "1": -1}}))
        .load()
        .selectExpr("partition", "offset", "cast(value as string) as value")
        .write.format("pylog-files")
        .mode("append")
        .save(str(tmp_path / "out"))
    )
    expected = [(0, n, f"p0-{n}") for n in (2, 3, 4)] + [(1, n, f"p1-{n}") for n in range(4)]
    assert _written(spark, tmp_path / "out") == expected, pyspark.__version__


def test_streaming_read_bounded_by_max_offsets_per_trigger_restarts_exactly_once(
    spark, pylog_broker, pylog_topic, tmp_path
):
    topic = pylog_topic(partitions=2)
    bootstrap = pylog_broker.bootstrap_servers
    _produce(bootstrap, topic, 0, 0, 10)
    _produce(bootstrap, topic, 1, 0, 10)

    def run() -> list[int]:
        query = (
            spark.readStream.format("pylog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "5")
            .load()
            .selectExpr("partition", "offset", "cast(value as string) as value")
            .writeStream.format("pylog-files")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .start(str(tmp_path / "out"))
        )
        try:
            query.processAllAvailable()
            return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
        finally:
            query.stop()

    first = run()
    # 20 records at most 5 a trigger: the limit held every batch, so it took at least four.
    assert sum(first) == 20 and len(first) >= 4 and max(first) <= 5, (pyspark.__version__, first)
    _produce(bootstrap, topic, 0, 10, 3)
    _produce(bootstrap, topic, 1, 10, 3)
    second = run()  # from the checkpoint: only the new records, once
    assert sum(second) == 6 and max(second) <= 5, (pyspark.__version__, second)
    expected = sorted((p, n, f"p{p}-{n}") for p in (0, 1) for n in range(13))
    assert _written(spark, tmp_path / "out") == expected, pyspark.__version__
