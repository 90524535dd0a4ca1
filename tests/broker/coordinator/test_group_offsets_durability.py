"""Committed offsets survive a broker restart (replayed from __consumer_offsets); deleted groups
and topics stay deleted (tombstones); `pylog groups list|describe` report offsets and lag the
way kafka-consumer-groups.sh does."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.coordinator.group_offsets import (
    CommittedOffset,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kafka_spark.common.topic_partition import TopicPartition as TP
from tests.support.waiting import wait_until


def on_loop(broker: EmbeddedBroker, function, *args):
    """Run a coordinator call on the broker's event loop (it is not thread-safe)."""

    async def call():
        return function(*args)

    return asyncio.run_coroutine_threadsafe(call(), broker.broker.loop).result(10)


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in counts.items():
        for index in range(count):
            producer.produce(topic, value=b"%d" % index, partition=partition)
    assert producer.flush(30) == 0


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        result = consumer.commit(
            offsets=[TopicPartition(t, p, o, metadata="m") for (t, p), o in offsets.items()], asynchronous=False
        )
        assert all(tp.error is None for tp in result)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(t, p) for t, p in partitions], timeout=30)
        return {(tp.topic, tp.partition): tp.offset for tp in found}
    finally:
        consumer.close()


def join(consumer: Consumer, topic: str) -> None:
    """Subscribe ``consumer`` to ``topic`` and poll until the group has assigned it partitions."""
    consumer.subscribe([topic])

    def assigned() -> bool:
        if consumer.assignment():
            return True
        consumer.poll(0.2)
        return False

    wait_until(assigned, "partitions for the consumer", 30, interval=0)


