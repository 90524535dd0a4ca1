"""A live group moving between the classic protocol and KIP-848's consumer protocol (Kafka's online
upgrade and downgrade), over the wire, step by step: a consumer-protocol member joining a classic
group converts it and the classic member stays, told to rejoin by its heartbeats and answered by
the coordinator's assignment, given in two steps while it still owns what moves elsewhere; a group
whose classic members are not a consumer's is not converted; the group goes back to the classic
protocol when its last consumer-protocol member leaves; classic members' rebalance and session
timeouts; the records in ``__consumer_offsets`` across the conversions and a restart between
them. (The same scenario with librdkafka consumers on pylog and Apache Kafka 4.3.1:
tests/interop/test_group_migration.py.)"""

from __future__ import annotations

import io
import struct
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription, TopicPartition
from kio.serial import entity_reader, entity_writer

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.coordinator.classic_group_log import decode_group, is_group_metadata
from kafka_spark.broker.coordinator.consumer_group_log import (
    MEMBER_METADATA,
    RECORD_TYPES,
    decode_key,
    decode_value,
    record_type,
)
from kafka_spark.broker.coordinator.group_offsets import _events
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC
from tests.broker.coordinator.test_consumer_group import TOPIC, Member, broker  # noqa: F401 (broker: a fixture)
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 11, 12, 13, 14, 15, 16
OFFSET_COMMIT, CONSUMER_GROUP_DESCRIBE = 8, 69
ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, GROUP_ID_NOT_FOUND, MEMBER_ID_REQUIRED = 22, 27, 69, 79
ALL = set(range(6))


def subscription(owned: set[int] = frozenset(), topic: str = TOPIC) -> bytes:
    """A ConsumerProtocolSubscription v1 of ``topic``, as a classic consumer's JoinGroup carries it."""
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", 1))
    entity_writer(ConsumerProtocolSubscription)(
        buffer,
        ConsumerProtocolSubscription(
            topics=(topic,),
            user_data=None,
            owned_partitions=(TopicPartition(topic=topic, partitions=tuple(sorted(owned))),) if owned else (),
        ),
    )
    return buffer.getvalue()


def assigned(assignment: bytes, topic: str = TOPIC) -> set[int]:
    """The partitions of ``topic`` in a SyncGroup answer (a ConsumerProtocolAssignment)."""
    (version,) = struct.unpack_from(">h", assignment, 0)
    assert version == 1  # the version of the member's subscription, as Kafka answers
    decoded, _ = entity_reader(ConsumerProtocolAssignment)(assignment, 2)
    return {p for entry in decoded.assigned_partitions if entry.topic == topic for p in entry.partitions}


def assignment(partitions: set[int], topic: str = TOPIC) -> bytes:
    """What a classic leader hands a member (a ConsumerProtocolAssignment v1 of ``topic``)."""
    from kio.schema.consumer_protocol_assignment.v1.data import TopicPartition as Assigned

    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", 1))
    entity_writer(ConsumerProtocolAssignment)(
        buffer,
        ConsumerProtocolAssignment(
            assigned_partitions=(Assigned(topic=topic, partitions=tuple(sorted(partitions))),), user_data=None
        ),
    )
    return buffer.getvalue()


