"""Transactions with a real client (confluent-kafka / librdkafka): fencing, timeouts, and a
consume-transform-produce loop killed with SIGKILL that still delivers every record exactly once
to read_committed consumers."""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.support.partition_reads import read_partitions_to_end
from tests.support.waiting import async_wait_until, wait_until


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str, timeout_s: float = 30) -> list[bytes]:
    """Every value visible to an ``isolation`` consumer, once each partition reports EOF."""
    messages = read_partitions_to_end(
        bootstrap,
        topic,
        range(partitions),
        timeout_s,
        **{"group.id": f"reader-{isolation}", "isolation.level": isolation},
    )
    return [message.value() for message in messages]


def transactional_producer(bootstrap: str, transactional_id: str, **config) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **config}
    )
    producer.init_transactions(10)
    return producer


def test_zombie_producer_is_fenced_once_a_new_instance_initialises(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=2)
    bootstrap = pylog_broker.bootstrap_servers
    zombie = transactional_producer(bootstrap, f"{topic}-app")
    zombie.begin_transaction()
    for i in range(10):
        zombie.produce(topic, value=f"zombie-{i}".encode(), partition=i % 2)
    zombie.flush(10)

    successor = transactional_producer(bootstrap, f"{topic}-app")  # aborts the zombie's transaction
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(10)
    assert fenced.value.args[0].fatal(), fenced.value.args[0]
    assert fenced.value.args[0].code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), fenced.value.args[0]

    successor.begin_transaction()
    for i in range(4):
        successor.produce(topic, value=f"successor-{i}".encode(), partition=i % 2)
    successor.commit_transaction(10)

    assert sorted(read_all(bootstrap, topic, 2, "read_committed")) == [f"successor-{i}".encode() for i in range(4)]
    assert len(read_all(bootstrap, topic, 2, "read_uncommitted")) == 14


def test_transaction_timeout_aborts_an_abandoned_transaction_and_unblocks_readers(pylog_broker, pylog_topic):
    topic = pylog_topic()
    bootstrap = pylog_broker.bootstrap_servers
    abandoned = transactional_producer(bootstrap, f"{topic}-app", **{"transaction.timeout.ms": 1000})
    abandoned.begin_transaction()
    abandoned.produce(topic, value=b"never committed")
    abandoned.flush(10)
    # Committed by someone else after the abandoned transaction began: read_committed readers are
    # held at the abandoned transaction's first offset until the coordinator aborts it.
    other = transactional_producer(bootstrap, f"{topic}-other")
    other.begin_transaction()
    other.produce(topic, value=b"committed")
    other.commit_transaction(10)

    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "timeout-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    started = time.monotonic()
    seen: list[bytes] = []
    try:
        while not seen and time.monotonic() - started < 15:
            seen += [m.value() for m in reader.consume(10, timeout=0.2) if not m.error()]
    finally:
        reader.close()
    waited = time.monotonic() - started
    assert seen == [b"committed"]
    assert 0.3 < waited < 10, f"read_committed reader waited {waited:.1f} s"  # held, then released
    with pytest.raises(KafkaException):
        abandoned.commit_transaction(10)


