"""A streaming query reading a replicated topic through broker kills: the pylog source on an
EmbeddedCluster, writing the pylog-files sink, while the leader of a partition is killed and
restarted. Every acknowledged record lands in the output exactly once, with no manual restart."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import confluent_kafka

from kafka_spark import EmbeddedCluster

TOPIC = "clicks"


def test_streaming_query_reads_a_replicated_topic_through_leader_kills(spark, tmp_path: Path) -> None:
    with EmbeddedCluster(brokers=3, log_dir=tmp_path / "cluster", broker_session_timeout_ms=2_000) as cluster:
        cluster.create_topic(TOPIC, partitions=2, replication_factor=3, config={"min.insync.replicas": "2"})
        acked: list[bytes] = []
        failed: list = []
        stop = threading.Event()

        def produce() -> None:
            producer = confluent_kafka.Producer(
                {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "log_level": 0,
                }
            )
            sequence = 0
            while not stop.is_set():
                producer.produce(
                    TOPIC,
                    value=b"click-%d" % sequence,
                    on_delivery=lambda error, message: failed.append(error) if error else acked.append(message.value()),
                )
                sequence += 1
                producer.poll(0.01)
            producer.flush(120)

        out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
        query = (
            spark.readStream.format("pylog")
            .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            # An offset lookup sent to the killed leader before the controller noticed waits
            # this long before it is retried with fresh metadata (Kafka's default: 60 s).
            .option("kafka.default.api.timeout.ms", "4000")
            .load()
            .selectExpr("partition", "offset", "cast(value as string) value")
            .writeStream.format("pylog-files")
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds")
            .start(str(out))
        )
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        try:
            deadline = time.monotonic() + 120
            while not (query.lastProgress or {}).get("numInputRows"):  # the query runs before the first kill
                assert time.monotonic() < deadline and query.exception() is None, "the query read nothing"
                time.sleep(0.1)
            for partition in (0, 1):  # kill each partition's leader in turn, and bring it back
                deadline = time.monotonic() + 60
                while len(acked) < 100 * (partition + 1):
                    assert time.monotonic() < deadline, "no acknowledgements"
                    time.sleep(0.05)
                victim = cluster.leader(TOPIC, partition)
                cluster.kill_broker(victim)
                cluster.wait_for_leader(TOPIC, partition, not_on=victim)
                cluster.restart_broker(victim)
                cluster.wait_for_isr(TOPIC, partition, size=3)
            at_end = len(acked)
            deadline = time.monotonic() + 60
            while len(acked) < at_end + 50:
                assert time.monotonic() < deadline, "no acknowledgements after the restarts"
                time.sleep(0.05)
        finally:
            stop.set()
            producer.join(150)
        try:
            assert failed == []
            query.processAllAvailable()
            assert query.exception() is None
        finally:
            query.stop()
        rows = spark.read.parquet(str(out)).collect()
        assert len({(row.partition, row.offset) for row in rows}) == len(rows), "an offset written twice"
        values = [row.value.encode() for row in rows]
        assert len(set(values)) == len(values), "a record written twice"
        assert set(acked) <= set(values), f"{len(set(acked) - set(values))} acknowledged records missing"
