"""Transactions on a replicated cluster: markers reach partitions led by other brokers than the
coordinator (WriteTxnMarkers), and transactions go on through the kill of the coordinator's broker
(its state is the replicated ``__transaction_state``); committed group offsets survive the kill of
the group coordinator's broker (``__consumer_offsets`` is replicated too)."""

from __future__ import annotations

import time
from collections.abc import Iterable

import confluent_kafka

from kafka_spark.broker.cluster import EmbeddedCluster

TOPIC = "payments"
PARTITIONS = 3


def _producer(cluster: EmbeddedCluster, transactional_id: str) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 60_000,
            "topic.metadata.refresh.interval.ms": 500,
            "retry.backoff.ms": 50,
            "log_level": 0,
        }
    )
    producer.init_transactions(60)
    return producer


def _transaction(producer: confluent_kafka.Producer, values: Iterable[str], commit: bool) -> None:
    producer.begin_transaction()
    for index, value in enumerate(values):
        producer.produce(TOPIC, value.encode(), partition=index % PARTITIONS)
    producer.flush(60)
    if commit:
        producer.commit_transaction(60)
    else:
        producer.abort_transaction(60)


def _read_committed(cluster: EmbeddedCluster, timeout: float = 60.0) -> list[str]:
    """Every record a read_committed consumer gets from the start of every partition up to its
    last stable offset (polled until it reaches the end the broker reports)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "checker",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
            "log_level": 0,
        }
    )
    partitions = [confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        ends = {p: consumer.get_watermark_offsets(partitions[p], timeout=30)[1] for p in range(PARTITIONS)}
        positions = dict.fromkeys(range(PARTITIONS), 0)
        while any(positions[p] < ends[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, f"read_committed stopped at {positions}, ends {ends}: {seen}"
            message = consumer.poll(0.2)
            if message is None or message.error():
                for tp in consumer.position(partitions):
                    if tp.offset >= 0:
                        positions[tp.partition] = tp.offset
                continue
            seen.append(message.value().decode())
            positions[message.partition()] = message.offset() + 1
    finally:
        consumer.close()
    return seen


def test_markers_reach_partitions_led_by_other_brokers(pylog_cluster: EmbeddedCluster) -> None:
    pylog_cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    assert len({pylog_cluster.leader(TOPIC, p) for p in range(PARTITIONS)}) == PARTITIONS
    producer = _producer(pylog_cluster, "payer")
    _transaction(producer, [f"first-{i}" for i in range(6)], commit=True)
    _transaction(producer, [f"aborted-{i}" for i in range(6)], commit=False)
    _transaction(producer, [f"second-{i}" for i in range(6)], commit=True)
    seen = _read_committed(pylog_cluster)
    assert sorted(seen) == sorted([f"first-{i}" for i in range(6)] + [f"second-{i}" for i in range(6)])
