"""The topic sink: df.writeStream/df.write.format("pylog"), exactly-once through transactions."""

from __future__ import annotations

import logging
import socket
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.errors import PySparkException
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from kafka_spark.spark_api import ADMISSION_CONTROL
from tests.support.partition_reads import read_partitions_to_end


def read_topic(bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> list:
    messages = read_partitions_to_end(bootstrap, topic, range(partitions), **{"isolation.level": isolation})
    return [(m.key(), m.value(), m.headers(), m.timestamp()[1], m.partition()) for m in messages]


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, key=b"k%d" % (i % 7), value=b"%d" % i, partition=i % 3)
    assert producer.flush(10) == 0


def test_batch_write_with_all_columns_lands_once(spark, pylog_broker, pylog_topic):
    out = pylog_topic(partitions=2)
    df = (
        spark.createDataFrame(
            [(f"k{i}", f"v{i}".encode(), i % 2, [("h", b"x")], i) for i in range(50)],
            "key string, value binary, partition int, headers array<struct<key:string,value:binary>>, ms long",
        )
        .withColumn("timestamp", F.timestamp_millis(F.col("ms") + 1_700_000_000_000))
        .drop("ms")
    )
    (
        df.write.format("pylog")
        .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
        .option("topic", out)
        .mode("append")
        .save()
    )
    rows = read_topic(pylog_broker.bootstrap_servers, out, 2)
    assert sorted(r[1] for r in rows) == sorted(f"v{i}".encode() for i in range(50))
    for key, value, headers, timestamp, partition in rows:
        i = int(value[1:])
        assert key == f"k{i}".encode() and partition == i % 2 and headers == [("h", b"x")]
        assert timestamp == 1_700_000_000_000 + i


