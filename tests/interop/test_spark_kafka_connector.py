"""Spark's built-in Kafka connector (format("kafka"), the JVM spark-sql-kafka-0-10 jars in the
shared session's spark.jars) beside pylog's source and sinks, on pylog's broker and on Apache
Kafka: what one writes, the other reads, and the same topic read by both gives the same rows."""

from __future__ import annotations

import json
import time

from pyspark.sql import functions as F

from tests.interop.harness import Cluster, JavaClients, fill, read, records, rows


def test_spark_kafka_source_and_pylog_source_read_the_same_rows(spark_kafka, cluster: Cluster):
    topic = cluster.topic(partitions=3)
    fill(cluster, topic, 3, 40)
    for options in (
        {},
        {"includeHeaders": "true"},
        {
            "startingOffsets": json.dumps({topic: {"0": 5, "1": -2, "2": 39}}),
            "endingOffsets": json.dumps({topic: {"0": 20, "1": 7, "2": -1}}),
        },
    ):
        spark_rows = rows(read(spark_kafka.read, "kafka", cluster.bootstrap_servers, subscribe=topic, **options))
        pylog_rows = rows(read(spark_kafka.read, "pylog", cluster.bootstrap_servers, subscribe=topic, **options))
        assert len(spark_rows) > 0 and pylog_rows == spark_rows, options


def test_spark_kafka_sink_writes_what_pylog_reads_back(spark_kafka, cluster: Cluster):
    topic = cluster.topic(partitions=2)
    frame = spark_kafka.range(100).select(
        F.concat(F.lit("key-"), F.col("id").cast("string")).alias("key"),
        F.concat(F.lit("value-"), F.col("id").cast("string")).alias("value"),
        (F.col("id") % 2).cast("int").alias("partition"),
        F.array(F.struct(F.lit("seq").alias("key"), F.col("id").cast("string").cast("binary").alias("value"))).alias(
            "headers"
        ),
    )
    frame.write.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers).option(
        "topic", topic
    ).save()
    back = read(spark_kafka.read, "pylog", cluster.bootstrap_servers, subscribe=topic, includeHeaders="true").collect()
    assert sorted(
        (bytes(r.key).decode(), bytes(r.value).decode(), r.partition, [(h.key, bytes(h.value)) for h in r.headers])
        for r in back
    ) == sorted((f"key-{i}", f"value-{i}", i % 2, [("seq", str(i).encode())]) for i in range(100))


def test_spark_kafka_stream_reads_pylog_topic_sink_output_once_under_read_committed(
    spark_kafka, cluster: Cluster, tmp_path, java_clients: JavaClients
):
    source, output = cluster.topic(partitions=2), cluster.topic(partitions=2)
    fill(cluster, source, 2, 50)
    query = (
        read(spark_kafka.readStream, "pylog", cluster.bootstrap_servers, subscribe=source, startingOffsets="earliest")
        .select("key", "value")
        .writeStream.format("pylog")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("topic", output)
        .option("checkpointLocation", str(tmp_path / "sink-checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None

    name = f"spark_kafka_{cluster.name}_{int(time.time() * 1000)}"
    stream = (
        read(
            spark_kafka.readStream,
            "kafka",
            cluster.bootstrap_servers,
            subscribe=output,
            startingOffsets="earliest",
            **{"kafka.isolation.level": "read_committed"},
        )
        .writeStream.format("memory")
        .queryName(name)
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination(300)
    assert stream.exception() is None
    seen = sorted(bytes(row.value).decode() for row in spark_kafka.table(name).collect() if row.value is not None)
    expected = sorted(f"v{p}-{i}" for p in range(2) for i in range(50) if i != 5)
    assert seen == expected
    # Kafka's Java consumer agrees: every committed row once.
    java = records(java_clients.run("read", cluster.bootstrap_servers, output, "read_committed", "60000"))
    assert sorted(value for _, _, value in java if value != "null") == expected
