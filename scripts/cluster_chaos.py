"""Random broker kills under load: a 3-broker EmbeddedCluster, a topic of 3 partitions with
replication factor 3 and min.insync.replicas 2, an idempotent acks=all confluent-kafka producer
and a consumer running throughout, while a random broker (leader or not) is killed, left down for
a random while and restarted, ``--kills`` times. At the end every acknowledged record must have
been consumed, exactly once (the idempotent producer writes no duplicates through failovers).

With ``--topic-sink`` a Spark streaming query also runs throughout: the pylog source reads the
topic and pylog's exactly-once topic sink (one transaction per task, transaction coordinators and
group offsets on the cluster's replicated internal topics) copies every record to ``chaos-out``.
At the end a read_committed consumer must find every acknowledged record there exactly once.

    python scripts/cluster_chaos.py [--kills 10] [--seed N] [--session-timeout-ms 1000] [--topic-sink]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka_spark import EmbeddedCluster  # noqa: E402

TOPIC = "chaos"
OUTPUT = "chaos-out"


def start_copy(cluster: EmbeddedCluster, work: str):  # noqa: ANN201 - pyspark is imported lazily
    """A streaming query copying TOPIC to OUTPUT through the exactly-once topic sink."""
    import os

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import kafka_spark

    # local[2, 8]: a task that failed on a dying broker is retried, as on a real cluster.
    spark = (
        SparkSession.builder.master("local[2, 8]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    kafka_spark.register(spark)
    return (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .option("kafka.default.api.timeout.ms", "4000")
        .load()
        .select("value")
        .writeStream.format("pylog")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("topic", OUTPUT)
        .option("checkpointLocation", str(Path(work) / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )


def produce_until(
    stop: threading.Event,
    bootstrap: str,
    prefix: bytes,
    on_acked: Callable[[confluent_kafka.Message], None],
    failed: list,
    **settings: Any,
) -> None:
    """An idempotent acks=all producer writing ``prefix-N`` values to TOPIC as fast as it may until
    ``stop`` is set, then flushing; acknowledgements go to ``on_acked``, failures to ``failed``."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "log_level": 0,
            **settings,
        }
    )

    def delivered(error: confluent_kafka.KafkaError | None, message: confluent_kafka.Message) -> None:
        if error:
            failed.append(error)
        else:
            on_acked(message)

    sequence = 0
    while not stop.is_set():
        try:
            producer.produce(TOPIC, value=b"%s-%d" % (prefix, sequence), on_delivery=delivered)
            sequence += 1
        except BufferError:
            pass
        producer.poll(0.002)
    producer.flush(300)


