"""Partition reassignment on an EmbeddedCluster (AlterPartitionReassignments and
ListPartitionReassignments, KIP-455): replicas added catch up from the leader and join the ISR,
the replicas left out go (their records with them), leadership moves to the target, and a producer
writing with acks=all throughout loses nothing; a reassignment that cannot finish is listed and
can be cancelled."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import confluent_kafka

from kafka_spark import EmbeddedCluster
from kafka_spark.common.topic_partition import TopicPartition
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS = 39, 85


def reassign(bootstrap: str, topic: str, replicas: list[int] | None, partition: int = 0) -> tuple[int, str | None]:
    body = {
        "timeout": 30_000,
        "allow_replication_factor_change": True,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "replicas": replicas}]}],
    }
    with WireClient(bootstrap) as client:
        response = client.call(ALTER_PARTITION_REASSIGNMENTS, 1, body)
    assert response.error_code == 0
    (answer,) = response.responses[0].partitions
    return answer.error_code, answer.error_message


def ongoing(bootstrap: str) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    with WireClient(bootstrap) as client:
        response = client.call(LIST_PARTITION_REASSIGNMENTS, 0, {"timeout": 30_000, "topics": None})
    assert response.error_code == 0
    return {
        (topic.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for topic in response.topics
        for p in topic.partitions
    }


class Writer(threading.Thread):
    """A producer writing numbered records with acks=all until stopped; what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="reassignment-writer", daemon=True)
        self.producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
        )
        self.topic, self.acked, self.errors = topic, set(), []
        self.stopping = threading.Event()

    def delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(error)
        else:
            self.acked.add(message.value())

    def run(self) -> None:
        n = 0
        while not self.stopping.is_set():
            self.producer.produce(self.topic, value=b"%d" % n, partition=0, on_delivery=self.delivered)
            self.producer.poll(0.002)
            n += 1
        assert self.producer.flush(60) == 0


def consume_all(bootstrap: str, topic: str, count: int) -> set[bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-check", "auto.offset.reset": "earliest"}
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen: set[bytes] = set()
    try:
        wait_until(
            lambda: seen.update(m.value() for m in consumer.consume(500, 0.2) if not m.error()) or len(seen) >= count,
            lambda: f"{count} records back, got {len(seen)}",
        )
    finally:
        consumer.close()
    return seen


def test_replicas_move_while_a_producer_writes_and_nothing_is_lost(tmp_path: Path) -> None:
    with EmbeddedCluster(brokers=3, log_dir=tmp_path) as cluster:
        cluster.create_topic("moving", 1, replication_factor=1)
        tp = TopicPartition("moving", 0)
        first = cluster.leader("moving")
        second, third = (node for node in sorted(cluster.nodes) if node != first)
        admin = cluster.nodes[third].bootstrap_servers  # the broker the requests go to
        writer = Writer(cluster.bootstrap_servers, "moving")
        writer.start()
        try:
            wait_until(lambda: len(writer.acked) >= 300, "the first records acknowledged")
            # Two replicas join: they catch up from the leader, and the reassignment completes.
            assert reassign(admin, "moving", [first, second, third]) == (0, None)
            wait_until(
                lambda: (
                    cluster.partition("moving").replicas == (first, second, third)
                    and set(cluster.partition("moving").isr) == {first, second, third}
                    and not cluster.partition("moving").adding
                ),
                lambda: f"the new replicas in sync: {cluster.partition('moving')}",
            )
            assert ongoing(admin) == {}
            acked_before_move = len(writer.acked)
            # The first broker leaves: the leadership moves to the target's first replica.
            epoch = cluster.partition("moving").leader_epoch
            assert reassign(admin, "moving", [second, third]) == (0, None)
            state = cluster.partition("moving")
            assert (state.replicas, state.leader, state.leader_epoch) == ((second, third), second, epoch + 1)
            wait_until(lambda: len(writer.acked) >= acked_before_move + 300, "records acknowledged by the new leader")
        finally:
            writer.stopping.set()
            writer.join(60)
        assert not writer.errors
        cluster.wait_for_metadata()
        removed = cluster.nodes[first].replicas
        assert tp not in removed.partitions  # the first broker hosts it no more ...
        assert removed.broker.logs.get_log("moving", 0).log_end_offset == 0  # ... and its records are gone
        assert writer.acked <= consume_all(cluster.bootstrap_servers, "moving", len(writer.acked))


def test_a_reassignment_under_way_is_listed_and_can_be_cancelled(tmp_path: Path) -> None:
    with EmbeddedCluster(brokers=3, log_dir=tmp_path, broker_session_timeout_ms=1_000) as cluster:
        cluster.create_topic("stuck", 1, replication_factor=1)
        leader = cluster.leader("stuck")
        down = max(node for node in cluster.nodes if node != leader)
        cluster.stop_broker(down)  # registered, not running: it can never catch up
        bootstrap = cluster.nodes[leader].bootstrap_servers
        assert reassign(bootstrap, "stuck", [down]) == (0, None)
        assert ongoing(bootstrap) == {("stuck", 0): ([down, leader], [down], [leader])}
        assert cluster.leader("stuck") == leader  # the old replica leads until the new one is in sync
        assert reassign(bootstrap, "stuck", None) == (0, None)  # cancel
        assert ongoing(bootstrap) == {}
        assert (cluster.partition("stuck").replicas, cluster.leader("stuck")) == ((leader,), leader)
        assert reassign(bootstrap, "stuck", None)[0] == NO_REASSIGNMENT_IN_PROGRESS
        code, message = reassign(bootstrap, "stuck", [leader, 7])
        assert code == INVALID_REPLICA_ASSIGNMENT and message and "broker 7" in message
        code, message = reassign(bootstrap, "stuck", [leader, leader])
        assert code == INVALID_REPLICA_ASSIGNMENT and message and "more than once" in message
