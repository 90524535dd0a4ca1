"""Jobs moved from format("kafka") keep their Java client settings: the source and the topic sink
(streaming and batch) run with them, apply what they mean, and ignore the rest with one warning;
a value the client refuses fails where the query is defined, naming the option (KafkaSourceSuite /
KafkaSinkSuite scenarios with Java producer and consumer properties)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections import Counter

import pytest
from confluent_kafka import Producer
from kafka.partitioner.default import murmur2
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from tests.topics.test_sink import read_topic

JAVA_CONSUMER = {
    "kafka.default.api.timeout.ms": "20000",
    "kafka.fetch.max.wait.ms": "100",
    "kafka.receive.buffer.bytes": "65536",
    "kafka.request.timeout.ms": "20000",
    "kafka.max.poll.records": "100",  # ignored: pylog reads whole ranges
    "kafka.client.dns.lookup": "use_all_dns_ips",
}
JAVA_PRODUCER = {
    "kafka.max.block.ms": "30000",
    "kafka.buffer.memory": "8388608",
    "kafka.max.request.size": "2097152",
    "kafka.send.buffer.bytes": "131072",
    "kafka.request.timeout.ms": "20000",
    "kafka.linger.ms": "10",
    "kafka.acks": "all",
    "kafka.compression.type": "lz4",
    "kafka.delivery.timeout.ms": "120000",
    "kafka.retries": "5",
}


def produce_numbers(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def test_source_reads_batch_and_stream_with_java_consumer_settings(spark, pylog_broker, pylog_topic, tmp_path):
    topic = pylog_topic(partitions=3)
    produce_numbers(pylog_broker.bootstrap_servers, topic, 90, 3)
    reader = spark.read.format("pylog").options(**JAVA_CONSUMER)
    batch = (
        reader.option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
        .option("subscribe", topic)
        .load()
        .select(F.col("value").cast("string").cast("int").alias("n"))
    )
    assert sorted(r.n for r in batch.collect()) == list(range(90))

    query = (
        spark.readStream.format("pylog")
        .options(**JAVA_CONSUMER)
        .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 40)
        .load()
        .select(F.col("value").cast("string").alias("v"))
        .writeStream.format("memory")
        .queryName("java_consumer_settings")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    query.awaitTermination()
    assert sorted(int(r.v) for r in spark.table("java_consumer_settings").collect()) == list(range(90))


def _read_failure(spark, address: str, **options: str) -> str:
    """The message of a batch read of topic ``t`` at ``address`` that must fail, with a 1.5 s
    ``kafka.default.api.timeout.ms``."""
    df = spark.read.format("pylog").option("kafka.bootstrap.servers", address).option("subscribe", "t")
    df = df.option("kafka.default.api.timeout.ms", "1500").options(**options).load()
    with pytest.raises(PySparkException) as raised:
        df.count()
    return str(raised.value)


def _stalling_listener(listener: socket.socket) -> None:
    """Accepts connections and sends one byte of an answer to each, then nothing more: a peer
    that started to answer and hung (the reachability check passes; every request times out)."""
    held = []
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener was shut down: the test is over
                return
            held.append(conn)
            conn.settimeout(30)
            with contextlib.suppress(OSError):
                conn.recv(4)
                conn.sendall(b"\x00")
    finally:
        for conn in held:
            conn.close()


def test_default_api_timeout_bounds_the_drivers_offset_calls(spark):
    with socket.create_server(("127.0.0.1", 0)) as stalling:
        server = threading.Thread(target=_stalling_listener, args=(stalling,), daemon=True)
        server.start()
        address = f"127.0.0.1:{stalling.getsockname()[1]}"
        try:
            message = _read_failure(spark, address, **{"fetchOffset.numRetries": "0"})
        finally:
            stalling.shutdown(socket.SHUT_RDWR)  # wakes the server's accept (a close alone would not)
            server.join(60)
    assert not server.is_alive()
    assert f"1 attempts of at most 1500 ms each against {address}" in message, message


def test_a_read_from_an_address_that_never_answers_fails_naming_its_silence(spark):
    # The kernel accepts the connection; nothing ever answers. The driver asks a Kafka question
    # first and fails within kafka.default.api.timeout.ms, saying so, instead of librdkafka's
    # attempts of a whole timeout each ending in a bare timeout.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        message = _read_failure(spark, address)
    assert f"no Kafka broker reachable at {address} within 1.5s" in message, message
    assert "accepts connections but sent no answer to a Kafka request" in message, message
    assert "set kafka.default.api.timeout.ms (now 1500) to wait longer" in message, message


def test_a_read_from_an_address_where_nothing_listens_fails_naming_it(spark):
    # No retries against a cluster that accepts no connection: kafka.default.api.timeout.ms
    # (default 30 s) bounds the whole wait, and the message says how to wait longer.
    message = _read_failure(spark, "127.0.0.1:1")
    assert "no Kafka broker reachable at 127.0.0.1:1 within 1.5s (127.0.0.1:1: connection refused)" in message
    assert "set kafka.default.api.timeout.ms (now 1500) to wait longer" in message


def test_topic_sink_streams_with_java_producer_settings_and_large_records(spark, pylog_broker, pylog_topic, tmp_path):
    bootstrap = pylog_broker.bootstrap_servers
    source = pylog_topic(partitions=2)
    sink = pylog_topic(partitions=2, config={"max.message.bytes": str(4 << 20)})
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        producer.produce(source, key=b"k%d" % i, value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    big = 1_500_000  # above librdkafka's default message.max.bytes: needs kafka.max.request.size
    query = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 15)
        .load()
        .select(
            "key", F.concat(F.col("value").cast("string"), F.lit(":"), F.expr(f"repeat('x', {big})")).alias("value")
        )
        .writeStream.format("pylog")
        .options(**JAVA_PRODUCER)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    rows = read_topic(bootstrap, sink, 2)
    assert sorted(int(value.split(b":")[0]) for _, value, *_ in rows) == list(range(40))
    assert all(len(value.split(b":")[1]) == big for _, value, *_ in rows)


def test_topic_sink_batch_write_partitions_as_the_java_partitioner_named(spark, pylog_broker, pylog_topic):
    bootstrap = pylog_broker.bootstrap_servers
    keys = spark.createDataFrame([(f"user-{i % 7}", f"{i}") for i in range(70)], "key string, value string")

    keyed = pylog_topic(partitions=3)
    (
        keys.write.format("pylog")
        .options(**JAVA_PRODUCER)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.partitioner.class", "org.apache.kafka.clients.producer.internals.DefaultPartitioner")
        .option("topic", keyed)
        .mode("append")
        .save()
    )
    for key, _, _, _, partition in read_topic(bootstrap, keyed, 3):
        assert partition == (murmur2(key) & 0x7FFFFFFF) % 3, "where Kafka's Java producer puts the key"

    dealt = pylog_topic(partitions=3)
    (
        keys.coalesce(1)
        .write.format("pylog")
        .options(**JAVA_PRODUCER)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.partitioner.class", "org.apache.kafka.clients.producer.RoundRobinPartitioner")
        .option("topic", dealt)
        .mode("append")
        .save()
    )
    rows = read_topic(bootstrap, dealt, 3)
    assert sorted(int(value) for _, value, *_ in rows) == list(range(70))
    assert sorted(Counter(partition for *_, partition in rows).values()) == [23, 23, 24], "keys ignored, dealt in turn"


def test_a_queue_too_small_for_a_record_fails_after_max_block_ms(spark, pylog_broker, pylog_topic):
    df = spark.createDataFrame([("x" * 8192,)], "value string")
    with pytest.raises(PySparkException, match="queue stayed full for kafka.max.block.ms=1500 ms"):
        (
            df.write.format("pylog")
            .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
            .option("kafka.buffer.memory", "1024")
            .option("kafka.max.block.ms", "1500")
            .option("topic", pylog_topic())
            .option("deliveryGuarantee", "at-least-once")
            .mode("append")
            .save()
        )


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("kafka.max.request.size", "10", "kafka.max.request.size refused by the Kafka client"),
        ("kafka.linger.ms", "soon", "kafka.linger.ms refused by the Kafka client"),
        ("kafka.max.blok.ms", "5", "Did you mean kafka.max.block.ms?"),
        ("kafka.partitioner.class", "com.acme.Custom", "a Java partitioner cannot run in librdkafka"),
    ],
)
def test_sink_setting_the_client_refuses_fails_when_the_write_starts(spark, pylog_broker, option, value, message):
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(PySparkException, match=message):
        (
            df.write.format("pylog")
            .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
            .option(option, value)
            .option("topic", "t")
            .mode("append")
            .save()
        )


def test_source_setting_the_client_refuses_fails_where_the_dataframe_is_defined(spark, pylog_broker):
    reader = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", pylog_broker.bootstrap_servers)
        .option("subscribe", "t")
        .option("kafka.fetch.max.bytes", "many")
    )
    with pytest.raises(PySparkException, match="kafka.fetch.max.bytes refused by the Kafka client"):
        reader.load()


SCRIPT = """
import os, sys
from pyspark.sql import SparkSession, functions as F
bootstrap, source, sink, checkpoint = sys.argv[1:5]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
query = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 10)
         .option("kafka.max.poll.records", "50").load()
         .select("key", "value")
         .writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
         .option("kafka.metrics.num.samples", "3").option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
query.awaitTermination()
print("batches", len(query.recentProgress))
spark.stop()
"""


@pytest.mark.spark  # Spark runs in a subprocess
def test_an_ignored_property_is_warned_about_once_per_query(pylog_broker, pylog_topic, tmp_path):
    # A query of its own, in a process of its own, so that all of Spark's output (its Python
    # workers' included) can be read: several batches and tasks, still one warning each.
    source, sink = pylog_topic(partitions=2), pylog_topic(partitions=2)
    produce_numbers(pylog_broker.bootstrap_servers, source, 40, 2)
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    run = subprocess.run(
        [sys.executable, str(script), pylog_broker.bootstrap_servers, source, sink, str(tmp_path / "checkpoint")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-3000:]
    # 40 records at 10 a trigger, after the empty batch 0 that records where the query starts
    assert "batches 5" in run.stdout, run.stdout[-2000:]
    assert output.count("ignoring kafka.max.poll.records") == 1, output[-3000:]
    assert output.count("ignoring kafka.metrics.num.samples") == 1, output[-3000:]
    assert sorted(int(v) for _, v, *_ in read_topic(pylog_broker.bootstrap_servers, sink, 2)) == list(range(40))
