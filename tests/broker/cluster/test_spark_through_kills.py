"""A streaming query reading a replicated topic through broker kills: the pylog source on an
EmbeddedCluster, writing the pylog-files sink, while the leader of a partition is killed and
restarted. Every acknowledged record lands in the output exactly once, with no manual restart."""

from __future__ import annotations

import threading
from pathlib import Path

import confluent_kafka

from kafka_spark import EmbeddedCluster
from tests.support.partition_reads import read_partitions_to_end
from tests.support.waiting import wait_until

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

            def read_something() -> bool:  # the query runs before the first kill
                assert query.exception() is None, query.exception()
                return bool((query.lastProgress or {}).get("numInputRows"))

            wait_until(read_something, "the query to read something", 120, interval=0.1)
            for partition in (0, 1):  # kill each partition's leader in turn, and bring it back
                wait_until(lambda partition=partition: len(acked) >= 100 * (partition + 1), "acknowledgements")
                victim = cluster.leader(TOPIC, partition)
                cluster.kill_broker(victim)
                cluster.wait_for_leader(TOPIC, partition, not_on=victim)
                cluster.restart_broker(victim)
                cluster.wait_for_isr(TOPIC, partition, size=3)
            at_end = len(acked)
            wait_until(lambda: len(acked) >= at_end + 50, "acknowledgements after the restarts")
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


def test_topic_sink_writes_exactly_once_through_the_kill_of_a_coordinator(spark, tmp_path: Path) -> None:
    """pylog's exactly-once topic sink on a cluster: every task's transaction spans partitions led
    by several brokers and commits the sink's batch marker as group offsets. Between two runs of the
    query the broker leading most coordinator partitions is killed; a batch replayed after Spark's
    commit log lost its entry is skipped through those offsets, now served by the new coordinator."""

    with EmbeddedCluster(brokers=3, log_dir=tmp_path / "cluster", broker_session_timeout_ms=2_000) as cluster:
        cluster.create_topic("orders", partitions=3, replication_factor=3)
        cluster.create_topic("copies", partitions=3, replication_factor=3)
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})

        def produce(start: int) -> None:
            for index in range(start, start + 60):
                producer.produce("orders", value=b"%d" % index, partition=index % 3)
            producer.flush(30)

        def run() -> None:
            (
                spark.readStream.format("pylog")
                .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                .option("subscribe", "orders")
                .option("startingOffsets", "earliest")
                .option("kafka.default.api.timeout.ms", "4000")
                .load()
                .select("value")
                .writeStream.format("pylog")
                .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                .option("topic", "copies")
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(availableNow=True)
                .start()
                .awaitTermination()
            )

        produce(0)
        run()
        leaders = [cluster.leader("__transaction_state", p) for p in range(4)]
        victim = max(set(leaders), key=leaders.count)
        cluster.kill_broker(victim)
        produce(60)
        commits = sorted((tmp_path / "checkpoint" / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
        commits[-1].unlink()  # the last batch is replayed: the sink must skip what it committed
        (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
        run()
        values = [
            int(message.value())
            for message in read_partitions_to_end(
                cluster.bootstrap_servers,
                "copies",
                range(3),
                **{"group.id": "checker", "isolation.level": "read_committed", "log_level": 0},
            )
        ]
        assert sorted(values) == list(range(120)), "every input exactly once for read_committed consumers"
