"""What requests may cost the broker in memory: socket.request.max.bytes per request,
queued.max.request.bytes for all connections together, and a half-sent frame only what it sent."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.protocol.frames import FrameDecoder
from kafka_spark.broker.storage.batch import build_record_batch
from tests.support.waiting import wait_until
from tests.support.wire import WireClient  # noqa: E402

MiB = 1024 * 1024


def on_loop(broker: EmbeddedBroker, read: Callable[[], Any]) -> Any:
    """``read()`` on the broker's event loop, where its connections live."""

    async def call() -> Any:
        return read()

    return asyncio.run_coroutine_threadsafe(call(), broker.broker.loop).result(30)


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def half_sent_produce(bootstrap: str, declared: int, sent: int) -> socket.socket:
    """A connection that sends the size prefix, a Produce request header and ``sent`` bytes in
    all of a ``declared``-byte frame, then stalls."""
    host, _, port = bootstrap.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    header = struct.pack(">hhih", 0, 7, 1, 5) + b"stall"
    sock.sendall(struct.pack(">i", declared) + header + b"\0" * (sent - 4 - len(header)))
    return sock


def produce_and_read_back(bootstrap: str, topic: str, count: int) -> None:
    """acks=all produce of ``count`` small records and a consumer reading them all back."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60_000})
    delivered: list[Any] = []
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=0, on_delivery=lambda error, _: delivered.append(error))
    assert producer.flush(90) == 0
    assert delivered == [None] * count
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []

    def read_to_end() -> bool:
        message = consumer.poll(0.5)
        if message is None:
            return False
        if message.error():
            assert message.error().code() == KafkaError._PARTITION_EOF
            return len(values) >= count
        values.append(message.value())
        return False

    try:
        wait_until(read_to_end, lambda: f"the end of {topic} after {count} records, read {len(values)}", interval=0)
    finally:
        consumer.close()
    assert values[-count:] == [b"%d" % i for i in range(count)]


def test_stalled_half_sent_frames_cost_what_they_sent_while_clients_are_served(tmp_path, pylog_broker_factory):
    """200 connections each declare a 100 MiB Produce request, send 100 kB of it and stall. Each
    costs about what it sent — the broker's own count of its receive buffers stays within twice
    the bytes received plus a 64 KiB chunk per connection, and its RSS grows by tens of
    megabytes, not the 2-3 GB that buffers sized by the declared length took — and a producer
    and a consumer are served normally meanwhile."""
    broker = pylog_broker_factory(log_dir=tmp_path)
    broker.create_topic("served", partitions=1)
    produce_and_read_back(broker.bootstrap_servers, "served", 100)  # warm: the clients' own buffers
    memory = broker.server.memory
    rss_before, pool_before = rss_bytes(), memory.used
    stalled = [half_sent_produce(broker.bootstrap_servers, 100 * MiB, 100_000) for _ in range(200)]
    try:
        wait_until(
            lambda: on_loop(broker, lambda: broker.server.buffered_bytes) >= 200 * 100_000,
            "the broker received every stalled connection's 100 kB",
        )
        buffered = on_loop(broker, lambda: broker.server.buffered_bytes)
        assert buffered == 200 * 100_000
        pooled = memory.used - pool_before
        assert 0 < pooled <= FrameDecoder.GROWTH * buffered + 200 * FrameDecoder.CHUNK, (pooled, buffered)
        growth = rss_bytes() - rss_before
        assert growth < 200 * MiB, f"RSS grew by {growth / MiB:.0f} MiB for 200 stalled connections"
        produce_and_read_back(broker.bootstrap_servers, "served", 1000)
    finally:
        for sock in stalled:
            sock.close()
    wait_until(
        lambda: on_loop(broker, lambda: (broker.server.buffered_bytes, memory.used <= pool_before)) == (0, True),
        "the stalled connections' buffers were given back",
    )


def test_a_request_over_socket_request_max_bytes_closes_its_connection_with_a_log_line(
    tmp_path, caplog, pylog_broker_factory
):
    broker = pylog_broker_factory(log_dir=tmp_path, socket_request_max_bytes=MiB)
    host, _, port = broker.bootstrap_servers.rpartition(":")
    with caplog.at_level(logging.WARNING, logger="kafka_spark.broker"):
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(struct.pack(">i", 2 * MiB) + b"\0" * 1000)
            assert sock.recv(100) == b""  # closed, nothing answered
    assert any(
        "request of 2097152 bytes is larger than socket.request.max.bytes=1048576" in record.getMessage()
        for record in caplog.records
    ), [record.getMessage() for record in caplog.records]
    assert on_loop(broker, lambda: broker.server.memory.used) == 0  # nothing was allocated for it
    with WireClient(broker.bootstrap_servers) as client:  # everyone else is served
        assert client.call(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0


def test_an_exhausted_pool_stops_reading_until_memory_is_given_back(tmp_path, pylog_broker_factory):
    """queued.max.request.bytes=4 MiB, taken by one connection's half-sent frame: a client whose
    900 kB Produce request needs a larger buffer is not read further (back-pressure, no error) until
    that connection goes away, then it is answered; small requests fit the chunk every connection
    has and are served throughout."""
    broker = pylog_broker_factory(log_dir=tmp_path, queued_max_request_bytes=4 * MiB)
    broker.create_topic("big", partitions=1)
    broker.create_topic("small", partitions=1)
    memory = broker.server.memory
    hog = half_sent_produce(broker.bootstrap_servers, 100 * MiB, 3 * MiB)
    wait_until(lambda: on_loop(broker, lambda: memory.exhausted), "the hog exhausted the pool")

    answers: list[Any] = []
    batch = build_record_batch([(b"k", b"v" * 900_000, [], 1_700_000_000_000)])

    def produce_big() -> None:
        with WireClient(broker.bootstrap_servers, timeout=120) as client:
            answers.append(
                client.call(
                    0,
                    7,
                    {
                        "transactional_id": None,
                        "acks": 1,
                        "timeout": 5000,
                        "topic_data": [{"name": "big", "partition_data": [{"index": 0, "records": batch}]}],
                    },
                )
            )

    big = threading.Thread(target=produce_big)
    big.start()
    try:
        wait_until(lambda: on_loop(broker, lambda: memory.waiting) == 1, "the big request waited for memory")
        produce_and_read_back(broker.bootstrap_servers, "small", 200)
        assert big.is_alive() and not answers  # still waiting: nothing was given back yet
    finally:
        hog.close()
    big.join(120)
    assert not big.is_alive()
    (response,) = answers
    partition = response.responses[0].partition_responses[0]
    assert (int(partition.error_code), partition.base_offset) == (0, 0)
    assert memory.refusals >= 1