WORKER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer, Producer, TopicPartition, KafkaError, OFFSET_BEGINNING

    bootstrap, source, sink, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ctp", "enable.auto.commit": False,
                         "enable.partition.eof": True, "isolation.level": "read_committed"})
    # The producer first: initialising fences the killed run and aborts its open transaction, whose
    # offsets a read_committed fetch would otherwise wait on (UNSTABLE_OFFSET_COMMIT, KIP-447) until
    # the transaction timed out.
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ctp-worker", "linger.ms": 5})
    producer.init_transactions(30)
    committed = consumer.committed([TopicPartition(source, p) for p in range(partitions)], timeout=30)
    consumer.assign([TopicPartition(source, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                     for tp in committed])
    eof = set()
    while len(eof) < partitions:
        messages = consumer.consume(50, timeout=0.5)
        data = [m for m in messages if not m.error()]
        for m in messages:  # in order: an EOF may follow data of its partition in the same batch
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
            else:
                eof.discard(m.partition())
        if not data:
            continue
        producer.begin_transaction()
        positions = {}
        for m in data:
            producer.produce(sink, key=m.key(), value=b"out-" + m.value(), partition=m.partition())
            positions[m.partition()] = m.offset() + 1
        producer.flush(10)
        time.sleep(0.03)  # "processing": the transaction stays open with data written
        producer.send_offsets_to_transaction(
            [TopicPartition(source, p, offset) for p, offset in positions.items()],
            consumer.consumer_group_metadata(), 10)
        producer.commit_transaction(10)
        print("committed", flush=True)
    consumer.close()
    print("done", flush=True)
""")


def _lines_to(stream, lines: queue.Queue[bytes]) -> None:
    for line in stream:
        lines.put(line)


def test_consume_transform_produce_killed_repeatedly_outputs_each_record_exactly_once(
    pylog_broker, pylog_topic, tmp_path
):
    bootstrap = pylog_broker.bootstrap_servers
    source = pylog_topic(partitions=2)
    sink = pylog_topic(partitions=2)
    count = 1500
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(source, key=str(i).encode(), value=str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    script = tmp_path / "ctp_worker.py"
    script.write_text(WORKER)
    command = [sys.executable, str(script), bootstrap, source, sink, "2"]

    chooser = random.Random(4242)
    for _ in range(6):  # 6 runs x at most 4 of the 30 transactions: every run dies mid-way
        worker = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        commits: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=_lines_to, args=(worker.stdout, commits), daemon=True).start()
        # Let it commit a few transactions, then kill it somewhere inside the next one.
        for _ in range(chooser.randint(1, 3)):
            # a generous deadline, not a bound: a worker's first commit includes its interpreter's
            # start and fencing the killed run's transaction, which a loaded machine can slow past 30 s
            try:
                line = commits.get(timeout=180)
            except queue.Empty:
                worker.kill()
                worker.wait()
                raise AssertionError("the worker committed no transaction within 180 s") from None
            assert line == b"committed\n"
        time.sleep(chooser.uniform(0.0, 0.1))
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
    final = subprocess.run(command, capture_output=True, timeout=120)
    assert final.returncode == 0, final.stderr.decode()[-3000:]

    committed = Counter(read_all(bootstrap, sink, 2, "read_committed"))
    expected = Counter(b"out-" + str(i).encode() for i in range(count))
    assert committed == expected, (
        f"missing {sum((expected - committed).values())}, duplicated {sum((committed - expected).values())}"
    )
    uncommitted = read_all(bootstrap, sink, 2, "read_uncommitted")
    assert len(uncommitted) > count, "no aborted attempt reached the log; the kills hit no open transaction"


def test_transactional_offsets_are_visible_only_after_commit(pylog_broker, pylog_topic):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=2)
    sink = pylog_topic()
    group = f"{topic}-group"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    # A read_uncommitted consumer asks for offsets without require_stable (OffsetFetch v7+), so it
    # sees what is committed now; a read_committed one (librdkafka's default) is told
    # UNSTABLE_OFFSET_COMMIT while a transaction has offsets staged, and retries (KIP-447).
    looker = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    producer = transactional_producer(bootstrap, f"{topic}-app")
    partitions = [TopicPartition(topic, p) for p in range(2)]

    def committed() -> list[int]:
        return [tp.offset for tp in looker.committed(partitions, timeout=10)]

    try:
        producer.begin_transaction()
        producer.produce(sink, value=b"x")
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)], consumer.consumer_group_metadata(), 10
        )
        assert committed() == [-1001, -1001]  # staged, not visible
        with pytest.raises(KafkaException) as unstable:  # held back until the transaction ends
            consumer.committed(partitions, timeout=2)
        assert unstable.value.args[0].code() == KafkaError._TIMED_OUT
        producer.abort_transaction(10)
        assert [tp.offset for tp in consumer.committed(partitions, timeout=10)] == [-1001, -1001]
        assert committed() == [-1001, -1001]  # dropped with the abort

        producer.begin_transaction()
        producer.produce(sink, value=b"y")
        producer.send_offsets_to_transaction(
            [TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)], consumer.consumer_group_metadata(), 10
        )
        assert committed() == [-1001, -1001]
        producer.commit_transaction(10)
        assert committed() == [3, 4]
        assert [tp.offset for tp in consumer.committed(partitions, timeout=10)] == [3, 4]
    finally:
        consumer.close()
        looker.close()


def test_python_clients_read_committed_skip_aborted_records(pylog_broker, pylog_topic):
    """kafka-python (which checks CRCs, also of the broker's markers) filters with the broker's
    aborted_transactions list exactly as librdkafka does."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic()
    producer = transactional_producer(bootstrap, f"{topic}-app")
    for attempt in range(4):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, value=f"{attempt}-{i}".encode())
        if attempt % 2:
            producer.commit_transaction(10)
        else:
            producer.flush(10)
            producer.abort_transaction(10)
    expected = [f"{attempt}-{i}".encode() for attempt in (1, 3) for i in range(5)]

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", check_crcs=True, enable_auto_commit=False
    )
    got: list[bytes] = []
    try:
        partition = KafkaTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning()

        def past_the_last_marker() -> bool:  # offset 23: nothing more may arrive after it
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(record.value for record in records)
            return consumer.position(partition) >= 24

        wait_until(
            past_the_last_marker,
            "the reader past the last marker",
            10,
            interval=0,
        )
    finally:
        consumer.close()
    assert got == expected
    assert sorted(read_all(bootstrap, topic, 1, "read_committed")) == sorted(expected)


