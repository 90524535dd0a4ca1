"""Kafka's Java clients (kafka-clients 4.3) against pylog's broker, and against Apache Kafka as
the reference: a transactional producer read by read_committed and read_uncommitted consumers,
a consumer group of three members with the cooperative-sticky assignor, and a consumer reading
through fetch sessions, on one broker and across a partition leader's kill on a pylog cluster."""

from __future__ import annotations

import collections
import contextlib
import itertools
import queue
import threading
import time

from tests.interop.harness import Cluster, JavaClients, records, table
from tests.support.waiting import wait_until


def test_transactional_producer_is_read_once_by_read_committed_and_aborts_are_skipped(
    cluster: Cluster, java_clients: JavaClients
):
    topic = cluster.topic(partitions=2)
    produced = java_clients.run("txn-produce", cluster.bootstrap_servers, topic, f"txn-{topic}", "v", "6", "4")
    assert produced == ["COMMITTED 6", "ABORTED 4", "COMMITTED 6"]

    committed = records(java_clients.run("read", cluster.bootstrap_servers, topic, "read_committed", "60000"))
    values = [value for _, _, value in committed]
    assert sorted(values) == sorted([f"v-c-{i}" for i in range(6)] + [f"v-d-{i}" for i in range(6)])
    for partition in (0, 1):  # each partition in produce order
        in_partition = [value for p, _, value in committed if p == partition]
        assert in_partition == sorted(in_partition, key=lambda v: (v[2], int(v[4:])))

    everything = records(java_clients.run("read", cluster.bootstrap_servers, topic, "read_uncommitted", "60000"))
    assert sorted(value for _, _, value in everything) == sorted(values + [f"v-a-{i}" for i in range(4)])
    # Offsets are shared: the aborted records and the transaction markers take offsets too.
    assert {(p, o) for p, o, _ in committed} < {(p, o) for p, o, _ in everything}


class GroupProcess:
    """InteropClients group: three members in one JVM, their rebalance events as they come."""

    def __init__(
        self, java_clients: JavaClients, bootstrap: str, topic: str, group: str, protocol: str = "classic"
    ) -> None:
        self.process = java_clients.start("group", bootstrap, topic, group, "3", protocol)
        self.events: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.events.put(line.strip())

    def until(self, condition, timeout: float = 120) -> None:
        """Collect events until ``condition(self)`` holds."""

        def reached() -> bool:
            if condition(self):
                return True
            with contextlib.suppress(queue.Empty):
                self.seen.append(self.events.get(timeout=1))
            return False

        wait_until(reached, lambda: f"the group to get there; events: {self.seen}", timeout, interval=0)

    def owned(self) -> dict[int, set[int]]:
        """Each member's partitions, from the assign/revoke events so far."""
        owned: dict[int, set[int]] = collections.defaultdict(set)
        for event in self.seen:
            kind, *fields = event.split(" ")
            if kind in ("ASSIGNED", "REVOKED", "LOST") and len(fields) == 2:
                partitions = {int(p) for p in fields[1].split(",") if p}
                if kind == "ASSIGNED":
                    owned[int(fields[0])] |= partitions
                else:
                    owned[int(fields[0])] -= partitions
        return owned

    def consumed(self) -> collections.Counter:
        return collections.Counter((int(e.split()[2]), int(e.split()[3])) for e in self.seen if e.startswith("RECORD"))

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        if self.process.poll() is None:
            self.send("quit")
            try:
                self.process.wait(60)
            except Exception:  # noqa: BLE001 - a hung JVM is killed
                self.process.kill()
                self.process.wait(30)


def produce_round_robin(cluster: Cluster, topic: str, prefix: str, count: int) -> None:
    """``count`` records spread over every partition, with Kafka's console producer."""
    cluster.tool(
        "kafka-console-producer",
        "--topic",
        topic,
        "--command-property",
        "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
        input="".join(f"{prefix}{i}\n" for i in range(count)),
    )


def balanced(g: GroupProcess) -> bool:
    """Three members own two of the six partitions each."""
    owned = g.owned()
    return sorted(len(owned[m]) for m in range(3)) == [2, 2, 2] and set().union(*owned.values()) == set(range(6))


def stop_one_and_read_on(cluster: Cluster, members: GroupProcess, topic: str, before: dict[int, set[int]]) -> None:
    """Member 1 stops: members 0 and 2 keep what they had and take over only its partitions (no
    revocation, nothing lost), and every record, before and after, is read once."""
    stopped_at = len(members.seen)
    members.send("stop 1")
    members.until(lambda g: "STOPPED 1" in g.seen and len(g.owned()[0] | g.owned()[2]) == 6)
    after = members.owned()
    assert before[0] <= after[0] and before[2] <= after[2], members.seen
    assert after[0] | after[2] == set(range(6)) and not after[0] & after[2]
    since = members.seen[stopped_at:]
    revoked_from_survivors = [e for e in since if e.startswith(("REVOKED 0", "REVOKED 2", "LOST"))]
    assert revoked_from_survivors == [], members.seen
    produce_round_robin(cluster, topic, "n", 60)
    members.until(lambda g: sum(g.consumed().values()) >= 120)
    consumed = members.consumed()
    assert len(consumed) == 120 and set(consumed.values()) == {1}, consumed  # each record once


