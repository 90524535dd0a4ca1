"""The group coordinator on the wire: held JoinGroup/SyncGroup responses, rebalances triggered by
joins, session expiry and the rebalance timeout, offset commit validation and its error codes,
ListGroups/DescribeGroups, the oldest served versions, and internal topics kept out of sight."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from tests.support.waiting import wait_until
from tests.support.wire import WireClient

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT = 8, 9, 10, 11, 12
LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, METADATA = 13, 14, 15, 16, 3
CREATE_TOPICS, DELETE_TOPICS = 19, 20
MEMBER_ID_REQUIRED = 79
EMPTY_ASSIGNMENT = b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"

_groups = itertools.count()


@pytest.fixture(scope="module")
def pylog_broker():
    """This module's broker allows sessions from 100 ms (group.min.session.timeout.ms; Kafka's
    default minimum is 6 s), so that expiry is quick to test."""
    from kafka_spark.broker import EmbeddedBroker

    with EmbeddedBroker(register=False, group_min_session_timeout_ms=100) as broker:
        yield broker


@pytest.fixture
def group(request: pytest.FixtureRequest) -> str:
    return f"{request.node.name}-{next(_groups)}"


@pytest.fixture
def connect(pylog_broker):
    clients: list[WireClient] = []

    def open_client() -> WireClient:
        client = WireClient(pylog_broker.bootstrap_servers)
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        client.close()


def join_body(
    group: str,
    member_id: str = "",
    *,
    session_ms: int = 6000,
    rebalance_ms: int = 6000,
    protocols: tuple[str, ...] = ("range",),
    protocol_type: str = "consumer",
) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": session_ms,
        "rebalance_timeout": rebalance_ms,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": protocol_type,
        "protocols": [{"name": name, "metadata": name.encode()} for name in protocols],
    }


def join(client: WireClient, group: str, member_id: str = "", **options: Any) -> Any:
    """A JoinGroup v5; a new member's first is answered 79 MEMBER_ID_REQUIRED and joins again
    with the member id it was given, as clients do."""
    joined = client.call(JOIN_GROUP, 5, join_body(group, member_id, **options))
    if not member_id and joined.error_code == MEMBER_ID_REQUIRED:
        joined = client.call(JOIN_GROUP, 5, join_body(group, joined.member_id, **options))
    return joined


def new_member(client: WireClient, group: str, **options: Any) -> str:
    """The member id a new member is told to join with (79 MEMBER_ID_REQUIRED, v4+)."""
    answer = client.call(JOIN_GROUP, 5, join_body(group, **options))
    assert (answer.error_code, answer.generation_id) == (MEMBER_ID_REQUIRED, -1) and answer.member_id
    return answer.member_id


def sync(
    client: WireClient, group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None
) -> Any:
    return client.call(
        SYNC_GROUP,
        3,
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": member_id,
            "group_instance_id": None,
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
        },
    )


def heartbeat(client: WireClient, group: str, generation: int, member_id: str) -> int:
    return client.call(
        HEARTBEAT,
        3,
        {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None},
    ).error_code


def commit(
    client: WireClient, group: str, generation: int, member_id: str, offsets: dict[tuple[str, int], int]
) -> dict[tuple[str, int], int]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": -1,
                "committed_metadata": None,
            }
        )
    response = client.call(
        OFFSET_COMMIT,
        7,
        {
            "group_id": group,
            "generation_id_or_member_epoch": generation,
            "member_id": member_id,
            "group_instance_id": None,
            "topics": [{"name": n, "partitions": p} for n, p in topics.items()],
        },
    )
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def fetch_all(client: WireClient, group: str) -> dict[tuple[str, int], int]:
    response = client.call(OFFSET_FETCH, 5, {"group_id": group, "topics": None})
    assert response.error_code == 0
    return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}


def describe(client: WireClient, group: str) -> Any:
    (described,) = client.call(DESCRIBE_GROUPS, 4, {"groups": [group], "include_authorized_operations": False}).groups
    return described


def stable_member(client: WireClient, group: str, **options: Any) -> tuple[str, int]:
    """Join alone and sync: (member_id, generation) of a one-member Stable group."""
    joined = join(client, group, **options)
    assert joined.error_code == 0
    synced = sync(client, group, joined.generation_id, joined.member_id, {joined.member_id: b"mine"})
    assert synced.error_code == 0 and synced.assignment == b"mine"
    return joined.member_id, joined.generation_id


def test_find_coordinator_names_this_node_for_groups_and_transactions(pylog_broker, connect):
    client = connect()
    for key_type in (0, 1):
        response = client.call(FIND_COORDINATOR, 2, {"key": "anything", "key_type": key_type})
        assert (response.error_code, response.node_id, response.port) == (0, 0, pylog_broker.port)
    assert client.call(FIND_COORDINATOR, 0, {"key": "g"}).error_code == 0


def test_join_is_held_until_every_known_member_rejoins(connect, group):
    a, b = connect(), connect()
    member_a, generation = stable_member(a, group)

    b.send(JOIN_GROUP, 5, join_body(group, new_member(b, group)))  # held: member a has not rejoined yet
    wait_until(lambda: describe(a, group).group_state == "PreparingRebalance", "b's JoinGroup to start a rebalance")
    assert heartbeat(a, group, generation, member_a) == 27  # a learns of the rebalance on its own socket
    assert describe(a, group).group_state == "PreparingRebalance"
    rejoined_a = join(a, group, member_a)
    joined_b = b.receive(JOIN_GROUP, 5)

    assert rejoined_a.generation_id == joined_b.generation_id == generation + 1
    assert rejoined_a.leader == joined_b.leader == member_a  # the previous leader stays leader
    assert {m.member_id: m.metadata for m in rejoined_a.members} == {member_a: b"range", joined_b.member_id: b"range"}
    assert joined_b.members == ()  # followers learn nothing of the others

    b.send(
        SYNC_GROUP,
        3,
        {
            "group_id": group,
            "generation_id": joined_b.generation_id,
            "member_id": joined_b.member_id,
            "group_instance_id": None,
            "assignments": [],
        },
    )
    # b's SyncGroup is held until the leader's: the broker shows nothing of it to wait for, so
    # this pause only gives it the time to arrive first (the checks below hold either way).
    time.sleep(0.2)
    assert describe(a, group).group_state == "CompletingRebalance"
    # The leader leaves b out of its assignment: b still gets a decodable, empty one.
    assert sync(a, group, rejoined_a.generation_id, member_a, {member_a: b"all"}).assignment == b"all"
    assert b.receive(SYNC_GROUP, 3).assignment == EMPTY_ASSIGNMENT
    assert describe(a, group).group_state == "Stable"


def test_protocol_is_chosen_by_vote_among_protocols_every_member_supports(connect, group):
    a, b, c = connect(), connect(), connect()
    for client, protocols in ((a, ("roundrobin", "range")), (b, ("range", "roundrobin")), (c, ("roundrobin",))):
        client.send(
            JOIN_GROUP, 5, join_body(group, new_member(client, group, protocols=protocols), protocols=protocols)
        )
    responses = [client.receive(JOIN_GROUP, 5) for client in (a, b, c)]
    assert {r.protocol_name for r in responses} == {"roundrobin"}
    assert len({r.generation_id for r in responses}) == 1  # the initial delay gathered all three


def test_join_with_no_common_protocol_is_refused(connect, group):
    a, b = connect(), connect()
    stable_member(a, group)
    assert join(b, group, protocols=("cooperative-sticky",)).error_code == 23
    assert join(b, group, protocol_type="connect").error_code == 23


def test_session_expiry_removes_the_member_and_rebalances_the_rest(connect, group):
    a, b = connect(), connect()
    a.send(JOIN_GROUP, 5, join_body(group, new_member(a, group)))
    b.send(
        JOIN_GROUP,
        5,
        join_body(group, new_member(b, group, session_ms=500, rebalance_ms=500), session_ms=500, rebalance_ms=500),
    )
    joined_a, joined_b = a.receive(JOIN_GROUP, 5), b.receive(JOIN_GROUP, 5)
    generation = joined_a.generation_id
    leader_client = a if joined_a.leader == joined_a.member_id else b
    assignments = {joined_a.member_id: b"x", joined_b.member_id: b"y"}
    assert sync(leader_client, group, generation, joined_a.leader, assignments).error_code == 0
    assert sync(a, group, generation, joined_a.member_id).assignment == b"x"  # Stable: answered at once

    # b goes silent; a keeps heartbeating and is told to rejoin once b's 500 ms session is over.
    code = wait_until(
        lambda: heartbeat(a, group, generation, joined_a.member_id), "an answer other than 0", timeout=5, interval=0.1
    )
    assert code == 27, f"heartbeat answered {code}, expected 27 (rebalance) after b's session expired"
    rejoined = join(a, group, joined_a.member_id)
    assert rejoined.generation_id == generation + 1
    assert [m.member_id for m in rejoined.members] == [joined_a.member_id]
    assert heartbeat(b, group, generation, joined_b.member_id) == 25  # b is gone for good


def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_removed(connect, group):
    a, b, c = connect(), connect(), connect()
    a.send(JOIN_GROUP, 5, join_body(group, new_member(a, group, rebalance_ms=800), rebalance_ms=800))
    b.send(JOIN_GROUP, 5, join_body(group, new_member(b, group, rebalance_ms=800), rebalance_ms=800))
    joined_a, joined_b = a.receive(JOIN_GROUP, 5), b.receive(JOIN_GROUP, 5)
    generation = joined_a.generation_id
    leader_client = a if joined_a.leader == joined_a.member_id else b
    sync(leader_client, group, generation, joined_a.leader, {})

    c.send(
        JOIN_GROUP, 5, join_body(group, new_member(c, group, rebalance_ms=800), rebalance_ms=800)
    )  # starts a rebalance
    wait_until(lambda: describe(a, group).group_state == "PreparingRebalance", "c's JoinGroup to start a rebalance")
    started = time.monotonic()
    a.send(JOIN_GROUP, 5, join_body(group, joined_a.member_id, rebalance_ms=800))
    # b keeps its session alive with heartbeats (27) but never rejoins.
    while time.monotonic() - started < 0.6:
        assert heartbeat(b, group, generation, joined_b.member_id) == 27
        time.sleep(0.1)
    rejoined_a, joined_c = a.receive(JOIN_GROUP, 5), c.receive(JOIN_GROUP, 5)
    assert time.monotonic() - started >= 0.6
    assert rejoined_a.generation_id == joined_c.generation_id == generation + 1
    leader = rejoined_a if rejoined_a.members else joined_c
    assert {m.member_id for m in leader.members} == {joined_a.member_id, joined_c.member_id}
    assert heartbeat(b, group, generation, joined_b.member_id) == 25


def test_leave_group_rebalances_at_once_and_the_last_leave_empties_the_group(connect, group):
    a, b = connect(), connect()
    a.send(JOIN_GROUP, 5, join_body(group, new_member(a, group)))
    b.send(JOIN_GROUP, 5, join_body(group, new_member(b, group)))
    joined_a, joined_b = a.receive(JOIN_GROUP, 5), b.receive(JOIN_GROUP, 5)
    assert b.call(LEAVE_GROUP, 2, {"group_id": group, "member_id": joined_b.member_id}).error_code == 0
    assert describe(a, group).group_state == "PreparingRebalance"
    rejoined = join(a, group, joined_a.member_id)
    assert [m.member_id for m in rejoined.members] == [joined_a.member_id]
    assert a.call(LEAVE_GROUP, 2, {"group_id": group, "member_id": joined_a.member_id}).error_code == 0
    described = describe(a, group)
    assert (described.group_state, described.members) == ("Empty", ())
    assert a.call(LEAVE_GROUP, 2, {"group_id": group, "member_id": joined_a.member_id}).error_code == 25


def test_offset_commit_errors_name_the_stale_or_unknown_member_and_the_broker_keeps_serving(
    pylog_topic, connect, group
):
    topic = pylog_topic(partitions=2)
    client = connect()
    member, generation = stable_member(client, group)
    tp0, tp1 = (topic, 0), (topic, 1)

    assert commit(client, group, generation - 1, member, {tp0: 5}) == {tp0: 22}  # stale generation
    assert commit(client, group, generation, "no-such-member", {tp0: 5}) == {tp0: 25}
    assert commit(client, group, -1, "", {tp0: 5}) == {tp0: 25}  # standalone commits only while Empty
    missing = ("no-such-topic", 0)
    assert commit(client, group, generation, member, {tp0: 5, tp1: 6, (topic, 9): 1, missing: 1}) == {
        tp0: 0,
        tp1: 0,
        (topic, 9): 3,
        missing: 3,
    }
    assert fetch_all(client, group) == {tp0: 5, tp1: 6}

    assert heartbeat(client, group, generation + 5, member) == 22
    assert heartbeat(client, group, generation, "no-such-member") == 25
    assert sync(client, group, generation + 5, member).error_code == 22
    assert join(client, group, "no-such-member").error_code == 25
    assert heartbeat(client, "never-seen-group", 1, member) == 25
    # Still serving, on the same connection.
    assert heartbeat(client, group, generation, member) == 0
    assert commit(client, group, generation, member, {tp0: 7}) == {tp0: 0}


def test_commits_during_completing_rebalance_answer_rebalance_in_progress(pylog_topic, connect, group):
    topic = pylog_topic()
    client = connect()
    joined = join(client, group)
    assert describe(client, group).group_state == "CompletingRebalance"
    assert commit(client, group, joined.generation_id, joined.member_id, {(topic, 0): 1}) == {(topic, 0): 27}


def test_standalone_commit_to_an_empty_group_and_fetch_of_uncommitted_partitions(pylog_topic, connect, group):
    topic = pylog_topic(partitions=3)
    client = connect()
    assert commit(client, group, -1, "", {(topic, 1): 42}) == {(topic, 1): 0}
    response = client.call(
        OFFSET_FETCH, 1, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}]}
    )
    assert [
        (p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in response.topics[0].partitions
    ] == [(0, -1, "", 0), (1, 42, "", 0)]
    assert describe(client, group).group_state == "Empty"
    listed = {g.group_id: g.protocol_type for g in client.call(LIST_GROUPS, 2, {}).groups}
    assert listed[group] == "consumer"


def test_oldest_served_versions_run_a_whole_group_flow(pylog_topic, connect, group):
    topic = pylog_topic()
    client = connect()
    joined = client.call(
        JOIN_GROUP,
        0,
        {
            "group_id": group,
            "session_timeout": 6000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"m"}],
        },
    )
    assert joined.error_code == 0 and joined.generation_id >= 1
    synced = client.call(
        SYNC_GROUP,
        0,
        {
            "group_id": group,
            "generation_id": joined.generation_id,
            "member_id": joined.member_id,
            "assignments": [{"member_id": joined.member_id, "assignment": b"a"}],
        },
    )
    assert synced.assignment == b"a"
    assert (
        client.call(
            HEARTBEAT, 0, {"group_id": group, "generation_id": joined.generation_id, "member_id": joined.member_id}
        ).error_code
        == 0
    )
    committed = client.call(
        OFFSET_COMMIT,
        2,
        {
            "group_id": group,
            "generation_id_or_member_epoch": joined.generation_id,
            "member_id": joined.member_id,
            "retention_time": -1,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": 0, "committed_offset": 3, "committed_metadata": "m"}],
                }
            ],
        },
    )
    assert committed.topics[0].partitions[0].error_code == 0
    fetched = client.call(OFFSET_FETCH, 1, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]})
    assert (fetched.topics[0].partitions[0].committed_offset, fetched.topics[0].partitions[0].metadata) == (3, "m")
    (described,) = client.call(DESCRIBE_GROUPS, 0, {"groups": [group]}).groups
    assert (described.group_state, described.protocol_data) == ("Stable", "range")
    assert client.call(LEAVE_GROUP, 0, {"group_id": group, "member_id": joined.member_id}).error_code == 0
    assert group in {g.group_id for g in client.call(LIST_GROUPS, 0, {}).groups}


def test_describe_reports_members_and_an_unknown_group_as_dead(connect, group):
    client = connect()
    member, _ = stable_member(client, group)
    described = describe(client, group)
    assert (described.group_state, described.protocol_type, described.protocol_data) == ("Stable", "consumer", "range")
    (only,) = described.members
    assert (only.member_id, only.client_id, only.member_metadata, only.member_assignment) == (
        member,
        "wire-test",
        b"range",
        b"mine",
    )
    assert only.client_host == "/127.0.0.1"  # as Kafka spells the peer (InetAddress.toString())
    unknown = describe(client, group + "-unknown")
    assert (unknown.error_code, unknown.group_state, unknown.members) == (0, "Dead", ())


def test_internal_offsets_topic_is_listed_as_internal_and_never_created_by_clients(
    pylog_broker, pylog_topic, connect, group
):
    topic = pylog_topic()
    client = connect()
    assert commit(client, group, -1, "", {(topic, 0): 1}) == {(topic, 0): 0}  # creates __consumer_offsets
    listed = client.call(METADATA, 1, {"topics": None})
    internal = {t.name: t.is_internal for t in listed.topics}
    assert (internal["__consumer_offsets"], internal[topic]) == (True, False)  # as Kafka lists them
    asked = client.call(
        METADATA,
        4,
        {"topics": [{"name": "__consumer_offsets"}, {"name": "__other_internal"}], "allow_auto_topic_creation": True},
    )
    assert [(t.error_code, t.is_internal) for t in asked.topics] == [(0, True), (3, False)]  # none auto-created
    created = client.call(
        CREATE_TOPICS,
        2,
        {
            "topics": [
                {"name": "__mine", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            ],
            "timeout": 1000,
            "validate_only": False,
        },
    )
    assert created.topics[0].error_code == 17
    deleted = client.call(DELETE_TOPICS, 1, {"topic_names": ["__consumer_offsets"], "timeout": 1000})
    assert deleted.responses[0].error_code == 42  # INVALID_REQUEST: the broker's own state
    assert fetch_all(client, group) == {(topic, 0): 1}  # still there


def test_a_member_that_disconnects_while_parked_expires_and_the_group_carries_on(connect, group):
    a, b = connect(), connect()
    member_a, generation = stable_member(a, group)
    b.send(
        JOIN_GROUP,
        5,
        join_body(group, new_member(b, group, session_ms=500, rebalance_ms=500), session_ms=500, rebalance_ms=500),
    )
    wait_until(lambda: describe(a, group).group_state == "PreparingRebalance", "b's JoinGroup to be held")
    b.close()  # gone while its JoinGroup is held
    rejoined = join(a, group, member_a)
    assert rejoined.generation_id == generation + 1 and len(rejoined.members) == 2
    assert sync(a, group, rejoined.generation_id, member_a, {member_a: b"all"}).assignment == b"all"
    code = wait_until(
        lambda: heartbeat(a, group, rejoined.generation_id, member_a), "an answer other than 0", timeout=5, interval=0.1
    )
    assert code == 27  # the vanished member's session ran out
    again = join(a, group, member_a)
    assert [m.member_id for m in again.members] == [member_a]
    assert describe(a, group).group_state == "CompletingRebalance"


def test_static_member_instance_id_is_echoed_to_the_leader_and_in_describe(connect, group):
    client = connect()
    body = join_body(group)
    body["group_instance_id"] = "instance-1"
    joined = client.call(JOIN_GROUP, 5, body)
    assert [(m.member_id, m.group_instance_id) for m in joined.members] == [(joined.member_id, "instance-1")]
    assert [m.group_instance_id for m in describe(client, group).members] == ["instance-1"]


def test_commit_with_oversized_metadata_is_refused_for_that_partition_only(pylog_topic, connect, group):
    topic = pylog_topic(partitions=2)
    client = connect()
    response = client.call(
        OFFSET_COMMIT,
        7,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "x" * 5000,
                        },
                        {
                            "partition_index": 1,
                            "committed_offset": 2,
                            "committed_leader_epoch": 3,
                            "committed_metadata": "ok",
                        },
                    ],
                }
            ],
        },
    )
    assert [p.error_code for p in response.topics[0].partitions] == [12, 0]
    fetched = client.call(
        OFFSET_FETCH, 5, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}]}
    )
    assert [(p.committed_offset, p.committed_leader_epoch, p.metadata) for p in fetched.topics[0].partitions] == [
        (-1, -1, ""),
        (2, 3, "ok"),
    ]
