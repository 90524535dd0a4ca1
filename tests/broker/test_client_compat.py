"""Real Kafka clients against the embedded broker: what they write, they read back intact."""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.partition_reads import read_partitions_to_end

N = 100_000
BASE_TS = 1_700_000_000_000


def expected(i: int) -> tuple[bytes, bytes, list[tuple[str, bytes]], int]:
    return f"key-{i}".encode(), f"value-{i:06d}-".encode() + b"x" * (i % 50), [("seq", str(i).encode())], BASE_TS + i


def consume_all(bootstrap: str, topic: str, partitions: int, count: int, timeout_s: float = 120) -> list:
    messages = [
        (m.partition(), m.offset(), m.key(), m.value(), m.headers() or [], m.timestamp()[1])
        for m in read_partitions_to_end(bootstrap, topic, range(partitions), timeout_s, **{"group.id": "compat-reader"})
    ]
    assert len(messages) == count, f"read {len(messages)} of {count}"
    return messages


def assert_round_trip(messages: list, count: int) -> None:
    by_seq = {}
    last_offset: dict[int, int] = {}
    for partition, offset, key, value, headers, timestamp in messages:
        # Offsets are dense and increasing per partition (no transactions here).
        assert offset == last_offset.get(partition, -1) + 1
        last_offset[partition] = offset
        seq = int(dict(headers)["seq"])
        assert (key, value, [(k, bytes(v)) for k, v in headers], timestamp) == expected(seq)
        by_seq[seq] = partition
    assert sorted(by_seq) == list(range(count))


def produce_confluent(bootstrap: str, topic: str, count: int, **config) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **config})
    errors = []
    for i in range(count):
        key, value, headers, timestamp = expected(i)
        while True:
            try:
                producer.produce(
                    topic,
                    value=value,
                    key=key,
                    headers=headers,
                    timestamp=timestamp,
                    on_delivery=lambda err, msg: err and errors.append(err),
                )
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def test_confluent_admin_creates_lists_and_deletes_topics(pylog_broker):
    admin = AdminClient({"bootstrap.servers": pylog_broker.bootstrap_servers})
    futures = admin.create_topics([NewTopic("admin-made", num_partitions=3, replication_factor=1)])
    futures["admin-made"].result(timeout=30)
    metadata = admin.list_topics(timeout=30)
    assert len(metadata.topics["admin-made"].partitions) == 3
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS|already exists"):
        admin.create_topics([NewTopic("admin-made", num_partitions=1)])["admin-made"].result(timeout=30)
    with pytest.raises(Exception, match="TOPIC_EXCEPTION.*illegal"):
        admin.create_topics([NewTopic("bad/name", num_partitions=1)])["bad/name"].result(timeout=30)
    admin.delete_topics(["admin-made"])["admin-made"].result(timeout=30)
    assert "admin-made" not in admin.list_topics(timeout=30).topics


def test_confluent_producer_and_assigned_consumer_round_trip_100k(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=3)
    produce_confluent(pylog_broker.bootstrap_servers, topic, N, **{"acks": "all"})
    assert_round_trip(consume_all(pylog_broker.bootstrap_servers, topic, 3, N), N)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_round_trip(pylog_broker, pylog_topic, codec):
    topic = pylog_topic(partitions=3)
    produce_confluent(pylog_broker.bootstrap_servers, topic, 20_000, **{"compression.type": codec})
    assert_round_trip(consume_all(pylog_broker.bootstrap_servers, topic, 3, 20_000), 20_000)


def test_kafka_python_producer_and_consumer_round_trip_100k(pylog_broker, pylog_topic):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    topic = pylog_topic(partitions=3)
    producer = KafkaProducer(
        bootstrap_servers=pylog_broker.bootstrap_servers,
        acks="all",
        linger_ms=20,
        batch_size=256 * 1024,
        compression_type="gzip",
    )
    for i in range(N):
        key, value, headers, timestamp = expected(i)
        producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=timestamp)
    producer.flush(60)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=pylog_broker.bootstrap_servers,
        enable_auto_commit=False,
        group_id=None,
        consumer_timeout_ms=5000,
        max_poll_records=10_000,
    )
    consumer.assign([KTopicPartition(topic, p) for p in range(3)])
    consumer.seek_to_beginning()
    messages = [(m.partition, m.offset, m.key, m.value, list(m.headers), m.timestamp) for m in consumer]
    consumer.close()
    assert_round_trip(messages, N)


def test_aiokafka_producer_and_consumer_round_trip_100k(pylog_broker, pylog_topic):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATopicPartition

    topic = pylog_topic(partitions=3)

    async def run() -> list:
        producer = AIOKafkaProducer(
            bootstrap_servers=pylog_broker.bootstrap_servers, acks="all", linger_ms=20, max_batch_size=256 * 1024
        )
        await producer.start()
        try:
            futures = []
            for i in range(N):
                key, value, headers, timestamp = expected(i)
                futures.append(
                    await producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=timestamp)
                )
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=pylog_broker.bootstrap_servers,
            enable_auto_commit=False,
            group_id=None,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        messages = []
        try:
            consumer.assign([ATopicPartition(topic, p) for p in range(3)])
            await consumer.seek_to_beginning()
            while len(messages) < N:
                batch = await consumer.getmany(timeout_ms=5000, max_records=10_000)
                if not batch:
                    break
                for records in batch.values():
                    messages += [(m.partition, m.offset, m.key, m.value, list(m.headers), m.timestamp) for m in records]
        finally:
            await consumer.stop()
        return messages

    assert_round_trip(asyncio.run(run()), N)


def test_kcat_produces_and_consumes_100k(pylog_broker, pylog_topic, tmp_path):
    topic = pylog_topic(partitions=3)
    bootstrap = pylog_broker.bootstrap_servers
    lines = b"".join(b"%s\t%s\n" % (expected(i)[0], expected(i)[1]) for i in range(N))
    subprocess.run(
        ["kcat", "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-H", "source=kcat", "-X", "linger.ms=20"],
        input=lines,
        check=True,
        timeout=120,
    )
    result = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-f", "%p\t%o\t%k\t%s\t%h\n"],
        capture_output=True,
        check=True,
        timeout=120,
    )
    rows = result.stdout.splitlines()
    assert len(rows) == N
    seen = set()
    for row in rows:
        partition, offset, key, value, headers = row.split(b"\t")
        i = int(key.split(b"-")[1])
        assert (key, value) == expected(i)[:2]
        assert headers == b"source=kcat"
        seen.add(i)
    assert len(seen) == N