class ClassicMember:
    """A member of the classic protocol over its own connection: JoinGroup v9, SyncGroup v5,
    Heartbeat v4, LeaveGroup v5, OffsetCommit v8, its metadata a consumer's subscription."""

    def __init__(
        self,
        broker: EmbeddedBroker,
        group: str = "g",
        *,
        topic: str = TOPIC,
        protocol: str = "cooperative-sticky",
        session_ms: int = 6000,
        rebalance_ms: int = 30_000,
    ) -> None:
        self.client = WireClient(broker.bootstrap_servers)
        self.group, self.topic, self.protocol = group, topic, protocol
        self.session_ms, self.rebalance_ms = session_ms, rebalance_ms
        self.member_id, self.generation, self.owned = "", -1, set[int]()

    def join_body(self, metadata: bytes | None, protocol_type: str) -> dict[str, Any]:
        return {
            "group_id": self.group,
            "session_timeout": self.session_ms,
            "rebalance_timeout": self.rebalance_ms,
            "member_id": self.member_id,
            "group_instance_id": None,
            "protocol_type": protocol_type,
            "protocols": [
                {
                    "name": self.protocol,
                    "metadata": subscription(self.owned, self.topic) if metadata is None else metadata,
                }
            ],
            "reason": None,
        }

    def join(self, metadata: bytes | None = None, protocol_type: str = "consumer") -> Any:
        """A JoinGroup with what it owns (a new member first gets its id: MEMBER_ID_REQUIRED)."""
        answer = self.client.call(JOIN_GROUP, 9, self.join_body(metadata, protocol_type))
        if answer.error_code == MEMBER_ID_REQUIRED:
            self.member_id = answer.member_id
            answer = self.client.call(JOIN_GROUP, 9, self.join_body(metadata, protocol_type))
        if answer.error_code == 0:
            self.member_id, self.generation = answer.member_id, answer.generation_id
        return answer

    def sync(self, assignments: dict[str, set[int]] | None = None, generation: int | None = None) -> Any:
        answer = self.client.call(
            SYNC_GROUP,
            5,
            {
                "group_id": self.group,
                "generation_id": self.generation if generation is None else generation,
                "member_id": self.member_id,
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocol_name": self.protocol,
                "assignments": [
                    {"member_id": m, "assignment": assignment(p, self.topic)} for m, p in (assignments or {}).items()
                ],
            },
        )
        if answer.error_code == 0:
            self.owned = assigned(answer.assignment, self.topic)
        return answer

    def heartbeat(self, generation: int | None = None) -> int:
        body = {
            "group_id": self.group,
            "generation_id": self.generation if generation is None else generation,
            "member_id": self.member_id,
            "group_instance_id": None,
        }
        return int(self.client.call(HEARTBEAT, 4, body).error_code)

    def leave(self) -> int:
        body = {"group_id": self.group, "members": [{"member_id": self.member_id, "group_instance_id": None}]}
        (member,) = self.client.call(LEAVE_GROUP, 5, body).members
        return int(member.error_code)

    def commit(self, generation: int, partition: int = 0) -> int:
        body = {
            "group_id": self.group,
            "generation_id_or_member_epoch": generation,
            "member_id": self.member_id,
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [
                {
                    "name": self.topic,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "committed_offset": 0,
                            "committed_metadata": None,
                            "committed_leader_epoch": -1,
                        }
                    ],
                }
            ],
        }
        return int(self.client.call(OFFSET_COMMIT, 8, body).topics[0].partitions[0].error_code)

    def close(self) -> None:
        self.client.close()


def listed(client: WireClient, group: str) -> tuple[str, str] | None:
    """The group's type and state, as ListGroups v5 reports them."""
    groups = client.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}).groups
    return next(((g.group_type, g.group_state) for g in groups if g.group_id == group), None)


def described(client: WireClient, group: str) -> Any:
    (answer,) = client.call(
        CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False}
    ).groups
    return answer


def members(client: WireClient, group: str) -> dict[str, tuple[int, int, set[int], set[int]]]:
    """member id -> (member type, epoch, assignment, target), as ConsumerGroupDescribe reports them."""
    return {
        m.member_id: (
            m.member_type,
            m.member_epoch,
            {p for tp in m.assignment.topic_partitions for p in tp.partitions},
            {p for tp in m.target_assignment.topic_partitions for p in tp.partitions},
        )
        for m in described(client, group).members
    }


@dataclass
class Place:
    """Where a scenario runs: a broker (anything with ``bootstrap_servers``: pylog's, or Apache
    Kafka in tests/interop), a group id, and a topic of six partitions (its name and id)."""

    broker: Any
    group: str = "g"
    topic: str = TOPIC
    topic_id: uuid.UUID | None = None  # None: the EmbeddedBroker's own TOPIC

    def classic(self, group: str | None = None, **options: Any) -> ClassicMember:
        return ClassicMember(self.broker, group or self.group, topic=self.topic, **options)

    def modern(self, member_id: str, group: str | None = None) -> Member:
        return Member(self.broker, member_id, group or self.group, self.topic_id, self.topic)


