"""The classic group protocol's transition table (coordinator/classic_state.py), driven directly on
an event loop (no sockets): it is Kafka's, illegal moves raise, and the initial rebalance delay
gathers members that start together."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from kafka_spark.broker.coordinator.classic_state import (
    LEGAL_TRANSITIONS,
    Group,
    GroupState,
    IllegalGroupTransition,
)
from kafka_spark.broker.coordinator.group import GroupCoordinator
from kafka_spark.broker.durability import GroupCommit
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS
from kafka_spark.broker.notifier import DataNotifier
from kafka_spark.broker.storage.log_manager import LogManager

S = GroupState

# Kafka's ClassicGroupState: each state's valid *previous* states.
KAFKA_PREVIOUS_STATES = {
    S.EMPTY: {S.PREPARING_REBALANCE},
    S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
    S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
    S.STABLE: {S.COMPLETING_REBALANCE},
    S.DEAD: {S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY},
}


def test_transition_table_is_kafkas():
    inverted = {
        state: {source for source, targets in LEGAL_TRANSITIONS.items() if state in targets} for state in GroupState
    }
    assert inverted == KAFKA_PREVIOUS_STATES


@pytest.fixture
def logs(tmp_path):
    logs = LogManager(tmp_path)
    logs.create_topic(OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS)
    yield logs
    logs.close()


@pytest.fixture
def coordinator(logs):
    loop = asyncio.new_event_loop()
    group_commit = GroupCommit(loop)
    # This broker leads every partition of __consumer_offsets and is alone in their ISRs, as a
    # single node: nothing to wait for but the fsync.
    replication = SimpleNamespace(
        topics=logs.topics, leads=lambda topic, partition: True, wait_replicated=lambda *args: None
    )
    coordinator = GroupCoordinator(
        loop, logs, replication, group_commit, DataNotifier(loop), initial_rebalance_delay_ms=200
    )
    for partition in range(OFFSETS_TOPIC_PARTITIONS):
        coordinator.partition_moved(partition, 0)
    yield coordinator
    group_commit.close()
    loop.close()


def test_an_illegal_transition_is_a_bug_that_raises(coordinator):
    group = Group("g")
    with pytest.raises(IllegalGroupTransition, match="Empty -> Stable"):
        coordinator.classic._transition(group, GroupState.STABLE)
    assert group.state is GroupState.EMPTY


def _join(coordinator: GroupCoordinator, member_id: str):
    """A JoinGroup of group "g" (a response dict, or a future resolved when the rebalance completes)."""
    return coordinator.join(
        "g",
        member_id,
        client_id="c",
        client_host="",
        session_timeout_ms=6000,
        rebalance_timeout_ms=6000,
        protocol_type="consumer",
        protocols=[("range", b"")],
    )


def test_members_arriving_within_the_initial_delay_share_the_first_generation(coordinator):
    loop = coordinator._loop

    def join() -> asyncio.Future:
        return _join(coordinator, "")

    async def scenario() -> list[dict]:
        first = join()
        await asyncio.sleep(0.1)
        assert coordinator.state_of("g") is GroupState.PREPARING_REBALANCE and not first.done()
        second = join()
        return list(await asyncio.gather(first, second))

    responses = loop.run_until_complete(scenario())
    assert [r["generation_id"] for r in responses] == [1, 1]
    assert len(responses[0]["members"]) == 2 and responses[1]["members"] == []
    assert coordinator.state_of("g") is GroupState.COMPLETING_REBALANCE
    coordinator.close()


def test_transactional_commit_bypasses_generation_checks_and_skips_missing_partitions(coordinator, logs):
    from kafka_spark.common.topic_partition import TopicPartition

    logs.create_topic("t", 2)

    async def scenario() -> None:
        coordinator.commit_offsets(
            "txn-group",
            {
                TopicPartition("t", 0): (5, "meta", 3),
                TopicPartition("t", 1): (6, None, -1),
                TopicPartition("gone", 0): (1, None, -1),
            },
        )
        await asyncio.sleep(0.2)  # lets the background fsync finish before the loop closes

    coordinator._loop.run_until_complete(scenario())
    committed = coordinator.committed("txn-group")
    assert {tp: (c.offset, c.metadata, c.leader_epoch) for tp, c in committed.items()} == {
        TopicPartition("t", 0): (5, "meta", 3),
        TopicPartition("t", 1): (6, "", -1),
    }  # the epoch is kept


def test_the_leader_whose_request_completes_a_rebalance_is_answered_before_the_followers(coordinator):
    """Kafka's order: the request that completes a rebalance (the leader's rejoin, then its
    SyncGroup) is answered in the same call, the waiting follower through its future, which the API
    handler awaits and so answers on a later turn of the loop. (aiokafka's KIP-345 tests read the
    leader's new assignment as soon as the follower is ready; tests/interop/test_group_rebalances.py
    runs that scenario on both brokers.)"""
    loop = coordinator._loop

    def join(member_id: str):
        return _join(coordinator, member_id)

    async def scenario() -> None:
        leader = await join("")  # alone after the initial delay: generation 1, its own leader
        assert leader["leader"] == leader["member_id"]
        generation, leader_id = leader["generation_id"], leader["member_id"]
        alone = coordinator.sync("g", generation, leader_id, {leader_id: b"a"})
        assert isinstance(alone, dict) and alone["assignment"] == b"a"

        follower_join = join("")  # a second member: the group prepares a rebalance and waits
        assert isinstance(follower_join, asyncio.Future) and not follower_join.done()
        leader_join = join(leader_id)  # the leader's rejoin completes it
        assert isinstance(leader_join, dict), "the leader's JoinGroup was not answered in its own call"
        assert follower_join.done() and leader_join["generation_id"] == generation + 1
        follower = follower_join.result()
        assert leader_join["leader"] == leader_id and len(leader_join["members"]) == 2
        assert follower["members"] == [] and follower["generation_id"] == generation + 1

        follower_sync = coordinator.sync("g", generation + 1, follower["member_id"], {})
        assert isinstance(follower_sync, asyncio.Future) and not follower_sync.done()
        assignments = {leader_id: b"L", follower["member_id"]: b"F"}
        leader_sync = coordinator.sync("g", generation + 1, leader_id, assignments)
        assert isinstance(leader_sync, dict), "the leader's SyncGroup was not answered in its own call"
        assert leader_sync["assignment"] == b"L" and follower_sync.result()["assignment"] == b"F"
        assert coordinator.state_of("g") is GroupState.STABLE

    loop.run_until_complete(scenario())
    coordinator.close()
