"""Broker log directories written before issue 39's redesign (a single node as a cluster of one,
the coordinators split by concern) are read by today's broker.

tests/data/pre_redesign_broker holds the log directory of a single node and of a 3-broker cluster
as the broker of commit 166103b wrote them (tests/data/pre_redesign_broker/generate.py says what is
in them and how they were made). Each test opens a copy and checks what a client sees: the topics,
the records (read_committed, so the transaction state and markers count), the committed group
offsets, the transactions' states, and the leader epochs, which a restart moves on.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.admin import KafkaAdminClient

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.cluster import EmbeddedCluster
from kafka_spark.broker.protocol.versions import ApiKey
from tests.support.paths import DATA
from tests.support.wire import WireClient

FIXTURES = DATA / "pre_redesign_broker"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())
PER_PARTITION = 10


def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def _read_committed(bootstrap: str, topic: str, partition: int) -> list[str]:
    """Every value a read_committed consumer gets from ``topic``-``partition``, up to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}-{partition}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    values: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        while True:
            message = consumer.poll(10)
            assert message is not None, f"no end of {topic}-{partition} after {values}"
            if message.error():
                assert message.error().code() == -191, message.error()  # _PARTITION_EOF
                return values
            values.append(message.value().decode())
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, partition) for topic, partition in partitions], timeout=10)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}


def _transactions(bootstrap: str, ids: list[str]) -> dict[str, tuple[str, set[tuple[str, int]]]]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_transactions(ids)
    finally:
        admin.close()
    return {
        transactional_id: (found.state.value, {(tp.topic, tp.partition) for tp in found.topic_partitions})
        for transactional_id, found in described.items()
    }


def _metadata(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (leader, leader epoch), as Metadata answers."""
    with WireClient(bootstrap.split(",")[0]) as client:
        answer = client.call(ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return {p.partition_index: (p.leader_id, p.leader_epoch) for t in answer.topics for p in t.partitions}


def test_a_single_node_log_directory_from_before_the_redesign_is_read(tmp_path):
    expected = EXPECTED["single"]
    with EmbeddedBroker(log_dir=_copy("single", tmp_path), register=False) as broker:
        bootstrap = broker.bootstrap_servers
        assert broker.topics() == {"orders": 2}
        assert broker.config.cluster_id == expected["cluster_id"]
        # A restart leads every partition anew: one epoch above the one the records were written in.
        assert _metadata(bootstrap, "orders") == {
            int(p): (broker.config.node_id, epoch + 1) for p, epoch in expected["leader_epochs"].items()
        }
        plain = [f"0-{i}" for i in range(PER_PARTITION)]
        assert _read_committed(bootstrap, "orders", 0) == plain + ["done-0", "done-1", "done-2"]
        # tx-open's commit was interrupted after PrepareCommit: the broker finished it before
        # answering anyone, so its records are committed and so are the offsets it staged itself.
        ones = [f"1-{i}" for i in range(PER_PARTITION)]
        assert _read_committed(bootstrap, "orders", 1) == ones + ["open-0", "open-1"]
        assert _committed(bootstrap, "readers", [("orders", 0), ("orders", 1)]) == {("orders", 0): 7, ("orders", 1): 3}
        assert _committed(bootstrap, "txgroup", [("orders", 1)]) == {("orders", 1): 5}
        assert _committed(bootstrap, "opengroup", [("orders", 0)]) == {("orders", 0): 2}
        assert _transactions(bootstrap, ["tx-done", "tx-open"]) == {
            "tx-done": ("CompleteCommit", set()),
            "tx-open": ("CompleteCommit", set()),
        }
        with WireClient(bootstrap) as client:  # nothing staged is left: a stable read answers
            stable = client.call(
                ApiKey.OFFSET_FETCH,
                7,
                {
                    "group_id": "opengroup",
                    "topics": [{"name": "orders", "partition_indexes": [0]}],
                    "require_stable": True,
                },
            )
        assert [(p.error_code, p.committed_offset) for t in stable.topics for p in t.partitions] == [(0, 2)]

        # The producers come back: their ids and epochs go on, and their transactions commit.
        for transactional_id, partition in (("tx-open", 1), ("tx-done", 0)):
            producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
            producer.init_transactions(30)
            producer.begin_transaction()
            producer.produce("orders", value=f"after-{transactional_id}".encode(), partition=partition)
            producer.commit_transaction(30)
        assert _read_committed(bootstrap, "orders", 1) == ones + ["open-0", "open-1", "after-tx-open"]
        assert _read_committed(bootstrap, "orders", 0)[-1] == "after-tx-done"


def test_a_cluster_log_directory_from_before_the_redesign_is_read(tmp_path):
    expected = EXPECTED["cluster"]
    with EmbeddedCluster(brokers=3, log_dir=_copy("cluster", tmp_path)) as cluster:
        for partition in range(2):
            cluster.wait_for_leader("replicated", partition)
            cluster.wait_for_isr("replicated", partition)
        bootstrap = cluster.bootstrap_servers
        assert cluster.nodes[0].config.cluster_id == expected["cluster_id"]
        described = cluster.describe()["topics"]["replicated"]
        assert [len(p["replicas"]) for p in described] == [3, 3]
        for partition, epoch in expected["leader_epochs"].items():  # the controller's epochs go on from the old
            assert cluster.partition("replicated", int(partition)).leader_epoch >= epoch
        assert _read_committed(bootstrap, "replicated", 0) == [f"0-{i}" for i in range(PER_PARTITION)]
        assert _read_committed(bootstrap, "replicated", 1) == [f"1-{i}" for i in range(PER_PARTITION)] + [
            "done-0",
            "done-1",
            "done-2",
        ]
        both = [("replicated", 0), ("replicated", 1)]
        assert _committed(bootstrap, "creaders", both) == {("replicated", 0): 4, ("replicated", 1): 6}
        assert _committed(bootstrap, "ctxgroup", both) == {("replicated", 0): 9}
        assert _transactions(bootstrap, ["ctx"]) == {"ctx": ("CompleteCommit", set())}