def classic_group(place: Place) -> ClassicMember:
    """A classic group of one member that owns every partition (generation 1)."""
    classic = place.classic()
    answer = classic.join()
    assert (answer.error_code, answer.generation_id, answer.leader) == (0, 1, classic.member_id)
    assert classic.sync({classic.member_id: ALL}).error_code == 0 and classic.owned == ALL
    assert listed(classic.client, place.group) == ("classic", "Stable")
    return classic


def settle(classic: ClassicMember) -> None:
    """The classic member rejoins until its heartbeats say nothing more (as a client does)."""
    for _ in range(5):
        if classic.heartbeat() != REBALANCE_IN_PROGRESS:
            return
        assert classic.join().error_code == 0 and classic.sync().error_code == 0
    raise AssertionError(f"still rebalancing: {members(classic.client, classic.group)}")


def upgrade(place: Place) -> None:
    """A consumer-protocol member joins a classic group of one member owning every partition: the
    group is converted, the classic member stays and is answered as Kafka answers it."""
    group = place.group
    classic = classic_group(place)
    modern = place.modern("modern")
    answer = modern.join()
    assert (answer.error_code, answer.member_epoch, modern.owned) == (0, 2, set())  # its share is classic's yet
    assert listed(classic.client, group) == ("consumer", "Reconciling")
    state = members(classic.client, group)
    moving = state["modern"][3]
    assert state == {
        classic.member_id: (0, 1, ALL, ALL - moving),  # member type 0: the classic protocol, at generation 1
        "modern": (1, 2, set(), moving),
    }
    assert len(moving) == 3
    body = {"groups": [group], "include_authorized_operations": False}
    (old,) = classic.client.call(DESCRIBE_GROUPS, 6, body).groups
    assert (old.error_code, old.error_message) == (69, f"Group {group} is not a classic group.")

    assert classic.heartbeat() == REBALANCE_IN_PROGRESS  # the group epoch passed its own: rejoin
    answer = classic.join()  # still owning everything: it must give three up first
    assert (answer.error_code, answer.generation_id, answer.protocol_type, answer.protocol_name) == (
        0,
        1,
        "consumer",
        "cooperative-sticky",
    )
    assert (answer.leader, answer.members, answer.skip_assignment) == ("", (), False)  # nobody assigns
    answer = classic.sync()
    assert (answer.error_code, answer.protocol_type, answer.protocol_name) == (0, "consumer", "cooperative-sticky")
    assert classic.owned == ALL - moving
    assert modern.heartbeat(owned=set()).error_code == 0 and modern.owned == set()  # not given up yet
    assert classic.heartbeat() == REBALANCE_IN_PROGRESS  # partitions to give up: rejoin without them
    assert classic.join().generation_id == 2
    assert classic.sync().error_code == 0 and classic.owned == ALL - moving
    assert classic.heartbeat() == 0
    assert modern.heartbeat(owned=set()).error_code == 0 and modern.owned == moving
    assert listed(classic.client, group) == ("consumer", "Stable")

    assert classic.heartbeat(generation=1) == ILLEGAL_GENERATION  # its generation is its member epoch
    assert classic.sync(generation=1).error_code == ILLEGAL_GENERATION
    assert (classic.commit(0), classic.commit(2), classic.commit(3)) == (ILLEGAL_GENERATION, 0, ILLEGAL_GENERATION)
    # Its previous generation commits a partition it has had since then, not one it gave up (KIP-1251)
    kept, moved = min(ALL - moving), min(moving)
    assert (classic.commit(1, kept), classic.commit(1, moved)) == (0, ILLEGAL_GENERATION)
    assert classic.leave() == 0  # a classic member leaving leaves a consumer group
    assert listed(classic.client, group) == ("consumer", "Assigning")
    assert set(members(classic.client, group)) == {"modern"}

    def takes_all() -> bool:  # Kafka 4.3 computes a target assignment at most once a second (KIP-1263)
        return modern.heartbeat(owned=modern.owned).error_code == 0 and modern.owned == ALL

    wait_until(takes_all, lambda: modern.owned, 30, interval=0.2)
    classic.close()
    modern.close()