def pylog(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYLOG_HOME=os.environ.get("PYLOG_HOME", "/nonexistent"))
    return subprocess.run(
        [sys.executable, "-m", "kafka_spark.cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_offset_commit_records_use_kafkas_key_and_value_layouts():
    key = encode_key("g", TP("t", 3))
    assert key == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert decode_key(key) == ("g", TP("t", 3))
    value = CommittedOffset(42, 0, "meta", 1_700_000_000_000)
    assert encode_value(value)[:2] == b"\x00\x03"
    assert decode_value(encode_value(value)) == value
    assert decode_key(b"\x00\x02\x00\x01g") is None  # group metadata records are skipped


def test_committed_offsets_survive_a_restart_and_deletions_stay_deleted(tmp_path):
    log_dir = tmp_path / "data"
    with EmbeddedBroker(log_dir=log_dir, register=False) as broker:
        bootstrap = broker.bootstrap_servers
        broker.create_topic("orders", partitions=3)
        broker.create_topic("scratch", partitions=1)
        produce(bootstrap, "orders", {0: 10, 1: 10, 2: 10})
        commit(bootstrap, "billing", {("orders", 0): 4, ("orders", 1): 10, ("scratch", 0): 0})
        commit(bootstrap, "billing", {("orders", 0): 6})  # the newer commit wins on replay
        commit(bootstrap, "audit", {("orders", 2): 1})
        deleted = pylog("groups", "delete", "audit", "--bootstrap-server", bootstrap)  # DeleteGroups
        assert deleted.returncode == 0 and "Deleted consumer group 'audit'." in deleted.stdout, deleted.stderr
        broker.delete_topic("scratch")

    with EmbeddedBroker(log_dir=log_dir, register=False) as broker:
        bootstrap = broker.bootstrap_servers
        partitions = [("orders", 0), ("orders", 1), ("orders", 2)]
        assert committed(bootstrap, "billing", partitions) == {
            ("orders", 0): 6,
            ("orders", 1): 10,
            ("orders", 2): -1001,
        }
        assert committed(bootstrap, "audit", partitions) == {p: -1001 for p in partitions}
        replayed = on_loop(broker, broker.broker.groups.committed, "billing")
        assert set(replayed) == {TP("orders", 0), TP("orders", 1)}  # scratch-0 was tombstoned with its topic
        # confluent-kafka-python sends metadata with its C string's NUL terminator; stored verbatim.
        assert (replayed[TP("orders", 0)].offset, replayed[TP("orders", 0)].metadata) == (6, "m\x00")

        topics = pylog("topics", "list", "--bootstrap-server", bootstrap)
        assert topics.stdout.split() == ["__consumer_offsets", "orders"]  # listed as kafka-topics --list does

        listed = pylog("groups", "list", "--bootstrap-server", bootstrap)
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.split() == ["billing"]

        described = pylog("groups", "describe", "billing", "--bootstrap-server", bootstrap)
        assert described.returncode == 0, described.stderr
        assert "Consumer group 'billing' has no active members." in described.stdout
        header, *rows = [
            line.split() for line in described.stdout.splitlines() if line.strip() and "Consumer" not in line
        ]
        assert header == [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
        assert rows == [
            ["billing", "orders", "0", "6", "10", "4", "-", "-", "-"],
            ["billing", "orders", "1", "10", "10", "0", "-", "-", "-"],
        ]

        missing = pylog("groups", "describe", "nobody", "--bootstrap-server", bootstrap)
        assert missing.returncode == 1 and "does not exist" in missing.stderr


def test_a_deleted_topics_offset_tombstones_are_fsynced_as_commits_are(tmp_path):
    """The tombstones a topic's deletion writes for its committed offsets are fsynced like the
    commits they cancel (the offsets topic flushes on acks=all): a crash of the machine right
    after the deletion cannot bring the deleted topic's offsets back. Both ways of deleting (the
    embedded broker's call and a client's DeleteTopics), for every group that committed."""
    from confluent_kafka.admin import AdminClient

    with EmbeddedBroker(log_dir=tmp_path / "data", register=False) as broker:
        bootstrap = broker.bootstrap_servers
        broker.create_topic("scratch", partitions=2)
        broker.create_topic("temp", partitions=1)
        broker.create_topic("kept", partitions=1)
        commit(bootstrap, "billing", {("scratch", 0): 3, ("scratch", 1): 5})
        commit(bootstrap, "audit", {("scratch", 1): 2, ("temp", 0): 1, ("kept", 0): 4})
        logs = broker.broker.logs
        partitions = range(logs.topics()["__consumer_offsets"].partitions)
        offsets_logs = [logs.get_log("__consumer_offsets", p) for p in partitions]
        group_commit = broker.broker.group_commit

        def durable() -> dict[int, tuple[int, int]]:
            """(fsynced up to, log end) of every offsets partition holding records."""
            return {
                log.partition: (on_loop(broker, group_commit.durable_offset, log), log.log_end_offset)
                for log in offsets_logs
                if log.log_end_offset > 0
            }

        def wait_fsynced(written: int) -> None:
            wait_until(
                lambda: all(fsynced >= end for fsynced, end in durable().values()),
                lambda: f"the tombstones fsynced: {durable()}",
                30,
            )
            assert sum(end for _, end in durable().values()) == written

        wait_fsynced(5)  # the commits were fsynced (acks=all)
        broker.delete_topic("scratch")
        wait_fsynced(5 + 3)  # a tombstone per committed partition of the topic, in both groups
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.delete_topics(["temp"])["temp"].result(30)
        wait_fsynced(5 + 3 + 1)
        assert on_loop(broker, broker.broker.groups.committed, "billing") == {}
        assert set(on_loop(broker, broker.broker.groups.committed, "audit")) == {TP("kept", 0)}


def test_describe_shows_the_active_member_and_its_assignment(pylog_broker, pylog_topic):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=2)
    produce(bootstrap, topic, {0: 5, 1: 3})
    group = f"live-{topic}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "reader-1",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    try:
        consumer.subscribe([topic])
        seen = 0

        def read_partition_0() -> bool:
            nonlocal seen
            message = consumer.poll(0.2)
            if message is not None and not message.error() and message.partition() == 0:
                seen += 1
            return seen >= 5

        wait_until(read_partition_0, lambda: f"5 records of partition 0, read {seen}", 30, interval=0)
        assert seen == 5
        consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
        described = pylog("groups", "describe", group, "--bootstrap-server", bootstrap)
        assert described.returncode == 0, described.stderr
        rows = [line.split() for line in described.stdout.splitlines() if line.startswith(group)]
        by_partition = {row[2]: row for row in rows}
        assert by_partition["0"][3:6] == ["5", "5", "0"]
        assert by_partition["1"][3:6] == ["-", "3", "-"]  # assigned, nothing committed yet
        assert all(row[8] == "reader-1" and row[6].startswith("reader-1-") for row in rows)
    finally:
        consumer.close()


def test_delete_groups_as_kafkas_admin_client_asks(pylog_broker, pylog_topic):
    """DeleteGroups through confluent-kafka's admin client and the CLI: an active group is refused
    (NON_EMPTY_GROUP), an unknown one is GROUP_ID_NOT_FOUND, an idle one goes with its offsets."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=1)
    produce(bootstrap, topic, {0: 3})
    commit(bootstrap, f"idle-{topic}", {(topic, 0): 2})
    active = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"active-{topic}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        join(active, topic)
        futures = admin.delete_consumer_groups([f"active-{topic}", f"idle-{topic}", "never-was"], request_timeout=30)
        with pytest.raises(KafkaException) as refused:
            futures[f"active-{topic}"].result(timeout=30)
        assert refused.value.args[0].name() == "NON_EMPTY_GROUP"
        futures[f"idle-{topic}"].result(timeout=30)
        with pytest.raises(KafkaException) as unknown:
            futures["never-was"].result(timeout=30)
        assert unknown.value.args[0].name() == "GROUP_ID_NOT_FOUND"
    finally:
        active.close()
    assert committed(bootstrap, f"idle-{topic}", [(topic, 0)]) == {(topic, 0): -1001}
    listed = {group.group_id for group in admin.list_consumer_groups(request_timeout=30).result(timeout=30).valid}
    assert f"idle-{topic}" not in listed and f"active-{topic}" in listed

    refused_cli = pylog("groups", "delete", "never-was", "--bootstrap-server", bootstrap)
    assert refused_cli.returncode == 1 and "does not exist" in refused_cli.stderr


def test_reset_offsets_plans_then_commits_as_kafka_consumer_groups_does(pylog_broker, pylog_topic):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap})
    base = 1_700_000_000_000
    for partition in range(2):
        for index in range(10):  # record i at base + i seconds
            producer.produce(topic, value=b"%d" % index, partition=partition, timestamp=base + 1000 * index)
    assert producer.flush(30) == 0
    group = f"reset-{topic}"
    tps = [(topic, 0), (topic, 1)]
    commit(bootstrap, group, {(topic, 0): 8, (topic, 1): 9})

    def reset(*how: str) -> subprocess.CompletedProcess[str]:
        result = pylog("groups", "reset-offsets", group, *how, "--bootstrap-server", bootstrap)
        assert result.returncode == 0, result.stderr
        return result

    planned = reset("--topic", topic, "--to-earliest")  # a dry run
    assert [line.split()[2:] for line in planned.stdout.splitlines() if line.startswith(group)] == [
        ["0", "0"],
        ["1", "0"],
    ]
    assert "Dry run" in planned.stdout and committed(bootstrap, group, tps) == {tps[0]: 8, tps[1]: 9}

    reset("--topic", topic, "--to-earliest", "--execute")
    assert committed(bootstrap, group, tps) == {tps[0]: 0, tps[1]: 0}
    reset("--topic", f"{topic}:1", "--to-offset", "25", "--execute")  # past the end: the end
    assert committed(bootstrap, group, tps) == {tps[0]: 0, tps[1]: 10}
    reset("--topic", topic, "--shift-by", "-3", "--execute")  # 0 - 3 stays at 0
    assert committed(bootstrap, group, tps) == {tps[0]: 0, tps[1]: 7}
    reset("--topic", topic, "--to-datetime", "2023-11-14T22:13:24.5", "--execute")  # base + 4.5 s
    assert committed(bootstrap, group, tps) == {tps[0]: 5, tps[1]: 5}
    reset("--topic", topic, "--to-latest", "--execute")
    assert committed(bootstrap, group, tps) == {tps[0]: 10, tps[1]: 10}

    refused = pylog(
        "groups", "reset-offsets", group, "--topic", f"{topic}:7", "--to-earliest", "--bootstrap-server", bootstrap
    )
    assert refused.returncode == 1 and "has no partition(s) 7" in refused.stderr
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000})
    try:
        join(member, topic)
        busy = pylog(
            "groups",
            "reset-offsets",
            group,
            "--topic",
            topic,
            "--to-earliest",
            "--execute",
            "--bootstrap-server",
            bootstrap,
        )
        assert busy.returncode == 1 and "active member" in busy.stderr
    finally:
        member.close()
    assert committed(bootstrap, group, tps) == {tps[0]: 10, tps[1]: 10}


def test_delete_group_offsets_spares_topics_the_group_subscribes_to(pylog_broker, pylog_topic):
    """OffsetDelete, through kafka-python's admin client (confluent-kafka's Python binding has no
    call for it): Kafka's rules for a running group."""
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError

    bootstrap = pylog_broker.bootstrap_servers
    read, other = pylog_topic(partitions=2), pylog_topic(partitions=1)
    produce(bootstrap, read, {0: 3, 1: 3})
    group = f"trim-{read}"
    commit(bootstrap, group, {(read, 0): 3, (read, 1): 3, (other, 0): 0})
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    member = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000, "enable.auto.commit": False}
    )
    try:
        assert admin.delete_group_offsets(group, [KpTopicPartition(read, 0)]) == {KpTopicPartition(read, 0): NoError}
        assert committed(bootstrap, group, [(read, 0), (read, 1)]) == {(read, 0): -1001, (read, 1): 3}
        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets("no-such-group", [KpTopicPartition(read, 0)])

        join(member, read)
        # The member reads `read`: its offset stays. `other` it does not: that one may go.
        assert admin.delete_group_offsets(group, [KpTopicPartition(read, 1), KpTopicPartition(other, 0)]) == {
            KpTopicPartition(read, 1): GroupSubscribedToTopicError,
            KpTopicPartition(other, 0): NoError,
        }
    finally:
        member.close()
        admin.close()
    assert committed(bootstrap, group, [(read, 1), (other, 0)]) == {(read, 1): 3, (other, 0): -1001}


