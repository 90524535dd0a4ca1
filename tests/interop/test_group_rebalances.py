"""Rebalances of classic consumer groups as aiokafka's own KIP-345 tests
(test_kip_345_enabled/_disabled) live them, on pylog's broker and on Apache Kafka 4.3.1.

A first member takes both partitions of a topic; a second joins. Both brokers must give the same
rebalance: the first member revokes both partitions and is assigned one, the second is assigned the
other, nothing is assigned twice. The scenario repeats, with static members
(``group.instance.id``) and with dynamic ones, eight rounds each.

aiokafka's tests check the first member's new assignment the moment the second is ready. That
held on Kafka and failed one round in three to five on pylog before its coordinator answered the
leader first, as Kafka does (tests/broker/coordinator/test_group_state_machine.py pins that order).
It is still a race between two members' callbacks in the client, which a loaded machine lost once on
Kafka too, so here each round waits for the first member's callback before comparing.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from tests.interop.harness import Cluster, wait_for_group_coordinator
from tests.support.waiting import async_wait_until

ROUNDS = 8
_groups = itertools.count()


class Listener(ConsumerRebalanceListener):
    """Every revocation and assignment a member saw, in order."""

    def __init__(self) -> None:
        self.revoked: list[set[TopicPartition]] = []
        self.assigned: list[set[TopicPartition]] = []

    def on_partitions_revoked(self, revoked) -> None:
        self.revoked.append(set(revoked))

    def on_partitions_assigned(self, assigned) -> None:
        self.assigned.append(set(assigned))


def _member(cluster: Cluster, group: str, instance: str | None) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id=group,
        group_instance_id=instance,
        enable_auto_commit=True,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    )


async def _second_member_joins(cluster: Cluster, topic: str, static: bool) -> None:
    group = f"rebalance-{cluster.name}-{next(_groups)}-{topic}"
    await asyncio.to_thread(wait_for_group_coordinator, cluster.bootstrap_servers, group)
    both = {TopicPartition(topic, 0), TopicPartition(topic, 1)}
    first, second = (_member(cluster, group, f"{group}-{n}" if static else None) for n in (1, 2))
    heard_first, heard_second = Listener(), Listener()
    first.subscribe([topic], listener=heard_first)
    second.subscribe([topic], listener=heard_second)
    try:
        await first.start()
        await first.seek_to_committed()
        assert (heard_first.revoked, heard_first.assigned) == ([set()], [both])

        await second.start()
        await second.seek_to_committed()
        await async_wait_until(
            lambda: len(heard_first.assigned) == 2, lambda: f"{cluster.name}: the first member's new assignment"
        )
        mine, theirs = first.assignment(), second.assignment()
        assert len(mine) == len(theirs) == 1 and mine | theirs == both, cluster.name
        assert heard_first.revoked == [set(), both], cluster.name
        assert heard_first.assigned == [both, mine], cluster.name
        assert (heard_second.revoked, heard_second.assigned) == ([set()], [theirs])
    finally:
        await second.stop()
        await first.stop()


@pytest.mark.parametrize("static", [True, False], ids=["static", "dynamic"])
def test_the_first_member_is_rebalanced_before_the_second_is_ready(cluster: Cluster, static: bool) -> None:
    topic = cluster.topic(partitions=2)

    async def rounds() -> None:
        for _ in range(ROUNDS):
            await _second_member_joins(cluster, topic, static)

    asyncio.run(rounds())
