"""Update output mode into a topic: PySpark's Python sinks cannot take it, and the documented
workaround (foreachBatch with kafka_spark.topic_writer) writes each micro-batch exactly once."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

import kafka_spark
from tests.topics.test_sink import read_topic


def counts_per_key(spark, bootstrap: str, topic: str):
    return (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 30)
        .load()
        .groupBy(F.col("key").cast("string").alias("key"))
        .count()
        .select("key", F.col("count").cast("string").alias("value"))
    )


def produce_keys(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, key=b"k%d" % (i % 3), value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0


def test_update_mode_on_the_topic_sink_is_refused_by_pyspark(spark, pylog_broker, pylog_topic, tmp_path):
    source = pylog_topic(partitions=2)
    produce_keys(pylog_broker.bootstrap_servers, source, 0, 3)
    query = (
        counts_per_key(spark, pylog_broker.bootstrap_servers, source)
        .writeStream.format("pylog")
        .outputMode("update")
        .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
        .option("topic", pylog_topic())
        .option("checkpointLocation", str(tmp_path / "c"))
        .start()
    )
    with pytest.raises(PySparkException, match="pylog does not support Update mode"):
        query.awaitTermination(120)


def test_update_mode_through_topic_writer_lands_each_batch_exactly_once(spark, pylog_broker, pylog_topic, tmp_path):
    bootstrap = pylog_broker.bootstrap_servers
    source, sink = pylog_topic(partitions=2), pylog_topic(partitions=2)
    checkpoint = tmp_path / "checkpoint"

    def run() -> None:
        query = (
            counts_per_key(spark, bootstrap, source)
            .writeStream.outputMode("update")
            .foreachBatch(kafka_spark.topic_writer(topic=sink, **{"kafka.bootstrap.servers": bootstrap}))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    produce_keys(bootstrap, source, 0, 60)  # two batches of 30: each key updated twice
    run()
    produce_keys(bootstrap, source, 60, 30)
    # Spark's commit log loses its last entry: that batch is replayed, topic_writer must skip it.
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    run()
    rows = read_topic(bootstrap, sink, 2)
    updates = sorted((key.decode(), int(value)) for key, value, *_ in rows)
    # Update mode: after each of the 3 batches, every key's new count, once.
    assert updates == sorted((f"k{k}", n) for k in range(3) for n in (10, 20, 30))


def test_topic_writer_keys_batches_by_the_query_id_in_checkpoint_location(spark, pylog_broker, pylog_topic, tmp_path):
    """checkpoint_location: the query id comes from the checkpoint's `metadata` (what a Spark
    Connect server's foreachBatch needs, tests/test_connect.py); in a classic session it is also
    checked against the running query's, so another query's checkpoint is refused."""
    bootstrap = pylog_broker.bootstrap_servers
    source, sink = pylog_topic(partitions=2), pylog_topic(partitions=2)
    produce_keys(bootstrap, source, 0, 30)

    def run(checkpoint, writer_checkpoint):
        query = (
            counts_per_key(spark, bootstrap, source)
            .writeStream.outputMode("update")
            .foreachBatch(
                kafka_spark.topic_writer(
                    checkpoint_location=str(writer_checkpoint), topic=sink, **{"kafka.bootstrap.servers": bootstrap}
                )
            )
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return query

    mine = tmp_path / "mine"
    run(mine, mine)
    assert sorted((k.decode(), int(v)) for k, v, *_ in read_topic(bootstrap, sink, 2)) == [
        ("k0", 10),
        ("k1", 10),
        ("k2", 10),
    ]
    with pytest.raises(
        PySparkException, match=r"checkpoint_location .*mine holds query .*, but this micro-batch is of"
    ):
        run(tmp_path / "other", mine)
