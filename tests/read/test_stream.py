"""Streaming reads with spark.readStream.format("pylog"): micro-batches, read limits,
AvailableNow, new topics, data loss, replays and consumer-group commits."""

from __future__ import annotations

import ast
import json
import sys
import uuid

import pytest

from kafka_spark.client.consumer_pool import close_pooled_consumers
from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.offsets import offsets_from_dict, positions_from_dict
from kafka_spark.options import parse_source_options
from kafka_spark.read.partition import read_partition
from kafka_spark.read.stream import PylogStreamReader
from kafka_spark.spark_api import ADMISSION_CONTROL, ReadAllAvailable, ReadMaxRows, ReadMinRows
from tests.support.source_fixtures import embedded_kafka, kafka_cluster, mock_kafka  # noqa: F401
from tests.support.waiting import wait_until


def _stream(spark, cluster, **options):
    reader = spark.readStream.format("pylog").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _to_memory(df, tmp_path, trigger=None):
    name = f"q_{uuid.uuid4().hex[:8]}"
    writer = df.writeStream.format("memory").queryName(name).option("checkpointLocation", str(tmp_path / name))
    if trigger is not None:
        writer = writer.trigger(**trigger)
    return name, writer.start()


def _progress_offsets(value):  # noqa: ANN001, ANN202
    """Offsets of query progress: JSON text, or (PySpark 4.0's lastProgress) a dict's repr."""
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = ast.literal_eval(value)
    return positions_from_dict(parsed)[0]


def _planner(cluster, **options) -> PylogStreamReader:
    """The stream reader as Spark's planner worker uses it, in this process."""
    opts = parse_source_options({"kafka.bootstrap.servers": cluster.bootstrap_servers, **options})
    return PylogStreamReader(opts, cluster.bootstrap_servers)


def test_micro_batches_read_new_records_exactly_once(spark, kafka_cluster, tmp_path):
    topic = kafka_cluster.new_topic("stream")
    kafka_cluster.produce_values(topic, 0, 3)
    name, query = _to_memory(_stream(spark, kafka_cluster, subscribe=topic, startingOffsets="earliest"), tmp_path)
    try:
        query.processAllAvailable()
        kafka_cluster.produce_values(topic, 1, 2, start=3)
        kafka_cluster.produce_values(topic, 0, 1, start=5)
        query.processAllAvailable()
        rows = spark.sql(f"select partition, offset, cast(value as string) v from {name}").collect()
        assert sorted((r.partition, r.offset, r.v) for r in rows) == [
            (0, 0, "v0"),
            (0, 1, "v1"),
            (0, 2, "v2"),
            (0, 3, "v5"),
            (1, 0, "v3"),
            (1, 1, "v4"),
        ]
        progress = query.lastProgress["sources"][0]
        assert _progress_offsets(progress["endOffset"]) == {
            TP(topic, 0): 4,
            TP(topic, 1): 2,
            TP(topic, 2): 0,
            TP(topic, 3): 0,
        }
        # reportLatestOffset(): the latest offsets fetched, shown in query progress (PySpark
        # before 4.2 shows what latestOffset() returned, the same here: no read limit).
        assert _progress_offsets(progress["latestOffset"]) == _progress_offsets(progress["endOffset"])
    finally:
        query.stop()


def test_streaming_starts_at_latest_by_default(spark, kafka_cluster, tmp_path):
    topic = kafka_cluster.new_topic("latest")
    kafka_cluster.produce_values(topic, 0, 5)
    name, query = _to_memory(_stream(spark, kafka_cluster, subscribe=topic), tmp_path)
    try:
        query.processAllAvailable()
        kafka_cluster.produce_values(topic, 0, 2, start=5)
        query.processAllAvailable()
        assert sorted(r.offset for r in spark.table(name).collect()) == [5, 6]
    finally:
        query.stop()


