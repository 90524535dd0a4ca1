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
from pathlib import Path
from typing import Any

from kio.schema.consumer_protocol_assignment.v1.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_subscription.v1.data import ConsumerProtocolSubscription, TopicPartition
from kio.serial import entity_reader, entity_writer

from kafka_spark.broker import EmbeddedBroker
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


def subscription(owned: set[int] = frozenset(), topics: tuple[str, ...] = (TOPIC,)) -> bytes:
    """A ConsumerProtocolSubscription v1, as a classic consumer's JoinGroup carries it."""
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", 1))
    entity_writer(ConsumerProtocolSubscription)(
        buffer,
        ConsumerProtocolSubscription(
            topics=topics,
            user_data=None,
            owned_partitions=(TopicPartition(topic=TOPIC, partitions=tuple(sorted(owned))),) if owned else (),
        ),
    )
    return buffer.getvalue()


def assigned(assignment: bytes) -> set[int]:
    """The partitions of TOPIC in a SyncGroup answer (a ConsumerProtocolAssignment)."""
    (version,) = struct.unpack_from(">h", assignment, 0)
    assert version == 1  # the version of the member's subscription, as Kafka answers
    decoded, _ = entity_reader(ConsumerProtocolAssignment)(assignment, 2)
    return {p for entry in decoded.assigned_partitions if entry.topic == TOPIC for p in entry.partitions}


def assignment(partitions: set[int]) -> bytes:
    """What a classic leader hands a member (a ConsumerProtocolAssignment v1)."""
    from kio.schema.consumer_protocol_assignment.v1.data import TopicPartition as Assigned

    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", 1))
    entity_writer(ConsumerProtocolAssignment)(
        buffer,
        ConsumerProtocolAssignment(
            assigned_partitions=(Assigned(topic=TOPIC, partitions=tuple(sorted(partitions))),), user_data=None
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
        protocol: str = "cooperative-sticky",
        session_ms: int = 6000,
        rebalance_ms: int = 30_000,
    ) -> None:
        self.client = WireClient(broker.bootstrap_servers)
        self.group, self.protocol = group, protocol
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
                {"name": self.protocol, "metadata": subscription(self.owned) if metadata is None else metadata}
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
                "assignments": [{"member_id": m, "assignment": assignment(p)} for m, p in (assignments or {}).items()],
            },
        )
        if answer.error_code == 0:
            self.owned = assigned(answer.assignment)
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

    def commit(self, generation: int) -> int:
        body = {
            "group_id": self.group,
            "generation_id_or_member_epoch": generation,
            "member_id": self.member_id,
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {
                            "partition_index": 0,
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


def listed(client: WireClient, group: str = "g") -> tuple[str, str] | None:
    """The group's type and state, as ListGroups v5 reports them."""
    groups = client.call(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []}).groups
    return next(((g.group_type, g.group_state) for g in groups if g.group_id == group), None)


def described(client: WireClient, group: str = "g") -> Any:
    (answer,) = client.call(
        CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False}
    ).groups
    return answer


def members(client: WireClient, group: str = "g") -> dict[str, tuple[int, int, set[int], set[int]]]:
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


def classic_group(broker: EmbeddedBroker) -> ClassicMember:
    """A classic group "g" of one member that owns every partition (generation 1)."""
    classic = ClassicMember(broker)
    answer = classic.join()
    assert (answer.error_code, answer.generation_id, answer.leader) == (0, 1, classic.member_id)
    assert classic.sync({classic.member_id: ALL}).error_code == 0 and classic.owned == ALL
    assert listed(classic.client) == ("classic", "Stable")
    return classic


def settle(classic: ClassicMember) -> None:
    """The classic member rejoins until its heartbeats say nothing more (as a client does)."""
    for _ in range(5):
        if classic.heartbeat() != REBALANCE_IN_PROGRESS:
            return
        assert classic.join().error_code == 0 and classic.sync().error_code == 0
    raise AssertionError(f"still rebalancing: {members(classic.client)}")


def test_a_consumer_joining_converts_the_classic_group_and_the_classic_member_stays(broker):
    classic = classic_group(broker)
    modern = Member(broker, "modern")
    answer = modern.join()
    assert (answer.error_code, answer.member_epoch, modern.owned) == (0, 2, set())  # its share is classic's yet
    assert listed(classic.client) == ("consumer", "Reconciling")
    state = members(classic.client)
    moving = state["modern"][3]
    assert state == {
        classic.member_id: (0, 1, ALL, ALL - moving),  # member type 0: the classic protocol, at generation 1
        "modern": (1, 2, set(), moving),
    }
    assert len(moving) == 3
    (old,) = classic.client.call(DESCRIBE_GROUPS, 6, {"groups": ["g"], "include_authorized_operations": False}).groups
    assert (old.error_code, old.error_message) == (69, "Group g is not a classic group.")

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
    assert listed(classic.client) == ("consumer", "Stable")

    assert classic.heartbeat(generation=1) == ILLEGAL_GENERATION  # its generation is its member epoch
    assert classic.sync(generation=1).error_code == ILLEGAL_GENERATION
    assert classic.commit(1) == ILLEGAL_GENERATION
    assert classic.commit(2) == 0
    assert classic.leave() == 0  # a classic member leaving leaves a consumer group
    assert listed(classic.client) == ("consumer", "Assigning") and set(members(classic.client)) == {"modern"}
    assert modern.heartbeat(owned=modern.owned).error_code == 0 and modern.owned == ALL
    classic.close()
    modern.close()


