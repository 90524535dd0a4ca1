"""Clients through the kill of a partition leader: acks=all producers and consumers of
confluent-kafka, aiokafka and kafka-python keep running; every acknowledged record survives and is
consumed."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import confluent_kafka
import kafka
import pytest

from kafka_spark import EmbeddedCluster
from tests.support.waiting import wait_until

TOPIC = "events"


class Consumer(threading.Thread):
    """Reads both partitions from the beginning until stopped, keeping every (partition, value)
    seen, with one of the three clients."""

    def __init__(self, bootstrap: str, client: str = "confluent-kafka") -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.client = bootstrap, client
        self.seen: set[tuple[int, bytes]] = set()
        self.stop = threading.Event()
        self.started = threading.Event()

    def run(self) -> None:
        getattr(self, "_" + self.client.replace("-", "_"))()

    def _confluent_kafka(self) -> None:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "watchers",
                "log_level": 0,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING) for p in range(2)])
        self.started.set()
        while not self.stop.is_set():
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                self.seen.add((message.partition(), message.value()))
        consumer.close()

    def _kafka_python(self) -> None:
        consumer = kafka.KafkaConsumer(
            bootstrap_servers=self.bootstrap, enable_auto_commit=False, metadata_max_age_ms=500, retry_backoff_ms=100
        )
        partitions = [kafka.TopicPartition(TOPIC, p) for p in range(2)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        self.started.set()
        while not self.stop.is_set():
            for records in consumer.poll(timeout_ms=200).values():
                self.seen.update((record.partition, record.value) for record in records)
        consumer.close()

    def _aiokafka(self) -> None:
        async def consume() -> None:
            from aiokafka import AIOKafkaConsumer, TopicPartition

            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                enable_auto_commit=False,
                metadata_max_age_ms=500,
                retry_backoff_ms=100,
            )
            await consumer.start()
            partitions = [TopicPartition(TOPIC, p) for p in range(2)]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            self.started.set()
            try:
                while not self.stop.is_set():
                    for records in (await consumer.getmany(timeout_ms=200)).values():
                        self.seen.update((record.partition, record.value) for record in records)
            finally:
                await consumer.stop()

        asyncio.run(consume())


def confluent_producer(bootstrap: str, acked: list, failed: list, stop: threading.Event) -> threading.Thread:
    def run() -> None:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "enable.idempotence": True,
                "log_level": 0,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )

        def delivered(error, message) -> None:
            if error:
                failed.append(error)
            else:
                acked.append((message.partition(), message.value()))

        sequence = 0
        while not stop.is_set():
            try:
                producer.produce(TOPIC, value=b"confluent-%d" % sequence, on_delivery=delivered)
                sequence += 1
            except BufferError:
                pass
            producer.poll(0.002)
        producer.flush(120)

    return threading.Thread(target=run, daemon=True)


def kafka_python_producer(bootstrap: str, acked: list, failed: list, stop: threading.Event) -> threading.Thread:
    def run() -> None:
        producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            retries=1_000_000,
            retry_backoff_ms=100,
            linger_ms=5,
            request_timeout_ms=30_000,
            max_in_flight_requests_per_connection=1,
            metadata_max_age_ms=500,
        )
        sequence = 0
        while not stop.is_set():
            value = b"kafka-python-%d" % sequence
            sequence += 1
            future = producer.send(TOPIC, value=value)
            future.add_callback(lambda metadata, value=value: acked.append((metadata.partition, value)))
            future.add_errback(lambda error: failed.append(error))
            time.sleep(0.002)
        producer.flush(120)
        producer.close(30)

    return threading.Thread(target=run, daemon=True)


def aiokafka_producer(bootstrap: str, acked: list, failed: list, stop: threading.Event) -> threading.Thread:
    async def produce() -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            linger_ms=5,
            request_timeout_ms=30_000,
            retry_backoff_ms=100,
            metadata_max_age_ms=500,
        )
        await producer.start()
        try:
            sequence = 0
            while not stop.is_set():
                value = b"aiokafka-%d" % sequence
                sequence += 1
                try:  # send_and_wait retries retriable errors (NOT_LEADER_OR_FOLLOWER) within the request timeout
                    metadata = await producer.send_and_wait(TOPIC, value=value)
                    acked.append((metadata.partition, value))
                except Exception as error:  # noqa: BLE001 - counted and asserted on
                    failed.append(error)
        finally:
            await producer.stop()

    return threading.Thread(target=lambda: asyncio.run(produce()), daemon=True)


PRODUCERS = {
    "confluent-kafka": confluent_producer,
    "kafka-python": kafka_python_producer,
    "aiokafka": aiokafka_producer,
}


@pytest.mark.parametrize(
    "client,reader",
    [(client, "confluent-kafka") for client in sorted(PRODUCERS)]
    + [("confluent-kafka", "kafka-python"), ("confluent-kafka", "aiokafka")],
)
def test_acks_all_producer_and_consumer_ride_through_a_leader_kill(tmp_path: Path, client: str, reader: str) -> None:
    with EmbeddedCluster(brokers=3, log_dir=tmp_path, broker_session_timeout_ms=1_000) as cluster:
        cluster.create_topic(TOPIC, partitions=2, replication_factor=3, config={"min.insync.replicas": "2"})
        consumer = Consumer(cluster.bootstrap_servers, reader)
        consumer.start()
        assert consumer.started.wait(60)
        acked: list[tuple[int, bytes]] = []  # (partition, value)
        failed: list = []
        stop = threading.Event()
        make = PRODUCERS[client]
        producer = make(cluster.bootstrap_servers, acked, failed, stop)
        producer.start()
        try:
            wait_until(lambda: len(acked) >= 100, "the first acknowledgements", timeout=60)
            victim = cluster.leader(TOPIC, 0)
            cluster.kill_broker(victim)
            at_kill = len(acked)
            assert cluster.wait_for_leader(TOPIC, 0, not_on=victim) != victim
            wait_until(
                lambda: sum(partition == 0 for partition, _ in acked[at_kill:]) >= 50,
                "acknowledgements from the new leader of partition 0",
                timeout=60,
            )
            cluster.restart_broker(victim)
            cluster.wait_for_isr(TOPIC, 0, size=3)
            wait_until(lambda: len(acked) >= at_kill + 200, "acknowledgements after the restart", timeout=60)
        finally:
            stop.set()
            producer.join(150)
        assert not producer.is_alive()
        assert failed == [], f"{len(failed)} records failed, e.g. {failed[:3]}"
        wait_until(
            lambda: set(acked) <= consumer.seen,
            f"the consumer to see every acknowledged record ({len(set(acked) - consumer.seen)} missing)",
            timeout=60,
        )
        consumer.stop.set()
        consumer.join(30)
