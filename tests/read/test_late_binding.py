"""Batch DataFrames bind earliest/latest/timestamps at every execution, and explicit positions are
checked before anything is read: the scenarios of Spark's KafkaRelationSuite, on the embedded
broker."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.errors import PySparkException

from tests.support.waiting import wait_until


def send(bootstrap: str, topic: str, values, partition: int | None = None, timestamp: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        kwargs = {"partition": partition} if partition is not None else {}
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        producer.produce(topic, value=str(v).encode(), **kwargs)
    assert producer.flush(30) == 0


def create_df(spark, bootstrap: str, topic: str, **options):
    reader = spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load().selectExpr("CAST(value AS STRING) AS v")


def values(df) -> list[int]:
    return sorted(int(r.v) for r in df.collect())


def test_explicit_earliest_to_latest_binds_latest_at_each_execution(spark, pylog_broker, pylog_topic):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=3)
    send(bootstrap, topic, range(0, 10), 0)
    send(bootstrap, topic, range(10, 20), 1)
    send(bootstrap, topic, [20], 2)
    df = create_df(spark, bootstrap, topic, startingOffsets="earliest", endingOffsets="latest")
    assert values(df) == list(range(21))
    send(bootstrap, topic, range(21, 30), 2)
    assert values(df) == list(range(30)), "'latest' late-binds to the current latest offset"
    assert df.count() == 30


def test_explicit_offsets_bind_only_their_moving_positions(spark, pylog_broker, pylog_topic):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=3)
    send(bootstrap, topic, range(0, 10), 0)
    send(bootstrap, topic, range(10, 20), 1)
    send(bootstrap, topic, [20], 2)
    df = create_df(
        spark,
        bootstrap,
        topic,
        startingOffsets=f'{{"{topic}":{{"0":-2,"1":-2,"2":0}}}}',
        endingOffsets=f'{{"{topic}":{{"0":-1,"1":-1,"2":1}}}}',
    )
    assert values(df) == list(range(21))
    send(bootstrap, topic, range(31, 40), 2)
    assert values(df) == list(range(21)), "static offsets of partition 2: nothing changes"
    send(bootstrap, topic, range(21, 31), 1)
    assert values(df) == list(range(31)), "latest of partition 1 moved"


def test_reused_dataframe_in_one_query(spark, pylog_broker, pylog_topic):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=1)
    send(bootstrap, topic, range(11), 0)
    df = create_df(spark, bootstrap, topic, startingOffsets="earliest", endingOffsets="latest")
    assert values(df.union(df)) == sorted(list(range(11)) * 2)


def test_late_binding_start_after_the_front_was_deleted(spark, pylog_broker, pylog_topic):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=1)
    send(bootstrap, topic, range(10), 0)
    df = create_df(spark, bootstrap, topic, startingOffsets="earliest", endingOffsets="latest")
    assert values(df) == list(range(10))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deleted = admin.delete_records([KafkaTopicPartition(topic, 0, 10)])  # blow away the current records
    next(iter(deleted.values())).result(30)
    send(bootstrap, topic, range(10, 20), 0)
    assert values(df) == list(range(10, 20)), "starts at the new earliest, no DataLossError"


def test_min_partitions_split_reads_new_records_when_reused(spark, pylog_broker, pylog_topic):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=3)
    send(bootstrap, topic, range(0, 10), 0)
    send(bootstrap, topic, range(10, 20), 1)
    send(bootstrap, topic, [20], 2)
    df = create_df(spark, bootstrap, topic, minPartitions="6")
    rdd = df.rdd
    partitions = rdd.glom().collect()
    assert len(partitions) >= 6
    assert sorted(int(r.v) for p in partitions for r in p) == list(range(21))
    send(bootstrap, topic, range(21, 31))
    assert sorted(int(r.v) for r in rdd.collect()) == list(range(31)), "the reused rdd sees the new data"
    assert values(df) == list(range(31))


def test_partitions_and_topics_that_appear_later_are_read_by_the_next_execution(spark, pylog_broker, pylog_topic):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=1)
    send(bootstrap, topic, range(5), 0)
    df = create_df(spark, bootstrap, topic)
    assert values(df) == list(range(5))
    from confluent_kafka.admin import NewPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    wait_until(lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions) >= 3, "3 partitions", 30, 0.1)
    send(bootstrap, topic, range(5, 8), 2)
    assert values(df) == list(range(8))

    later = f"{topic}-created-later"
    empty = create_df(spark, bootstrap, later)
    assert values(empty) == []
    pylog_broker.create_topic(later, partitions=2)
    send(bootstrap, later, range(4), 1)
    assert values(empty) == list(range(4))


def test_start_and_end_offsets_must_name_the_same_topic_partitions(spark, pylog_broker):
    df = create_df(
        spark,
        pylog_broker.bootstrap_servers,
        "test",
        startingOffsets='{"test": {"0": 1, "1": 1, "2": 1}}',
        endingOffsets='{"test": {"0": 0, "1": 0}}',
    )
    with pytest.raises(
        PySparkException, match="The specified start offset and end offset should have the same topic-partitions"
    ):
        df.collect()


def test_unresolved_start_offset_greater_than_end_offset(spark, pylog_broker):
    df = create_df(
        spark,
        pylog_broker.bootstrap_servers,
        "test",
        startingOffsets='{"test": {"0": 1, "1": 1, "2": 1}}',
        endingOffsets='{"test": {"0": 0, "1": 0, "2": 0}}',
    )
    with pytest.raises(PySparkException, match="The specified start offset 1 is greater than the end offset 0 for"):
        df.collect()


def test_resolved_start_offset_greater_than_end_offset_without_latest(spark, pylog_broker, pylog_topic):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=3)
    stamps = []
    for p in range(3):
        send(bootstrap, topic, [0], p, timestamp=1_700_000_000_000 + p)
        send(bootstrap, topic, [0], p, timestamp=1_700_000_001_000 + p)
        stamps.append(1_700_000_001_000 + p)
    df = create_df(
        spark,
        bootstrap,
        topic,
        startingOffsets=f'{{"{topic}": {{"0": 3, "1": 3, "2": 3}}}}',
        endingOffsetsByTimestamp=f'{{"{topic}": {{"0": {stamps[0]}, "1": {stamps[1]}, "2": {stamps[2]}}}}}',
    )
    with pytest.raises(
        PySparkException, match="The resolved start offset 3 is greater than the resolved end offset 1 for"
    ):
        df.collect()


def test_resolved_start_offset_greater_than_end_offset_with_latest(spark, pylog_broker, pylog_topic):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=3)
    df = create_df(spark, bootstrap, topic, startingOffsets=f'{{"{topic}": {{"0": 1, "1": 1, "2": 1}}}}')
    with pytest.raises(
        PySparkException, match="The resolved start offset 1 is greater than the resolved end offset 0 for"
    ):
        df.collect()


def test_explicit_offsets_of_a_topic_that_does_not_exist_fail_naming_it(spark, pylog_broker):
    df = create_df(
        spark,
        pylog_broker.bootstrap_servers,
        "no-such-topic",
        startingOffsets='{"no-such-topic": {"0": 0}}',
        endingOffsets='{"no-such-topic": {"0": 5}}',
    )
    with pytest.raises(PySparkException, match="Topic\\(s\\) no-such-topic do not exist or are not subscribed"):
        df.collect()


def test_assign_reads_the_assigned_partitions_that_exist(spark, pylog_broker, pylog_topic):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=2)
    send(bootstrap, topic, range(3), 0)
    send(bootstrap, topic, range(3, 6), 1)
    base = spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
    assigned = base.option("assign", f'{{"{topic}":[1,5]}}').load().selectExpr("CAST(value AS STRING) AS v")
    assert values(assigned) == [3, 4, 5]
    explicit = (
        base.option("assign", f'{{"{topic}":[1,5]}}').option("startingOffsets", f'{{"{topic}":{{"1":0,"5":0}}}}').load()
    )
    with pytest.raises(PySparkException, match=f"Specified: {topic}-1, {topic}-5; assigned: {topic}-1"):
        explicit.collect()


def test_topic_level_offsets_json_mixes_whole_topics_and_partitions(spark, pylog_broker, pylog_topic, tmp_path):
    bootstrap = pylog_broker.bootstrap_servers
    a, b = pylog_topic(partitions=2), pylog_topic(partitions=2)
    send(bootstrap, a, range(0, 4), 0)
    send(bootstrap, a, range(4, 8), 1)
    send(bootstrap, b, range(100, 104), 0)
    send(bootstrap, b, range(104, 108), 1)
    df = create_df(
        spark,
        bootstrap,
        f"{a},{b}",
        startingOffsets=f'{{"{a}":"earliest","{b}":{{"0":2,"1":3}}}}',
        endingOffsets=f'{{"{a}":"latest","{b}":{{"0":-1,"1":4}}}}',
    )
    assert values(df) == [*range(8), 102, 103, 107]
    query = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", f"{a},{b}")
        .option("startingOffsets", f'{{"{a}":"latest","{b}":"earliest"}}')
        .load()
        .selectExpr("CAST(value AS STRING) AS v")
        .writeStream.format("memory")
        .queryName("topic_level_offsets")
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert values(spark.table("topic_level_offsets")) == list(range(100, 108))
