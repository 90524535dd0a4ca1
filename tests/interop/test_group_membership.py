"""Classic group membership on the wire, against pylog's broker and Apache Kafka 4.3.1: a new
dynamic member's first JoinGroup (v4+) is answered MEMBER_ID_REQUIRED; a static member
(``group.instance.id``) back under a new member id takes its old place without a rebalance and
fences the old id; a static member leaves by its instance id; a static member that misses a
rebalance stays a member while the dynamic ones that miss it are dropped; a member that never
sends its SyncGroup is removed after the rebalance timeout, in a Stable group too. Each answer is asserted
the same on both brokers."""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
import time
from typing import Any

import pytest

from tests.interop.harness import Cluster, wait_for_group_coordinator
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS = 11, 12, 13, 14, 15
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID = 25, 27, 79, 82

_groups = itertools.count()


@pytest.fixture
def group(cluster: Cluster) -> str:
    name = f"membership-{cluster.name}-{next(_groups)}-{int(time.time() * 1000) % 100000}"
    wait_for_group_coordinator(cluster.bootstrap_servers, name)
    return name


@pytest.fixture
def connect(cluster: Cluster):
    clients: list[WireClient] = []

    def open_client() -> WireClient:
        clients.append(WireClient(cluster.bootstrap_servers, timeout=30))
        return clients[-1]

    yield open_client
    for client in clients:
        client.close()


def join_body(
    group: str, member_id: str = "", instance: str | None = None, metadata: bytes = b"m", rebalance_ms: int = 30_000
) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": 10_000,
        "rebalance_timeout": rebalance_ms,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": metadata}],
        "reason": None,
    }


def sync(client: WireClient, group: str, generation: int, member_id: str, instance: str | None, **assignments) -> Any:
    return client.call(
        SYNC_GROUP,
        5,
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": member_id,
            "group_instance_id": instance,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
        },
    )


