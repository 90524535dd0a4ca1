"""The membership of consumer-protocol groups (KIP-848) survives a restart of the broker, as Kafka's
does: the coordinator writes it to ``__consumer_offsets`` with Kafka's records and replays it when
it loads the partition, so members go on with their ids, epochs and partitions; members that left
and deleted groups stay gone (tombstones); a log written before membership was kept (offsets
only) still loads. (A coordinator moving on a cluster: tests/broker/cluster/test_transactions.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.coordinator.consumer_group_log import RECORD_TYPES, record_type
from kafka_spark.broker.coordinator.group_offsets import _events
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC
from tests.broker.coordinator.test_consumer_group import TOPIC, Member
from tests.broker.coordinator.test_group_offsets_durability import commit, committed, on_loop
from tests.support.waiting import wait_until


def start(log_dir: Path) -> EmbeddedBroker:
    return EmbeddedBroker(log_dir=log_dir, register=False, group_consumer_heartbeat_interval_ms=500)


def describe(member: Member) -> Any:
    (group,) = member.client.call(69, 1, {"group_ids": ["g"], "include_authorized_operations": False}).groups
    return group


def state(group: Any) -> tuple[Any, ...]:
    """What a restart must keep of a described group: its state and epochs, and each member's id,
    epoch, subscription and assignment."""
    return (
        int(group.error_code),
        group.group_state,
        group.group_epoch,
        group.assignment_epoch,
        group.assignor_name,
        sorted(
            (
                m.member_id,
                m.member_epoch,
                m.client_id,
                tuple(m.subscribed_topic_names),
                tuple(sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)),
                tuple(sorted(p for tp in m.target_assignment.topic_partitions for p in tp.partitions)),
            )
            for m in group.members
        ),
    )


def again(broker: EmbeddedBroker, member: Member) -> Member:
    """``member`` on a new connection to ``broker`` (restarted on another port), with its epoch and
    partitions."""
    back = Member(broker, member.member_id)
    back.epoch, back.owned = member.epoch, member.owned
    return back


def commit_as(member: Member, epoch: int, partition: int = 0) -> int:
    answer = member.client.call(
        8,
        9,
        {
            "group_id": "g",
            "generation_id_or_member_epoch": epoch,
            "member_id": member.member_id,
            "group_instance_id": None,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "committed_offset": 7,
                            "committed_leader_epoch": -1,
                            "committed_metadata": None,
                        }
                    ],
                }
            ],
        },
    )
    return int(answer.topics[0].partitions[0].error_code)


def assignment_epochs(broker: EmbeddedBroker, member_id: str) -> dict[tuple[str, int], int]:
    """The epoch each partition the member holds was assigned at, as the coordinator keeps it."""
    return on_loop(broker, lambda: dict(broker.broker.groups.consumer.group("g").members[member_id].assignment_epochs))


def consumer_group_records(broker: EmbeddedBroker) -> list[tuple[int, bool]]:
    """``(record type, tombstone)`` of every consumer-group record in ``__consumer_offsets``."""
    found = []
    for partition in range(broker.broker.logs.topic_info(OFFSETS_TOPIC).partitions):
        for _, _, key, value in _events(broker.broker.logs.get_log(OFFSETS_TOPIC, partition)):
            if key is not None and record_type(key) in RECORD_TYPES:
                found.append((record_type(key), value is None))
    return found


def test_a_restarted_broker_keeps_its_consumer_groups_members_and_epochs(tmp_path):
    log_dir = tmp_path / "data"
    with start(log_dir) as broker:
        broker.create_topic(TOPIC, partitions=6)
        one, two, leaver = Member(broker, "one"), Member(broker, "two"), Member(broker, "leaver")
        for member in (one, two, leaver):
            assert member.join().error_code == 0
        assert leaver.heartbeat(member_epoch=-1).error_code == 0  # leaves: its records are tombstoned

        def settled() -> bool:
            for member in (one, two):
                assert member.heartbeat(owned=member.owned).error_code == 0
            return describe(one).group_state == "Stable"

        wait_until(settled, lambda: f"the group to settle: {describe(one)}", 30)
        before = state(describe(one))
        assert [m[0] for m in before[-1]] == ["one", "two"] and before[1] == "Stable", before
        assert commit_as(one, one.epoch) == 0
        # The log holds the whole state in memory: a full comparison finds nothing left to write.
        coordinator = broker.broker.groups
        unwritten = on_loop(
            broker,
            coordinator._consumer_records.changes,
            "g",
            coordinator.consumer.group("g"),
            coordinator._topic_ids(),
        )
        assert unwritten == []
        held = assignment_epochs(broker, "one")
        assert set(held) == {(TOPIC, p) for p in one.owned} and all(0 < e <= one.epoch for e in held.values()), held
        for member in (one, two, leaver):
            member.close()
        assert {kind for kind, tombstone in consumer_group_records(broker) if tombstone} == {5, 7, 8}

    with start(log_dir) as broker:
        one, two = again(broker, one), again(broker, two)
        assert state(describe(one)) == before  # the same members, epochs and partitions
        epochs = (one.epoch, two.epoch)
        for member in (one, two):
            answer = member.heartbeat(owned=member.owned)
            assert (answer.error_code, answer.member_epoch) == (0, member.epoch)
        assert (one.epoch, two.epoch) == epochs  # nobody joined again
        assert commit_as(one, one.epoch) == 0  # a commit with the member's epoch is taken at once
        # Each partition keeps the epoch it was assigned at (KIP-1251): an older epoch commits it
        # from that epoch on, and is fenced (STALE_MEMBER_EPOCH) before it.
        assert assignment_epochs(broker, "one") == held
        (_, partition), since = min(held.items(), key=lambda item: (item[1], item[0]))
        assert commit_as(one, since, partition) == 0
        assert commit_as(one, since - 1, partition) == 113
        for member in (one, two):
            assert member.heartbeat(member_epoch=-1).error_code == 0
        assert int(one.client.call(42, 2, {"groups_names": ["g"]}).results[0].error_code) == 0  # DeleteGroups
        one.close()
        two.close()

    with start(log_dir) as broker:
        probe = Member(broker, "probe")
        assert int(describe(probe).error_code) == 69  # GROUP_ID_NOT_FOUND: deleted stays deleted
        probe.close()
        # Kafka's tombstones of a deleted group: its assignment epoch, subscribed partitions and epoch, last.
        assert consumer_group_records(broker)[-3:] == [(6, True), (4, True), (3, True)]
        assert broker.broker.groups.consumer.group("g") is None


def test_offsets_written_without_membership_records_still_load(tmp_path):
    """A log written before pylog kept consumer groups' membership holds offset commits only: they
    load as before, and a member of the consumer protocol joins the group from epoch 0."""
    log_dir = tmp_path / "data"
    with start(log_dir) as broker:
        broker.create_topic(TOPIC, partitions=6)
        commit(broker.bootstrap_servers, "g", {(TOPIC, 0): 4})  # an offset commit record, nothing else
        assert consumer_group_records(broker) == []

    with start(log_dir) as broker:
        assert committed(broker.bootstrap_servers, "g", [(TOPIC, 0)]) == {(TOPIC, 0): 4}
        assert broker.broker.groups.consumer.group("g") is None
        member = Member(broker, "m")
        answer = member.join()
        assert (answer.error_code, answer.member_epoch) == (0, 1)
        assert len(member.owned) == 6
        member.close()
