"""Consumer lag as Spark's Kafka source reports it (min/max/avgOffsetsBehindLatest), computed for
the pylog source from its progress: the latest offsets it reports and the offsets each batch read
up to (KafkaMicroBatchSourceSuite's "test custom metrics" scenarios)."""

from __future__ import annotations

import json

from confluent_kafka import Producer
from pyspark.sql import functions as F

import kafka_spark
from kafka_spark.lag import lag_metrics
from kafka_spark.offsets import EPOCHS_KEY, START_KEY
from tests.support.waiting import wait_until


def produce(bootstrap: str, topic: str, per_partition: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in enumerate(per_partition):
        for i in range(count):
            producer.produce(topic, value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0


def run(spark, bootstrap: str, topic: str, tmp_path, **options):
    """An AvailableNow query; returns it and, per batch, the offsets it read up to per partition
    (taken from the rows themselves, independently of the progress)."""
    read_up_to: dict[int, dict[int, int]] = {}

    def record(df, batch_id):
        rows = df.groupBy("partition").agg(F.max("offset").alias("last")).collect()
        read_up_to[batch_id] = {r.partition: r.last + 1 for r in rows}

    reader = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (
        reader.load()
        .writeStream.foreachBatch(record)
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query, read_up_to


def test_lag_with_max_offsets_per_trigger_is_latest_minus_end_per_partition(spark, pylog_broker, pylog_topic, tmp_path):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=3)
    produce(bootstrap, topic, [60, 30, 10])
    query, read_up_to = run(spark, bootstrap, topic, tmp_path, maxOffsetsPerTrigger=25)
    progresses = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(progresses) >= 4, "100 offsets, at most 25 (+1 per partition) a batch"
    position = {0: 0, 1: 0, 2: 0}
    for progress in progresses:
        source = progress["sources"][0]
        assert json.loads(source["latestOffset"]) if isinstance(source["latestOffset"], str) else source["latestOffset"]
        position.update(read_up_to[progress["batchId"]])
        behind = [end - position[p] for p, end in enumerate([60, 30, 10])]
        assert lag_metrics(progress) == {
            "minOffsetsBehindLatest": str(min(behind)),
            "maxOffsetsBehindLatest": str(max(behind)),
            "avgOffsetsBehindLatest": repr(sum(behind) / 3),
        }
    assert lag_metrics(progresses[0])["maxOffsetsBehindLatest"] != "0", "a rate-limited batch leaves a lag"
    assert lag_metrics(progresses[-1]) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "0",
        "avgOffsetsBehindLatest": "0.0",
    }


def test_lag_without_a_rate_limit_is_zero_as_in_spark(spark, pylog_broker, pylog_topic, tmp_path):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=2)
    produce(bootstrap, topic, [7, 3])
    query, _ = run(spark, bootstrap, topic, tmp_path)
    assert lag_metrics(query.lastProgress) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "0",
        "avgOffsetsBehindLatest": "0.0",
    }
    assert query.lastProgress["sources"][0]["metrics"] == {}, "PySpark's Python sources report no metrics"


def test_lag_listener_reports_every_batch(spark, pylog_broker, pylog_topic, tmp_path):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=2)
    produce(bootstrap, topic, [30, 10])
    published = []
    listener = kafka_spark.LagListener(publish=lambda qid, batch, name, metrics: published.append((batch, metrics)))
    spark.streams.addListener(listener)
    try:
        query, _ = run(spark, bootstrap, topic, tmp_path, maxOffsetsPerTrigger=8)
        # listener events arrive asynchronously
        wait_until(
            lambda: len(published) >= len(query.recentProgress),
            lambda: f"the listener's event of every batch: {len(published)} of {len(query.recentProgress)}",
        )
    finally:
        spark.streams.removeListener(listener)
    expected = {p["batchId"]: lag_metrics(p) for p in query.recentProgress if lag_metrics(p)}
    # 40 records at 8 a trigger, after the empty batch 0 that records the start (all 40 behind)
    assert dict(published) == expected and len(expected) == 6
    assert expected[0] == {
        "minOffsetsBehindLatest": "10",
        "maxOffsetsBehindLatest": "30",
        "avgOffsetsBehindLatest": "20.0",
    }
    assert listener.latest[str(query.id)] == expected[max(expected)]


def test_offsets_shown_as_a_python_dict_repr_read_as_spark_json_is():
    """PySpark 4.0 and 4.1 show a Python source's offsets in ``lastProgress`` as a dict's repr
    (single quotes); the lag is the same as from Spark's JSON, and text that is neither gives no
    figures rather than an error or an evaluation."""
    latest, end = {"t": {"0": 60, "1": 30}}, {"t": {"0": 25, "1": 30}}

    def progress(show):  # noqa: ANN001, ANN202
        return {"sources": [{"latestOffset": show(latest), "endOffset": show(end)}]}

    expected = {"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "35", "avgOffsetsBehindLatest": "17.5"}
    assert lag_metrics(progress(json.dumps)) == expected
    assert lag_metrics(progress(repr)) == expected
    assert lag_metrics(progress(lambda _: "__import__('os').getpid()")) == {}


def test_leader_epochs_and_the_start_a_first_batch_records_are_no_partitions():
    """Offsets carry their leader epochs (``@leaderEpochs``), and on PySpark 4.0 and 4.1 a new
    query's first batch carries where it started (``@firstBatchStart``); PySpark before 4.2
    shows the source's latestOffset() there as the latest offset, with both: the lag is the
    partitions' only. (Through a 4.0 Connect server, these entries failed lag_metrics with a
    TypeError.)"""
    epochs = {"t": {"0": 0, "1": 0}}
    start = {"t": {"0": 0, "1": 0}, EPOCHS_KEY: epochs}
    latest = {"t": {"0": 60, "1": 30}, EPOCHS_KEY: epochs, START_KEY: start}
    end = {"t": {"0": 25, "1": 30}, EPOCHS_KEY: epochs, START_KEY: start}
    progress = {"sources": [{"latestOffset": repr(latest), "endOffset": repr(end)}]}
    assert lag_metrics(progress) == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "35",
        "avgOffsetsBehindLatest": "17.5",
    }
