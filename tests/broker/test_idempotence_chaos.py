"""Idempotent and transactional producers under connection loss: no duplicates, no gaps, order
kept per partition.

A TCP proxy sits between a confluent-kafka producer (enable.idempotence) and the broker and
cuts connections at random moments, mostly right after the broker answered a request and before
the answer reaches the client: the client must retry batches the broker already wrote, and the
broker must recognise them by producer id, epoch and sequence (storage/producer_state.py).

The broker binds 127.0.0.1 and advertises 127.0.0.2 on the same port, where the proxy listens,
so every connection the client opens after Metadata goes through the proxy too.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections import defaultdict

import pytest
from confluent_kafka import Producer

from kafka_spark.broker import EmbeddedBroker
from tests.support.partition_reads import read_partitions_to_end

MESSAGES = 50_000
PARTITIONS = 3
PROXY_HOST = "127.0.0.2"


class CuttingProxy:
    """Forwards ``listen -> target`` and cuts each connection after a random number of
    broker-to-client chunks (the broker did the work, the client never hears of it), until
    ``max_cuts`` connections were cut. Threads only; loopback only."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int], *, max_cuts: int, seed: int) -> None:
        self.target = target
        self.max_cuts = max_cuts
        self.cuts = 0
        self.connections = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._server = socket.create_server(listen)
        self._closed = False
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="cutting-proxy", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self.connections += 1
                self._sockets += [client, upstream]
                # Let the first connections live a little (handshake), later ones die sooner or later.
                budget = self._random.randint(3, 40) if self.cuts < self.max_cuts else None
            pair = _Pair(client, upstream)
            threading.Thread(target=self._pump, args=(client, upstream, pair, None), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, pair, budget), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, pair: _Pair, budget: int | None) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if budget is not None:
                    budget -= 1
                    if budget <= 0:
                        with self._lock:
                            cut = self.cuts < self.max_cuts
                            if cut:
                                self.cuts += 1
                        if cut:
                            break  # drop this response: the request was served, the client won't know
                sink.sendall(data)
        except OSError:
            pass
        finally:
            pair.close()

    def stop_cutting(self) -> None:
        with self._lock:
            self.max_cuts = self.cuts

    def close(self) -> None:
        self._closed = True
        try:
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        except OSError:
            pass
        self._server.close()
        self._thread.join(timeout=5)
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.close()
                except OSError:
                    pass


class _Pair:
    def __init__(self, *sockets: socket.socket) -> None:
        self._sockets = sockets

    def close(self) -> None:
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


@pytest.fixture
def proxied_broker(tmp_path):
    try:
        probe = socket.create_server((PROXY_HOST, 0))
        probe.close()
    except OSError as error:
        pytest.skip(f"cannot listen on {PROXY_HOST} (needs the 127.0.0.0/8 loopback range): {error}")
    with EmbeddedBroker(log_dir=tmp_path, host="127.0.0.1", advertised_host=PROXY_HOST, register=False) as broker:
        yield broker


def test_idempotent_producer_survives_connection_cuts_without_duplicates_or_gaps(proxied_broker):
    broker = proxied_broker
    topic = "chaos"
    broker.create_topic(topic, partitions=PARTITIONS)
    proxy = CuttingProxy((PROXY_HOST, broker.port), ("127.0.0.1", broker.port), max_cuts=30, seed=20261122)
    try:
        producer = Producer(
            {
                "bootstrap.servers": f"{PROXY_HOST}:{broker.port}",
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.num.messages": 200,  # many requests in flight, so cuts land mid-stream
                "message.timeout.ms": 120_000,
                "retry.backoff.ms": 20,
                "reconnect.backoff.ms": 10,
                "reconnect.backoff.max.ms": 200,
            }
        )
        errors: list = []
        for i in range(MESSAGES):
            while True:
                try:
                    producer.produce(
                        topic,
                        value=str(i).encode(),
                        partition=i % PARTITIONS,
                        on_delivery=lambda err, msg: err and errors.append(err),
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 100 == 0:
                producer.poll(0)
                time.sleep(0.01)  # spread the stream over ~5 s so cuts hit it everywhere
        assert producer.flush(120) == 0
        assert not errors, errors[:3]
        assert proxy.cuts >= 10, f"only {proxy.cuts} connection(s) were cut; the test did not test retries"
        proxy.stop_cutting()
        by_partition = _read_everything(broker)
    finally:
        proxy.close()
    for partition in range(PARTITIONS):
        expected = list(range(partition, MESSAGES, PARTITIONS))
        got = by_partition[partition]
        assert len(got) == len(expected), f"partition {partition}: {len(got)} records, expected {len(expected)}"
        assert got == expected, f"partition {partition}: duplicates, gaps or reordering"
    # The cuts did make the client resend batches the broker had already written.
    retried = sum(
        broker.broker.producer_state(broker.broker.logs.get_log(topic, p)).duplicates_acknowledged
        for p in range(PARTITIONS)
    )
    assert retried >= 3, f"only {retried} retried batch(es) reached the broker; the cuts missed the produce answers"


def _read_everything(broker: EmbeddedBroker, topic: str = "chaos") -> dict[int, list[int]]:
    """Every value of the topic per partition, in offset order (through the proxy, no more cuts)."""
    values: dict[int, list[int]] = defaultdict(list)
    for message in read_partitions_to_end(
        f"{PROXY_HOST}:{broker.port}", topic, range(PARTITIONS), **{"group.id": "chaos-check"}
    ):
        values[message.partition()].append(int(message.value()))
    return values


def test_transactional_producer_survives_connection_cuts_with_exactly_once_output(proxied_broker):
    """A transactional producer is idempotent too, and its coordinator requests get cut as well:
    lost AddPartitionsToTxn / EndTxn answers are retried and must not change the outcome."""
    broker = proxied_broker
    topic = "txn-chaos"
    broker.create_topic(topic, partitions=PARTITIONS)
    transactions, per_transaction = 60, 100
    proxy = CuttingProxy((PROXY_HOST, broker.port), ("127.0.0.1", broker.port), max_cuts=25, seed=7)
    try:
        producer = Producer(
            {
                "bootstrap.servers": f"{PROXY_HOST}:{broker.port}",
                "transactional.id": "txn-chaos",
                "linger.ms": 5,
                "retry.backoff.ms": 20,
                "reconnect.backoff.ms": 10,
                "reconnect.backoff.max.ms": 200,
            }
        )
        producer.init_transactions(30)
        for t in range(transactions):
            producer.begin_transaction()
            for i in range(t * per_transaction, (t + 1) * per_transaction):
                producer.produce(topic, value=str(i).encode(), partition=i % PARTITIONS)
            producer.commit_transaction(60)
        assert proxy.cuts >= 10, f"only {proxy.cuts} connection(s) were cut; the test did not test retries"
        proxy.stop_cutting()
        by_partition = _read_everything(broker, topic)
    finally:
        proxy.close()
    total = transactions * per_transaction
    for partition in range(PARTITIONS):
        assert by_partition[partition] == list(range(partition, total, PARTITIONS)), f"partition {partition}"
