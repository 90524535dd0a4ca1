"""Idempotent producer across broker restarts: the broker rebuilds each partition's producer
state from the stored batch headers, so batches the client resends after the restart (their
answers were lost with the old connections) are recognised and not written twice."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from confluent_kafka import Producer

from kafka_spark.broker import EmbeddedBroker
from tests.support.partition_reads import read_partitions_to_end
from tests.support.waiting import wait_until

MESSAGES = 20_000
PARTITIONS = 2


def test_idempotent_producer_keeps_exactly_once_across_broker_restarts(tmp_path):
    broker = EmbeddedBroker(log_dir=tmp_path, register=False).start()
    port = broker.port
    broker.create_topic("restarts", partitions=PARTITIONS)
    errors: list = []
    sent = threading.Event()

    def produce() -> None:
        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.num.messages": 100,
                "message.timeout.ms": 120_000,
                "reconnect.backoff.ms": 10,
                "reconnect.backoff.max.ms": 100,
            }
        )
        for i in range(MESSAGES):
            while True:
                try:
                    producer.produce(
                        "restarts",
                        value=str(i).encode(),
                        partition=i % PARTITIONS,
                        on_delivery=lambda err, msg: err and errors.append(err),
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 200 == 0:
                producer.poll(0)
                time.sleep(0.02)
        undelivered = producer.flush(120)
        if undelivered:
            errors.append(f"{undelivered} message(s) undelivered")
        sent.set()

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        for restart in range(1, 3):
            # Restart once the stream is well under way: after about 1/3 and 2/3 of the records.
            wait_until(
                lambda broker=broker, restart=restart: _written(broker) >= restart * MESSAGES // 3,
                f"{restart}/3 of the stream written",
                120,
                interval=0.01,
            )
            assert _written(broker) < MESSAGES, "the stream finished before the restart"
            broker.close()  # connections drop with requests in flight
            broker = EmbeddedBroker(log_dir=tmp_path, port=port, register=False).start()
        assert sent.wait(120), "the producer did not finish"
        assert errors == [], errors[:3]
        by_partition = _read(broker.bootstrap_servers)
    finally:
        thread.join(10)
        broker.close()
    for partition in range(PARTITIONS):
        assert by_partition[partition] == list(range(partition, MESSAGES, PARTITIONS)), f"partition {partition}"


def _written(broker: EmbeddedBroker) -> int:
    return sum(broker.broker.logs.get_log("restarts", p).high_watermark for p in range(PARTITIONS))


def _read(bootstrap: str) -> dict[int, list[int]]:
    values: dict[int, list[int]] = defaultdict(list)
    for message in read_partitions_to_end(bootstrap, "restarts", range(PARTITIONS), **{"group.id": "restart-check"}):
        values[message.partition()].append(int(message.value()))
    return values
