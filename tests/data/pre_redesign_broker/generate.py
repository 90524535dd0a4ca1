"""Writes the broker log directories that tests/broker/test_pre_redesign_log_dirs.py opens.

They were written once by the broker as it was before issue 39 made the single node a cluster of
one (a single node then kept its own leader epochs in the LogManager, staged a transaction's
consumer offsets in ``__transaction_state`` and kept that topic at one partition), and are
committed as they came out: the point of the test is that a log directory written before an
upgrade of pylog is read after it. Regenerating them with a newer pylog would test nothing; the
command that made them, from a checkout of the commit before the redesign (166103b)::

    PYTHONPATH=<checkout> python tests/data/pre_redesign_broker/generate.py

``single/``: an ``EmbeddedBroker`` (node 0, started once, so every partition is in leader epoch 0):

* topic ``orders``, 2 partitions, partition p holding ``PER_PARTITION`` records ``"p-i"`` (key
  ``"k<i>"``), written by an idempotent producer;
* group ``readers`` committed ``{orders-0: 7, orders-1: 3}`` (OffsetCommit);
* transactional id ``tx-done`` committed a transaction of 3 records ``"done-i"`` to ``orders-0``
  with the offsets ``{orders-1: 5}`` of group ``txgroup`` (state CompleteCommit);
* transactional id ``tx-open`` wrote 2 records ``"open-i"`` to ``orders-1`` and staged the offsets
  ``{orders-0: 2}`` of group ``opengroup`` in its transaction (the single node's way then), and the
  broker stopped as if it had died right after logging PrepareCommit (the last record of
  ``tx-open`` in ``__transaction_state``, appended after the broker closed, as
  tests/broker/coordinator/test_transaction_protocol.py provokes it): no marker was written, the
  last stable offset of ``orders-1`` stops at the first open record, and the staged offsets are
  not committed. A broker that loads it must finish the commit.

``cluster/``: an ``EmbeddedCluster`` of 3 brokers (its ``controller/metadata.json`` and one
``broker-<id>`` directory each):

* topic ``replicated``, 2 partitions, replication factor 3, ``PER_PARTITION`` records ``"p-i"``
  per partition, acknowledged by all in-sync replicas;
* group ``creaders`` committed ``{replicated-0: 4, replicated-1: 6}``;
* transactional id ``ctx`` committed 3 records ``"done-i"`` to ``replicated-1`` with the offsets
  ``{replicated-0: 9}`` of group ``ctxgroup``.

``expected.json`` records what the writing broker answered (cluster id, leader epochs), for the
test to compare with.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

TOPIC = "orders"
CLUSTER_TOPIC = "replicated"
PARTITIONS = 2
PER_PARTITION = 10
OPEN_TIMEOUT_MS = 900_000


def _produce(bootstrap: str, topic: str, acks: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": acks})
    for partition in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(topic, key=f"k{i}".encode(), value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()


def _transaction(
    bootstrap: str,
    transactional_id: str,
    topic: str,
    partition: int,
    values: list[str],
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    commit: bool,
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": OPEN_TIMEOUT_MS,
        }
    )
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value.encode(), partition=partition)
        producer.send_offsets_to_transaction(
            [TopicPartition(t, p, offset) for (t, p), offset in offsets.items()], consumer.consumer_group_metadata(), 30
        )
        if commit:
            producer.commit_transaction(30)
        else:
            assert producer.flush(30) == 0  # the records are in the log; the transaction stays open
    finally:
        consumer.close()


def single(target: Path) -> dict[str, object]:
    from kafka_spark.broker import EmbeddedBroker

    with EmbeddedBroker(log_dir=target, register=False) as broker:
        broker.create_topic(TOPIC, partitions=PARTITIONS)
        bootstrap = broker.bootstrap_servers
        _produce(bootstrap, TOPIC, "all")
        _commit(bootstrap, "readers", {(TOPIC, 0): 7, (TOPIC, 1): 3})
        _transaction(
            bootstrap, "tx-done", TOPIC, 0, ["done-0", "done-1", "done-2"], "txgroup", {(TOPIC, 1): 5}, commit=True
        )
        _transaction(bootstrap, "tx-open", TOPIC, 1, ["open-0", "open-1"], "opengroup", {(TOPIC, 0): 2}, commit=False)
        epochs = {str(p): broker.broker.logs.get_log(TOPIC, p).leader_epoch for p in range(PARTITIONS)}
        expected = {"cluster_id": broker.config.cluster_id, "leader_epochs": epochs}
    _interrupt_commit(target, "tx-open")
    return expected


def _interrupt_commit(target: Path, transactional_id: str) -> None:
    """Log PrepareCommit for ``transactional_id``'s open transaction, as a broker that died right
    after doing so (before any marker) left it."""
    import time

    from kafka_spark.broker.coordinator.transaction_log import TransactionLog
    from kafka_spark.broker.storage.log_manager import LogManager

    logs = LogManager(target)
    try:
        state_log = TransactionLog(logs)
        record = state_log.replay()[transactional_id]
        assert record.pop("version") == 1 and record["state"] == "Ongoing", record
        state_log.append(transactional_id, {**record, "state": "PrepareCommit"}, int(time.time() * 1000))
    finally:
        logs.close()


def cluster(target: Path) -> dict[str, object]:
    from kafka_spark.broker.cluster import EmbeddedCluster

    with EmbeddedCluster(brokers=3, log_dir=target) as running:
        running.create_topic(CLUSTER_TOPIC, partitions=PARTITIONS, replication_factor=3)
        bootstrap = running.bootstrap_servers
        _produce(bootstrap, CLUSTER_TOPIC, "all")
        _commit(bootstrap, "creaders", {(CLUSTER_TOPIC, 0): 4, (CLUSTER_TOPIC, 1): 6})
        _transaction(
            bootstrap,
            "ctx",
            CLUSTER_TOPIC,
            1,
            ["done-0", "done-1", "done-2"],
            "ctxgroup",
            {(CLUSTER_TOPIC, 0): 9},
            commit=True,
        )
        for partition in range(PARTITIONS):
            running.wait_for_isr(CLUSTER_TOPIC, partition)
        return {
            "cluster_id": running.nodes[0].config.cluster_id,
            "leader_epochs": {str(p): running.partition(CLUSTER_TOPIC, p).leader_epoch for p in range(PARTITIONS)},
        }


def main() -> None:
    target = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory(prefix="pylog-pre-redesign-") as scratch:
        expected = {"single": single(Path(scratch) / "single"), "cluster": cluster(Path(scratch) / "cluster")}
        for name in ("single", "cluster"):
            shutil.rmtree(target / name, ignore_errors=True)
            # The directory lock is the broker's own, taken at every start; nothing else is left behind.
            shutil.copytree(Path(scratch) / name, target / name, ignore=shutil.ignore_patterns(".lock"))
    (target / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
