"""Consumer groups with kafka-python: members share partitions, commit after processing, and the
group rebalances as members leave and join again; every message is consumed at least once."""

from __future__ import annotations

import threading

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.support.waiting import wait_until
from tests.support.wire import WireClient

PARTITIONS = 6


class Member:
    """A KafkaConsumer polled on its own thread (kafka-python consumers are not thread-safe)."""

    def __init__(self, bootstrap: str, topic: str, group: str, name: str) -> None:
        self.consumer = KafkaConsumer(
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
        self.assignment: set[int] = set()
        self.consumed: set[tuple[int, int]] = set()
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batches = self.consumer.poll(timeout_ms=100)
                for records in batches.values():
                    for record in records:
                        self.consumed.add((record.partition, record.offset))
                if batches:
                    self.consumer.commit()  # after processing: at least once
                self.assignment = {tp.partition for tp in self.consumer.assignment()}
        except BaseException as error:  # noqa: BLE001 surfaced by the test through self.errors
            self.errors.append(error)
        finally:
            self.consumer.close()  # sends LeaveGroup

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self.errors, self.errors


def produce(bootstrap: str, topic: str, per_partition: int) -> set[tuple[int, int]]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    futures = [producer.send(topic, value=b"x", partition=p) for _ in range(per_partition) for p in range(PARTITIONS)]
    producer.flush(30)
    sent = {(meta.partition, meta.offset) for meta in (future.get(30) for future in futures)}
    producer.close()
    return sent


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


def test_kafka_python_members_share_partitions_and_rebalance_on_leave_and_rejoin(pylog_broker, pylog_topic):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=PARTITIONS)
    group = f"kp-{topic}"
    first, second = Member(bootstrap, topic, group, "kp-a"), Member(bootstrap, topic, group, "kp-b")
    members = [first, second]
    third = None
    try:
        wait_until(
            lambda: shares([first, second]), lambda: f"3+3 partitions: {[m.assignment for m in members]}", timeout=30
        )
        sent = produce(bootstrap, topic, 10)
        wait_until(lambda: sent <= first.consumed | second.consumed, "the first messages", timeout=30)

        first.close()  # leaves the group: the other member takes everything
        wait_until(
            lambda: second.assignment == set(range(PARTITIONS)),
            lambda: f"the remaining member to own all partitions: {second.assignment}",
            timeout=30,
        )
        sent |= produce(bootstrap, topic, 10)

        third = Member(bootstrap, topic, group, "kp-c")  # a new member joins: shares again
        members.append(third)
        wait_until(
            lambda: shares([second, third]), lambda: f"3+3 again: {second.assignment}, {third.assignment}", timeout=30
        )
        sent |= produce(bootstrap, topic, 10)
        wait_until(lambda: sent <= set().union(*(m.consumed for m in members)), "every message", timeout=30)

        ends = {p: max(o for q, o in sent if q == p) + 1 for p in range(PARTITIONS)}
        wait_until(
            lambda: committed_offsets(bootstrap, group) == ends,
            lambda: f"commits at the log end {ends}, have {committed_offsets(bootstrap, group)}",
            timeout=10,
        )
    finally:
        for member in members:
            member.close()


def test_kafka_python_standalone_commit_and_fetch_round_trip(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=2)
    consumer = KafkaConsumer(
        bootstrap_servers=pylog_broker.bootstrap_servers, group_id=f"kp-solo-{topic}", enable_auto_commit=False
    )
    try:
        partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(partitions)
        from kafka.structs import OffsetAndMetadata

        consumer.commit({partitions[0]: OffsetAndMetadata(7, "note", -1), partitions[1]: OffsetAndMetadata(3, "", -1)})
        assert consumer.committed(partitions[0]) == 7
        assert consumer.committed(partitions[1]) == 3
    finally:
        consumer.close()
