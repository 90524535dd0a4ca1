"""pylog's source and sinks against Apache Kafka: every kind of offset option gives the rows
Spark's own Kafka source gives; streaming restarts, a killed driver and replays keep the sinks
exactly once; Kafka's own tools and Java consumer see what the connector did; SCRAM works."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F

from kafka_spark.topics.options import parse_sink_options
from kafka_spark.topics.task import TopicSinkCommitMessage, write_exactly_once
from tests.interop.harness import (
    BASE_TS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    Cluster,
    JavaClients,
    fill,
    read,
    records,
    rows,
    table,
)
from tests.support.waiting import wait_until
from tests.topics.test_fencing import SCHEMA as FENCING_SCHEMA
from tests.topics.test_fencing import HeldAttempt
from tests.topics.test_fencing import rows as fencing_rows

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def apache(apache_kafka, tool_runner) -> Cluster:
    return Cluster("kafka", apache_kafka.bootstrap_servers, tool_runner)


def offset_options(topic: str) -> list[dict[str, str]]:
    """One of each kind of Spark's offset options (fill() timestamps: BASE_TS + i seconds)."""
    specific = json.dumps
    return [
        {},
        {"startingOffsets": "earliest", "endingOffsets": "latest"},
        {
            "startingOffsets": specific({topic: {"0": 3, "1": -2, "2": 10}}),
            "endingOffsets": specific({topic: {"0": 15, "1": -1, "2": 12}}),
        },
        {"startingTimestamp": str(BASE_TS + 7_000)},
        {"startingTimestamp": str(BASE_TS + 4_500), "endingTimestamp": str(BASE_TS + 9_000)},
        {
            "startingOffsetsByTimestamp": specific(
                {topic: {"0": BASE_TS + 2_000, "1": BASE_TS, "2": BASE_TS + 18_000}}
            ),
            "endingOffsetsByTimestamp": specific(
                {topic: {"0": BASE_TS + 6_000, "1": BASE_TS + 19_500, "2": BASE_TS + 19_000}}
            ),
        },
        {
            "startingOffsetsByTimestamp": specific({topic: {"0": BASE_TS + 60_000, "1": BASE_TS, "2": BASE_TS}}),
            "startingOffsetsByTimestampStrategy": "latest",
        },
        {"assign": specific({topic: [0, 2]}), "startingOffsets": specific({topic: {"0": 1, "2": -2}})},
    ]


def test_batch_read_with_every_offset_option_kind_gives_spark_kafka_source_rows(spark_kafka, apache: Cluster):
    cluster = apache
    topic = cluster.topic(partitions=3, prefix="offsets")
    fill(cluster, topic, 3, 20)
    for options in offset_options(topic):
        subscription = {} if "assign" in options else {"subscribe": topic}
        expected = rows(read(spark_kafka.read, "kafka", cluster.bootstrap_servers, **subscription, **options))
        assert expected, options
        assert (
            rows(read(spark_kafka.read, "pylog", cluster.bootstrap_servers, **subscription, **options)) == expected
        ), options
    pattern = rows(read(spark_kafka.read, "kafka", cluster.bootstrap_servers, subscribePattern=f"{topic[:-3]}.*"))
    assert (
        rows(read(spark_kafka.read, "pylog", cluster.bootstrap_servers, subscribePattern=f"{topic[:-3]}.*")) == pattern
    )
    for bad in (
        {"startingOffsets": "latest"},
        {"endingOffsets": "earliest"},
        {
            "startingOffsetsByTimestamp": json.dumps({topic: {"0": BASE_TS + 60_000}}),
            "assign": json.dumps({topic: [0]}),
        },
    ):
        subscription = {} if "assign" in bad else {"subscribe": topic}
        for fmt in ("kafka", "pylog"):  # both refuse
            with pytest.raises(Exception):  # noqa: B017 each format raises its own error class
                read(spark_kafka.read, fmt, cluster.bootstrap_servers, **subscription, **bad).collect()