def heartbeat(client: WireClient, group: str, generation: int, member_id: str, instance: str | None) -> int:
    body = {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": instance}
    return client.call(HEARTBEAT, 4, body).error_code


def describe(client: WireClient, group: str) -> Any:
    return client.call(DESCRIBE_GROUPS, 5, {"groups": [group], "include_authorized_operations": False}).groups[0]


def test_a_new_dynamic_member_is_told_its_member_id_before_it_joins(cluster: Cluster, connect, group: str) -> None:
    client = connect()
    first = client.call(JOIN_GROUP, 9, join_body(group))
    assert (first.error_code, first.generation_id, first.members) == (MEMBER_ID_REQUIRED, -1, ())
    assert first.member_id, cluster.name
    assert describe(client, group).members == ()  # told its id, not a member yet
    joined = client.call(JOIN_GROUP, 9, join_body(group, first.member_id))
    assert (joined.error_code, joined.member_id, joined.leader) == (0, first.member_id, first.member_id)
    assert [m.member_id for m in joined.members] == [first.member_id]

    # Before v4 the member id is handed out with the join itself.
    older = connect().call(JOIN_GROUP, 3, {k: v for k, v in join_body(f"{group}-v3").items() if k in _V3})
    assert older.error_code == 0 and older.member_id and older.leader == older.member_id


_V3 = {"group_id", "session_timeout", "rebalance_timeout", "member_id", "protocol_type", "protocols"}


@pytest.mark.parametrize("version", [9, 5])
def test_a_static_member_back_under_a_new_id_takes_its_place(cluster: Cluster, connect, group: str, version: int):
    client = connect()
    body = join_body(group, instance="static-a")
    if version < 8:
        del body["reason"]
    joined = client.call(JOIN_GROUP, version, body)  # a static member is given its id at once
    assert joined.error_code == 0, cluster.name
    old, generation = joined.member_id, joined.generation_id
    assert sync(client, group, generation, old, "static-a", **{old: b"a's share"}).assignment == b"a's share"

    back = connect().call(JOIN_GROUP, version, body)  # a restart: same instance id, no member id
    assert back.error_code == 0 and back.member_id != old
    assert back.generation_id == generation  # no rebalance
    if version >= 9:  # the leader learns the members and that the assignment stands
        assert back.leader == back.member_id and back.skip_assignment is True
        assert [(m.member_id, m.group_instance_id) for m in back.members] == [(back.member_id, "static-a")]
    else:  # nobody is asked to assign again; the leader is named as it was before the restart
        assert back.leader == old and back.members == ()
    assert heartbeat(client, group, generation, old, "static-a") == FENCED_INSTANCE_ID
    assert heartbeat(client, group, generation, back.member_id, "static-a") == 0
    assert sync(client, group, generation, old, "static-a").error_code == FENCED_INSTANCE_ID
    assert sync(client, group, generation, back.member_id, "static-a").assignment == b"a's share"
    described = describe(client, group)
    assert (described.group_state, [m.member_id for m in described.members]) == ("Stable", [back.member_id])


def test_a_static_member_leaves_by_its_instance_id(cluster: Cluster, connect, group: str) -> None:
    client = connect()
    joined = client.call(JOIN_GROUP, 9, join_body(group, instance="static-b"))
    assert sync(client, group, joined.generation_id, joined.member_id, "static-b").error_code == 0

    def leave(*members: tuple[str, str | None]) -> list[int]:
        body = {"group_id": group, "members": [{"member_id": m, "group_instance_id": i} for m, i in members]}
        return [member.error_code for member in client.call(LEAVE_GROUP, 4, body).members]

    assert leave(("not-its-id", "static-b"), ("", "nobody")) == [FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID]
    assert describe(client, group).group_state == "Stable"
    assert leave(("", "static-b")) == [0]  # by instance id alone, as an administrator removes it
    assert (describe(client, group).group_state, describe(client, group).members) == ("Empty", ())
    assert heartbeat(client, group, joined.generation_id, joined.member_id, "static-b") == UNKNOWN_MEMBER_ID


def test_a_static_leader_that_misses_a_rebalance_stays_a_member(cluster: Cluster, connect, group: str) -> None:
    static, dynamic = connect(), connect()
    first = static.call(JOIN_GROUP, 9, join_body(group, instance="static-d", rebalance_ms=1000))
    assert first.error_code == 0 and first.leader == first.member_id, cluster.name
    assert sync(static, group, first.generation_id, first.member_id, "static-d").error_code == 0
    member_id = dynamic.call(JOIN_GROUP, 9, join_body(group, rebalance_ms=1000)).member_id
    # The dynamic member joins; the static leader never rejoins (its session, 10 s, outlasts the test).
    joined = dynamic.call(JOIN_GROUP, 9, join_body(group, member_id, rebalance_ms=1000))
    assert joined.error_code == 0 and joined.generation_id == first.generation_id + 1
    assert joined.leader == member_id  # the one that rejoined leads
    assert {(m.member_id, m.group_instance_id) for m in joined.members} == {
        (first.member_id, "static-d"),  # still a member, for its assignment
        (member_id, None),
    }


def test_a_member_that_never_syncs_is_removed_after_the_rebalance_timeout_even_once_stable(
    cluster: Cluster, connect, group: str
) -> None:
    """Every member of a generation owes a SyncGroup within the rebalance timeout: the leader's
    makes the group Stable, but a follower that never asks for its assignment is removed (it
    heartbeats all along, so its session never expires) and the group rebalances without it."""
    leader, follower = connect(), connect()
    body = functools.partial(join_body, group, rebalance_ms=3000)
    leader_id = leader.call(JOIN_GROUP, 9, body()).member_id
    first = leader.call(JOIN_GROUP, 9, body(leader_id))
    assert sync(leader, group, first.generation_id, leader_id, None, **{leader_id: b"all"}).assignment == b"all"

    follower_id = follower.call(JOIN_GROUP, 9, body()).member_id
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # the follower's join waits for the rebalance, which the leader's rejoin completes
        parked = pool.submit(follower.call, JOIN_GROUP, 9, body(follower_id))
        wait_until(
            lambda: heartbeat(leader, group, first.generation_id, leader_id, None) == REBALANCE_IN_PROGRESS,
            f"{cluster.name}: the leader is told of the rebalance",
        )
        rejoined = leader.call(JOIN_GROUP, 9, body(leader_id))
        joined = parked.result(timeout=60)
    generation = rejoined.generation_id
    assert joined.generation_id == generation and rejoined.leader == leader_id, cluster.name
    assignments = {leader_id: b"one", follower_id: b"other"}
    assert sync(leader, group, generation, leader_id, None, **assignments).assignment == b"one"
    assert describe(leader, group).group_state == "Stable"

    # Both heartbeat (no session expires); the follower never syncs: removed after the rebalance
    # timeout, and the group rebalances without it.
    answers: list[tuple[int, int]] = []

    def follower_removed() -> bool:
        answers.append(
            (
                heartbeat(leader, group, generation, leader_id, None),
                heartbeat(follower, group, generation, follower_id, None),
            )
        )
        return answers[-1][1] == UNKNOWN_MEMBER_ID

    wait_until(follower_removed, lambda: f"{cluster.name}: the follower that never synced is removed: {answers[-3:]}")
    assert {leader_answer for leader_answer, _ in answers[:-1]} == {0}, cluster.name  # Stable until then
    alone = leader.call(JOIN_GROUP, 9, body(leader_id))  # the leader rejoins the rebalance at once
    assert (alone.error_code, alone.generation_id) == (0, generation + 1), cluster.name
    assert [m.member_id for m in alone.members] == [leader_id], cluster.name