def test_cooperative_sticky_group_of_three_shares_partitions_and_moves_only_a_leavers(
    cluster: Cluster, java_clients: JavaClients
):
    topic = cluster.topic(partitions=6)
    group = f"coop-{topic}"
    members = GroupProcess(java_clients, cluster.bootstrap_servers, topic, group)
    try:
        members.until(balanced)
        before = {m: set(p) for m, p in members.owned().items()}

        rows = table(cluster.tool("kafka-consumer-groups", "--describe", "--group", group).stdout)
        assert len(rows) == 6 and {row["HOST"] for row in rows} == {"/127.0.0.1"}, rows
        assert {row["CLIENT-ID"] for row in rows} == {"member-0", "member-1", "member-2"}
        state = table(cluster.tool("kafka-consumer-groups", "--describe", "--group", group, "--state").stdout)
        assert [(row["ASSIGNMENT-STRATEGY"], row["STATE"], row["#MEMBERS"]) for row in state] == [
            ("cooperative-sticky", "Stable", "3")
        ]
        produce_round_robin(cluster, topic, "m", 60)
        members.until(lambda g: sum(g.consumed().values()) >= 60)
        stop_one_and_read_on(cluster, members, topic, before)
    finally:
        members.close()


def test_consumer_protocol_group_of_three_shares_partitions_and_moves_only_a_leavers(
    cluster: Cluster, java_clients: JavaClients
):
    """KIP-848 (group.protocol=consumer): the broker assigns; a leaver's partitions go to the
    others without taking any from them, every record is read once, and the tools describe the
    group (ConsumerGroupDescribe) as Kafka does."""
    topic = cluster.topic(partitions=6)
    group = f"kip848-{topic}"
    members = GroupProcess(java_clients, cluster.bootstrap_servers, topic, group, "consumer")
    try:
        members.until(balanced)
        before = {m: set(p) for m, p in members.owned().items()}
        assert not any(a & b for a, b in itertools.combinations(before.values(), 2))

        def described() -> list[dict[str, str]]:
            return table(cluster.tool("kafka-consumer-groups", "--describe", "--group", group).stdout)

        def six_rows() -> list[dict[str, str]] | None:
            rows = described()
            return rows if len(rows) == 6 else None

        # the tool shows a partition once its member has committed it
        rows = wait_until(six_rows, "six rows", interval=0.5)
        assert {row["CLIENT-ID"] for row in rows} == {"member-0", "member-1", "member-2"}, rows
        assert {row["HOST"] for row in rows} == {"/127.0.0.1"}, rows
        state = table(cluster.tool("kafka-consumer-groups", "--describe", "--group", group, "--state").stdout)
        assert [(row["ASSIGNMENT-STRATEGY"], row["STATE"], row["#MEMBERS"]) for row in state] == [
            ("uniform", "Stable", "3")
        ], state
        listed = table(cluster.tool("kafka-consumer-groups", "--list", "--type").stdout)
        assert {"GROUP": group, "TYPE": "Consumer"} in listed, listed
        produce_round_robin(cluster, topic, "m", 60)
        members.until(lambda g: sum(g.consumed().values()) >= 60)
        stop_one_and_read_on(cluster, members, topic, before)
    finally:
        members.close()
    deleted = cluster.tool("kafka-consumer-groups", "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted.stdout


def test_transactional_producer_on_a_replicated_cluster(pylog_cluster, java_clients: JavaClients):
    """The same Java transactional producer on a 3-broker pylog cluster: its partitions are led by
    different brokers, whose markers the coordinator writes with WriteTxnMarkers; transaction
    protocol v2 is not finalized there, so the client adds partitions with AddPartitionsToTxn."""
    pylog_cluster.create_topic("java-txn", partitions=2, replication_factor=3)
    assert pylog_cluster.leader("java-txn", 0) != pylog_cluster.leader("java-txn", 1)
    bootstrap = pylog_cluster.bootstrap_servers
    produced = java_clients.run("txn-produce", bootstrap, "java-txn", "txn-java-cluster", "v", "6", "4")
    assert produced == ["COMMITTED 6", "ABORTED 4", "COMMITTED 6"]
    committed = records(java_clients.run("read", bootstrap, "java-txn", "read_committed", "60000"))
    assert sorted(value for _, _, value in committed) == sorted(
        [f"v-c-{i}" for i in range(6)] + [f"v-d-{i}" for i in range(6)]
    )


def test_java_consumer_fetches_through_fetch_sessions_and_reads_everything_once(
    pylog_broker, java_clients: JavaClients
):
    """Kafka's Java consumer opens a fetch session (KIP-227) with pylog's broker, as with Kafka,
    and reads through incremental fetches: every record once, in order per partition, while
    records are still arriving in some partitions and not in others."""
    from confluent_kafka import Producer

    topic = f"java-sessions-{time.monotonic_ns()}"
    pylog_broker.create_topic(topic, partitions=3)
    producer = Producer({"bootstrap.servers": pylog_broker.bootstrap_servers, "linger.ms": 0})
    expected = []
    for partition, count in ((0, 2_000), (1, 30), (2, 0)):  # a busy, a quiet and an empty partition
        for i in range(count):
            producer.produce(topic, value=f"p{partition}-{i}".encode(), partition=partition)
            expected.append((partition, f"p{partition}-{i}"))
            if i % 100 == 99:
                producer.flush(10)  # many small fetches rather than one large one
    assert producer.flush(30) == 0
    sessions = pylog_broker._broker.fetch_sessions
    created, incremental = sessions.created, sessions.incremental_fetches

    read = records(java_clients.run("read", pylog_broker.bootstrap_servers, topic, "read_uncommitted", "60000"))
    assert sorted((p, v) for p, _, v in read) == sorted(expected)  # everything, once
    for partition in (0, 1):
        offsets = [o for p, o, _ in read if p == partition]
        assert offsets == list(range(len(offsets)))
    assert sessions.created > created, "the Java consumer opened no fetch session"
    assert sessions.incremental_fetches > incremental, "the Java consumer made no incremental fetch"


def test_java_consumer_reads_on_through_a_partition_leader_kill_with_new_fetch_sessions(
    pylog_cluster, java_clients: JavaClients
):
    """Fetch sessions live on one broker: when a partition's leader is killed, Kafka's Java
    consumer must find the new leader and fetch there (a session with it, opened or extended),
    and read on from its position: every acknowledged record once, offsets without a gap or a
    repeat, on a 3-broker pylog cluster."""
    from confluent_kafka import Producer

    cluster = pylog_cluster
    topic, per_phase = "java-follow", 300
    cluster.create_topic(topic, partitions=2, replication_factor=3, config={"min.insync.replicas": "2"})
    for partition in (0, 1):
        cluster.wait_for_isr(topic, partition, size=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "log_level": 0})
    expected = []

    def produce(phase: str) -> None:
        for partition in (0, 1):
            for i in range(per_phase):
                producer.produce(topic, value=f"{phase}{partition}-{i}".encode(), partition=partition)
                expected.append((partition, f"{phase}{partition}-{i}"))
        assert producer.flush(60) == 0

    produce("a")
    follower = java_clients.start("follow", cluster.bootstrap_servers, topic, str(4 * per_phase), "150000")
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []

    def read() -> None:
        assert follower.stdout is not None
        for line in follower.stdout:
            lines.put(line.strip())

    def until(count: int, timeout: float = 120) -> None:

        def printed() -> bool:
            if sum(line.startswith("RECORD") for line in seen) >= count:
                return True
            assert reader.is_alive() or not lines.empty(), f"the Java consumer ended: {seen[-3:]}"
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=1))
            return False

        wait_until(
            printed,
            lambda: f"the Java consumer printed {len(seen)} lines, not {count} records: {seen[-3:]}",
            timeout,
            0,
        )

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        until(2 * per_phase)  # the first phase, read through the old leaders' sessions
        victim = cluster.leader(topic, 0)
        cluster.kill_broker(victim)
        successor = cluster.wait_for_leader(topic, 0, not_on=victim)
        sessions = cluster.nodes[successor].broker.fetch_sessions
        incremental = sessions.incremental_fetches
        produce("b")  # written to the new leader of partition 0
        until(4 * per_phase)
        assert follower.wait(60) == 0, follower.stderr.read() if follower.stderr else ""
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait(30)
    reader.join(30)
    while not lines.empty():
        seen.append(lines.get())
    assert seen[-1] == f"END {4 * per_phase}", seen[-3:]
    read_records = records(seen)
    assert sorted((p, v) for p, _, v in read_records) == sorted(expected)  # every record, once
    for partition in (0, 1):
        offsets = [o for p, o, _ in read_records if p == partition]
        assert offsets == list(range(2 * per_phase)), f"partition {partition}: offsets out of order"
    assert sessions.incremental_fetches > incremental, (
        f"the Java consumer made no incremental fetch from the new leader (broker {successor})"
    )
