"""Consumer groups with aiokafka: members share partitions, commit after processing, and the
group rebalances as members leave and join again; every message is consumed at least once."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from tests.support.waiting import async_wait_until
from tests.support.wire import WireClient

PARTITIONS = 6


class Member:
    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        self.consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            fetch_max_wait_ms=100,
        )
        self.consumed: set[tuple[int, int]] = set()
        self.task: asyncio.Task[None] | None = None

    @property
    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    async def start(self) -> Member:
        await self.consumer.start()
        self.task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=100)
            for records in batches.values():
                for record in records:
                    self.consumed.add((record.partition, record.offset))
            if batches:
                await self.consumer.commit()  # after processing: at least once

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
            self.task = None
        await self.consumer.stop()  # sends LeaveGroup


async def produce(bootstrap: str, topic: str, per_partition: int) -> set[tuple[int, int]]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, b"x", partition=p) for _ in range(per_partition) for p in range(PARTITIONS)
        ]
        return {(meta.partition, meta.offset) for meta in await asyncio.gather(*futures)}
    finally:
        await producer.stop()


def committed_offsets(bootstrap: str, group: str) -> dict[int, int]:
    """partition -> committed offset, as OffsetFetch (topics=null: all) reports them."""
    with WireClient(bootstrap) as client:
        response = client.call(9, 5, {"group_id": group, "topics": None})
    assert response.error_code == 0
    return {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}


def shares(members: list[Member]) -> bool:
    owned = [m.assignment for m in members]
    sizes = sorted(len(o) for o in owned)
    return set().union(*owned) == set(range(PARTITIONS)) and sizes[-1] - sizes[0] <= 1 and sum(sizes) == PARTITIONS


def test_aiokafka_members_share_partitions_and_rebalance_on_leave_and_rejoin(pylog_broker, pylog_topic):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=PARTITIONS)
    group = f"aio-{topic}"

    async def scenario() -> None:
        members = [
            await Member(bootstrap, topic, group, "aio-a").start(),
            await Member(bootstrap, topic, group, "aio-b").start(),
        ]
        first, second = members
        try:
            await async_wait_until(
                lambda: shares([first, second]), lambda: f"3+3: {[m.assignment for m in members]}", timeout=30
            )
            sent = await produce(bootstrap, topic, 10)
            await async_wait_until(lambda: sent <= first.consumed | second.consumed, "the first messages", timeout=30)

            await first.stop()
            members.remove(first)
            await async_wait_until(
                lambda: second.assignment == set(range(PARTITIONS)),
                lambda: f"the remaining member to own all partitions: {second.assignment}",
                timeout=30,
            )
            sent |= await produce(bootstrap, topic, 10)

            third = await Member(bootstrap, topic, group, "aio-c").start()
            members.append(third)
            await async_wait_until(
                lambda: shares([second, third]),
                lambda: f"3+3 again: {second.assignment}, {third.assignment}",
                timeout=30,
            )
            sent |= await produce(bootstrap, topic, 10)
            await async_wait_until(
                lambda: sent <= first.consumed | second.consumed | third.consumed, "every message", timeout=30
            )
            ends = {p: max(o for q, o in sent if q == p) + 1 for p in range(PARTITIONS)}
            await async_wait_until(
                lambda: committed_offsets(bootstrap, group) == ends,
                lambda: f"commits at the log end {ends}",
                timeout=10,
            )
        finally:
            for member in members:
                await member.stop()

    asyncio.run(scenario())