def test_aiokafka_transactions_commit_abort_and_offsets(pylog_broker, pylog_topic):
    """aiokafka speaks the oldest versions (InitProducerId/AddPartitionsToTxn/EndTxn v0)."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic()
    group = f"{topic}-group"
    expected = [b"c0", b"c1", b"c2", b"last"]

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-app")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(3):
                    await producer.send(topic, f"c{i}".encode(), partition=0)
            await producer.begin_transaction()
            for i in range(3):
                await producer.send(topic, f"aborted{i}".encode(), partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send(topic, b"last", partition=0)
                await producer.send_offsets_to_transaction({AioTopicPartition(topic, 0): 3}, group)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            consumer.assign([AioTopicPartition(topic, 0)])
            await consumer.seek_to_beginning()

            async def read_all_expected() -> bool:
                for messages in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend(message.value for message in messages)
                return len(got) >= len(expected)

            await async_wait_until(read_all_expected, lambda: got, 10, interval=0)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == expected
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        assert reader.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 3
    finally:
        reader.close()


def test_idle_transactional_ids_expire_and_stay_expired_after_a_restart(tmp_path):
    """Kafka's transactional.id.expiration.ms: an id unused for longer than it, with no open
    transaction, is forgotten (tombstoned, so a restart does not bring it back); an id with an
    open transaction is kept; an expired id starts afresh on its next init_transactions."""
    import asyncio

    from kafka_spark.broker import EmbeddedBroker

    def on_loop(broker, function, *args):  # noqa: ANN001, ANN202
        async def call():  # noqa: ANN202
            return function(*args)

        return asyncio.run_coroutine_threadsafe(call(), broker.broker.loop).result(10)

    log_dir = tmp_path / "data"
    with EmbeddedBroker(log_dir=log_dir, register=False) as broker:
        broker.create_topic("events", partitions=1)
        broker.create_topic("elsewhere", partitions=1)  # the open transaction must not hold events' LSO
        done = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "finished"})
        done.init_transactions(30)
        done.begin_transaction()
        done.produce("events", b"committed")
        done.commit_transaction(30)
        open_txn = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "transactional.id": "still-open",
                "transaction.timeout.ms": 900_000,
            }
        )
        open_txn.init_transactions(30)
        open_txn.begin_transaction()
        open_txn.produce("elsewhere", b"pending")
        open_txn.flush(30)
        coordinator = broker.broker.transactions
        old_producer_id = coordinator.get("finished").producer_id
        now = time.time_ns() // 1_000_000
        assert on_loop(broker, coordinator.expire_transactional_ids, now) == []  # not idle long enough
        eight_days = 8 * 24 * 3_600_000
        assert on_loop(broker, coordinator.expire_transactional_ids, now + eight_days) == ["finished"]
        assert coordinator.get("finished") is None and coordinator.get("still-open") is not None

    with EmbeddedBroker(log_dir=log_dir, register=False) as broker:
        coordinator = broker.broker.transactions
        assert coordinator.get("finished") is None  # the tombstone was replayed
        assert coordinator.get("still-open") is not None
        again = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "finished"})
        again.init_transactions(30)
        again.begin_transaction()
        again.produce("events", b"after-expiry")
        again.commit_transaction(30)
        assert coordinator.get("finished").producer_id != old_producer_id
        assert read_all(broker.bootstrap_servers, "events", 1, "read_committed")[-1:] == [b"after-expiry"]