def read_committed(cluster: EmbeddedCluster, topic: str, partitions: int) -> list[bytes]:
    """Every value a read_committed consumer finds in ``topic`` up to its end."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "chaos-check",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    assigned = [confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)]
    consumer.assign(assigned)
    values: list[bytes] = []
    try:
        ends = [consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in assigned]
        positions = [0] * partitions
        deadline = time.monotonic() + 120
        while any(position < end for position, end in zip(positions, ends, strict=True)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read_committed of {topic} stopped at {positions}, ends {ends}")
            message = consumer.poll(0.2)
            if message is None or message.error():
                for tp in consumer.position(assigned):
                    positions[tp.partition] = max(positions[tp.partition], tp.offset)
                continue
            values.append(message.value())
            positions[message.partition()] = message.offset() + 1
    finally:
        consumer.close()
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--session-timeout-ms", type=int, default=1_000)
    parser.add_argument("--topic-sink", action="store_true", help="also copy the topic with the exactly-once sink")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    chance = random.Random(seed)
    print(f"seed {seed}", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="pylog-cluster-chaos-") as data,
        EmbeddedCluster(brokers=3, log_dir=data, broker_session_timeout_ms=args.session_timeout_ms) as cluster,
    ):
        cluster.create_topic(TOPIC, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
        query = None
        if args.topic_sink:
            cluster.create_topic(OUTPUT, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
            query = start_copy(cluster, data)
        acked: list[tuple[int, int, bytes]] = []
        failed: list = []
        consumed: list[tuple[int, int, bytes]] = []
        stop_producing, stop_consuming = threading.Event(), threading.Event()

        def produce() -> None:
            produce_until(
                stop_producing,
                cluster.bootstrap_servers,
                b"chaos",
                lambda message: acked.append((message.partition(), message.offset(), message.value())),
                failed,
            )

        def consume() -> None:
            consumer = confluent_kafka.Consumer(
                {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "chaos", "log_level": 0}
            )
            consumer.assign(
                [confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING) for p in range(3)]
            )
            while not stop_consuming.is_set():
                message = consumer.poll(0.2)
                if message is not None and not message.error():
                    consumed.append((message.partition(), message.offset(), message.value()))
            consumer.close()

        started = time.monotonic()
        threads = [threading.Thread(target=produce, daemon=True), threading.Thread(target=consume, daemon=True)]
        for thread in threads:
            thread.start()
        while query is not None and (query.lastProgress or {}).get("batchId", -1) < 1:  # kills hit a running query
            if time.monotonic() > started + 300 or not query.isActive:
                raise RuntimeError(f"the streaming query did not start: {query.exception()}")
            time.sleep(0.2)
        for kill in range(args.kills):
            time.sleep(chance.uniform(0.5, 1.5))
            victim = chance.choice(sorted(cluster.nodes))
            led = [p for p in range(3) if cluster.leader(TOPIC, p) == victim]
            states = cluster.controller.image.partitions
            coordinated = sorted(  # the partitions of the coordinators' topics it led
                f"{tp.topic}-{tp.partition}"
                for tp, state in states.items()
                if tp.topic in ("__transaction_state", "__consumer_offsets") and state.leader == victim
            )
            cluster.kill_broker(victim)
            time.sleep(chance.uniform(0.2, 2.5))
            cluster.restart_broker(victim)
            for partition in range(3):
                cluster.wait_for_isr(TOPIC, partition, size=3, timeout=120)
            print(
                f"kill {kill + 1}: broker {victim} (leader of {led or 'nothing'}; coordinator of "
                f"{', '.join(coordinated) or 'nothing'}); {len(acked)} acknowledged so far",
                flush=True,
            )
        stop_producing.set()
        threads[0].join(600)
        deadline = time.monotonic() + 120
        while {a for a in acked} - set(consumed) and time.monotonic() < deadline:
            time.sleep(0.1)
        stop_consuming.set()
        threads[1].join(60)
        missing = set(acked) - set(consumed)
        values = [value for _, _, value in set(consumed)]
        duplicates = len(values) - len(set(values))
        print(
            f"acknowledged {len(acked)}  failed {len(failed)}  consumed {len(set(consumed))}  "
            f"missing {len(missing)}  duplicate values {duplicates}"
        )
        ok = not missing and not failed and not duplicates
        if query is not None:
            wanted = {value for _, _, value in acked}
            copied: list[bytes] = []
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and query.isActive:  # until the query copied every record
                copied = read_committed(cluster, OUTPUT, 3)
                if wanted <= set(copied):
                    break
                time.sleep(1)
            error = query.exception()
            batches = (query.lastProgress or {}).get("batchId", -1) + 1
            query.stop()
            copied = read_committed(cluster, OUTPUT, 3)
            lost = wanted - set(copied)
            doubled = len(copied) - len(set(copied))
            foreign = set(copied) - wanted  # written, but their delivery was reported failed
            print(
                f"topic sink: copied {len(copied)} (read_committed)  lost {len(lost)}  duplicates {doubled}  "
                f"not acknowledged {len(foreign)}  batches {batches}  query error {error}"
            )
            ok = ok and not lost and not doubled and error is None
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
