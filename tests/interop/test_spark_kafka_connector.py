"""Spark's built-in Kafka connector (format("kafka"), the JVM spark-sql-kafka-0-10 jars in the
shared session's spark.jars) beside pylog's source and sinks, on pylog's broker and on Apache
Kafka: what one writes, the other reads, and the same topic read by both gives the same rows."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer
from pyspark.sql import DataFrame, functions as F

from interop.harness import Cluster, JavaClients, records
from interop.references import ReferencesMissing, SPARK_CONNECTOR_VERSION

BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="session")
def spark_kafka(spark):
    """The shared session, with Spark's Kafka connector on its classpath."""
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    if f"spark-sql-kafka-0-10_2.13-{SPARK_CONNECTOR_VERSION}.jar" not in jars:
        raise ReferencesMissing("Spark's Kafka connector is not in the test session's spark.jars: run "
                                "`bash scripts/fetch_references.sh` (make bootstrap does)")
    return spark


def fill(cluster: Cluster, topic: str, partitions: int, per_partition: int) -> None:
    """Records with keys, headers and increasing timestamps, a null key and a null value among them."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for i in range(per_partition):
        for partition in range(partitions):
            key = None if i == 3 else f"k{partition}-{i}".encode()
            value = None if i == 5 else f"v{partition}-{i}".encode()
            producer.produce(topic, key=key, value=value, partition=partition, timestamp=BASE_TS + i * 1000,
                             headers=[("h", f"{i}".encode()), ("empty", None)] if i % 2 else None)
    assert producer.flush(30) == 0


def rows(frame: DataFrame) -> list[tuple]:
    """The rows in a comparable form, sorted (headers as tuples, None for no headers)."""
    out = []
    for row in frame.collect():
        values = row.asDict()
        if values.get("headers") is not None:
            values["headers"] = tuple((h["key"], h["value"]) for h in values["headers"])
        out.append(tuple(values[name] for name in sorted(values)))
    return sorted(out, key=repr)


def read(reader, fmt: str, bootstrap: str, **options: str) -> DataFrame:
    """``reader`` (``spark.read`` or ``spark.readStream``) of ``fmt`` with ``options``."""
    reader = reader.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_spark_kafka_source_and_pylog_source_read_the_same_rows(spark_kafka, cluster: Cluster):
    topic = cluster.topic(partitions=3)
    fill(cluster, topic, 3, 40)
    for options in ({}, {"includeHeaders": "true"},
                    {"startingOffsets": json.dumps({topic: {"0": 5, "1": -2, "2": 39}}),
                     "endingOffsets": json.dumps({topic: {"0": 20, "1": 7, "2": -1}})}):
        spark_rows = rows(read(spark_kafka.read, "kafka", cluster.bootstrap_servers, subscribe=topic, **options))
        pylog_rows = rows(read(spark_kafka.read, "pylog", cluster.bootstrap_servers, subscribe=topic, **options))
        assert len(spark_rows) > 0 and pylog_rows == spark_rows, options


def test_spark_kafka_sink_writes_what_pylog_reads_back(spark_kafka, cluster: Cluster):
    topic = cluster.topic(partitions=2)
    frame = spark_kafka.range(100).select(
        F.concat(F.lit("key-"), F.col("id").cast("string")).alias("key"),
        F.concat(F.lit("value-"), F.col("id").cast("string")).alias("value"),
        (F.col("id") % 2).cast("int").alias("partition"),
        F.array(F.struct(F.lit("seq").alias("key"), F.col("id").cast("string").cast("binary").alias("value"))).alias("headers"),
    )
    frame.write.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers).option("topic", topic).save()
    back = read(spark_kafka.read, "pylog", cluster.bootstrap_servers, subscribe=topic, includeHeaders="true").collect()
    assert sorted((bytes(r.key).decode(), bytes(r.value).decode(), r.partition, [(h.key, bytes(h.value)) for h in r.headers])
                  for r in back) == sorted((f"key-{i}", f"value-{i}", i % 2, [("seq", str(i).encode())]) for i in range(100))


def test_spark_kafka_stream_reads_pylog_topic_sink_output_once_under_read_committed(
        spark_kafka, cluster: Cluster, tmp_path, java_clients: JavaClients):
    source, output = cluster.topic(partitions=2), cluster.topic(partitions=2)
    fill(cluster, source, 2, 50)
    query = (read(spark_kafka.readStream, "pylog", cluster.bootstrap_servers, subscribe=source,
                  startingOffsets="earliest")
             .select("key", "value")
             .writeStream.format("pylog").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
             .option("topic", output).option("checkpointLocation", str(tmp_path / "sink-checkpoint"))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    assert query.exception() is None

    name = f"spark_kafka_{cluster.name}_{int(time.time() * 1000)}"
    stream = (read(spark_kafka.readStream, "kafka", cluster.bootstrap_servers, subscribe=output,
                   startingOffsets="earliest", **{"kafka.isolation.level": "read_committed"})
              .writeStream.format("memory").queryName(name).trigger(availableNow=True).start())
    stream.awaitTermination(300)
    assert stream.exception() is None
    seen = sorted(bytes(row.value).decode() for row in spark_kafka.table(name).collect() if row.value is not None)
    expected = sorted(f"v{p}-{i}" for p in range(2) for i in range(50) if i != 5)
    assert seen == expected
    # Kafka's Java consumer agrees: every committed row once.
    java = records(java_clients.run("read", cluster.bootstrap_servers, output, "read_committed", "60000"))
    assert sorted(value for _, _, value in java if value != "null") == expected