def refusals(place: Place) -> None:
    """A classic group that is not a consumer's is not converted (GROUP_ID_NOT_FOUND, Kafka's
    reason), and a consumer group takes classic members of a consumer only."""
    workers, modern_only = (f"{place.group}-{name}" for name in ("workers", "modern-only"))
    connect = place.classic(workers, protocol="sessioned")
    assert connect.join(metadata=b"worker", protocol_type="connect").error_code == 0
    connector = place.modern("modern", workers)
    answer = connector.join()
    assert (answer.error_code, answer.error_message) == (
        GROUP_ID_NOT_FOUND,
        f"Cannot upgrade classic group {workers} to consumer group because the group does not use the consumer "
        "embedded protocol.",
    )
    owner = place.modern("owner", modern_only)
    assert owner.join().error_code == 0
    stranger = place.classic(modern_only, protocol="sessioned")
    assert stranger.join(metadata=b"worker", protocol_type="connect").error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
    for member in (connect, connector, owner, stranger):
        member.close()


def downgrade(place: Place) -> None:
    """The last consumer-protocol member of a group of classic members leaves: the group is a
    classic group again, Stable at the group epoch as its generation, which rebalances."""
    group = place.group
    classic = classic_group(place)
    modern = place.modern("modern")
    assert modern.join().error_code == 0
    settle(classic)
    assert modern.heartbeat(member_epoch=-1).error_code == 0  # the last member of the consumer protocol
    assert listed(classic.client, group) == ("classic", "PreparingRebalance")  # back, and rebalancing
    assert described(classic.client, group).error_code == GROUP_ID_NOT_FOUND
    body = {"groups": [group], "include_authorized_operations": False}
    (described_group,) = classic.client.call(DESCRIBE_GROUPS, 5, body).groups
    assert (
        described_group.group_state,
        described_group.protocol_type,
        [m.member_id for m in described_group.members],
    ) == (
        "PreparingRebalance",
        "consumer",
        [classic.member_id],
    )
    assert classic.heartbeat() == REBALANCE_IN_PROGRESS  # generation 2: the group's epoch
    answer = classic.join()  # the classic protocol again: it leads, and assigns
    assert (answer.error_code, answer.generation_id, answer.leader) == (0, 3, classic.member_id)
    assert [m.member_id for m in answer.members] == [classic.member_id]
    assert classic.sync({classic.member_id: ALL}).error_code == 0 and classic.owned == ALL
    assert listed(classic.client, group) == ("classic", "Stable")
    classic.close()
    modern.close()


def test_a_consumer_joining_converts_the_classic_group_and_the_classic_member_stays(broker):
    upgrade(Place(broker))


def test_a_classic_group_of_other_members_is_not_converted(broker):
    refusals(Place(broker))


def test_the_group_goes_back_to_the_classic_protocol_when_its_last_consumer_member_leaves(broker):
    downgrade(Place(broker))


def test_a_classic_group_whose_metadata_is_no_subscription_is_not_converted(broker):
    """(Apache Kafka 4.3.1 never completes such a group's first rebalance: its join timer fails
    to read the metadata; pylog completes it, and refuses the upgrade.)"""
    malformed = ClassicMember(broker)
    answer = malformed.join(metadata=b"no subscription")
    assert answer.error_code == 0 and malformed.sync({malformed.member_id: set()}).error_code == 0
    modern = Member(broker, "modern")
    answer = modern.join()
    assert answer.error_code == GROUP_ID_NOT_FOUND
    assert "the embedded consumer protocol is malformed" in answer.error_message
    assert malformed.heartbeat() == 0 and listed(malformed.client, "g") == ("classic", "Stable")  # untouched
    malformed.close()
    modern.close()


