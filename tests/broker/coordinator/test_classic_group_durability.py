"""The membership of classic groups survives a restart of the broker (or, on a cluster, a move of
the coordinator), as Kafka's does: the coordinator writes each group's GroupMetadata record to
``__consumer_offsets`` and replays it when it loads the partition, so members go on with their
ids, generation and assignments without joining again; an Empty group keeps its generation and
protocol type; a deleted group stays deleted (its tombstone); a static member's replacement is the
member that is loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.cluster import EmbeddedCluster
from kafka_spark.broker.coordinator.classic_group_log import GROUP_METADATA, decode_group
from kafka_spark.broker.coordinator.group_offsets import _events
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC
from kafka_spark.broker.internal_topics import partition_for as offsets_partition_for
from tests.broker.coordinator.test_group_protocol import (
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    commit,
    describe,
    fetch_all,
    heartbeat,
    join,
    join_body,
    new_member,
    sync,
)
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

GROUP = "g"
UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID, NOT_COORDINATOR = 25, 22, 82, 16


def start(log_dir: Path) -> EmbeddedBroker:
    return EmbeddedBroker(log_dir=log_dir, register=False)


def group_records(broker: EmbeddedBroker) -> list[tuple[str, bytes | None]]:
    """``(group, value or None)`` of every GroupMetadata record in ``__consumer_offsets``, in order."""
    found = []
    for partition in range(broker.broker.logs.topic_info(OFFSETS_TOPIC).partitions):
        for _, _, key, value in _events(broker.broker.logs.get_log(OFFSETS_TOPIC, partition)):
            if key is not None and int.from_bytes(key[:2], "big", signed=True) == GROUP_METADATA:
                found.append((key[4:].decode(), value))
    return found


def two_member_group(one: WireClient, two: WireClient) -> tuple[WireClient, WireClient, str, str, int]:
    """A Stable group of two members that joined together: ``(leader's client, follower's client,
    leader, follower, generation)``, assigned b"leader" and b"follower"."""
    ids = {client: new_member(client, GROUP) for client in (one, two)}
    for client, member_id in ids.items():
        client.send(JOIN_GROUP, 5, join_body(GROUP, member_id))  # both land in the first generation
    joined = {client: client.receive(JOIN_GROUP, 5) for client in ids}
    assert [answer.error_code for answer in joined.values()] == [0, 0]
    (generation,) = {answer.generation_id for answer in joined.values()}
    (leader_client,) = [client for client, answer in joined.items() if answer.leader == ids[client]]
    (follower_client,) = [client for client in ids if client is not leader_client]
    leader, follower = ids[leader_client], ids[follower_client]
    assignments = {leader: b"leader", follower: b"follower"}
    assert sync(leader_client, GROUP, generation, leader, assignments).assignment == b"leader"
    assert sync(follower_client, GROUP, generation, follower).assignment == b"follower"
    return leader_client, follower_client, leader, follower, generation


def members(described: Any) -> list[tuple[str, bytes]]:
    return sorted((m.member_id, bytes(m.member_assignment)) for m in described.members)


def test_a_restarted_broker_keeps_its_classic_groups_members_generation_and_assignments(tmp_path):
    log_dir = tmp_path / "data"
    with (
        start(log_dir) as broker,
        WireClient(broker.bootstrap_servers) as one,
        WireClient(broker.bootstrap_servers) as two,
    ):
        _, _, leader, follower, generation = two_member_group(one, two)
        before = describe(one, GROUP)
        assert before.group_state == "Stable" and len(before.members) == 2
        # the leader's SyncGroup wrote the group's record, with the assignments
        ((group_id, value),) = group_records(broker)
        assert group_id == GROUP and value is not None
        written = decode_group(GROUP, value, "test")
        assert (written.generation_id, written.leader_id) == (generation, leader)
        assert {m.member_id: m.assignment for m in written.members.values()} == {
            leader: b"leader",
            follower: b"follower",
        }

    with (
        start(log_dir) as broker,
        WireClient(broker.bootstrap_servers) as one,
        WireClient(broker.bootstrap_servers) as two,
    ):
        loaded = broker.broker.groups.classic.group(GROUP)
        assert loaded is not None and loaded.generation_id == generation
        described = describe(one, GROUP)
        assert (described.group_state, described.protocol_type, described.protocol_data) == (
            "Stable",
            "consumer",
            "range",
        )
        assert members(described) == members(before)
        # The members go on: heartbeats and SyncGroups of the old generation are answered at once.
        assert heartbeat(one, GROUP, generation, leader) == 0
        assert heartbeat(two, GROUP, generation, follower) == 0
        assert sync(two, GROUP, generation, follower).assignment == b"follower"
        assert heartbeat(one, GROUP, generation - 1, leader) == ILLEGAL_GENERATION  # still fenced
        assert heartbeat(one, GROUP, generation, "a-stranger") == UNKNOWN_MEMBER_ID
        # nobody joined again: the generation is the one before the restart
        assert broker.broker.groups.classic.group(GROUP).generation_id == generation
        assert len(group_records(broker)) == 1  # nothing changed: nothing written


def test_an_empty_group_keeps_its_generation_and_a_deleted_one_stays_deleted(tmp_path):
    log_dir = tmp_path / "data"
    with start(log_dir) as broker, WireClient(broker.bootstrap_servers) as client:
        joined = join(client, GROUP)
        assert sync(client, GROUP, joined.generation_id, joined.member_id, {joined.member_id: b"x"}).error_code == 0
        left = client.call(LEAVE_GROUP, 3, {"group_id": GROUP, "members": [{"member_id": joined.member_id}]})
        assert left.error_code == 0
        empty_generation = joined.generation_id + 1
        wait_until(lambda: describe(client, GROUP).group_state == "Empty", "the group to be Empty", 30)
        wait_until(lambda: len(group_records(broker)) == 2, "the Empty group's record", 30)

    with start(log_dir) as broker, WireClient(broker.bootstrap_servers) as client:
        loaded = broker.broker.groups.classic.group(GROUP)
        assert loaded is not None
        assert (loaded.state.value, loaded.generation_id, loaded.protocol_type) == (
            "Empty",
            empty_generation,
            "consumer",
        )
        assert describe(client, GROUP).group_state == "Empty"
        deleted = client.call(42, 2, {"groups_names": [GROUP]})  # DeleteGroups
        assert int(deleted.results[0].error_code) == 0
        assert group_records(broker)[-1] == (GROUP, None)  # its tombstone

    with start(log_dir) as broker, WireClient(broker.bootstrap_servers) as client:
        assert broker.broker.groups.classic.group(GROUP) is None
        assert describe(client, GROUP).group_state == "Dead"
        joined = join(client, GROUP)  # a new group under the old id starts over
        assert (joined.error_code, joined.generation_id) == (0, 1)


def test_a_static_members_replacement_is_the_member_a_restart_keeps(tmp_path):
    log_dir = tmp_path / "data"
    body = join_body(GROUP)
    body["group_instance_id"] = "instance-1"
    with start(log_dir) as broker, WireClient(broker.bootstrap_servers) as client:
        joined = client.call(JOIN_GROUP, 5, body)
        assert joined.error_code == 0
        old, generation = joined.member_id, joined.generation_id
        assert sync(client, GROUP, generation, old, {old: b"mine"}).assignment == b"mine"
        back = client.call(JOIN_GROUP, 5, body)  # the same instance, restarted: a new member id, no rebalance
        assert back.error_code == 0 and back.member_id != old and back.generation_id == generation
        new = back.member_id
        assert [m.member_id for m in decode_group(GROUP, group_records(broker)[-1][1], "t").members.values()] == [new]

    with start(log_dir) as broker, WireClient(broker.bootstrap_servers) as client:
        assert members(describe(client, GROUP)) == [(new, b"mine")]
        beat = {"group_id": GROUP, "generation_id": generation, "group_instance_id": "instance-1"}
        assert client.call(HEARTBEAT, 3, {**beat, "member_id": new}).error_code == 0
        assert client.call(HEARTBEAT, 3, {**beat, "member_id": old}).error_code == FENCED_INSTANCE_ID


def test_classic_members_go_on_at_the_next_coordinator_after_a_kill(tmp_path):
    """On a cluster the group's record is replicated with the offsets: when the broker leading the
    group's partition of ``__consumer_offsets`` is killed, the next leader loads the group, and
    its members' heartbeats and SyncGroups of their generation are answered there at once."""
    with EmbeddedCluster(
        3, log_dir=tmp_path / "cluster", default_replication_factor=3, broker_session_timeout_ms=2_000
    ) as cluster:
        cluster.create_topic("events", partitions=2, replication_factor=3)

        def coordinator() -> int:
            with WireClient(next(iter(cluster.nodes.values())).bootstrap_servers) as client:  # creates the topic
                wait_until(
                    lambda: client.call(FIND_COORDINATOR, 2, {"key": GROUP, "key_type": 0}).error_code == 0,
                    "a coordinator for the group",
                    60,
                )
            partitions = cluster.controller.image.topics[OFFSETS_TOPIC].partitions
            return cluster.wait_for_leader(OFFSETS_TOPIC, offsets_partition_for(GROUP, partitions))

        first = coordinator()
        address = cluster.nodes[first].bootstrap_servers
        with WireClient(address) as one, WireClient(address) as two:
            leader_client, _, leader, follower, generation = two_member_group(one, two)
            before = members(describe(one, GROUP))
            # A commit is answered once the in-sync replicas have it, and the group's record before it
            # (the leader's SyncGroup is answered without waiting for the record's replicas).
            assert commit(leader_client, GROUP, generation, leader, {("events", 0): 5}) == {("events", 0): 0}
        cluster.kill_broker(first)
        # the controller fences the killed broker (its session times out) and elects another leader
        successor = wait_until(lambda: [node for node in [coordinator()] if node != first], "a new coordinator", 60)[0]

        with WireClient(cluster.nodes[successor].bootstrap_servers) as client:

            def loaded() -> bool:
                code = heartbeat(client, GROUP, generation, leader)
                assert code in (0, NOT_COORDINATOR), code  # never UNKNOWN_MEMBER_ID: the member is known
                return code == 0

            wait_until(loaded, "the next coordinator to take the leader's heartbeat", 60)
            assert heartbeat(client, GROUP, generation, follower) == 0
            assert sync(client, GROUP, generation, follower).assignment == b"follower"
            (described,) = client.call(
                DESCRIBE_GROUPS, 4, {"groups": [GROUP], "include_authorized_operations": False}
            ).groups
            assert described.group_state == "Stable" and members(described) == before
            assert fetch_all(client, GROUP) == {("events", 0): 5}
