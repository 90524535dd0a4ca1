"""Batch reads with spark.read.format("pylog") against a Kafka-protocol cluster."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality

from kafka_spark.source import source_schema
from tests.support.source_fixtures import Record, embedded_kafka, kafka_cluster, mock_kafka  # noqa: F401


def _read(spark, cluster, **options):
    reader = spark.read.format("pylog").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _utc(ms: int) -> dt.datetime:
    # Spark returns naive datetimes in the session time zone (UTC in tests).
    return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)


def _rows(topic, records, headers=False):
    return [
        (r.key, r.value, topic, r.partition, r.offset, _utc(r.timestamp), 0) + ((r.headers or None,) if headers else ())
        for r in records
    ]


@pytest.fixture(scope="module")
def filled(kafka_cluster):
    """A topic with records in partitions 0, 2 and 3 (1 stays empty), timestamps 1000.. ms."""
    return _fill(kafka_cluster)


@pytest.fixture(scope="module")
def timestamp_cluster(kafka_cluster, request):
    """``kafka_cluster`` if it answers ListOffsets by timestamp, else the embedded broker
    (librdkafka's mock answers every timestamp lookup with -1)."""
    if kafka_cluster.supports_timestamp_lookup:
        return kafka_cluster
    return request.getfixturevalue("embedded_kafka")


@pytest.fixture(scope="module")
def filled_for_timestamps(timestamp_cluster):
    return timestamp_cluster, *_fill(timestamp_cluster)


def _fill(kafka_cluster):
    topic = kafka_cluster.new_topic("batch")
    records = kafka_cluster.produce(
        topic,
        [
            Record(key=b"k0", value=b"v0", partition=0, timestamp=1000, headers=[("h", b"1")]),
            Record(key=None, value=b"v1", partition=0, timestamp=2000),
            Record(key=b"k2", value=None, partition=0, timestamp=3000, headers=[("a", b"x"), ("b", None), ("a", b"y")]),
            Record(key=b"k3", value=b"", partition=2, timestamp=1500),
            Record(key=b"k4", value=b"v4", partition=3, timestamp=2500),
            Record(key=b"k5", value=b"v5", partition=3, timestamp=4000),
        ],
    )
    return topic, records


def test_batch_read_returns_exactly_the_produced_records(spark, kafka_cluster, filled):
    topic, records = filled
    df = _read(spark, kafka_cluster, subscribe=topic)
    expected = spark.createDataFrame(_rows(topic, records), source_schema())
    assert_df_equality(df, expected, ignore_row_order=True)


def test_include_headers_adds_headers_column_null_when_a_record_has_none(spark, kafka_cluster, filled):
    topic, records = filled
    df = _read(spark, kafka_cluster, subscribe=topic, includeHeaders="true")
    expected = spark.createDataFrame(_rows(topic, records, headers=True), source_schema(True))
    assert_df_equality(df, expected, ignore_row_order=True)


def test_starting_and_ending_offsets_json_select_a_slice(spark, kafka_cluster, filled):
    topic, records = filled
    df = _read(
        spark,
        kafka_cluster,
        subscribe=topic,
        startingOffsets=f'{{"{topic}":{{"0":1,"1":-2,"2":-2,"3":-2}}}}',
        endingOffsets=f'{{"{topic}":{{"0":2,"1":-1,"2":0,"3":-1}}}}',
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, 1), (3, 0), (3, 1)]


def test_starting_offsets_json_must_list_every_partition(spark, kafka_cluster, filled):
    topic, _ = filled
    df = _read(spark, kafka_cluster, subscribe=topic, startingOffsets=f'{{"{topic}":{{"0":0}}}}')
    with pytest.raises(
        Exception, match="If startingOffsets contains specific offsets, you must specify all TopicPartitions"
    ):
        df.collect()