def test_classic_members_join_and_leave_a_consumer_group(broker):
    """A classic member joins a consumer group (a new member: the group epoch as its generation),
    another leaves (the group stays a consumer group); the generations are the epochs pylog's
    coordinator reaches at once (Kafka 4.3 computes a new target assignment at most once a second,
    KIP-1263, so its epochs lag). A classic member's commit with its previous generation is taken
    for a partition it has had since then, and refused for one it gave up (KIP-1251)."""
    place = Place(broker)
    first = classic_group(place)
    modern = place.modern("modern")
    assert modern.join().error_code == 0
    settle(first)
    kept = min(first.owned)
    given_up = min(ALL - first.owned)
    assert (first.commit(1, kept), first.commit(1, given_up)) == (0, ILLEGAL_GENERATION)
    assert first.commit(0, kept) == ILLEGAL_GENERATION  # before it had it
    second = place.classic()
    answer = second.join()  # a classic member joins the consumer group: epoch 3
    assert (answer.error_code, answer.generation_id, answer.leader, answer.members) == (0, 3, "", ())
    assert second.sync().error_code == 0
    assert first.leave() == 0  # a classic member leaves: still a consumer group (epoch 4)
    assert listed(first.client, "g") == ("consumer", "Assigning")
    assert second.heartbeat() == REBALANCE_IN_PROGRESS
    assert second.join().generation_id == 4 and second.sync().error_code == 0
    assert modern.heartbeat(member_epoch=-1).error_code == 0  # the last member of the consumer protocol
    assert second.heartbeat() == REBALANCE_IN_PROGRESS  # the classic group's generation: 4
    answer = second.join()
    assert (answer.error_code, answer.generation_id, answer.leader) == (0, 5, second.member_id)
    for member in (first, second, modern):
        member.close()


def test_classic_members_that_do_not_rejoin_or_go_silent_are_removed(tmp_path, pylog_broker_factory):
    broker = pylog_broker_factory(log_dir=tmp_path, group_min_session_timeout_ms=500)
    broker.create_topic(TOPIC, partitions=6)
    late = ClassicMember(broker, rebalance_ms=1000)
    assert late.join().error_code == 0 and late.sync({late.member_id: ALL}).error_code == 0
    modern = Member(broker, "modern")
    assert modern.join().error_code == 0
    assert late.heartbeat() == REBALANCE_IN_PROGRESS  # told to rejoin, it never does
    wait_until(lambda: set(members(modern.client, "g")) == {"modern"}, lambda: members(modern.client, "g"), 30)
    assert late.heartbeat() == 25  # UNKNOWN_MEMBER_ID: removed after its rebalance timeout
    assert modern.heartbeat(owned=set()).error_code == 0 and modern.owned == ALL

    silent = ClassicMember(broker, session_ms=1000)
    assert silent.join().error_code == 0 and silent.sync().error_code == 0
    assert silent.member_id in members(modern.client, "g")
    wait_until(lambda: silent.member_id not in members(modern.client, "g"), lambda: members(modern.client, "g"), 30)
    for member in (late, modern, silent):
        member.close()


def test_the_migration_policy_decides_which_conversions_happen(pylog_broker_factory):
    upgrade_only = Place(pylog_broker_factory(group_consumer_migration_policy="upgrade"))
    upgrade_only.broker.create_topic(TOPIC, partitions=6)
    classic = classic_group(upgrade_only)
    modern = upgrade_only.modern("modern")
    assert modern.join().error_code == 0  # upgraded
    settle(classic)
    assert modern.heartbeat(member_epoch=-1).error_code == 0  # not downgraded: a consumer group of one classic member
    assert listed(classic.client, "g") == ("consumer", "Assigning")
    settle(classic)
    assert classic.owned == ALL and listed(classic.client, "g") == ("consumer", "Stable")

    downgrade_only = Place(pylog_broker_factory(group_consumer_migration_policy="downgrade"))
    downgrade_only.broker.create_topic(TOPIC, partitions=6)
    kept = classic_group(downgrade_only)
    answer = downgrade_only.modern("modern").join()
    assert (answer.error_code, answer.error_message) == (
        GROUP_ID_NOT_FOUND,
        "Cannot upgrade classic group g to consumer group because the online upgrade is disabled "
        "(group.consumer.migration.policy=downgrade).",
    )
    assert kept.heartbeat() == 0 and listed(kept.client, "g") == ("classic", "Stable")
    for member in (classic, modern, kept):
        member.close()


