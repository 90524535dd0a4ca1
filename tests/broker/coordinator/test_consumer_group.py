"""Consumer groups of KIP-848's protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe): librdkafka
consumers with ``group.protocol=consumer`` sharing a topic, and the coordinator's rules over the
wire, step by step: epochs, revocation before assignment, fencing, validation, sessions, offsets,
and the id space shared with classic groups. (Kafka's Java consumer against pylog and Apache Kafka:
tests/interop/test_java_clients.py.)"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.coordinator.assignors import range_assignment, uniform_assignment
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

TOPIC = "orders"


@pytest.fixture
def broker(tmp_path, pylog_broker_factory):
    embedded = pylog_broker_factory(log_dir=tmp_path, group_consumer_heartbeat_interval_ms=500)
    embedded.create_topic(TOPIC, partitions=6)
    yield embedded


def topic_id(broker: EmbeddedBroker, name: str = TOPIC):
    return broker.broker.logs.topic_info(name).topic_id


class Member:
    """One member speaking ConsumerGroupHeartbeat v1 over its own connection, subscribing to
    ``topic_name`` (``topic``: its id, when ``broker`` is not an EmbeddedBroker that has it)."""

    def __init__(
        self,
        broker: EmbeddedBroker,
        member_id: str,
        group: str = "g",
        topic: uuid.UUID | None = None,
        topic_name: str = TOPIC,
    ) -> None:
        self.broker, self.member_id, self.group = broker, member_id, group
        self.topic, self.topic_name = topic, topic_name
        self.client = WireClient(broker.bootstrap_servers)
        self.epoch = 0
        self.owned: set[int] = set()

    def heartbeat(self, *, owned: set[int] | None = None, **fields: Any) -> Any:
        body = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": datetime.timedelta(milliseconds=fields.pop("rebalance_timeout_ms", -1)),
            "subscribed_topic_names": None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": None
            if owned is None
            else [{"topic_id": self.topic or topic_id(self.broker, self.topic_name), "partitions": sorted(owned)}]
            if owned
            else [],
            **fields,
        }
        answer = self.client.call(68, 1, body)
        if answer.error_code == 0:
            self.epoch = answer.member_epoch
            if answer.assignment is not None:
                self.owned = {p for tp in answer.assignment.topic_partitions for p in tp.partitions}
        return answer

    def join(self, topics: list[str] | None = None, **fields: Any) -> Any:
        fields.setdefault("subscribed_topic_names", topics if topics is not None else [self.topic_name])
        return self.heartbeat(owned=set(), rebalance_timeout_ms=fields.pop("rebalance_timeout_ms", 30_000), **fields)

    def close(self) -> None:
        self.client.close()


def test_librdkafka_consumers_share_a_topic_and_take_over_a_leavers_partitions(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for index in range(600):
        producer.produce(TOPIC, b"%d" % index, partition=index % 6)
    assert producer.flush(30) == 0

    def consumer(name: str) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "readers",
                "group.protocol": "consumer",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )

    def hand_over(member: Consumer, partitions: list) -> None:
        """Commit what was read of partitions being revoked, so that their next owner goes on from there."""
        positions = [tp for tp in member.position(partitions) if tp.offset >= 0]
        if positions:
            member.commit(offsets=positions, asynchronous=False)

    first, second = consumer("first"), consumer("second")
    read: dict[bytes, list[str]] = {}
    partitions_read: set[int] = set()

    def poll(name: str, member: Consumer) -> None:
        message = member.poll(0.05)
        if message is not None and message.error() is None:
            read.setdefault(message.value(), []).append(name)
            partitions_read.add(message.partition())

    first.subscribe([TOPIC], on_revoke=hand_over)
    deadline = time.monotonic() + 60  # one bound for both waits

    def read_by_first() -> bool:  # first owns all six partitions and has read from each
        poll("first", first)
        return len(partitions_read) == 6

    wait_until(read_by_first, lambda: (partitions_read, first.assignment()), deadline - time.monotonic(), interval=0)
    assert len(first.assignment()) == 6
    second.subscribe([TOPIC], on_revoke=hand_over)

    def read_by_both() -> bool:
        poll("first", first)
        poll("second", second)
        return len(read) >= 600 and bool(first.assignment() and second.assignment())

    wait_until(
        read_by_both,
        lambda: (len(read), first.assignment(), second.assignment()),
        deadline - time.monotonic(),
        interval=0,
    )
    assert all(len(readers) == 1 for readers in read.values())  # every record once
    mine = {tp.partition for tp in first.assignment()}
    theirs = {tp.partition for tp in second.assignment()}
    assert mine | theirs == set(range(6)) and not mine & theirs and len(mine) == len(theirs) == 3
    hand_over(first, first.assignment())
    hand_over(second, second.assignment())  # (nothing, if first had read all of second's share)
    second.close()

    def first_owns_all() -> bool:
        if len(first.assignment()) == 6:
            return True
        first.poll(0.05)
        return False

    wait_until(first_owns_all, first.assignment, 30, interval=0)
    for index in range(600, 606):
        producer.produce(TOPIC, b"%d" % index, partition=index % 6)
    assert producer.flush(30) == 0
    later: list[bytes] = []

    def read_later() -> bool:  # from the committed offsets: nothing read twice
        message = first.poll(0.05)
        if message is not None and message.error() is None:
            later.append(message.value())
        return len(later) >= 6

    wait_until(read_later, lambda: later, 30, interval=0)
    assert sorted(later) == [b"%d" % index for index in range(600, 606)]
    first.close()


def test_partitions_move_only_once_revoked_and_epochs_fence_zombies(broker):
    one, two = Member(broker, "member-one"), Member(broker, "member-two")
    answer = one.join()
    assert (answer.error_code, answer.member_id, answer.member_epoch) == (0, "member-one", 1)
    assert answer.heartbeat_interval == datetime.timedelta(milliseconds=500)
    assert one.owned == set(range(6))

    assert two.join().member_epoch == 2 and two.owned == set()  # its target is still one's
    answer = one.heartbeat(owned=one.owned)  # told to give three up, at its old epoch
    assert answer.member_epoch == 1 and len(one.owned) == 3
    given_up = set(range(6)) - one.owned
    assert two.heartbeat(owned=set()).member_epoch == 2 and two.owned == set()  # not released yet
    assert one.heartbeat(owned=one.owned).member_epoch == 2  # revoked: now at the group's epoch
    assert two.heartbeat(owned=set()).error_code == 0 and two.owned == given_up

    assert one.heartbeat(owned=one.owned, member_epoch=3).error_code == 110  # FENCED_MEMBER_EPOCH: ahead
    lost = one.heartbeat(owned=one.owned, member_epoch=1)  # the previous epoch, same partitions: a lost answer
    assert (lost.error_code, lost.member_epoch) == (0, 2)
    assert one.heartbeat(owned=set(range(6)), member_epoch=1).error_code == 110  # claims partitions it lost
    stranger = Member(broker, "stranger")
    stranger.epoch = 2
    assert stranger.heartbeat().error_code == 25  # UNKNOWN_MEMBER_ID

    described = one.client.call(69, 1, {"group_ids": ["g", "nobody"], "include_authorized_operations": False})
    group, nobody = described.groups
    assert (group.group_state, group.group_epoch, group.assignment_epoch, group.assignor_name) == (
        "Stable",
        2,
        2,
        "uniform",
    )
    assert {m.member_id: sorted(m.assignment.topic_partitions[0].partitions) for m in group.members} == {
        "member-one": sorted(one.owned),
        "member-two": sorted(two.owned),
    }
    assert (int(nobody.error_code), nobody.error_message) == (69, "Group nobody not found.")

    assert one.heartbeat(member_epoch=-1).member_epoch == -1  # leaves
    answer = two.heartbeat(owned=two.owned)
    assert answer.member_epoch == 3 and two.owned == set(range(6))
    for member in (one, two, stranger):
        member.close()


def test_heartbeats_kafka_refuses_are_refused_with_the_reason(broker):
    member = Member(broker, "m")
    cases = [
        ({"group_id": ""}, 42, "GroupId can't be empty."),
        ({"subscribed_topic_names": None}, 42, "SubscribedTopicNames or SubscribedTopicRegex must be set"),
        ({"server_assignor": "sticky"}, 112, "ServerAssignor 'sticky' is not supported"),
        ({"subscribed_topic_names": None, "subscribed_topic_regex": "orders["}, 128, "not a valid regular expression"),
    ]
    for fields, code, reason in cases:
        answer = member.join(**fields)
        assert int(answer.error_code) == code and reason in answer.error_message, (fields, answer)
    assert member.join(rebalance_timeout_ms=-1).error_code == 42  # RebalanceTimeoutMs must be provided
    member.close()


def test_a_regular_expression_subscribes_to_the_topics_it_matches_as_they_come(broker):
    broker.create_topic("orders-eu", partitions=2)
    broker.create_topic("payments", partitions=2)
    member = Member(broker, "m")
    member.join(subscribed_topic_names=None, subscribed_topic_regex="orders.*")
    described = member.client.call(69, 1, {"group_ids": ["g"], "include_authorized_operations": False})
    (entry,) = described.groups[0].members
    assert {tp.topic_name: len(tp.partitions) for tp in entry.assignment.topic_partitions} == {
        "orders": 6,
        "orders-eu": 2,
    }
    broker.create_topic("orders-us", partitions=1)  # a new match moves the group to a new epoch
    answer = member.heartbeat(owned=member.owned)
    assert answer.member_epoch == 2
    described = member.client.call(69, 1, {"group_ids": ["g"], "include_authorized_operations": False})
    (entry,) = described.groups[0].members
    assert {tp.topic_name for tp in entry.assignment.topic_partitions} == {"orders", "orders-eu", "orders-us"}
    member.close()


def test_offsets_need_the_members_current_epoch(broker):
    member = Member(broker, "m")
    member.join()

    def commit(epoch: int, member_id: str) -> int:
        answer = member.client.call(
            8,
            9,
            {
                "group_id": "g",
                "generation_id_or_member_epoch": epoch,
                "member_id": member_id,
                "group_instance_id": None,
                "topics": [
                    {
                        "name": TOPIC,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 5,
                                "committed_leader_epoch": -1,
                                "committed_metadata": None,
                            }
                        ],
                    }
                ],
            },
        )
        return int(answer.topics[0].partitions[0].error_code)

    def fetch(member_id: str | None, epoch: int) -> tuple[int, list[int]]:
        answer = member.client.call(
            9,
            9,
            {
                "groups": [
                    {
                        "group_id": "g",
                        "member_id": member_id,
                        "member_epoch": epoch,
                        "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                    }
                ],
                "require_stable": False,
            },
        )
        (group,) = answer.groups
        return int(group.error_code), [p.committed_offset for t in group.topics for p in t.partitions]

    assert commit(0, "m") == 113  # STALE_MEMBER_EPOCH
    assert commit(-1, "") == 25  # no member while the group has members: UNKNOWN_MEMBER_ID
    assert commit(1, "someone") == 25
    assert commit(1, "m") == 0
    assert fetch("m", 1) == (0, [5])
    assert fetch("m", 0) == (113, [])
    assert fetch("someone", 1) == (25, [])
    assert fetch(None, -1) == (0, [5])  # an admin tool names no member
    member.heartbeat(member_epoch=-1)
    assert commit(-1, "") == 0  # an empty group takes commits from tools
    member.close()


def test_the_protocols_share_group_ids(broker):
    """A consumer group takes classic members of a consumer only (tests/broker/coordinator/
    test_group_migration.py has them), is listed as a consumer group and is no classic group."""
    member = Member(broker, "m", group="shared")
    member.join()
    with WireClient(broker.bootstrap_servers) as client:
        worker = {
            "group_id": "shared",
            "session_timeout": 6000,
            "rebalance_timeout": 6000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "connect",
            "protocols": [{"name": "sessioned", "metadata": b"worker"}],
        }
        assert client.call(11, 5, worker).error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
        listed = client.call(16, 5, {"states_filter": [], "types_filter": ["consumer"]})
        assert [(g.group_id, g.group_state, g.group_type) for g in listed.groups] == [("shared", "Stable", "consumer")]
        described = client.call(15, 6, {"groups": ["shared", "nobody"], "include_authorized_operations": True})
        assert [(int(g.error_code), g.error_message, g.authorized_operations) for g in described.groups] == [
            (69, "Group shared is not a classic group.", -(2**31)),  # no operations with an error, as Kafka
            (69, "Group nobody not found.", -(2**31)),
        ]
        assert int(client.call(42, 2, {"groups_names": ["shared"]}).results[0].error_code) == 68  # NON_EMPTY_GROUP
        member.heartbeat(member_epoch=-1)
        assert int(client.call(42, 2, {"groups_names": ["shared"]}).results[0].error_code) == 0
    member.close()


def test_silent_members_expire_and_members_that_keep_revoked_partitions_are_removed(tmp_path, pylog_broker_factory):
    broker = pylog_broker_factory(
        log_dir=tmp_path, group_consumer_session_timeout_ms=1_000, group_consumer_heartbeat_interval_ms=200
    )
    broker.create_topic(TOPIC, partitions=4)
    silent, holder, taker = Member(broker, "silent"), Member(broker, "holder"), Member(broker, "taker")
    silent.join()

    def members() -> list[str]:  # asked with ConsumerGroupDescribe, which is no heartbeat
        (group,) = holder.client.call(69, 1, {"group_ids": ["g"], "include_authorized_operations": False}).groups
        return [member.member_id for member in group.members]

    assert members() == ["silent"]
    wait_until(lambda: not members(), "the silent member's session to expire", 30, interval=0.1)
    assert silent.heartbeat(owned=silent.owned).error_code == 25

    holder.join(rebalance_timeout_ms=500)
    assert holder.owned == set(range(4))
    taker.join()
    holder.heartbeat(owned=holder.owned)  # told to give two up, which it never confirms

    def taker_owns_all() -> bool:  # holder is removed after its rebalance timeout; taker gets all
        if taker.owned == set(range(4)):
            return True
        taker.heartbeat(owned=taker.owned)
        return False

    wait_until(taker_owns_all, lambda: taker.owned, 10, interval=0.1)
    assert holder.heartbeat(owned=holder.owned).error_code == 25
    for member in (silent, holder, taker):
        member.close()


def test_uniform_assignment_is_balanced_and_sticky_and_range_is_contiguous():
    everyone = {"a": {"t"}, "b": {"t"}, "c": {"t"}}
    first = uniform_assignment(everyone, {"t": 7}, {})
    assert sorted(len(first[m]["t"]) for m in everyone) == [2, 2, 3]
    assert set().union(*(first[m]["t"] for m in everyone)) == set(range(7))
    without_b = uniform_assignment({"a": {"t"}, "c": {"t"}}, {"t": 7}, first)
    assert first["a"]["t"] <= without_b["a"]["t"] and first["c"]["t"] <= without_b["c"]["t"]  # only b's move
    # Only a may have t: balancing gives b all of u.
    mixed = uniform_assignment({"a": {"t", "u"}, "b": {"u"}}, {"t": 4, "u": 4}, {})
    assert mixed == {"a": {"t": frozenset(range(4))}, "b": {"u": frozenset(range(4))}}
    assert range_assignment(everyone, {"t": 7}, {}) == {
        "a": {"t": frozenset({0, 1, 2})},
        "b": {"t": frozenset({3, 4})},
        "c": {"t": frozenset({5, 6})},
    }


def test_a_static_member_that_leaves_for_a_while_gets_its_partitions_back(broker):
    """group.instance.id: leaving with epoch -2 keeps the member's partitions for the same instance,
    which takes them back under a new member id; a second live member with that instance id is
    refused; a member that leaves with -1 gives its partitions up at once."""
    first, second = Member(broker, "first"), Member(broker, "second")
    first.join(instance_id="host-a")
    second.join(instance_id="host-b")
    for _ in range(3):  # settle: first gives up three, second takes them
        first.heartbeat(owned=first.owned, instance_id="host-a")
        second.heartbeat(owned=second.owned, instance_id="host-b")
    assert len(first.owned) == len(second.owned) == 3 and not first.owned & second.owned
    kept, epoch = set(first.owned), first.epoch

    impostor = Member(broker, "impostor")
    assert impostor.join(instance_id="host-a").error_code == 111  # UNRELEASED_INSTANCE_ID

    assert first.heartbeat(member_epoch=-2, instance_id="host-a").member_epoch == -2
    assert second.heartbeat(owned=second.owned, instance_id="host-b").error_code == 0
    assert second.owned.isdisjoint(kept)  # held for host-a while it is away
    back = Member(broker, "first-again")
    answer = back.join(instance_id="host-a")
    # Same subscription: no new group epoch, so nobody rebalances (as Kafka's coordinator).
    assert (answer.error_code, back.owned, answer.member_epoch) == (0, kept, epoch)
    assert second.heartbeat(owned=second.owned, instance_id="host-b").member_epoch == epoch
    assert back.heartbeat(member_epoch=-2, instance_id="host-a").member_epoch == -2
    changed = Member(broker, "first-changed")
    answer = changed.join(topics=[TOPIC, "other"], instance_id="host-a")  # back, subscribed to more
    assert answer.error_code == 0 and answer.member_epoch == epoch + 1
    back = changed

    assert back.heartbeat(member_epoch=-1).member_epoch == -1  # a real leave: second takes all

    def second_owns_all() -> bool:
        if second.owned == set(range(6)):
            return True
        second.heartbeat(owned=second.owned, instance_id="host-b")
        return False

    wait_until(second_owns_all, lambda: second.owned, 10, interval=0)
    for member in (first, second, impostor, back):
        member.close()


def test_version_0_members_are_named_by_the_coordinator(broker):
    with WireClient(broker.bootstrap_servers) as client:
        answer = client.call(
            68,
            0,
            {
                "group_id": "v0",
                "member_id": "",
                "member_epoch": 0,
                "instance_id": None,
                "rack_id": None,
                "rebalance_timeout": datetime.timedelta(seconds=30),
                "subscribed_topic_names": [TOPIC],
                "server_assignor": "range",
                "topic_partitions": [],
            },
        )
    assert answer.error_code == 0 and answer.member_id and answer.member_epoch == 1
    assert sorted(p for tp in answer.assignment.topic_partitions for p in tp.partitions) == list(range(6))