def test_timestamps_select_first_offset_at_or_after_them(spark, filled_for_timestamps):
    kafka_cluster, topic, records = filled_for_timestamps
    df = _read(spark, kafka_cluster, assign=f'{{"{topic}":[0,3]}}', startingTimestamp="2000", endingTimestamp="3000")
    # partition 0: start at ts 2000 (offset 1), end before ts 3000 (offset 2);
    # partition 3: start at ts 2500 (offset 0); no record at >= 3000... 4000 is: end at offset 1.
    got = sorted(r.value for r in df.collect())
    assert got == [b"v1", b"v4"]


def test_timestamp_newer_than_every_record_fails_or_starts_at_latest_by_strategy(spark, kafka_cluster, filled):
    topic, _ = filled
    by_ts = f'{{"{topic}":{{"0":9998,"2":9999}}}}'
    df = _read(spark, kafka_cluster, assign=f'{{"{topic}":[0,2]}}', startingOffsetsByTimestamp=by_ts)
    with pytest.raises(
        Exception,
        match=f"No offset matched from request of topic-partition {topic}-0 "
        "and timestamp 9998.*startingOffsetsByTimestampStrategy=latest",
    ):
        df.collect()
    df = _read(
        spark,
        kafka_cluster,
        assign=f'{{"{topic}":[0,2]}}',
        startingOffsetsByTimestamp=by_ts,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert df.count() == 0
    # An ending timestamp newer than every record ends at latest.
    df = _read(spark, kafka_cluster, assign=f'{{"{topic}":[0,2]}}', endingTimestamp="9999")
    assert df.count() == 4


def test_per_partition_timestamps_select_per_partition_starts(spark, filled_for_timestamps):
    kafka_cluster, topic, _ = filled_for_timestamps
    by_ts = f'{{"{topic}":{{"0":2500,"3":0}}}}'
    df = _read(spark, kafka_cluster, assign=f'{{"{topic}":[0,3]}}', startingOffsetsByTimestamp=by_ts)
    assert sorted((r.partition, r.offset) for r in df.collect()) == [(0, 2), (3, 0), (3, 1)]


def test_subscribe_pattern_reads_every_matching_topic(spark, kafka_cluster):
    prefix = kafka_cluster.new_topic("pattern")
    first, second = prefix + "-a", prefix + "-b"
    kafka_cluster.produce_values(first, 1, 2)
    kafka_cluster.produce_values(second, 3, 1)
    kafka_cluster.produce_values(prefix + "-other-x", 0, 1)
    df = _read(spark, kafka_cluster, subscribePattern=prefix + "-[ab]")
    got = sorted((r.topic, r.partition, r.offset) for r in df.select("topic", "partition", "offset").collect())
    assert got == [(first, 1, 0), (first, 1, 1), (second, 3, 0)]


def test_empty_topic_reads_as_empty_dataframe(spark, kafka_cluster):
    topic = kafka_cluster.new_topic("empty")
    assert _read(spark, kafka_cluster, subscribe=topic).count() == 0


def test_subscribing_to_a_missing_topic_reads_nothing(spark, kafka_cluster):
    assert _read(spark, kafka_cluster, subscribe="no-such-topic-xyz").count() == 0


def test_ending_offset_past_the_log_end_is_data_loss_naming_partition_and_offsets(spark, kafka_cluster, filled):
    topic, _ = filled
    ending = f'{{"{topic}":{{"0":10}}}}'
    df = _read(spark, kafka_cluster, assign=f'{{"{topic}":[0]}}', endingOffsets=ending)
    with pytest.raises(
        Exception,
        match=rf"{topic}-0: offsets \[3, 10\) are not in the log.*"
        "set the source option failOnDataLoss=false to skip",
    ):
        df.collect()
    df = _read(spark, kafka_cluster, assign=f'{{"{topic}":[0]}}', endingOffsets=ending, failOnDataLoss="false")
    assert sorted(r.offset for r in df.collect()) == [0, 1, 2]


def test_min_partitions_splits_and_max_partitions_groups_tasks(spark, kafka_cluster):
    topic = kafka_cluster.new_topic("tasks")
    for p in range(4):
        kafka_cluster.produce_values(topic, p, 10)
    df = _read(spark, kafka_cluster, subscribe=topic, minPartitions="8")
    assert df.rdd.getNumPartitions() == 8
    assert sorted(r.offset for r in df.collect()) == sorted(list(range(10)) * 4)
    df = _read(spark, kafka_cluster, subscribe=topic, maxPartitions="2", assignmentStrategy="roundrobin")
    assert df.rdd.getNumPartitions() == 2
    assert df.count() == 40


def test_user_specified_schema_is_rejected(spark, kafka_cluster, filled):
    topic, _ = filled
    reader = (
        spark.read.format("pylog")
        .schema("value STRING")
        .option("kafka.bootstrap.servers", kafka_cluster.bootstrap_servers)
        .option("subscribe", topic)
    )
    with pytest.raises(Exception, match="does not accept a user-specified schema"):
        reader.load().collect()


def test_bad_option_fails_when_the_dataframe_is_defined(spark):
    with pytest.raises(Exception, match="subscribe"):
        spark.read.format("pylog").option("kafka.bootstrap.servers", "h:1").load()  # no subscription
    with pytest.raises(Exception, match="Kafka option 'auto.offset.reset' is not supported"):
        (
            spark.read.format("pylog")
            .option("subscribe", "x")
            .option("kafka.bootstrap.servers", "h:1")
            .option("kafka.auto.offset.reset", "earliest")
            .load()
        )


def test_a_partition_without_a_leader_fails_the_read_naming_it(spark, tmp_path, pylog_broker_factory):
    """Offsets of a partition whose only replica is offline (a disk error here) cannot be listed:
    after fetchOffset.numRetries the read fails naming that partition and what the broker said."""
    from confluent_kafka import Producer

    broker = pylog_broker_factory(log_dir=tmp_path)
    broker.create_topic("half-offline", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        producer.produce("half-offline", value=b"%d" % i, partition=i % 2)
    producer.flush(10)
    broker.broker.logs.get_log("half-offline", 1).mark_failed("a test's disk error")
    with pytest.raises(Exception, match=r"partition half-offline-1: .*LEADER_NOT_AVAILABLE"):
        _read(
            spark,
            broker,
            subscribe="half-offline",
            **{"fetchOffset.numRetries": "1", "fetchOffset.retryIntervalMs": "10"},
        ).count()


def test_a_task_freezes_its_workers_heap_and_the_driver_is_left_alone(spark):
    """Spark's daemon runs a full gc.collect() after each task of a reused worker; the objects of
    numba, pyarrow and confluent-kafka made that ~0.05 s of CPU per task, so a task's read leaves
    them frozen (kafka_spark.read.partition.settle_worker_heap). Outside a task nothing is frozen."""
    import gc

    from kafka_spark.read.partition import settle_worker_heap

    def read_nothing_in_a_task(_rows):  # noqa: ANN001, ANN202 - runs in a Spark Python worker (pickled by value)
        import gc

        from kafka_spark.client.config import consumer_config
        from kafka_spark.options import parse_source_options
        from kafka_spark.planning import KafkaInputPartition
        from kafka_spark.read import partition as reading

        opts = parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t"})
        nothing = KafkaInputPartition(
            ranges=(),
            config=consumer_config(opts, "127.0.0.1:9", "test-executor"),
            fail_on_data_loss=True,
            include_headers=False,
            poll_timeout_ms=1000,
        )
        gc.unfreeze()  # whatever earlier tests' reads left in this reused worker
        reading._frozen_at = None
        before = gc.get_freeze_count()
        assert list(reading.read_partition(nothing)) == []
        return [(before, gc.get_freeze_count())]

    (before, after), *_ = spark.sparkContext.parallelize([0], 1).mapPartitions(read_nothing_in_a_task).collect()
    assert before == 0 and after > 0
    frozen_here = gc.get_freeze_count()
    settle_worker_heap()
    assert gc.get_freeze_count() == frozen_here
