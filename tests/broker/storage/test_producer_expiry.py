"""Idempotent-producer state expires as with Kafka's producer.id.expiration.ms: a producer whose
last batch is older than the limit, with no transaction open, is forgotten; when it comes back
its batches are accepted as a new producer's, and nothing is lost or written twice."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from kafka_spark.broker import EmbeddedBroker
from tests.support.partition_reads import read_to_end
from tests.support.waiting import wait_until

DAY_MS = 24 * 3_600_000


def on_loop(broker: EmbeddedBroker, function):  # noqa: ANN001, ANN201
    async def run():  # noqa: ANN202
        return function()

    return broker._call(run())


def producer_ids(broker: EmbeddedBroker) -> set[int]:
    log = broker.broker.logs.get_log("expiry", 0)
    return on_loop(broker, lambda: set(broker.broker.producer_state(log).producers))


def produce(producer: Producer, values: list[bytes], timestamp_ms: int) -> None:
    errors: list = []
    for value in values:
        producer.produce(
            "expiry",
            value=value,
            partition=0,
            timestamp=timestamp_ms,
            on_delivery=lambda err, msg: err and errors.append(err),
        )
    assert producer.flush(30) == 0 and errors == [], errors


def read_values(bootstrap: str) -> list[bytes]:
    return [message.value() for message in read_to_end(bootstrap, "expiry", **{"isolation.level": "read_committed"})]


def test_idle_producers_are_forgotten_but_not_those_with_an_open_transaction(pylog_broker_factory):
    broker = pylog_broker_factory()
    bootstrap = broker.bootstrap_servers
    broker.create_topic("expiry", partitions=1)
    now = int(time.time() * 1000)
    old = now - 2 * DAY_MS  # batches stamped two days ago: their producer is idle by Kafka's rule

    idle = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    produce(idle, [b"idle-%d" % i for i in range(10)], old)
    (idle_pid,) = producer_ids(broker)
    recent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    produce(recent, [b"recent-%d" % i for i in range(10)], now)
    (recent_pid,) = producer_ids(broker) - {idle_pid}
    in_txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "expiry-txn", "linger.ms": 0})
    in_txn.init_transactions(30)
    in_txn.begin_transaction()
    produce(in_txn, [b"txn-%d" % i for i in range(5)], old)
    (txn_pid,) = producer_ids(broker) - {idle_pid, recent_pid}

    assert on_loop(broker, lambda: broker.broker.expire_producer_ids(now)) == 1
    assert producer_ids(broker) == {recent_pid, txn_pid}  # the open transaction keeps its state

    # The forgotten producer goes on at sequence 10: accepted as a new producer's batches.
    produce(idle, [b"idle-%d" % i for i in range(10, 20)], old)
    in_txn.commit_transaction(30)
    assert read_values(bootstrap) == (
        [b"idle-%d" % i for i in range(10)]
        + [b"recent-%d" % i for i in range(10)]
        + [b"txn-%d" % i for i in range(5)]
        + [b"idle-%d" % i for i in range(10, 20)]
    )

    # A day and more later, with the transaction committed, every producer is idle.
    assert on_loop(broker, lambda: broker.broker.expire_producer_ids(now + 2 * DAY_MS)) == 3
    assert producer_ids(broker) == set()
    produce(recent, [b"recent-10"], now)
    assert read_values(bootstrap)[-1] == b"recent-10"


def test_the_expiry_check_runs_by_itself_and_is_rescheduled(pylog_broker_factory):
    broker = pylog_broker_factory()
    node = broker.broker
    first = node._producer_expiry
    on_loop(broker, node._expire_producers_periodically)
    assert node._producer_expiry is not first and not node._producer_expiry.cancelled()
    assert (
        abs(
            node._producer_expiry.when()
            - node.loop.time()
            - node.config.producer_id_expiration_check_interval_ms / 1000
        )
        < 5
    )


def test_settings_passed_to_the_embedded_broker_drive_the_periodic_expiry(pylog_broker_factory):
    broker = pylog_broker_factory(producer_id_expiration_ms=60_000, producer_id_expiration_check_interval_ms=200)
    broker.create_topic("expiry", partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "enable.idempotence": True, "linger.ms": 0})
    produce(producer, [b"old"], int(time.time() * 1000) - 120_000)  # older than the minute allowed
    wait_until(lambda: not producer_ids(broker), lambda: f"no producer ids, have {producer_ids(broker)}", 10, 0.1)
    assert producer_ids(broker) == set()  # forgotten by the timer, with no call from the test


def test_an_unknown_broker_setting_is_refused_with_the_known_ones():
    with pytest.raises(TypeError, match="producer_id_expiraton_ms.*producer_id_expiration_ms"):
        EmbeddedBroker(producer_id_expiraton_ms=1)