def offsets_records(log_dir: Path) -> list[tuple[bytes, bytes | None]]:
    """``(key, value)`` of every record of ``__consumer_offsets`` in ``log_dir``, in order."""
    from kafka_spark.broker.storage.log_manager import LogManager

    logs = LogManager(log_dir)
    try:
        return [
            (key, value)
            for partition in range(logs.topics()[OFFSETS_TOPIC].partitions)
            for _, _, key, value in _events(logs.get_log(OFFSETS_TOPIC, partition))
            if key is not None
        ]
    finally:
        logs.close()


def consumer_group_records(log_dir: Path) -> list[tuple[int, str | None, Any]]:
    """The consumer-group records of ``__consumer_offsets`` (type, member, decoded value or None)."""
    found = []
    for key, value in offsets_records(log_dir):
        if record_type(key) in RECORD_TYPES:
            kind, _, member = decode_key(key)
            found.append((kind, member, None if value is None else decode_value(kind, value)))
    return found


def group_metadata_records(log_dir: Path) -> list[bytes | None]:
    """The values of the classic group records (GroupMetadata) of ``__consumer_offsets``, in order."""
    return [value for key, value in offsets_records(log_dir) if is_group_metadata(key)]


def test_the_records_of_a_converted_group_survive_a_restart_and_its_downgrade_leaves_tombstones(tmp_path):
    def start() -> EmbeddedBroker:
        return EmbeddedBroker(log_dir=tmp_path, register=False, group_consumer_heartbeat_interval_ms=500)

    with start() as broker:
        broker.create_topic(TOPIC, partitions=6)
        classic = classic_group(Place(broker))
        modern = Member(broker, "modern")
        assert modern.join().error_code == 0
        before = members(classic.client, "g")
        classic.close()
        modern.close()
    records = consumer_group_records(tmp_path)
    metadata = {member: value for kind, member, value in records if kind == MEMBER_METADATA}
    assert set(metadata) == {classic.member_id, "modern"}
    assert metadata["modern"].classic_member_metadata is None
    kept = metadata[classic.member_id].classic_member_metadata  # Kafka's ClassicMemberMetadata (tag 0)
    assert kept.session_timeout_ms == 6000
    assert [(p.name, p.metadata) for p in kept.supported_protocols] == [("cooperative-sticky", subscription())]

    with start() as broker:  # the converted group is back, its classic member with it
        again, modern = ClassicMember(broker), Member(broker, "modern")
        again.member_id, again.generation, again.owned = classic.member_id, 1, ALL
        modern.epoch = 2
        assert members(again.client, "g") == before
        assert again.heartbeat() == REBALANCE_IN_PROGRESS  # a member still, told to rejoin
        settle(again)
        assert again.owned == ALL - before["modern"][3]
        assert modern.heartbeat(member_epoch=-1).error_code == 0  # downgrade
        assert listed(again.client, "g") == ("classic", "PreparingRebalance")
        again.close()
        modern.close()
    records = consumer_group_records(tmp_path)
    last = {}
    for kind, member, value in records:
        last[(kind, member)] = value
    assert last and all(value is None for value in last.values())  # every record of the group tombstoned

    # ... and the classic group's record, written as it converted (Kafka's GroupMetadata)
    classic_records = group_metadata_records(tmp_path)
    # the classic group's record, its tombstone as it was upgraded, its record as it was downgraded
    assert [value is None for value in classic_records] == [False, True, False]
    assert classic_records[-1] is not None
    converted = decode_group("g", classic_records[-1], "test")
    assert list(converted.members) == [classic.member_id]

    with start() as broker, WireClient(broker.bootstrap_servers) as client:
        # the classic group is back, Stable with its member (which the downgrade's rebalance will ask to rejoin)
        assert listed(client, "g") == ("classic", "Stable")
        assert described(client, "g").error_code == GROUP_ID_NOT_FOUND  # not a consumer group


#: The steps of confluent-kafka-python's test_consumer_upgrade_downgrade: a consumer of ``protocol``
#: joins (the last one to join) or the first one still there leaves; each step ends with the
#: group's type as it is then.
UPGRADE_DOWNGRADE = [
    ("classic", "CLASSIC"),
    ("consumer", "CONSUMER"),
    (None, "CONSUMER"),
    ("classic", "CONSUMER"),
    (None, "CLASSIC"),
]