@pytest.mark.skipif(
    not ADMISSION_CONTROL,
    reason="PySpark before 4.2 runs Trigger.AvailableNow of a Python source as a single batch "
    "(tests/read/test_without_admission_control.py covers what pylog does there)",
)
def test_available_now_with_max_offsets_per_trigger_drains_in_proportional_batches(spark, kafka_cluster, tmp_path):
    topic = kafka_cluster.new_topic("rate")
    kafka_cluster.produce_values(topic, 0, 10)
    kafka_cluster.produce_values(topic, 1, 10)
    df = _stream(spark, kafka_cluster, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="5")
    name, query = _to_memory(df, tmp_path, trigger={"availableNow": True})
    query.awaitTermination(120)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
    # 5 spread over backlogs 10 and 10 -> 2.5 each, floored: 2 + 2 per batch, as Spark.
    assert sizes == [4, 4, 4, 4, 4]
    assert spark.table(name).count() == 20


def test_available_now_stops_at_offsets_present_when_it_started(kafka_cluster):
    topic = kafka_cluster.new_topic("snapshot")
    kafka_cluster.produce_values(topic, 0, 4)
    reader = _planner(kafka_cluster, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="3")
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    assert reader.latestOffset(start, reader.getDefaultReadLimit()) == start  # the start batch
    first = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert offsets_from_dict(first)[TP(topic, 0)] == 3
    kafka_cluster.produce_values(topic, 0, 10, start=4)  # arrives after the query started
    second = reader.latestOffset(first, reader.getDefaultReadLimit())
    assert offsets_from_dict(second)[TP(topic, 0)] == 4
    assert reader.latestOffset(second, ReadAllAvailable()) == second  # nothing more: the query ends
    reader.stop()


def test_min_offsets_per_trigger_waits_for_enough_new_offsets(kafka_cluster):
    topic = kafka_cluster.new_topic("min")
    reader = _planner(kafka_cluster, subscribe=topic, minOffsetsPerTrigger="5", maxTriggerDelay="1h")
    assert reader.getDefaultReadLimit() == ReadMinRows(5)
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadMinRows(5)) == start  # the start batch
    # Spark's first trigger never waits (lastTriggerMillis starts at 0).
    assert reader.latestOffset(start, ReadMinRows(5)) == start
    kafka_cluster.produce_values(topic, 0, 3)
    assert reader.latestOffset(start, ReadMinRows(5)) == start  # 3 < 5: wait
    kafka_cluster.produce_values(topic, 2, 2)
    end = reader.latestOffset(start, ReadMinRows(5))
    assert offsets_from_dict(end)[TP(topic, 0)] == 3 and offsets_from_dict(end)[TP(topic, 2)] == 2
    # The engine's ReadAllAvailable overrides the option.
    kafka_cluster.produce_values(topic, 0, 1, start=3)
    assert offsets_from_dict(reader.latestOffset(end, ReadAllAvailable()))[TP(topic, 0)] == 4
    reader.stop()


def test_max_trigger_delay_fires_a_batch_below_min_offsets_per_trigger(kafka_cluster):
    topic = kafka_cluster.new_topic("delay")
    reader = _planner(
        kafka_cluster, subscribe=topic, startingOffsets="earliest", minOffsetsPerTrigger="100", maxTriggerDelay="300ms"
    )
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadMinRows(100)) == start  # the start batch
    reader.latestOffset(start, ReadMinRows(100))  # the first trigger fires at once
    kafka_cluster.produce_values(topic, 1, 2)
    assert reader.latestOffset(start, ReadMinRows(100)) == start

    # Below minOffsetsPerTrigger, a batch fires once maxTriggerDelay (300 ms) has passed since the last.
    def delayed_trigger() -> dict | None:
        end = reader.latestOffset(start, ReadMinRows(100))
        return end if end != start else None

    assert offsets_from_dict(wait_until(delayed_trigger, "the delayed trigger"))[TP(topic, 1)] == 2
    reader.stop()