def test_cli_delete_offsets_as_kafka_consumer_groups_does(pylog_broker, pylog_topic):
    """`pylog groups delete-offsets`: Kafka's table and rules, against a group with a member."""
    bootstrap = pylog_broker.bootstrap_servers
    read, stale = pylog_topic(partitions=2), pylog_topic(partitions=2)
    produce(bootstrap, read, {0: 3, 1: 3})
    group = f"cli-trim-{read}"
    commit(bootstrap, group, {(read, 0): 3, (read, 1): 3, (stale, 0): 0, (stale, 1): 0})

    done = pylog("groups", "delete-offsets", group, "--topic", f"{stale}:1", "--bootstrap-server", bootstrap)
    assert done.returncode == 0, done.stderr
    assert f"Request succeed for deleting offsets with topic {stale} group {group}" in done.stdout
    assert [line.split() for line in done.stdout.splitlines() if line.startswith(stale)] == [[stale, "1", "Successful"]]
    assert committed(bootstrap, group, [(stale, 0), (stale, 1)]) == {(stale, 0): 0, (stale, 1): -1001}

    member = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000, "enable.auto.commit": False}
    )
    try:
        join(member, read)
        refused = pylog("groups", "delete-offsets", group, "--topic", read, "--bootstrap-server", bootstrap)
        assert refused.returncode == 1
        assert "Request failed" in refused.stdout and "the group is subscribed to the topic" in refused.stdout
        assert (
            pylog("groups", "delete-offsets", group, "--topic", stale, "--bootstrap-server", bootstrap).returncode == 0
        )
    finally:
        member.close()
    assert committed(bootstrap, group, [(read, 0), (read, 1), (stale, 0)]) == {
        (read, 0): 3,
        (read, 1): 3,
        (stale, 0): -1001,
    }

    missing = pylog("groups", "delete-offsets", "no-such-group", "--topic", read, "--bootstrap-server", bootstrap)
    assert missing.returncode == 1 and "consumer group 'no-such-group' does not exist" in missing.stderr
    no_topic = pylog("groups", "delete-offsets", group, "--topic", "no-such-topic", "--bootstrap-server", bootstrap)
    assert no_topic.returncode == 1 and "topic 'no-such-topic' does not exist" in no_topic.stderr
