"""Data loss the mock cluster cannot produce, against pylog's embedded broker: offsets deleted
by retention and topics deleted while a query reads them."""

from __future__ import annotations

import pytest

from kafka_spark.client.config import consumer_config
from kafka_spark.client.consumer_pool import close_pooled_consumers
from kafka_spark.client.offset_reader import OffsetReader
from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.offsets import DataLossError, OffsetRange
from kafka_spark.options import parse_source_options
from kafka_spark.planning import KafkaInputPartition
from kafka_spark.read.partition import read_partition
from kafka_spark.read.stream import PylogStreamReader
from kafka_spark.spark_api import ReadAllAvailable
from tests.support.source_fixtures import embedded_kafka  # noqa: F401


@pytest.fixture(autouse=True)
def _empty_pool():
    yield
    close_pooled_consumers()


def _options(cluster, **options):
    return parse_source_options({"kafka.bootstrap.servers": cluster.bootstrap_servers, **options})


@pytest.fixture()
def aged_out(embedded_kafka):
    """A topic whose partition 0 lost its oldest records to retention (log start > 0)."""
    topic = embedded_kafka.new_topic("retention", config={"internal.segment.bytes": "200", "retention.bytes": "400"})
    for i in range(40):
        embedded_kafka.produce_values(topic, 0, 1, start=i)  # one batch per record: many segments
    embedded_kafka.broker.run_retention()
    reader = OffsetReader(_options(embedded_kafka, subscribe=topic), embedded_kafka.bootstrap_servers)
    log_start = reader.earliest_offsets([TP(topic, 0)])[TP(topic, 0)]
    log_end = reader.latest_offsets([TP(topic, 0)])[TP(topic, 0)]
    assert 0 < log_start < log_end == 40, (log_start, log_end)
    return topic, log_start


def _partition(cluster, r, fail_on_data_loss):
    opts = _options(cluster, subscribe="x")
    return KafkaInputPartition(
        ranges=(r,),
        config=consumer_config(opts, cluster.bootstrap_servers, "t-executor"),
        fail_on_data_loss=fail_on_data_loss,
        include_headers=False,
        poll_timeout_ms=10_000,
    )


def test_offsets_deleted_by_retention_fail_naming_partition_and_offsets(embedded_kafka, aged_out):
    topic, log_start = aged_out
    r = OffsetRange(TP(topic, 0), 0, 40)
    with pytest.raises(
        DataLossError,
        match=rf"{topic}-0: offsets \[0, {log_start}\) were deleted.*"
        "failOnDataLoss=false to skip",
    ):
        list(read_partition(_partition(embedded_kafka, r, fail_on_data_loss=True)))


def test_offsets_deleted_by_retention_are_skipped_with_fail_on_data_loss_false(embedded_kafka, aged_out):
    topic, log_start = aged_out
    r = OffsetRange(TP(topic, 0), 0, 40)
    rows = [row for b in read_partition(_partition(embedded_kafka, r, False)) for row in b.to_pylist()]
    assert [row["offset"] for row in rows] == list(range(log_start, 40))


def test_batch_read_of_aged_out_offsets_fails_in_spark(spark, embedded_kafka, aged_out):
    topic, log_start = aged_out
    df = (
        spark.read.format("pylog")
        .option("kafka.bootstrap.servers", embedded_kafka.bootstrap_servers)
        .option("assign", f'{{"{topic}":[0]}}')
        .option("startingOffsets", f'{{"{topic}":{{"0":0}}}}')
        .load()
    )
    with pytest.raises(Exception, match=rf"offsets \[0, {log_start}\) were deleted"):
        df.collect()


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_deleted_topic_is_data_loss_on_the_next_batch(embedded_kafka, fail_on_data_loss, caplog):
    topic = embedded_kafka.new_topic("deleted")
    embedded_kafka.produce_values(topic, 0, 3)
    reader = PylogStreamReader(
        _options(
            embedded_kafka, subscribe=topic, startingOffsets="earliest", failOnDataLoss=str(fail_on_data_loss).lower()
        ),
        embedded_kafka.bootstrap_servers,
    )
    start = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert start[topic]["0"] == 3
    embedded_kafka.broker.delete_topic(topic)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {}
    if fail_on_data_loss:
        with pytest.raises(DataLossError, match=rf"{topic}-0, {topic}-1, .* are gone"):
            reader.partitions(start, end)
    else:
        assert reader.partitions(start, end) == []
        assert f"{topic}-0, {topic}-1" in caplog.text and "failOnDataLoss=false" in caplog.text
    reader.stop()
