"""Executor-side reading, in this process (no Spark needed): exact ranges, gaps that are not
loss, Arrow output, and the consumer pool."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyspark import TaskContext

from kafka_spark.client import consumer_pool as client
from kafka_spark.client.config import consumer_config
from kafka_spark.client.consumer_pool import acquire_consumer, close_pooled_consumers, release_consumer
from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.offsets import DataLossError, OffsetRange
from kafka_spark.options import parse_source_options
from kafka_spark.planning import KafkaInputPartition
from kafka_spark.read.partition import read_partition
from kafka_spark.source import source_schema
from tests.support.source_fixtures import kafka_cluster, mock_kafka  # noqa: F401


@pytest.fixture(autouse=True)
def _empty_pool():
    close_pooled_consumers()
    yield
    close_pooled_consumers()


def _partition(cluster, *ranges, fail_on_data_loss=True, include_headers=False, fetcher="librdkafka", **kafka):
    opts = parse_source_options(
        {
            "kafka.bootstrap.servers": cluster.bootstrap_servers,
            "subscribe": "x",
            **{f"kafka.{k}": v for k, v in kafka.items()},
        }
    )
    return KafkaInputPartition(
        ranges=tuple(ranges),
        config=consumer_config(opts, cluster.bootstrap_servers, "test-executor"),
        fail_on_data_loss=fail_on_data_loss,
        include_headers=include_headers,
        poll_timeout_ms=10_000,
        fetcher=fetcher,
    )


def _read(partition):
    batches = list(read_partition(partition))
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    return [row for b in batches for row in b.to_pylist()]


FETCHERS = pytest.mark.parametrize("fetcher", ["arrow", "librdkafka"])


@FETCHERS
def test_read_yields_arrow_batches_with_the_spark_schema(kafka_cluster, fetcher):
    from pyspark.sql.pandas.types import to_arrow_schema

    topic = kafka_cluster.new_topic("arrow")
    kafka_cluster.produce_values(topic, 2, 3)
    for headers in (False, True):
        batches = list(
            read_partition(
                _partition(kafka_cluster, OffsetRange(TP(topic, 2), 0, 3), include_headers=headers, fetcher=fetcher)
            )
        )
        expected = to_arrow_schema(source_schema(headers), timezone="UTC")
        assert batches and all(b.schema.equals(expected) for b in batches)


@FETCHERS
def test_read_stops_at_until_however_far_the_log_has_grown(kafka_cluster, fetcher):
    topic = kafka_cluster.new_topic("exact")
    kafka_cluster.produce_values(topic, 0, 20)
    rows = _read(_partition(kafka_cluster, OffsetRange(TP(topic, 0), 5, 12), fetcher=fetcher))
    assert [r["offset"] for r in rows] == list(range(5, 12))
    assert [r["value"] for r in rows] == [f"v{i}".encode() for i in range(5, 12)]
    assert {(r["topic"], r["partition"], r["timestampType"]) for r in rows} == {(topic, 0, 0)}


@FETCHERS
def test_transaction_gaps_are_not_reported_as_data_loss(kafka_cluster, fetcher):
    topic = kafka_cluster.new_topic("txn")
    kafka_cluster.produce_values(topic, 0, 1)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(10)
    for value, commit in ((b"c1", True), (b"a1", False), (b"c2", True)):
        producer.begin_transaction()
        producer.produce(topic, value=value, partition=0)
        (producer.commit_transaction if commit else producer.abort_transaction)(10)
    whole = _partition(
        kafka_cluster,
        OffsetRange(TP(topic, 0), 0, _log_end(kafka_cluster, topic)),
        fetcher=fetcher,
        **{"isolation.level": "read_committed"},
    )
    rows = _read(whole)
    assert [r["value"] for r in rows] == [b"v0", b"c1", b"c2"]
    offsets = [r["offset"] for r in rows]
    assert offsets[-1] - offsets[0] + 1 > len(offsets)  # there are gaps, and no error for them
    # A range that ends inside a gap finishes when the position passes `until`.
    gap_end = offsets[1] + 1
    assert [
        r["offset"]
        for r in _read(
            _partition(
                kafka_cluster,
                OffsetRange(TP(topic, 0), 0, gap_end + 1),
                fetcher=fetcher,
                **{"isolation.level": "read_committed"},
            )
        )
    ] == offsets[:2]


def _log_end(cluster, topic, partition=0):
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTP

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "probe"})
    try:
        return consumer.get_watermark_offsets(KafkaTP(topic, partition), timeout=10)[1]
    finally:
        consumer.close()


@FETCHERS
def test_range_past_the_log_end_is_data_loss_or_skipped(kafka_cluster, fetcher):
    topic = kafka_cluster.new_topic("short")
    kafka_cluster.produce_values(topic, 1, 2)
    r = OffsetRange(TP(topic, 1), 0, 7)
    with pytest.raises(
        DataLossError,
        match=rf"{topic}-1: offsets \[2, 7\) are not in the log.*"
        "failOnDataLoss=false to skip",
    ):
        _read(_partition(kafka_cluster, r, fetcher=fetcher))
    assert [row["offset"] for row in _read(_partition(kafka_cluster, r, fail_on_data_loss=False, fetcher=fetcher))] == [
        0,
        1,
    ]


def test_consecutive_ranges_reuse_the_pooled_consumer_and_what_it_fetched(kafka_cluster):
    topic = kafka_cluster.new_topic("pool")
    kafka_cluster.produce_values(topic, 0, 10)
    tp = TP(topic, 0)
    first = _partition(kafka_cluster, OffsetRange(tp, 0, 4))
    assert [r["offset"] for r in _read(first)] == [0, 1, 2, 3]
    assert client.pooled_consumer_count() == 1
    pooled = acquire_consumer(first.config, tp)
    assert pooled.next_offset == 4 and pooled.buffered and pooled.buffered[0].offset() == 4
    release_consumer(pooled, reusable=True)
    second = _partition(kafka_cluster, OffsetRange(tp, 4, 10))
    assert [r["offset"] for r in _read(second)] == list(range(4, 10))
    again = acquire_consumer(first.config, tp)
    assert again is pooled  # one consumer served both micro-batches
    release_consumer(again, reusable=True)
    # A non-contiguous start re-assigns and still reads exactly the range.
    assert [r["offset"] for r in _read(_partition(kafka_cluster, OffsetRange(tp, 1, 3)))] == [1, 2]


def test_task_retry_drops_the_pooled_consumer(kafka_cluster):
    topic = kafka_cluster.new_topic("retry")
    kafka_cluster.produce_values(topic, 0, 2)
    partition = _partition(kafka_cluster, OffsetRange(TP(topic, 0), 0, 2))
    _read(partition)
    pooled = acquire_consumer(partition.config, TP(topic, 0))
    release_consumer(pooled, reusable=True)
    context = TaskContext._getOrCreate()
    context._attemptNumber = 1
    try:
        retried = acquire_consumer(partition.config, TP(topic, 0))
    finally:
        TaskContext._setTaskContext(None)
    assert retried is not pooled
    release_consumer(retried, reusable=False)


def test_idle_consumers_are_evicted(kafka_cluster, monkeypatch):
    topic = kafka_cluster.new_topic("idle")
    kafka_cluster.produce_values(topic, 0, 1)
    kafka_cluster.produce_values(topic, 1, 1)
    _read(_partition(kafka_cluster, OffsetRange(TP(topic, 0), 0, 1)))
    assert client.pooled_consumer_count() == 1
    monkeypatch.setattr(client, "IDLE_TIMEOUT_S", 0.0)
    _read(_partition(kafka_cluster, OffsetRange(TP(topic, 1), 0, 1)))
    # Reading partition 1 evicted partition 0's consumer, idle past the timeout.
    assert client.pooled_consumer_count() == 1
    monkeypatch.setattr(client, "IDLE_TIMEOUT_S", 300.0)
    pooled = acquire_consumer(_partition(kafka_cluster).config, TP(topic, 1))
    assert pooled.next_offset == 1
    release_consumer(pooled, reusable=False)


def test_the_evictor_closes_consumers_idle_past_the_timeout_without_a_next_read(kafka_cluster, monkeypatch):
    topic = kafka_cluster.new_topic("evicted")
    kafka_cluster.produce_values(topic, 0, 1)
    close_pooled_consumers()
    _read(_partition(kafka_cluster, OffsetRange(TP(topic, 0), 0, 1)))
    assert client._EVICTOR.running()  # started by the read's acquire
    assert client.evict_idle_consumers() == 0 and client.pooled_consumer_count() == 1
    monkeypatch.setattr(client, "IDLE_TIMEOUT_S", 0.0)
    assert client.evict_idle_consumers() == 1 and client.pooled_consumer_count() == 0


@FETCHERS
def test_unreachable_broker_times_out_naming_the_poll_timeout_option(fetcher):
    import socket

    from kafka_spark.read.partition import PylogReadTimeout

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    opts = parse_source_options({"kafka.bootstrap.servers": dead, "subscribe": "x"})
    partition = KafkaInputPartition(
        ranges=(OffsetRange(TP("x", 0), 0, 5),),
        config=consumer_config(opts, dead, "g"),
        fail_on_data_loss=True,
        include_headers=False,
        poll_timeout_ms=500,
        fetcher=fetcher,
    )
    with pytest.raises(
        PylogReadTimeout,
        match=r"Cannot fetch record for offset 0 of x-0 in \d+ "
        r"milliseconds.*kafkaConsumer.pollTimeoutMs",
    ):
        list(read_partition(partition))