def test_default_read_limit_follows_options():
    opts = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    # Unlimited, but never ReadAllAvailable: only Trigger.Once passes that (see the start batch).
    assert PylogStreamReader(parse_source_options(opts), "h:1").getDefaultReadLimit() == ReadMaxRows(sys.maxsize)
    both = parse_source_options({**opts, "maxOffsetsPerTrigger": "9", "minOffsetsPerTrigger": "2"})
    assert PylogStreamReader(both, "h:1").getDefaultReadLimit() == ReadMaxRows(9)


def test_replayed_batch_plans_and_reads_the_same_records(kafka_cluster):
    topic = kafka_cluster.new_topic("replay")
    for p in range(4):
        kafka_cluster.produce_values(topic, p, 5 + p)
    reader = _planner(kafka_cluster, subscribe=topic, startingOffsets="earliest", minPartitions="6")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    first = reader.partitions(start, end)
    kafka_cluster.produce_values(topic, 0, 7, start=100)  # the log grows before the replay
    replay = reader.partitions(start, end)
    assert [p.ranges for p in first] == [p.ranges for p in replay]

    def records(partitions):
        return sorted(
            (row["partition"], row["offset"], row["value"])
            for p in partitions
            for batch in read_partition(p)
            for row in batch.to_pylist()
        )

    try:
        assert records(first) == records(replay)
        assert len(records(first)) == 5 + 6 + 7 + 8
    finally:
        close_pooled_consumers()
        reader.stop()


def test_new_topic_matching_pattern_is_read_from_earliest(spark, kafka_cluster, tmp_path):
    prefix = kafka_cluster.new_topic("grow")
    first = prefix + "-a"
    kafka_cluster.produce_values(first, 0, 2)
    name, query = _to_memory(_stream(spark, kafka_cluster, subscribePattern=prefix + "-.*"), tmp_path)
    try:
        query.processAllAvailable()  # starts at latest: nothing read yet
        second = prefix + "-b"
        kafka_cluster.produce_values(second, 3, 3)  # a topic created after the query started
        kafka_cluster.produce_values(first, 0, 1, start=2)
        query.processAllAvailable()
        rows = spark.table(name).collect()
        assert sorted((r.topic, r.partition, r.offset) for r in rows) == [
            (first, 0, 2),
            (second, 3, 0),
            (second, 3, 1),
            (second, 3, 2),
        ]
    finally:
        query.stop()


