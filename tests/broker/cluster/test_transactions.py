"""Transactions on a replicated cluster: markers reach partitions led by other brokers than the
coordinator (WriteTxnMarkers), and transactions go on through the kill of the coordinator's broker
(its state is the replicated ``__transaction_state``); committed group offsets survive the kill of
the group coordinator's broker (``__consumer_offsets`` is replicated too)."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from kafka_spark.broker.cluster import EmbeddedCluster
from kafka_spark.broker.coordinator.transaction_state import TxnState
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from kafka_spark.broker.internal_topics import partition_for as offsets_partition_for
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

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

        def at_the_ends() -> bool:
            if all(positions[p] >= ends[p] for p in range(PARTITIONS)):
                return True
            message = consumer.poll(0.2)
            if message is None or message.error():
                for tp in consumer.position(partitions):
                    if tp.offset >= 0:
                        positions[tp.partition] = tp.offset
                return False
            seen.append(message.value().decode())
            positions[message.partition()] = message.offset() + 1
            return False

        wait_until(
            at_the_ends,
            lambda: f"read_committed at the ends {ends}, stopped at {positions}: {seen}",
            deadline - time.monotonic(),
            interval=0,
        )
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


def _coordinator(cluster: EmbeddedCluster, topic: str, key: str) -> int:
    """The broker leading ``key``'s partition of ``topic`` (once it has a leader)."""
    partitions = cluster.controller.image.topics[topic].partitions
    return cluster.wait_for_leader(topic, offsets_partition_for(key, partitions))


def test_transactions_go_on_after_the_coordinator_broker_is_killed(pylog_cluster: EmbeddedCluster) -> None:
    pylog_cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    producer = _producer(pylog_cluster, "payer")
    _transaction(producer, [f"before-{i}" for i in range(6)], commit=True)
    coordinator = _coordinator(pylog_cluster, TRANSACTION_STATE_TOPIC, "payer")
    pylog_cluster.kill_broker(coordinator)
    _transaction(producer, [f"aborted-{i}" for i in range(6)], commit=False)
    _transaction(producer, [f"after-{i}" for i in range(6)], commit=True)
    assert _coordinator(pylog_cluster, TRANSACTION_STATE_TOPIC, "payer") != coordinator
    expected = sorted([f"before-{i}" for i in range(6)] + [f"after-{i}" for i in range(6)])
    assert sorted(_read_committed(pylog_cluster)) == expected
    pylog_cluster.restart_broker(coordinator)  # back as a follower: the state stays where it is
    _transaction(producer, ["last"], commit=True)
    assert sorted(_read_committed(pylog_cluster)) == sorted([*expected, "last"])


def test_a_transaction_whose_coordinator_dies_while_ending_it_is_completed_by_the_next(
    pylog_cluster: EmbeddedCluster,
) -> None:
    """The coordinator is killed while the transaction is in PrepareCommit (its markers cannot
    reach a partition whose leader was killed just before): the broker that leads the
    transaction's state partition next writes the markers, and the producer's commit succeeds."""
    pylog_cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    producer = _producer(pylog_cluster, "payer")
    coordinator = _coordinator(pylog_cluster, TRANSACTION_STATE_TOPIC, "payer")
    node = pylog_cluster.nodes[coordinator]
    stalled = next(p for p in range(PARTITIONS) if pylog_cluster.leader(TOPIC, p) != coordinator)
    producer.begin_transaction()
    for index in range(6):
        producer.produce(TOPIC, f"committed-{index}".encode(), partition=index % PARTITIONS)
    producer.flush(60)
    pylog_cluster.kill_broker(pylog_cluster.leader(TOPIC, stalled))  # markers cannot reach it for a while
    committing = threading.Thread(target=producer.commit_transaction, args=(120,), daemon=True)
    committing.start()
    wait_until(
        lambda: (meta := node.broker.transactions.get("payer")) is not None and meta.state is TxnState.PREPARE_COMMIT,
        "the transaction to reach PrepareCommit",
        interval=0.005,
    )
    pylog_cluster.kill_broker(coordinator)
    committing.join(120)
    assert not committing.is_alive(), "commit_transaction did not return"
    survivor = _coordinator(pylog_cluster, TRANSACTION_STATE_TOPIC, "payer")
    assert survivor not in (coordinator,)
    _transaction(producer, ["next"], commit=True)
    assert sorted(_read_committed(pylog_cluster)) == sorted([f"committed-{i}" for i in range(6)] + ["next"])


