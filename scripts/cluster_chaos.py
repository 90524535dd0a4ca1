"""Random broker kills under load: a 3-broker EmbeddedCluster, a topic of 3 partitions with
replication factor 3 and min.insync.replicas 2, an idempotent acks=all confluent-kafka producer
and a consumer running throughout, while a random broker (leader or not) is killed, left down for
a random while and restarted, ``--kills`` times. At the end every acknowledged record must have
been consumed, exactly once (the idempotent producer writes no duplicates through failovers).

    python scripts/cluster_chaos.py [--kills 10] [--seed N] [--session-timeout-ms 1000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import confluent_kafka

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka_spark import EmbeddedCluster  # noqa: E402

TOPIC = "chaos"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--session-timeout-ms", type=int, default=1_000)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    chance = random.Random(seed)
    print(f"seed {seed}", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="pylog-cluster-chaos-") as data,
        EmbeddedCluster(brokers=3, log_dir=data, broker_session_timeout_ms=args.session_timeout_ms) as cluster,
    ):
        cluster.create_topic(TOPIC, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
        acked: list[tuple[int, int, bytes]] = []
        failed: list = []
        consumed: list[tuple[int, int, bytes]] = []
        stop_producing, stop_consuming = threading.Event(), threading.Event()

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

            def delivered(error, message) -> None:
                if error:
                    failed.append(error)
                else:
                    acked.append((message.partition(), message.offset(), message.value()))

            sequence = 0
            while not stop_producing.is_set():
                try:
                    producer.produce(TOPIC, value=b"chaos-%d" % sequence, on_delivery=delivered)
                    sequence += 1
                except BufferError:
                    pass
                producer.poll(0.002)
            producer.flush(300)

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

        threads = [threading.Thread(target=produce, daemon=True), threading.Thread(target=consume, daemon=True)]
        for thread in threads:
            thread.start()
        for kill in range(args.kills):
            time.sleep(chance.uniform(0.5, 1.5))
            victim = chance.choice(sorted(cluster.nodes))
            led = [p for p in range(3) if cluster.leader(TOPIC, p) == victim]
            cluster.kill_broker(victim)
            time.sleep(chance.uniform(0.2, 2.5))
            cluster.restart_broker(victim)
            for partition in range(3):
                cluster.wait_for_isr(TOPIC, partition, size=3, timeout=120)
            print(
                f"kill {kill + 1}: broker {victim} (leader of {led or 'nothing'}); {len(acked)} acknowledged so far",
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
        return 0 if not missing and not failed and not duplicates else 1


if __name__ == "__main__":
    sys.exit(main())