def test_partitions_added_to_a_subscribed_topic_are_read_from_earliest(spark, embedded_kafka, tmp_path):
    """Spark's Kafka source rule: partitions that appear while the query runs (CreatePartitions)
    are read from their beginning; the others go on from where they were."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic = embedded_kafka.new_topic("widen")  # 4 partitions
    embedded_kafka.produce_values(topic, 0, 2)
    name, query = _to_memory(_stream(spark, embedded_kafka, subscribe=topic, startingOffsets="earliest"), tmp_path)
    try:
        query.processAllAvailable()
        admin = AdminClient({"bootstrap.servers": embedded_kafka.bootstrap_servers})
        admin.create_partitions([NewPartitions(topic, 6)])[topic].result(10)
        producer = Producer({"bootstrap.servers": embedded_kafka.bootstrap_servers})  # knows all 6
        for i, partition in enumerate((5, 5, 4, 0)):
            producer.produce(topic, value=b"new-%d" % i, partition=partition)
        assert producer.flush(10) == 0
        query.processAllAvailable()
        rows = spark.sql(f"select partition, offset, cast(value as string) v from {name}").collect()
        assert sorted((r.partition, r.offset, r.v) for r in rows) == [
            (0, 0, "v0"),
            (0, 1, "v1"),
            (0, 2, "new-3"),
            (4, 0, "new-2"),
            (5, 0, "new-0"),
            (5, 1, "new-1"),
        ]
    finally:
        query.stop()


def test_offsets_that_went_backwards_fail_the_query_naming_partition_and_offsets(spark, kafka_cluster, tmp_path):
    topic = kafka_cluster.new_topic("loss")
    kafka_cluster.produce_values(topic, 0, 3)
    beyond = f'{{"{topic}":{{"0":50,"1":0,"2":0,"3":0}}}}'
    _, query = _to_memory(_stream(spark, kafka_cluster, subscribe=topic, startingOffsets=beyond), tmp_path)
    with pytest.raises(
        Exception,
        match=rf"Partition {topic}-0's offset was changed from 50 to 3.*"
        "failOnDataLoss=false to skip",
    ):
        query.processAllAvailable()
    query.stop()


def test_offsets_that_went_backwards_are_skipped_with_fail_on_data_loss_false(spark, kafka_cluster, tmp_path):
    topic = kafka_cluster.new_topic("skip")
    kafka_cluster.produce_values(topic, 0, 3)
    kafka_cluster.produce_values(topic, 1, 2)
    beyond = f'{{"{topic}":{{"0":50,"1":0,"2":0,"3":0}}}}'
    df = _stream(spark, kafka_cluster, subscribe=topic, startingOffsets=beyond, failOnDataLoss="false")
    name, query = _to_memory(df, tmp_path)
    try:
        query.processAllAvailable()
        assert sorted((r.partition, r.offset) for r in spark.table(name).collect()) == [(1, 0), (1, 1)]
    finally:
        query.stop()


def test_ending_offsets_are_rejected_in_streaming(spark, kafka_cluster, tmp_path):
    df = _stream(spark, kafka_cluster, subscribe="x", endingOffsets="latest")
    with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
        _, query = _to_memory(df, tmp_path)
        try:
            query.processAllAvailable()
        finally:
            query.stop()


def test_commit_offsets_to_group_publishes_progress_for_lag_monitors(spark, kafka_cluster, tmp_path):
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTP

    topic = kafka_cluster.new_topic("lag")
    kafka_cluster.produce_values(topic, 1, 4)
    group = f"etl-{uuid.uuid4().hex[:6]}"
    df = _stream(
        spark,
        kafka_cluster,
        subscribe=topic,
        startingOffsets="earliest",
        commitOffsetsToGroup="true",
        **{"kafka.group.id": group},
    )
    _, query = _to_memory(df, tmp_path)
    try:
        query.processAllAvailable()
        kafka_cluster.produce_values(topic, 1, 1, start=4)
        query.processAllAvailable()  # commit(end) of the first batch runs before the second
    finally:
        query.stop()
    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": group})
    try:
        committed = consumer.committed([KafkaTP(topic, 1)], timeout=10)
    finally:
        consumer.close()
    assert committed[0].offset in (4, 5)


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("startingOffsets", "earlist", "startingOffsets must be 'earliest' or 'latest' or offset JSON"),
        ("startingOffset", "earliest", "did you mean startingOffsets\\?"),
        ("kafka.fetch.min.bytes", "lots", "kafka.fetch.min.bytes refused by the Kafka client"),
        ("kafka.auto.offset.reset", "earliest", "Kafka option 'auto.offset.reset' is not supported"),
    ],
)
def test_option_errors_fail_at_load_before_the_query_starts(spark, option, value, message):
    reader = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", "127.0.0.1:1")
        .option("subscribe", "t")
        .option(option, value)
    )
    with pytest.raises(Exception, match=message):
        reader.load()


def test_streaming_only_rules_fail_at_start_as_pyspark_tells_the_source_no_sooner(spark, tmp_path):
    df = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", "127.0.0.1:1")
        .option("subscribe", "t")
        .option("endingOffsets", "latest")
        .load()
    )  # batch or stream? not known yet
    query = (
        df.writeStream.format("memory")
        .queryName("ending_offsets_in_a_stream")
        .option("checkpointLocation", str(tmp_path / "c"))
        .start()
    )
    with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
        query.awaitTermination(120)