def test_committed_group_offsets_survive_the_kill_of_the_group_coordinator(pylog_cluster: EmbeddedCluster) -> None:
    pylog_cluster.create_topic("orders", partitions=1, replication_factor=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": pylog_cluster.bootstrap_servers, "log_level": 0})
    for index in range(10):
        producer.produce("orders", f"order-{index}".encode())
    producer.flush(30)

    def consumer() -> confluent_kafka.Consumer:
        made = confluent_kafka.Consumer(
            {
                "bootstrap.servers": pylog_cluster.bootstrap_servers,
                "group.id": "billing",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 500,
                "log_level": 0,
            }
        )
        made.subscribe(["orders"])
        return made

    def next_value(reader: confluent_kafka.Consumer) -> str:
        def value() -> str | None:
            message = reader.poll(0.2)
            return str(message.value().decode()) if message is not None and not message.error() else None

        return wait_until(value, "a record", interval=0)

    first = consumer()
    assert [next_value(first) for _ in range(6)] == [f"order-{i}" for i in range(6)]
    first.commit(asynchronous=False)
    first.close()
    coordinator = _coordinator(pylog_cluster, OFFSETS_TOPIC, "billing")
    pylog_cluster.kill_broker(coordinator)
    second = consumer()
    try:
        assert next_value(second) == "order-6"  # where the group committed, not from the start
    finally:
        second.close()


def test_an_offset_commit_wakes_the_followers_fetches_instead_of_waiting_them_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A commit waits for the in-sync replicas of its __consumer_offsets partition, whose followers'
    fetches are parked at the leader until something is appended: the commit must wake them, as a
    produce does. (It did not: every commit took replica.fetch.wait.max.ms, 500 ms by default.) With
    that wait set to a minute here, a commit that does not wake them runs into the coordinator's
    10 s replication timeout, which the coordinator logs."""
    with EmbeddedCluster(
        brokers=3, log_dir=tmp_path, broker_session_timeout_ms=2_000, replica_fetch_wait_max_ms=60_000
    ) as cluster:
        # One replica: no follower fetches it, so the only fetches are those of __consumer_offsets,
        # which its followers start once the first commit's FindCoordinator creates it.
        cluster.create_topic("orders", partitions=1, replication_factor=1)
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "clerks", "log_level": 0}
        )
        with caplog.at_level(logging.WARNING, logger="kafka_spark.broker.coordinator.group"):
            for offset in (1, 2, 3):
                consumer.commit(offsets=[confluent_kafka.TopicPartition("orders", 0, offset)], asynchronous=False)
        assert [record.getMessage() for record in caplog.records if "not stored" in record.getMessage()] == []
        (position,) = consumer.committed([confluent_kafka.TopicPartition("orders", 0)], timeout=30)
        assert position.offset == 3
        consumer.close()


def test_transactional_consumer_offsets_commit_with_the_transaction_only(pylog_cluster: EmbeddedCluster) -> None:
    """send_offsets_to_transaction: the group's coordinator stages the offsets; they count once the
    transaction commits (an aborted one leaves them as they were), also after that coordinator's
    broker is killed."""
    pylog_cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    producer = _producer(pylog_cluster, "copier")
    group = "copier-group"
    admin = confluent_kafka.Consumer(
        {"bootstrap.servers": pylog_cluster.bootstrap_servers, "group.id": group, "log_level": 0}
    )
    metadata = admin.consumer_group_metadata()

    def send(offset: int, commit: bool) -> None:
        producer.begin_transaction()
        producer.produce(TOPIC, f"copy-{offset}".encode(), partition=0)
        producer.send_offsets_to_transaction([confluent_kafka.TopicPartition(TOPIC, 1, offset)], metadata, 60)
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)

    def committed() -> int:
        return int(admin.committed([confluent_kafka.TopicPartition(TOPIC, 1)], timeout=30)[0].offset)

    try:
        send(5, commit=True)
        assert committed() == 5
        send(9, commit=False)
        assert committed() == 5
        pylog_cluster.kill_broker(_coordinator(pylog_cluster, OFFSETS_TOPIC, group))
        assert committed() == 5
        send(7, commit=True)
        assert committed() == 7
    finally:
        admin.close()
    assert sorted(_read_committed(pylog_cluster)) == ["copy-5", "copy-7"]


def test_the_leader_of_a_keys_partition_is_its_coordinator_and_other_brokers_say_not_coordinator(
    pylog_cluster: EmbeddedCluster,
) -> None:
    keys = [f"id-{index}" for index in range(8)]
    addresses = {node_id: node.bootstrap_servers for node_id, node in pylog_cluster.nodes.items()}
    answers: dict[int, dict[str, int]] = {}
    deadline = time.monotonic() + 60
    for node_id, address in addresses.items():
        with WireClient(address) as client:
            versions = client.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
            assert 27 in {entry.api_key for entry in versions.api_keys}  # WriteTxnMarkers, broker to broker
            assert "transaction.version" not in {feature.name for feature in versions.finalized_features}

            def found_all(client: WireClient = client) -> Any:
                found = client.call(10, 4, {"key_type": 1, "coordinator_keys": keys})
                codes = {int(entry.error_code) for entry in found.coordinators}
                assert codes <= {0, 15}, codes  # 15: COORDINATOR_NOT_AVAILABLE
                return found if codes == {0} else None

            # the first FindCoordinator creates __transaction_state through the controller
            found = wait_until(found_all, "every coordinator found", deadline - time.monotonic())
            answers[node_id] = {entry.key: entry.node_id for entry in found.coordinators}
    assert all(answer == answers[0] for answer in answers.values()), answers
    for key in keys:
        assert answers[0][key] == _coordinator(pylog_cluster, TRANSACTION_STATE_TOPIC, key)
    key = keys[0]
    for node_id, address in addresses.items():
        with WireClient(address) as client:
            init = client.call(
                22,
                4,
                {"transactional_id": key, "transaction_timeout": 60_000, "producer_id": -1, "producer_epoch": -1},
            )
        expected = 0 if node_id == answers[0][key] else 16  # 16: NOT_COORDINATOR
        assert int(init.error_code) == expected, (node_id, init)


def test_a_transaction_left_open_past_its_timeout_is_aborted_on_every_leader(pylog_cluster: EmbeddedCluster) -> None:
    """The producer goes away mid-transaction: its coordinator aborts the transaction after
    transaction.timeout.ms, writing ABORT markers at the partitions other brokers lead, so their
    last stable offsets move on and read_committed consumers get past it."""
    pylog_cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": pylog_cluster.bootstrap_servers,
            "transactional.id": "forgetful",
            "transaction.timeout.ms": 1_000,
            "log_level": 0,
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    for index in range(6):
        producer.produce(TOPIC, f"abandoned-{index}".encode(), partition=index % PARTITIONS)
    producer.flush(60)
    coordinator = pylog_cluster.nodes[_coordinator(pylog_cluster, TRANSACTION_STATE_TOPIC, "forgetful")]
    wait_until(
        lambda: (
            (meta := coordinator.broker.transactions.get("forgetful")) is not None
            and meta.state is TxnState.COMPLETE_ABORT
        ),
        "the coordinator to abort the transaction",
    )
    assert _read_committed(pylog_cluster) == []


def test_coordinator_state_survives_a_restart_of_the_whole_cluster(tmp_path: Path) -> None:
    """A cluster restarted on its log directory: each coordinator loads its partitions again, so
    the group's committed offset is there and the transactional id keeps its producer id (the
    next InitProducerId bumps its epoch instead of starting afresh)."""
    with EmbeddedCluster(brokers=3, log_dir=tmp_path, broker_session_timeout_ms=2_000) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        producer = _producer(cluster, "payer")
        _transaction(producer, [f"kept-{i}" for i in range(3)], commit=True)
        coordinator = cluster.nodes[_coordinator(cluster, TRANSACTION_STATE_TOPIC, "payer")]
        before = coordinator.broker.transactions.get("payer")
        assert before is not None
        producer_id, epoch = before.producer_id, before.producer_epoch
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "keeper", "log_level": 0}
        )
        consumer.commit(offsets=[confluent_kafka.TopicPartition(TOPIC, 0, 2)], asynchronous=False)
        consumer.close()
        del producer
    with EmbeddedCluster(brokers=3, log_dir=tmp_path, broker_session_timeout_ms=2_000) as cluster:
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "keeper", "log_level": 0}
        )
        try:
            assert consumer.committed([confluent_kafka.TopicPartition(TOPIC, 0)], timeout=60)[0].offset == 2
        finally:
            consumer.close()
        producer = _producer(cluster, "payer")
        after = cluster.nodes[_coordinator(cluster, TRANSACTION_STATE_TOPIC, "payer")].broker.transactions.get("payer")
        assert after is not None and (after.producer_id, after.producer_epoch) == (producer_id, epoch + 1)
        _transaction(producer, ["again"], commit=True)
        assert sorted(_read_committed(cluster)) == sorted([f"kept-{i}" for i in range(3)] + ["again"])


def test_leader_and_follower_describe_a_partitions_producers_and_its_open_transaction(
    pylog_cluster: EmbeddedCluster,
) -> None:
    """DescribeProducers (kafka-transactions describe-producers, find-hanging): the leader answers
    from its producer state, a follower from its own copy of the log, and a broker without a
    replica says NOT_LEADER_OR_FOLLOWER, as in Kafka."""
    pylog_cluster.create_topic("ledger", partitions=1, replication_factor=2)
    replicas = pylog_cluster.wait_for_isr("ledger", 0)
    leader = pylog_cluster.leader("ledger", 0)
    (follower,) = [node for node in replicas if node != leader]
    (outsider,) = [node for node in pylog_cluster.nodes if node not in replicas]
    producer = _producer(pylog_cluster, "ledger-writer")
    producer.begin_transaction()
    for index in range(4):
        producer.produce("ledger", f"entry-{index}".encode(), partition=0)
    assert producer.flush(60) == 0  # acks=all: the follower has the records

    def describe(node_id: int) -> tuple[int, list[tuple[int, int, int, int]]]:
        with WireClient(pylog_cluster.nodes[node_id].bootstrap_servers) as client:
            answer = client.call(61, 0, {"topics": [{"name": "ledger", "partition_indexes": [0]}]})
        (partition,) = answer.topics[0].partitions
        return int(partition.error_code), [
            (p.producer_epoch, p.last_sequence, p.coordinator_epoch, p.current_txn_start_offset)
            for p in partition.active_producers
        ]

    open_transaction = (0, [(0, 3, -1, 0)])  # epoch 0, sequences 0-3, no marker yet, open from offset 0
    assert describe(leader) == open_transaction
    assert describe(follower) == open_transaction
    assert describe(outsider) == (6, [])  # NOT_LEADER_OR_FOLLOWER
    producer.commit_transaction(60)

    def marked() -> dict[int, tuple[int, list]] | None:  # the marker reaches the follower with its next fetch
        answers = {node: describe(node) for node in (leader, follower)}
        return answers if all(producers and producers[0][3] == -1 for _, producers in answers.values()) else None

    answers = wait_until(marked, "the marker on the leader and the follower", interval=0.1)
    for code, producers in answers.values():
        (epoch, last_sequence, coordinator_epoch, start) = producers[0]
        assert (code, epoch, last_sequence, start) == (0, 0, 3, -1)
        assert coordinator_epoch >= 0  # read from the COMMIT marker


def test_consumer_protocol_members_join_the_next_coordinator_after_a_kill(pylog_cluster: EmbeddedCluster) -> None:
    """KIP-848 groups on a cluster: the members of a group.protocol=consumer group find the next
    coordinator when the broker leading the group's offsets partition is killed, and go on there
    with the ids and epochs they had: the membership is in ``__consumer_offsets`` (replicated with
    the offsets), which the next coordinator replays, so their heartbeats and synchronous commits
    with their current epochs are taken at once, and every record is read once."""
    pylog_cluster.create_topic("events", partitions=6, replication_factor=3)
    producer = confluent_kafka.Producer({"bootstrap.servers": pylog_cluster.bootstrap_servers, "log_level": 0})

    def produce(first: int, last: int) -> None:
        for index in range(first, last):
            producer.produce("events", b"%d" % index, partition=index % 6)
        assert producer.flush(60) == 0

    def watcher(name: str) -> confluent_kafka.Consumer:
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": pylog_cluster.bootstrap_servers,
                "group.id": "watchers",
                "group.protocol": "consumer",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 500,
                "log_level": 0,
            }
        )
        consumer.subscribe(["events"])
        return consumer

    consumers = [watcher(f"watcher-{index}") for index in range(2)]
    read: collections.Counter[bytes] = collections.Counter()

    def poll(polled: list[confluent_kafka.Consumer]) -> None:
        for consumer in polled:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None:
                read[message.value()] += 1
                consumer.commit(message, asynchronous=False)

    def read_until(count: int) -> None:
        def read_enough() -> bool:
            if len(read) >= count:
                return True
            poll(consumers)
            return False

        wait_until(read_enough, lambda: f"{count} records, read {len(read)}", 90, interval=0)

    def stable_members(node_id: int) -> tuple[int, dict[str, int]]:
        """The group's epoch and its members' epochs, as its coordinator describes them once the
        group is Stable (ConsumerGroupDescribe)."""
        with WireClient(pylog_cluster.nodes[node_id].bootstrap_servers) as client:

            def stable() -> Any:
                poll(consumers)
                described = client.call(69, 0, {"group_ids": ["watchers"], "include_authorized_operations": False})
                (group,) = described.groups
                return group if group.error_code == 0 and group.group_state == "Stable" else None

            group = wait_until(stable, "the group to be Stable at its coordinator", 90, interval=0)
        return group.group_epoch, {member.member_id: member.member_epoch for member in group.members}

    produce(0, 300)
    read_until(300)
    visitor = watcher("visitor")  # a third member comes and goes: the group's epoch moves past 2,
    wait_until(
        lambda: poll([*consumers, visitor]) or visitor.assignment(), "partitions for the visitor", 90, interval=0
    )
    visitor.close()
    coordinator = _coordinator(pylog_cluster, OFFSETS_TOPIC, "watchers")
    before = stable_members(coordinator)
    # ... which two members joining afresh would reach (epochs 1 and 2): a rejoin would show.
    assert before[0] > 2 and len(before[1]) == 2 and min(before[1].values()) > 2, before
    pylog_cluster.kill_broker(coordinator)
    produce(300, 360)
    read_until(360)
    assert set(read.values()) == {1}, [value for value, count in read.items() if count > 1]
    successor = _coordinator(pylog_cluster, OFFSETS_TOPIC, "watchers")
    assert successor != coordinator
    # Nobody joined again: the same members with the same epochs, and the group's epoch unmoved.
    assert stable_members(successor) == before
    for consumer in consumers:
        consumer.close()
