"""Consumer groups with confluent-kafka (librdkafka): three member processes share a 6-partition
topic under each assignment strategy; one is killed with SIGKILL (no LeaveGroup) and the other
two take over its partitions after its session expires, from its committed offsets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.waiting import wait_until
from tests.support.wire import WireClient

SESSION_TIMEOUT_MS = 4000
PARTITIONS = 6

# One group member: prints its assignment whenever it changes and every message it processed,
# committing each one synchronously after printing it (commit after processing: at least once).
MEMBER = r"""
import signal, sys
from confluent_kafka import Consumer
bootstrap, topic, group, strategy, session_ms = sys.argv[1:6]
running = True
def stop(*_):
    global running
    running = False
signal.signal(signal.SIGTERM, stop)
owned = set()
def show():
    print("ASSIGNMENT " + ",".join(str(p) for p in sorted(owned)), flush=True)
def on_assign(consumer, partitions):
    owned.update(p.partition for p in partitions); show()
def on_revoke(consumer, partitions):
    owned.difference_update(p.partition for p in partitions); show()
consumer = Consumer({
    "bootstrap.servers": bootstrap, "group.id": group, "partition.assignment.strategy": strategy,
    "session.timeout.ms": int(session_ms), "heartbeat.interval.ms": 300, "enable.auto.commit": False,
    "auto.offset.reset": "latest", "fetch.wait.max.ms": 100,
})
consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
while running:
    message = consumer.poll(0.1)
    if message is None or message.error():
        continue
    print(f"MSG {message.partition()} {message.offset()}", flush=True)
    consumer.commit(message=message, asynchronous=False)
consumer.close()
"""


@dataclass
class MemberProcess:
    process: subprocess.Popen[str]
    assignment: set[int] = field(default_factory=set)
    consumed: set[tuple[int, int]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            kind, _, rest = line.strip().partition(" ")
            with self.lock:
                if kind == "ASSIGNMENT":
                    self.assignment = {int(p) for p in rest.split(",") if p}
                elif kind == "MSG":
                    partition, offset = rest.split()
                    self.consumed.add((int(partition), int(offset)))


def start_member(bootstrap: str, topic: str, group: str, strategy: str) -> MemberProcess:
    process = subprocess.Popen(
        [sys.executable, "-c", MEMBER, bootstrap, topic, group, strategy, str(SESSION_TIMEOUT_MS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    member = MemberProcess(process)
    threading.Thread(target=member.read, daemon=True).start()
    return member


def seed_committed_offsets(bootstrap: str, topic: str, group: str) -> None:
    """Commit offset 0 everywhere as a standalone consumer (generation -1, allowed while the
    group is Empty), so members start at the beginning although they reset to "latest"."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = consumer.commit(
            offsets=[TopicPartition(topic, p, 0) for p in range(PARTITIONS)], asynchronous=False
        )
        assert all(tp.error is None for tp in committed)
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, per_partition: int) -> set[tuple[int, int]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    delivered: set[tuple[int, int]] = set()

    def on_delivery(error, message):
        assert error is None, error
        delivered.add((message.partition(), message.offset()))

    for index in range(per_partition):
        for partition in range(PARTITIONS):
            producer.produce(topic, value=b"v%d" % index, partition=partition, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    return delivered


@pytest.fixture(scope="module")
def pylog_broker():
    """This module's broker allows the members' 4 s sessions (group.min.session.timeout.ms; Kafka's
    default minimum is 6 s), so that a killed member is noticed sooner."""
    from kafka_spark.broker import EmbeddedBroker

    with EmbeddedBroker(register=False, group_min_session_timeout_ms=1_000) as broker:
        yield broker


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_killed_member_partitions_move_to_the_survivors_without_losing_messages(pylog_broker, pylog_topic, strategy):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=PARTITIONS)
    group = f"group-{topic}"
    seed_committed_offsets(bootstrap, topic, group)
    members = [start_member(bootstrap, topic, group, strategy) for _ in range(3)]
    try:

        def assignments() -> list[set[int]]:
            return [set(m.assignment) for m in members]

        def balanced(alive: list[MemberProcess], each: int) -> bool:
            owned = [set(m.assignment) for m in alive]
            return all(len(o) == each for o in owned) and set().union(*owned) == set(range(PARTITIONS))

        wait_until(lambda: balanced(members, 2), lambda: f"two partitions per member, have {assignments()}", timeout=30)
        with WireClient(bootstrap) as client:
            (described,) = client.call(15, 4, {"groups": [group]}).groups
        assert described.group_state == "Stable" and described.protocol_data == strategy
        assert len(described.members) == 3

        first = produce(bootstrap, topic, per_partition=20)
        wait_until(lambda: first <= set().union(*(m.consumed for m in members)), "the first messages", timeout=30)

        victim, survivors = members[0], members[1:]
        victim_partitions = set(victim.assignment)
        victim.process.send_signal(signal.SIGKILL)  # no LeaveGroup: only the session timeout tells
        victim.process.wait(10)
        killed_at = time.monotonic()
        # Produced while the victim's partitions have no owner: with auto.offset.reset=latest only
        # its committed offsets let the survivors read these.
        second = produce(bootstrap, topic, per_partition=20)

        wait_until(
            lambda: balanced(survivors, 3),
            lambda: f"the survivors to take {sorted(victim_partitions)}, have {assignments()[1:]}",
            timeout=SESSION_TIMEOUT_MS / 1000 + 15,
        )
        took_total = time.monotonic() - killed_at
        assert took_total < SESSION_TIMEOUT_MS / 1000 + 8, f"takeover took {took_total:.1f} s"
        wait_until(
            lambda: second <= set().union(*(m.consumed for m in survivors)),
            "the survivors to read every message produced after the kill",
            timeout=30,
        )
        everything = set().union(*(m.consumed for m in members))
        assert first | second <= everything
    finally:
        for member in members:
            if member.process.poll() is None:
                member.process.terminate()
        for member in members:
            try:
                member.process.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(member.process.pid, signal.SIGKILL)
                member.process.wait(5)