def upgrade_and_downgrade(bootstrap: str, topic: str, partitions: int, strategy: str) -> list[tuple[str, list[int]]]:
    """confluent-kafka-python's test_consumer_upgrade_downgrade with librdkafka consumers of both
    protocols (classic ones with ``strategy``) in group ``topic``: at each step, once every member
    has its share of ``partitions`` (each partition owned once), 100 records produced then are read
    once each. Returns each step's group type (AdminClient.describe_consumer_groups) and shares."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    producer = Producer({"bootstrap.servers": bootstrap})
    base = {"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"}
    settings = {
        # heartbeat.interval.ms: told to rejoin sooner than after librdkafka's 3 s default
        "classic": {
            **base,
            "group.protocol": "classic",
            "partition.assignment.strategy": strategy,
            "heartbeat.interval.ms": 500,
        },
        "consumer": {**base, "group.protocol": "consumer"},
    }
    consumers: list[Consumer] = []
    steps: list[tuple[str, list[int]]] = []
    try:
        for step, (protocol, _) in enumerate(UPGRADE_DOWNGRADE):
            if protocol is None:
                consumers.pop(0).close()
            else:
                consumers.append(Consumer(settings[protocol]))
                consumers[-1].subscribe([topic])
            owned = _shares(consumers, partitions // len(consumers))
            assert sorted(p for mine in owned for p in mine) == list(range(partitions)), owned
            kind = admin.describe_consumer_groups([topic])[topic].result(timeout=30).type.name
            sent = [b"%d-%d" % (step, index) for index in range(100)]
            for value in sent:
                producer.produce(topic, value, key=value)
            assert producer.flush(30) == 0
            assert sorted(_read(consumers, b"%d-" % step, len(sent))) == sorted(sent)
            steps.append((kind, sorted(len(mine) for mine in owned)))
    finally:
        for consumer in consumers:
            consumer.close()
    return steps


def _shares(consumers: list[Consumer], share: int) -> list[set[int]]:
    """Each consumer's partitions, once every one has ``share`` of them."""

    def shared() -> bool:
        for consumer in consumers:
            consumer.poll(0.05)
        return all(len(consumer.assignment()) == share for consumer in consumers)

    wait_until(shared, lambda: [consumer.assignment() for consumer in consumers], 60, interval=0)
    return [{tp.partition for tp in consumer.assignment()} for consumer in consumers]


def _read(consumers: list[Consumer], prefix: bytes, count: int) -> list[bytes]:
    """The records whose value starts with ``prefix`` the consumers read, once ``count`` are read
    and half a second more shows no other (a partition that moved may give earlier ones again)."""
    read: list[bytes] = []

    def enough() -> bool:
        for consumer in consumers:
            message = consumer.poll(0.05)
            if message is not None and message.error() is None and message.value().startswith(prefix):
                read.append(message.value())
        return len(read) >= count

    wait_until(enough, lambda: len(read), 60, interval=0)
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        enough()
    return read


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_librdkafka_consumers_move_a_group_between_the_protocols(pylog_broker_factory, strategy):
    """The scenario of confluent-kafka-python's test with the eager strategies (the
    cooperative-sticky one runs on pylog and Apache Kafka alike: tests/interop/test_group_migration.py)."""
    broker = pylog_broker_factory(group_consumer_heartbeat_interval_ms=500, group_initial_rebalance_delay_ms=0)
    broker.create_topic(f"upgrade-{strategy}", partitions=10)
    assert upgrade_and_downgrade(broker.bootstrap_servers, f"upgrade-{strategy}", 10, strategy) == EXPECTED_STEPS


#: What each step of UPGRADE_DOWNGRADE ends with: the group's type and the members' shares.
EXPECTED_STEPS = [("CLASSIC", [10]), ("CONSUMER", [5, 5]), ("CONSUMER", [10]), ("CONSUMER", [5, 5]), ("CLASSIC", [10])]
