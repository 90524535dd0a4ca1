"""The source across restarts while producers keep writing, and read_committed over real aborts."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer
from pyspark.sql import functions as F

from tests.support.waiting import wait_until


def test_three_restarts_from_checkpoint_while_a_producer_writes_lose_and_duplicate_nothing(
    spark, pylog_broker, pylog_topic, tmp_path
):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=3)
    acknowledged: list[int] = []
    stop = threading.Event()

    def keep_producing() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        seq = 0
        while not stop.is_set():
            for _ in range(50):
                producer.produce(
                    topic,
                    value=b"%d" % seq,
                    on_delivery=lambda err, msg: err is None and acknowledged.append(int(msg.value())),
                )
                seq += 1
            producer.poll(0)
            time.sleep(0.02)
        producer.flush(30)

    writer = threading.Thread(target=keep_producing, daemon=True)
    writer.start()
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def query(**trigger):
        return (
            spark.readStream.format("pylog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .select(F.col("value").cast("string").cast("long").alias("seq"), "partition", "offset")
            .writeStream.format("pylog-files")
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .start(output)
        )

    try:
        for _ in range(4):  # the first run and three restarts, each stopped mid-stream
            running = query(processingTime="200 milliseconds")

            def two_batches_with_data(running=running) -> bool:  # then stop it mid-stream
                assert running.exception() is None, running.exception()
                return sum(1 for progress in running.recentProgress if progress["numInputRows"] > 0) >= 2

            wait_until(two_batches_with_data, "two batches with data", interval=0.1)
            running.stop()
    finally:
        stop.set()
        writer.join(60)
    query(availableNow=True).awaitTermination()  # drain what was written after the last stop
    rows = spark.read.parquet(output).select("seq").collect()
    seqs = [row.seq for row in rows]
    assert len(seqs) == len(set(seqs)), "no record duplicated"
    assert set(seqs) == set(acknowledged), "no acknowledged record lost"
    assert len(acknowledged) > 1000


def test_read_committed_hides_aborted_transactions_and_read_uncommitted_shows_them(spark, pylog_broker, pylog_topic):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn"})
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=f"{outcome}-{i}".encode(), partition=i % 2)
        producer.flush(30)
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(30)

    def values(isolation: str) -> list[str]:
        df = (
            spark.read.format("pylog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("kafka.isolation.level", isolation)
            .load()
        )
        return sorted(r.v for r in df.select(F.col("value").cast("string").alias("v")).collect())

    committed = values("read_committed")
    assert committed == sorted([f"commit-{i}" for i in range(10)] * 2)
    uncommitted = values("read_uncommitted")
    assert sorted(uncommitted) == sorted(committed + [f"abort-{i}" for i in range(10)])