class SequenceProducer:
    """Writes 0, 1, 2, ... into ``topic`` from a thread until stopped; remembers what was acked."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acknowledged: list[int] = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        seq = 0
        while not self._stop.is_set():
            for _ in range(10):  # about 200 records a second
                self._producer.produce(
                    self._topic,
                    value=b"%d" % seq,
                    on_delivery=lambda err, msg: err or self.acknowledged.append(int(msg.value())),
                )
                seq += 1
            self._producer.poll(0)
            time.sleep(0.05)

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join(60)
        assert self._producer.flush(60) == 0
        return self.acknowledged


def test_streaming_query_restarted_three_times_while_a_producer_writes_keeps_every_record_once(
    spark, apache: Cluster, tmp_path
):
    topic = apache.topic(partitions=3, prefix="restarts")
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    producer = SequenceProducer(apache.bootstrap_servers, topic)

    def start(**trigger):
        return (
            spark.readStream.format("pylog")
            .option("kafka.bootstrap.servers", apache.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 2000)
            .load()
            .select(F.col("value").cast("string").cast("long").alias("seq"), "partition", "offset")
            .writeStream.format("pylog-files")
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .start(output)
        )

    try:
        for _ in range(3):
            query = start(processingTime="200 milliseconds")

            def two_batches_with_data(query=query) -> bool:  # then stop mid-stream
                assert query.exception() is None, query.exception()
                return sum(1 for progress in query.recentProgress if progress["numInputRows"] > 0) >= 2

            wait_until(two_batches_with_data, "two batches with data", 120, interval=0.2)
            query.stop()
    finally:
        acknowledged = producer.stop()
    query = start(availableNow=True)
    query.awaitTermination(300)
    assert query.exception() is None
    seqs = Counter(row.seq for row in spark.read.parquet(output).select("seq").collect())
    assert len(acknowledged) > 0 and set(seqs) == set(acknowledged)
    assert [seq for seq, count in seqs.items() if count > 1] == []


@pytest.mark.spark  # Spark runs in a subprocess
def test_file_sink_keeps_every_record_once_when_the_driver_is_killed(apache: Cluster):
    """scripts/chaos_pipeline.py against Apache Kafka: the driver (JVM and Python workers) is
    killed with SIGKILL right after a sink commit published its manifest (before Spark's commit
    log records the batch) and restarted from its checkpoint while a producer writes; stock
    Spark reads every acknowledged record once."""
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "chaos_pipeline.py"),
            "--sink",
            "files",
            "--kills",
            "1",
            "--aim",
            "manifest-published",
            "--seed",
            "2",
            "--bootstrap-server",
            apache.bootstrap_servers,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    summary = [line for line in result.stdout.splitlines() if line.startswith("chaos:")]
    assert summary and summary[-1].endswith(" OK"), result.stdout[-2000:] + result.stderr[-3000:]
    assert " duplicates=0 missing=0 unexpected=0 " in summary[-1]
    assert "struck=[manifest-published" in summary[-1]


def test_topic_sink_replayed_batch_is_read_once_by_java_read_committed_consumer(
    spark, apache: Cluster, java_clients: JavaClients, tmp_path
):
    source, output = apache.topic(partitions=2, prefix="sink-in"), apache.topic(partitions=2, prefix="sink-out")
    checkpoint = tmp_path / "checkpoint"

    def run_to_end() -> None:
        query = (
            spark.readStream.format("pylog")
            .option("kafka.bootstrap.servers", apache.bootstrap_servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 40)
            .load()
            .select("key", "value")
            .writeStream.format("pylog")
            .option("kafka.bootstrap.servers", apache.bootstrap_servers)
            .option("topic", output)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        assert query.exception() is None

    producer = Producer({"bootstrap.servers": apache.bootstrap_servers})
    for i in range(100):
        producer.produce(source, key=b"k%d" % i, value=b"r%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    run_to_end()
    # Spark forgets it committed the last batch (as after a crash before its commit log write):
    # the batch is planned again and replayed; the sink must write nothing the second time.
    commits = sorted((checkpoint / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = commits[-1]
    assert last.name.isdigit()
    last.unlink()
    (checkpoint / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    run_to_end()

    committed = records(java_clients.run("read", apache.bootstrap_servers, output, "read_committed", "60000"))
    assert Counter(value for _, _, value in committed) == Counter(f"r{i}" for i in range(100))


def test_topic_sink_rows_apache_kafka_rejects_abort_the_write_and_name_why(
    spark, apache: Cluster, java_clients: JavaClients
):
    # Kafka takes batches of at most 1,000 bytes on this topic; every fifth row is 3,000 bytes.
    # The exactly-once sink's rows carry no delivery callback: Kafka's rejection has to fail the
    # transaction's commit, and no row of the write may reach a read_committed consumer.
    output = apache.topic(partitions=2, prefix="sink-rejected")
    apache.tool(
        "kafka-configs", "--alter", "--entity-type", "topics", "--entity-name", output, "--add-config",
        "max.message.bytes=1000",
    )  # fmt: skip
    rows = spark.range(0, 20, numPartitions=2).selectExpr(
        "cast(id as string) as key", "if(id % 5 = 0, repeat('x', 3000), concat('small', id)) as value"
    )
    with pytest.raises(Exception, match=r"(?is)pylog topic sink: the transaction of .*too large"):
        rows.write.format("pylog").option("kafka.bootstrap.servers", apache.bootstrap_servers).option(
            "topic", output
        ).mode("append").save()
    committed = records(java_clients.run("read", apache.bootstrap_servers, output, "read_committed", "60000"))
    assert committed == []


def test_topic_sink_attempt_fenced_by_its_copy_returns_as_a_replay_on_apache_kafka(
    apache: Cluster, java_clients: JavaClients
):
    # As tests/topics/test_fencing.py on pylog's broker: the first attempt of a task is held inside
    # its open transaction while a copy of it fences it and commits; Apache Kafka fences it with
    # its own errors, and the first attempt must return as a replay rather than fail the task.
    output = apache.topic(partitions=1, prefix="sink-fenced")
    options = parse_sink_options({"kafka.bootstrap.servers": apache.bootstrap_servers, "topic": output}, FENCING_SCHEMA)
    first = HeldAttempt(options, "fenced-on-kafka", 5)
    copy = write_exactly_once(options, iter([fencing_rows("copy-", 10)]), "fenced-on-kafka", 5)
    assert copy == TopicSinkCommitMessage(0, 10, skipped=False)
    assert first.release() == TopicSinkCommitMessage(0, 0, skipped=True)
    committed = records(java_clients.run("read", apache.bootstrap_servers, output, "read_committed", "60000"))
    assert sorted(value for _, _, value in committed) == sorted(f"copy-{i}" for i in range(10))


def test_commit_offsets_to_group_shows_in_kafka_consumer_groups_with_the_lag(spark, apache: Cluster, tmp_path):
    """Spark tells a source a batch is done (commit) when it plans the next one, so the group's
    offsets are those of the query's last batch but one: kafka-consumer-groups shows as lag
    what the newest batch read and what no batch read yet."""
    topic = apache.topic(partitions=2, prefix="lag")
    group = f"pylog-lag-{topic}"
    producer = Producer({"bootstrap.servers": apache.bootstrap_servers})

    def produce(partition_counts: dict[int, int]) -> None:
        for partition, count in partition_counts.items():
            for _ in range(count):
                producer.produce(topic, value=b"x", partition=partition)
        assert producer.flush(30) == 0

    def described() -> dict[str, tuple[str, str, str]]:
        output = apache.tool("kafka-consumer-groups", "--describe", "--group", group, check=False).stdout
        return {row["PARTITION"]: (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) for row in table(output)}

    def wait_for(condition, what: str) -> None:
        def running_until() -> bool:
            assert query.exception() is None, (what, query.exception(), described())
            return condition()

        wait_until(running_until, lambda: (what, described()), 120, interval=0.3)

    def processed() -> int:
        return sum(progress["numInputRows"] for progress in query.recentProgress)

    produce({0: 15, 1: 15})
    query = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", apache.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("commitOffsetsToGroup", "true")
        .option("kafka.group.id", group)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: processed() == 30, "the first batch")
        produce({1: 7})
        wait_for(lambda: processed() == 37, "the second batch")
        wait_for(lambda: described() == {"0": ("15", "15", "0"), "1": ("15", "22", "7")}, "the first batch's offsets")
        produce({0: 1})
        wait_for(lambda: processed() == 38, "the third batch")
        wait_for(lambda: described() == {"0": ("15", "16", "1"), "1": ("22", "22", "0")}, "the second batch's offsets")
    finally:
        query.stop()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_listener_serves_pylog_source_as_it_serves_spark_kafka_source(
    spark_kafka, apache_kafka, apache, mechanism
):
    topic = apache.topic(partitions=2, prefix="scram")
    fill(apache, topic, 2, 10)

    def secured(password: str) -> dict[str, str]:
        return {
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.mechanism": mechanism,
            "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{SCRAM_USER}" password="{password}";',
        }

    sasl = apache_kafka.sasl_bootstrap_servers
    expected = rows(read(spark_kafka.read, "kafka", sasl, subscribe=topic, **secured(SCRAM_PASSWORD)))
    assert len(expected) == 20
    assert rows(read(spark_kafka.read, "pylog", sasl, subscribe=topic, **secured(SCRAM_PASSWORD))) == expected
    started = time.monotonic()
    with pytest.raises(Exception, match="(?i)authentication"):
        read(spark_kafka.read, "pylog", sasl, subscribe=topic, **secured("wrong")).collect()
    assert time.monotonic() - started < 60