def test_a_classic_group_of_other_members_is_not_converted(broker):
    other = ClassicMember(broker, "other")
    answer = other.join(metadata=b"no subscription")
    assert answer.error_code == 0 and other.sync({other.member_id: set()}).error_code == 0
    modern = Member(broker, "modern", group="other")
    answer = modern.join()
    assert answer.error_code == GROUP_ID_NOT_FOUND
    assert "the embedded consumer protocol is malformed" in answer.error_message
    assert other.heartbeat() == 0 and listed(other.client, "other") == ("classic", "Stable")  # untouched

    connect = ClassicMember(broker, "workers", protocol="sessioned")
    assert connect.join(metadata=b"worker", protocol_type="connect").error_code == 0
    connector = Member(broker, "modern", group="workers")
    answer = connector.join()
    assert (answer.error_code, answer.error_message.split(":")[0]) == (
        GROUP_ID_NOT_FOUND,
        "Group workers is not a consumer group",
    )
    # The other way round: a consumer group takes classic members of a consumer only.
    owner = Member(broker, "owner", group="modern-only")
    assert owner.join().error_code == 0
    stranger = ClassicMember(broker, "modern-only", protocol="sessioned")
    assert stranger.join(metadata=b"worker", protocol_type="connect").error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
    for member in (other, modern, connect, connector, owner, stranger):
        member.close()


def test_the_group_goes_back_to_the_classic_protocol_when_its_last_consumer_member_leaves(broker):
    first = classic_group(broker)
    modern = Member(broker, "modern")
    assert modern.join().error_code == 0
    settle(first)
    second = ClassicMember(broker)
    answer = second.join()  # a classic member joins the consumer group: epoch 3
    assert (answer.error_code, answer.generation_id, answer.leader, answer.members) == (0, 3, "", ())
    assert second.sync().error_code == 0
    assert first.leave() == 0  # a classic member leaves: still a consumer group (epoch 4)
    assert listed(first.client) is not None and listed(first.client)[0] == "consumer"
    assert second.heartbeat() == REBALANCE_IN_PROGRESS
    assert second.join().generation_id == 4 and second.sync().error_code == 0

    assert modern.heartbeat(member_epoch=-1).error_code == 0  # the last member of the consumer protocol
    assert listed(second.client) == ("classic", "PreparingRebalance")  # back, and rebalancing
    assert described(second.client).error_code == GROUP_ID_NOT_FOUND
    (group,) = second.client.call(DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": False}).groups
    assert (group.group_state, group.protocol_type, [m.member_id for m in group.members]) == (
        "PreparingRebalance",
        "consumer",
        [second.member_id],
    )
    assert second.heartbeat() == REBALANCE_IN_PROGRESS  # generation 4: the group's epoch
    answer = second.join()  # the classic protocol again: it leads, and assigns
    assert (answer.error_code, answer.generation_id, answer.leader) == (0, 5, second.member_id)
    assert [m.member_id for m in answer.members] == [second.member_id]
    assert second.sync({second.member_id: ALL}).error_code == 0 and second.owned == ALL
    assert listed(second.client) == ("classic", "Stable")
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
    wait_until(lambda: set(members(modern.client)) == {"modern"}, lambda: members(modern.client), 30)
    assert late.heartbeat() == 25  # UNKNOWN_MEMBER_ID: removed after its rebalance timeout
    assert modern.heartbeat(owned=set()).error_code == 0 and modern.owned == ALL

    silent = ClassicMember(broker, session_ms=1000)
    assert silent.join().error_code == 0 and silent.sync().error_code == 0
    assert silent.member_id in members(modern.client)
    wait_until(lambda: silent.member_id not in members(modern.client), lambda: members(modern.client), 30)
    for member in (late, modern, silent):
        member.close()


def consumer_group_records(log_dir: Path) -> list[tuple[int, str | None, Any]]:
    """The consumer-group records of ``__consumer_offsets`` (type, member, decoded value or None)."""
    from kafka_spark.broker.storage.log_manager import LogManager

    logs = LogManager(log_dir)
    try:
        found = []
        for partition in range(logs.topics()[OFFSETS_TOPIC].partitions):
            for _, _, key, value in _events(logs.get_log(OFFSETS_TOPIC, partition)):
                if key is not None and record_type(key) in RECORD_TYPES:
                    kind, _, member = decode_key(key)
                    found.append((kind, member, None if value is None else decode_value(kind, value)))
        return found
    finally:
        logs.close()


def test_the_records_of_a_converted_group_survive_a_restart_and_its_downgrade_leaves_tombstones(tmp_path):
    def start() -> EmbeddedBroker:
        return EmbeddedBroker(log_dir=tmp_path, register=False, group_consumer_heartbeat_interval_ms=500)

    with start() as broker:
        broker.create_topic(TOPIC, partitions=6)
        classic = classic_group(broker)
        modern = Member(broker, "modern")
        assert modern.join().error_code == 0
        before = members(classic.client)
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
        assert members(again.client) == before
        assert again.heartbeat() == REBALANCE_IN_PROGRESS  # a member still, told to rejoin
        settle(again)
        assert again.owned == ALL - before["modern"][3]
        assert modern.heartbeat(member_epoch=-1).error_code == 0  # downgrade
        assert listed(again.client) == ("classic", "PreparingRebalance")
        again.close()
        modern.close()
    records = consumer_group_records(tmp_path)
    last = {}
    for kind, member, value in records:
        last[(kind, member)] = value
    assert last and all(value is None for value in last.values())  # every record of the group tombstoned

    with start() as broker, WireClient(broker.bootstrap_servers) as client:
        assert listed(client) is None  # no group left: classic groups are kept in memory
        assert described(client).error_code == GROUP_ID_NOT_FOUND