def test_streaming_exactly_once_survives_restarts_and_replays(spark, pylog_broker, pylog_topic, tmp_path):
    bootstrap = pylog_broker.bootstrap_servers
    source, sink = pylog_topic(partitions=3), pylog_topic(partitions=2)
    checkpoint = str(tmp_path / "checkpoint")

    def run_once() -> None:
        query = (
            spark.readStream.format("pylog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 40)
            .load()
            .select("key", F.upper(F.col("value").cast("string")).alias("value"))
            .writeStream.format("pylog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", checkpoint)
        )
        if ADMISSION_CONTROL:
            query = query.trigger(availableNow=True).start()
            query.awaitTermination()
            return
        # PySpark before 4.2 runs Trigger.AvailableNow as one batch: drain with micro-batches.
        query = query.start()
        try:
            query.processAllAvailable()
        finally:
            query.stop()

    produce(bootstrap, source, 100)
    run_once()
    produce(bootstrap, source, 100, start=100)
    # Spark's commit log loses its last entry: the batch is replayed; the sink must skip it.
    commits = sorted((tmp_path / "checkpoint" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run_once()
    values = sorted(int(r[1]) for r in read_topic(bootstrap, sink, 2))
    assert values == list(range(200)), "every input exactly once for read_committed consumers"


def test_missing_value_column_fails_when_the_query_starts(spark, pylog_broker, pylog_topic):
    df = spark.createDataFrame([("a",)], "key string")
    with pytest.raises(PySparkException, match="needs a 'value' column"):
        (
            df.write.format("pylog")
            .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
            .option("topic", pylog_topic())
            .mode("append")
            .save()
        )


def test_wrong_column_type_and_unknown_option_are_named(spark, pylog_broker, pylog_topic):
    df = spark.createDataFrame([(1,)], "value int")
    with pytest.raises(PySparkException, match="column 'value' has type int"):
        (
            df.write.format("pylog")
            .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
            .option("topic", pylog_topic())
            .mode("append")
            .save()
        )
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(PySparkException, match="unknown option 'topci'"):
        (
            df.write.format("pylog")
            .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
            .option("topci", "x")
            .mode("append")
            .save()
        )


def test_query_name_is_taken_as_sparks_option_without_a_warning(caplog, monkeypatch):
    """DataStreamWriter.queryName(...) reaches the sink as the option queryName: Spark's own,
    not an unknown option of the user's to warn about."""
    from kafka_spark import option_names
    from kafka_spark.topics.options import parse_sink_options

    monkeypatch.setattr(option_names, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="kafka_spark"):
        parse_sink_options(
            {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t", "queryName": "orders_out"},
            StructType([StructField("value", StringType())]),
        )
    assert [r.getMessage() for r in caplog.records if "unknown option" in r.getMessage()] == []


def _unreachable_sink_message(raised) -> str:
    message = str(raised.value)
    assert "no Kafka broker reachable at 127.0.0.1:1 within 1.5s (127.0.0.1:1: connection refused)" in message
    assert "set kafka.default.api.timeout.ms (now 1500) to wait longer" in message
    return message


@pytest.mark.parametrize("delivery", ["exactly-once", "at-least-once"])
def test_a_batch_write_to_an_address_where_nothing_listens_fails_at_start_naming_it(spark, delivery):
    # As the source: kafka.default.api.timeout.ms (default 30 s) bounds the wait for a cluster
    # that is still starting, and the message says how to wait longer.
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(PySparkException) as raised:
        (
            df.write.format("pylog")
            .option("kafka.bootstrap.servers", "127.0.0.1:1")
            .option("kafka.default.api.timeout.ms", "1500")
            .option("deliveryGuarantee", delivery)
            .option("topic", "t")
            .mode("append")
            .save()
        )
    _unreachable_sink_message(raised)


def test_a_streaming_write_to_an_address_where_nothing_listens_fails_naming_it(spark, tmp_path):
    query = (
        spark.readStream.format("rate")
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format("pylog")
        .option("kafka.bootstrap.servers", "127.0.0.1:1")
        .option("kafka.default.api.timeout.ms", "1500")
        .option("topic", "t")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        with pytest.raises(PySparkException) as raised:
            query.awaitTermination(120)
    finally:
        query.stop()
    _unreachable_sink_message(raised)


def test_a_write_to_an_address_that_never_answers_fails_naming_it(spark):
    df = spark.createDataFrame([("x",)], "value string")
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; nothing ever answers
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(PySparkException) as raised:
            (
                df.write.format("pylog")
                .option("kafka.bootstrap.servers", address)
                .option("kafka.default.api.timeout.ms", "1500")
                .option("topic", "t")
                .mode("append")
                .save()
            )
    assert f"no Kafka broker reachable at {address} within 1.5s" in str(raised.value)
    assert "no answer to a Kafka request" in str(raised.value)


def test_marker_lookup_waits_while_the_group_coordinator_loads(pylog_broker, pylog_topic, monkeypatch):
    """Apache Kafka answers OffsetFetch with NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS while
    it loads __consumer_offsets (the first groups after it starts): the sink's lookup of its
    last committed batch asks again instead of failing the task."""
    from kafka_spark.broker.apis import HANDLERS
    from kafka_spark.broker.protocol.versions import ApiKey
    from kafka_spark.topics.task import committed_offset

    answers = iter([16, 14])  # NOT_COORDINATOR, then COORDINATOR_LOAD_IN_PROGRESS, then served
    served = HANDLERS[ApiKey.OFFSET_FETCH]

    def loading(broker, request):
        code = next(answers, 0)
        if not code:
            return served(broker, request)
        if request.api_version >= 8:  # one answer per group
            return {
                "throttle_time": 0,
                "groups": [{"group_id": g.group_id, "error_code": code, "topics": []} for g in request.body.groups],
            }
        return {"throttle_time": 0, "topics": [], "error_code": code}

    monkeypatch.setitem(HANDLERS, ApiKey.OFFSET_FETCH, loading)
    topic = pylog_topic()
    consumer = Consumer({"bootstrap.servers": pylog_broker.bootstrap_servers, "group.id": f"loading-{topic}"})
    try:
        committed = committed_offset(consumer, TopicPartition(topic, 0), timeout=30)
    finally:
        consumer.close()
    assert committed.offset < 0 and next(answers, None) is None


def test_a_timestamp_column_that_is_not_a_timestamp_is_ignored_as_spark_does(spark, pylog_broker, pylog_topic):
    out = pylog_topic()
    before = int(time.time() * 1000)
    df = spark.createDataFrame([(f"v{i}", f"2020-01-0{i + 1}") for i in range(3)], "value string, timestamp string")
    (
        df.write.format("pylog")
        .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
        .option("topic", out)
        .mode("append")
        .save()
    )
    rows = read_topic(pylog_broker.bootstrap_servers, out, 1)
    assert sorted(r[1] for r in rows) == [b"v0", b"v1", b"v2"]
    assert all(r[3] >= before for r in rows), "CreateTime is when the record was produced, not the string column"


def test_unknown_sink_options_are_ignored_unless_close_to_a_known_one(spark, pylog_broker, pylog_topic):
    out = pylog_topic()
    df = spark.createDataFrame([("x",)], "value string")
    (
        df.write.format("pylog")
        .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
        .option("topic", out)
        .option("queryLabel", "nightly")
        .mode("append")
        .save()
    )
    assert [r[1] for r in read_topic(pylog_broker.bootstrap_servers, out, 1)] == [b"x"]
    with pytest.raises(
        PySparkException,
        match="unknown option 'deliveryguarante' for the pylog topic sink: did you mean deliveryGuarantee\\?",
    ):
        (
            df.write.format("pylog")
            .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
            .option("topic", out)
            .option("deliveryGuarante", "at-least-once")
            .mode("append")
            .save()
        )
    with pytest.raises(
        PySparkException,
        match="deliveryGuarantee must be 'exactly-once' or 'at-least-once', got "
        "'exactly_once'. Did you mean 'exactly-once'\\?",
    ):
        (
            df.write.format("pylog")
            .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
            .option("topic", out)
            .option("deliveryGuarantee", "exactly_once")
            .mode("append")
            .save()
        )
