"""EmbeddedCluster: replication, the high watermark, the ISR, acks=all and leader epochs.

Each test starts its own small cluster (a few tens of milliseconds) with the timeouts it needs,
talks to it with real clients (confluent-kafka) or, where the exact error code matters, with the
wire client, and waits on conditions with generous deadlines, never for fixed times.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest

from kafka_spark import EmbeddedCluster
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC
from kafka_spark.broker.internal_topics import partition_for as offsets_partition_for
from kafka_spark.broker.storage.batch import build_record_batch, read_varint, validate_batches
from kafka_spark.broker.storage.epochs import CHECKPOINT_FILE
from kafka_spark.broker.storage.log import partition_dir
from kafka_spark.broker.storage.records import decode_records
from kafka_spark.common.topic_partition import TopicPartition
from tests.broker.coordinator.test_group_protocol import commit
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
EOF = confluent_kafka.KafkaError._PARTITION_EOF


def produce_confluent(
    bootstrap: str, topic: str, values: list[bytes], partition: int | None = None, acks: str = "all"
) -> list:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 2, "log_level": 0})
    errors: list = []
    for value in values:
        kwargs = {} if partition is None else {"partition": partition}
        producer.produce(
            topic, value=value, on_delivery=lambda error, _: errors.append(error) if error else None, **kwargs
        )
    assert producer.flush(60) == 0
    return errors


def wire_produce(bootstrap: str, topic: str, values: list[bytes], acks: int) -> tuple[int, int]:
    """(error code, base offset) of one Produce v7 of ``values`` to partition 0."""
    batch = build_record_batch([(None, value, [], int(time.time() * 1000)) for value in values])
    with WireClient(bootstrap) as client:
        response = client.call(
            0,
            7,
            {
                "transactional_id": None,
                "acks": acks,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
    answer = response.responses[0].partition_responses[0]
    return int(answer.error_code), answer.base_offset


def wire_fetch(bootstrap: str, topic: str, current_leader_epoch: int) -> int:
    with WireClient(bootstrap) as client:
        response = client.call(
            1,
            11,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": 1 << 20,
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": current_leader_epoch,
                                "fetch_offset": 0,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
    return int(response.responses[0].partitions[0].error_code)


def wire_list_offsets(bootstrap: str, topic: str, current_leader_epoch: int) -> int:
    """The error code of ListOffsets v4 (latest) for partition 0 with the client's current leader epoch."""
    with WireClient(bootstrap) as client:
        response = client.call(
            2,
            4,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": current_leader_epoch, "timestamp": -1}
                        ],
                    }
                ],
            },
        )
    return int(response.topics[0].partitions[0].error_code)


def wire_metadata(bootstrap: str, topic: str) -> dict:
    with WireClient(bootstrap) as client:
        response = client.call(
            3,
            9,
            {
                "topics": [{"name": topic}],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        )
    partition = response.topics[0].partitions[0]
    return {
        "controller": response.controller_id,
        "brokers": sorted(b.node_id for b in response.brokers),
        "leader": partition.leader_id,
        "leader_epoch": partition.leader_epoch,
        "replicas": list(partition.replica_nodes),
        "isr": list(partition.isr_nodes),
        "offline": list(partition.offline_replicas),
    }


def address(cluster: EmbeddedCluster, node_id: int) -> str:
    return f"127.0.0.1:{cluster.nodes[node_id].port}"


def log_of(cluster: EmbeddedCluster, node_id: int, topic: str, partition: int = 0):
    return cluster.nodes[node_id].broker.logs.get_log(topic, partition)


def values_of(cluster: EmbeddedCluster, node_id: int, topic: str, partition: int = 0) -> list[bytes]:
    """Every record value in one replica's log, read straight from its storage."""
    log = log_of(cluster, node_id, topic, partition)
    data = bytes(log.read(log.log_start_offset, 1 << 30, max_offset=log.log_end_offset))
    values: list[bytes] = []
    for header in validate_batches(data, 1 << 30, allow_control=True) if data else ():
        batch = data[: header.size]
        data = data[header.size :]
        buf, records = decode_records(batch, header)
        for record in records:
            _, cursor = read_varint(buf, record.after_timestamp)  # offset delta
            key_length, cursor = read_varint(buf, cursor)
            value_length, cursor = read_varint(buf, cursor + max(key_length, 0))
            values.append(bytes(buf[cursor : cursor + value_length]))
    return values


def read_all(bootstrap: str, topic: str, partition: int = 0) -> list[bytes]:
    """What a consumer sees, from the start to the end (the high watermark)."""
    consumer = confluent_kafka.Consumer(
        {  # commits nothing: a commit waits for the coordinator's in-sync replicas, a stopped one too
            "bootstrap.servers": bootstrap,
            "group.id": "readers",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 0,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, partition, confluent_kafka.OFFSET_BEGINNING)])
    values = []

    def at_end() -> bool:  # errors other than the end are retried by the client: read on
        message = consumer.poll(1)
        if message is not None and not message.error():
            values.append(message.value())
        return message is not None and message.error() is not None and message.error().code() == EOF

    try:
        wait_until(at_end, lambda: f"the end of the partition ({len(values)} records read)", 30, interval=0)
        return values
    finally:
        consumer.close()


def test_produced_records_reach_every_replica_with_leader_epochs_checkpointed(tmp_path: Path) -> None:
    with EmbeddedCluster(brokers=3, log_dir=tmp_path) as cluster:
        cluster.create_topic("orders", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
        leaders = {cluster.leader("orders", p) for p in range(3)}
        assert leaders == {0, 1, 2}, "the leaders of 3 partitions are spread over the 3 brokers"
        values = [f"order-{i}".encode() for i in range(300)]
        for partition in range(3):
            assert (
                produce_confluent(cluster.bootstrap_servers, "orders", values[partition::3], partition=partition) == []
            )

        for partition in range(3):
            expected = values_of(cluster, cluster.leader("orders", partition), "orders", partition)
            wait_until(
                lambda partition=partition, expected=expected: all(
                    values_of(cluster, node, "orders", partition) == expected for node in range(3)
                ),
                f"orders-{partition} on every replica",
                timeout=30,
            )
            for node in range(3):
                epochs = (tmp_path / f"broker-{node}" / f"orders-{partition}" / CHECKPOINT_FILE).read_text().split()
                assert epochs == ["0", "1", "0", "0"], "one epoch (0) starting at offset 0"
        assert sorted(sum((values_of(cluster, 0, "orders", p) for p in range(3)), [])) == sorted(values)
        described = cluster.describe()["topics"]["orders"]
        assert all(sorted(p["isr"]) == [0, 1, 2] and p["offline"] == [] for p in described)


def test_consumers_see_records_only_below_the_high_watermark(tmp_path: Path) -> None:
    # Long timeouts: the stopped follower stays registered and in the ISR, so the HW cannot pass it.
    with EmbeddedCluster(
        brokers=2, log_dir=tmp_path, broker_session_timeout_ms=120_000, replica_lag_time_max_ms=120_000
    ) as cluster:
        cluster.create_topic("gated", replication_factor=2)
        leader = cluster.leader("gated")
        follower = 1 - leader
        assert produce_confluent(cluster.bootstrap_servers, "gated", [b"a", b"b"]) == []
        cluster.kill_broker(follower)
        assert wire_produce(address(cluster, leader), "gated", [b"c", b"d", b"e"], acks=1) == (0, 2)

        log = log_of(cluster, leader, "gated")
        assert (log.log_end_offset, log.high_watermark) == (5, 2)
        assert read_all(address(cluster, leader), "gated") == [b"a", b"b"]

        cluster.restart_broker(follower)
        wait_until(lambda: log.high_watermark == 5, "the follower to catch up and the HW to advance", timeout=30)
        assert read_all(cluster.bootstrap_servers, "gated") == [b"a", b"b", b"c", b"d", b"e"]


def lagging_followers_cluster(log_dir: Path) -> EmbeddedCluster:
    """Three brokers whose stopped followers leave the ISR by falling behind
    replica.lag.time.max.ms (300 ms), never by being fenced (a long session timeout)."""
    return EmbeddedCluster(brokers=3, log_dir=log_dir, broker_session_timeout_ms=120_000, replica_lag_time_max_ms=300)


def replicated_topic(cluster: EmbeddedCluster, topic: str, min_insync_replicas: int) -> tuple[int, list[int]]:
    """A one-partition topic on all three brokers; its leader and followers."""
    cluster.create_topic(topic, replication_factor=3, config={"min.insync.replicas": str(min_insync_replicas)})
    leader = cluster.leader(topic)
    return leader, [node for node in range(3) if node != leader]


def test_acks_all_needs_min_insync_replicas_and_lagging_followers_leave_and_rejoin_the_isr(tmp_path: Path) -> None:
    with lagging_followers_cluster(tmp_path) as cluster:
        leader, followers = replicated_topic(cluster, "safe", min_insync_replicas=2)
        bootstrap = address(cluster, leader)
        assert wire_produce(bootstrap, "safe", [b"one"], acks=-1) == (0, 0)

        cluster.kill_broker(followers[0])
        cluster.wait_for_isr("safe", size=2)
        assert wire_produce(bootstrap, "safe", [b"two"], acks=-1) == (0, 1), "2 in sync: min.insync.replicas met"

        cluster.kill_broker(followers[1])
        assert cluster.wait_for_isr("safe", size=1) == (leader,)
        assert wire_produce(bootstrap, "safe", [b"three"], acks=-1)[0] == NOT_ENOUGH_REPLICAS
        assert wire_produce(bootstrap, "safe", [b"three"], acks=1) == (0, 2), "acks=1 needs the leader only"

        for node in followers:
            cluster.restart_broker(node)
        assert sorted(cluster.wait_for_isr("safe", size=3)) == [0, 1, 2]
        assert wire_produce(bootstrap, "safe", [b"four"], acks=-1) == (0, 3)
        for node in range(3):
            wait_until(
                lambda node=node: values_of(cluster, node, "safe") == [b"one", b"two", b"three", b"four"],
                f"broker {node} to hold every record",
                timeout=30,
            )


def test_killed_leader_loses_no_acknowledged_record_and_is_fenced(tmp_path: Path) -> None:
    with EmbeddedCluster(brokers=3, log_dir=tmp_path, broker_session_timeout_ms=2_000) as cluster:
        cluster.create_topic("payments", replication_factor=3, config={"min.insync.replicas": "2"})
        old = cluster.leader("payments")
        assert produce_confluent(cluster.bootstrap_servers, "payments", [b"%d" % i for i in range(100)]) == []
        before = wire_metadata(address(cluster, old), "payments")
        assert before["leader"] == old and before["offline"] == [] and sorted(before["isr"]) == [0, 1, 2]

        cluster.kill_broker(old)
        new = cluster.wait_for_leader("payments", not_on=old)
        survivor = address(cluster, new)
        after = wire_metadata(survivor, "payments")
        assert after["leader"] == new and after["leader_epoch"] == before["leader_epoch"] + 1
        assert after["offline"] == [old] and old not in after["isr"] and old not in after["brokers"]
        assert produce_confluent(cluster.bootstrap_servers, "payments", [b"%d" % i for i in range(100, 200)]) == []
        assert read_all(survivor, "payments") == [b"%d" % i for i in range(200)]

        # A client still on the old epoch is fenced; the returning broker follows and refuses produces.
        assert wire_fetch(survivor, "payments", before["leader_epoch"]) == FENCED_LEADER_EPOCH
        assert wire_fetch(survivor, "payments", after["leader_epoch"] + 1) == UNKNOWN_LEADER_EPOCH
        assert wire_list_offsets(survivor, "payments", before["leader_epoch"]) == FENCED_LEADER_EPOCH
        assert wire_list_offsets(survivor, "payments", after["leader_epoch"] + 1) == UNKNOWN_LEADER_EPOCH
        assert wire_list_offsets(survivor, "payments", after["leader_epoch"]) == 0
        cluster.restart_broker(old)
        assert sorted(cluster.wait_for_isr("payments", size=3)) == [0, 1, 2]
        assert cluster.leader("payments") == new
        assert wire_produce(address(cluster, old), "payments", [b"x"], acks=1)[0] == NOT_LEADER_OR_FOLLOWER
        wait_until(
            lambda: values_of(cluster, old, "payments") == [b"%d" % i for i in range(200)],
            "the restarted broker to catch up",
            timeout=30,
        )

        # Preferred-replica election (ElectLeaders) gives the partition back to its first replica.
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        preferred = cluster.partition("payments").replicas[0]
        assert preferred == old, "the leader at creation is the preferred replica"
        partition = confluent_kafka.TopicPartition("payments", 0)
        elected = admin.elect_leaders(confluent_kafka.ElectionType.PREFERRED, [partition]).result(30)
        assert elected[partition] is None, elected
        assert cluster.leader("payments") == old
        cluster.wait_for_metadata()
        futures = admin.describe_topics(confluent_kafka.TopicCollection(["payments"]))
        described = futures["payments"].result(30)
        cluster_description = admin.describe_cluster().result(30)
        assert sorted(node.id for node in cluster_description.nodes) == [0, 1, 2]
        assert cluster_description.controller.id == cluster.describe()["controller"]
        assert described.partitions[0].leader.id == old
        assert sorted(replica.id for replica in described.partitions[0].isr) == [0, 1, 2]
        assert produce_confluent(cluster.bootstrap_servers, "payments", [b"200"]) == []


def test_follower_truncates_its_divergent_tail_after_an_unclean_election(tmp_path: Path) -> None:
    """Only an unclean election can make a replica's tail diverge deterministically: the old
    leader's unreplicated records must go, found through OffsetForLeaderEpoch."""
    with EmbeddedCluster(
        brokers=2, log_dir=tmp_path, broker_session_timeout_ms=2_000, unclean_leader_election_enable=True
    ) as cluster:
        cluster.create_topic("diverge", replication_factor=2)
        a = cluster.leader("diverge")
        b = 1 - a
        assert produce_confluent(cluster.bootstrap_servers, "diverge", [b"shared-0", b"shared-1"]) == []
        wait_until(lambda: log_of(cluster, b, "diverge").log_end_offset == 2, "the follower to copy", timeout=30)
        cluster.kill_broker(b)
        cluster.wait_for_isr("diverge", size=1)
        assert wire_produce(address(cluster, a), "diverge", [b"lost-2", b"lost-3", b"lost-4"], acks=1) == (0, 2)
        cluster.kill_broker(a)
        wait_until(lambda: cluster.leader("diverge") == -1, "the partition to go offline", timeout=30)

        cluster.restart_broker(b)  # out of sync, but unclean.leader.election.enable lets it lead
        assert cluster.wait_for_leader("diverge") == b
        assert wire_produce(address(cluster, b), "diverge", [b"new-2"], acks=1) == (0, 2)

        cluster.restart_broker(a)
        cluster.wait_for_isr("diverge", size=2)
        wait_until(
            lambda: values_of(cluster, a, "diverge") == [b"shared-0", b"shared-1", b"new-2"],
            "the old leader to truncate its divergent tail and copy the new one",
            timeout=30,
        )
        epochs = cluster.nodes[a].replicas.partitions[TopicPartition("diverge", 0)].epochs.entries
        new_epoch = cluster.partition("diverge").leader_epoch
        assert epochs == [(0, 0), (new_epoch, 2)]
        assert read_all(cluster.bootstrap_servers, "diverge") == [b"shared-0", b"shared-1", b"new-2"]
        assert (partition_dir(tmp_path / f"broker-{a}", "diverge", 0) / CHECKPOINT_FILE).exists()


def test_topics_and_partitions_are_created_through_the_controller() -> None:
    """CreateTopics (a replication factor above the live brokers is refused), CreatePartitions, and
    a replication-factor-1 topic whose leader alone makes the HW."""
    with EmbeddedCluster(brokers=2) as cluster:
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        futures = admin.create_topics(
            [confluent_kafka.admin.NewTopic("wide", 1, 3), confluent_kafka.admin.NewTopic("narrow", 2, 2)]
        )
        with pytest.raises(confluent_kafka.KafkaException, match="larger than available brokers"):
            futures["wide"].result(30)
        futures["narrow"].result(30)
        cluster.wait_for_metadata()
        topic = admin.list_topics(timeout=30).topics["narrow"]
        assert all(sorted(p.replicas) == [0, 1] and sorted(p.isrs) == [0, 1] for p in topic.partitions.values())

        grown = admin.create_partitions([confluent_kafka.admin.NewPartitions("narrow", 4)])
        grown["narrow"].result(30)
        cluster.wait_for_metadata()
        assert [len(cluster.partition("narrow", p).isr) for p in range(4)] == [2, 2, 2, 2]
        for partition in (2, 3):
            leader = address(cluster, cluster.leader("narrow", partition))
            assert produce_confluent(leader, "narrow", [b"new-%d" % partition], partition=partition) == []
            assert read_all(cluster.bootstrap_servers, "narrow", partition) == [b"new-%d" % partition]

        cluster.create_topic("single", replication_factor=1)  # a leader alone in its ISR: HW = LEO at once
        leader = address(cluster, cluster.leader("single"))
        assert wire_produce(leader, "single", [b"a"], acks=-1) == (0, 0)
        assert wire_produce(leader, "single", [b"b"], acks=1) == (0, 1)
        assert read_all(leader, "single") == [b"a", b"b"]


def test_cluster_restarted_on_its_log_dir_keeps_topics_leaders_and_records(tmp_path: Path) -> None:
    with EmbeddedCluster(brokers=3, log_dir=tmp_path) as cluster:
        cluster.create_topic("kept", partitions=2, replication_factor=2)
        before = {p: cluster.partition("kept", p) for p in range(2)}
        assert produce_confluent(cluster.bootstrap_servers, "kept", [b"%d" % i for i in range(50)], partition=0) == []
        cluster.wait_for_isr("kept", 0)
        bootstrap = cluster.bootstrap_servers
    with EmbeddedCluster(brokers=3, log_dir=tmp_path) as cluster:
        assert cluster.bootstrap_servers == bootstrap, "the old ports, still free, are taken again"
        assert {p: cluster.partition("kept", p).replicas for p in range(2)} == {
            p: s.replicas for p, s in before.items()
        }
        assert read_all(cluster.bootstrap_servers, "kept") == [b"%d" % i for i in range(50)]
        assert produce_confluent(cluster.bootstrap_servers, "kept", [b"50"], partition=0) == []


def test_a_node_whose_old_port_is_taken_starts_on_another_and_releases_the_failed_start(tmp_path: Path) -> None:
    """A restart finds one node's old port taken (by anything): that node listens on another port.
    The first attempt's hold on the node's log directory (its lock, its log cleaner) is released
    before the second attempt takes the directory (CI once found the lock still held)."""
    with EmbeddedCluster(brokers=3, log_dir=tmp_path) as cluster:
        cluster.create_topic("kept", replication_factor=3)
        assert produce_confluent(cluster.bootstrap_servers, "kept", [b"a", b"b"], partition=0) == []
        old = {node_id: node.port for node_id, node in cluster.nodes.items()}
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", old[2]))
        squatter.listen()
        with EmbeddedCluster(brokers=3, log_dir=tmp_path) as cluster:
            ports = {node_id: node.port for node_id, node in cluster.nodes.items()}
            assert ports[2] != old[2] and {0: ports[0], 1: ports[1]} == {0: old[0], 1: old[1]}
            cluster.wait_for_isr("kept", 0)
            assert read_all(address(cluster, 2), "kept") == [b"a", b"b"]


def test_pylog_cluster_fixture_survives_a_follower_loss(pylog_cluster: EmbeddedCluster) -> None:
    pylog_cluster.create_topic("fixture", config={"min.insync.replicas": "2"})
    state = pylog_cluster.partition("fixture")
    assert len(state.replicas) == 3, "the fixture's default replication factor is 3"
    follower = next(node for node in state.replicas if node != state.leader)
    pylog_cluster.kill_broker(follower)
    pylog_cluster.wait_for_isr("fixture", size=2)
    metadata = wire_metadata(address(pylog_cluster, state.leader), "fixture")
    assert metadata["offline"] == [follower] and metadata["leader"] == state.leader
    assert produce_confluent(pylog_cluster.bootstrap_servers, "fixture", [b"still-written"]) == []
    assert read_all(pylog_cluster.bootstrap_servers, "fixture") == [b"still-written"]


def test_group_members_bootstrapped_on_different_brokers_share_one_coordinator() -> None:
    with EmbeddedCluster(brokers=3) as cluster:
        cluster.create_topic("shared", partitions=2, replication_factor=3)
        for partition in (0, 1):
            assert (
                produce_confluent(
                    cluster.bootstrap_servers,
                    "shared",
                    [b"%d-%d" % (partition, i) for i in range(5)],
                    partition=partition,
                )
                == []
            )
        members = [
            confluent_kafka.Consumer(
                {"bootstrap.servers": address, "group.id": "one-group", "auto.offset.reset": "earliest", "log_level": 0}
            )
            for address in cluster.bootstrap_servers.split(",")[:2]
        ]
        for member in members:
            member.subscribe(["shared"])
        seen: list[bytes] = []
        try:

            def read_by_both() -> bool:
                if len(seen) >= 10 and all(member.assignment() for member in members):
                    return True
                for member in members:
                    message = member.poll(0.1)
                    if message is not None and not message.error():
                        seen.append(message.value())
                return False

            wait_until(read_by_both, lambda: f"10 records and both members assigned, {len(seen)} read", 30, 0)
            assignments = [{tp.partition for tp in member.assignment()} for member in members]
        finally:
            for member in members:
                member.close()
        assert sorted(assignments, key=min) == [{0}, {1}], "one group: the partitions are split, not read twice"
        assert sorted(seen) == sorted(b"%d-%d" % (p, i) for p in (0, 1) for i in range(5))


def test_follower_behind_the_leaders_log_start_starts_over_there(tmp_path: Path) -> None:
    with EmbeddedCluster(
        brokers=2, log_dir=tmp_path, broker_session_timeout_ms=120_000, replica_lag_time_max_ms=300
    ) as cluster:
        cluster.create_topic("trimmed", replication_factor=2, config={"internal.segment.bytes": "1024"})
        leader = cluster.leader("trimmed")
        follower = 1 - leader
        cluster.kill_broker(follower)
        cluster.wait_for_isr("trimmed", size=1)
        values = [b"%04d" % i + b"-" * 100 for i in range(60)]
        assert produce_confluent(address(cluster, leader), "trimmed", values, partition=0) == []
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": address(cluster, leader)})
        deleted = admin.delete_records([confluent_kafka.TopicPartition("trimmed", 0, 40)])
        assert deleted[confluent_kafka.TopicPartition("trimmed", 0, 40)].result(30).low_watermark == 40

        cluster.restart_broker(follower)  # its log ends at 0, below the leader's start (40)
        cluster.wait_for_isr("trimmed", size=2)
        wait_until(
            lambda: values_of(cluster, follower, "trimmed") == values_of(cluster, leader, "trimmed"),
            "the follower to copy from the leader's log start",
            timeout=30,
        )
        assert log_of(cluster, follower, "trimmed").log_start_offset >= 40


def set_topic_configs(admin: confluent_kafka.admin.AdminClient, topic: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET of each of ``configs``; raises the broker's refusal."""
    admin_module = confluent_kafka.admin
    entries = [
        admin_module.ConfigEntry(name, value, incremental_operation=admin_module.AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resource = admin_module.ConfigResource("topic", topic, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def test_topic_configs_altered_on_any_broker_reach_every_replica_and_the_leaders_acks_all(tmp_path: Path) -> None:
    # kafka-configs --alter sent to a broker that leads nothing of the topic: the controller takes
    # the change, every broker describes it, and the leader enforces the new min.insync.replicas.
    with lagging_followers_cluster(tmp_path) as cluster:
        leader, followers = replicated_topic(cluster, "tuned", min_insync_replicas=1)
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": address(cluster, followers[0])})
        set_topic_configs(admin, "tuned", {"min.insync.replicas": "3", "retention.ms": "3600000"})

        def described(node: int) -> dict[str, str]:
            client = confluent_kafka.admin.AdminClient({"bootstrap.servers": address(cluster, node)})
            asked = confluent_kafka.admin.ConfigResource("topic", "tuned")
            entries = client.describe_configs([asked])[asked].result(timeout=30)
            return {name: entries[name].value for name in ("min.insync.replicas", "retention.ms")}

        for node in range(3):
            wait_until(
                lambda node=node: described(node) == {"min.insync.replicas": "3", "retention.ms": "3600000"},
                f"broker {node} to describe the altered configs",
                timeout=30,
            )
        bootstrap = address(cluster, leader)
        assert wire_produce(bootstrap, "tuned", [b"all three"], acks=-1) == (0, 0)
        cluster.kill_broker(followers[1])
        cluster.wait_for_isr("tuned", size=2)
        assert wire_produce(bootstrap, "tuned", [b"two of three"], acks=-1)[0] == NOT_ENOUGH_REPLICAS

        with pytest.raises(confluent_kafka.KafkaException, match="min.insync.replicas"):
            set_topic_configs(admin, "tuned", {"min.insync.replicas": "0"})
        assert described(leader)["min.insync.replicas"] == "3", "a refused change changes nothing"


def _wire_committed(bootstrap: str, group: str, timeout: float = 30.0) -> dict[tuple[str, int], int]:
    """Every committed offset of ``group`` (OffsetFetch v5, all topics), asked of ``bootstrap``
    until it coordinates the group (a broker that just took the partition over may still load it)."""
    with WireClient(bootstrap) as client:

        def answered() -> Any:
            response = client.call(9, 5, {"group_id": group, "topics": None})
            assert response.error_code in (0, 14, 15, 16), response  # loading, not available, not coordinator
            return response if response.error_code == 0 else None

        response = wait_until(answered, f"{bootstrap} to answer for {group}", timeout)
        return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}


def test_a_deleted_topics_committed_offsets_go_on_every_coordinator_also_those_not_hosting_it(
    pylog_cluster: EmbeddedCluster,
) -> None:
    """Kafka's group coordinators drop the committed offsets of a deleted topic when the metadata
    drops it, wherever the topic's replicas were: here the group's coordinator hosts none of them.
    Its tombstones replicate and stay through a restart of that broker, and a topic created again
    with the same name starts without the old group's offsets."""
    cluster = pylog_cluster
    cluster.create_topic("gone", partitions=1, replication_factor=1)
    cluster.create_topic("kept", partitions=1, replication_factor=1)
    host = cluster.leader("gone")
    with WireClient(address(cluster, host)) as client:  # the first FindCoordinator creates __consumer_offsets
        wait_until(
            lambda: client.call(10, 4, {"key_type": 0, "coordinator_keys": ["probe"]}).coordinators[0].error_code == 0,
            "__consumer_offsets",
            timeout=30,
        )
    cluster.wait_for_metadata()
    partitions = cluster.controller.image.topics[OFFSETS_TOPIC].partitions
    # A group whose coordinator (the leader of its partition, there the first replica) is not the topic's broker.
    group = next(
        f"group-{index}"
        for index in range(1000)
        if cluster.partition(OFFSETS_TOPIC, offsets_partition_for(f"group-{index}", partitions)).replicas[0] != host
    )
    offsets_partition = offsets_partition_for(group, partitions)
    coordinator = cluster.wait_for_leader(OFFSETS_TOPIC, offsets_partition)
    assert coordinator == cluster.partition(OFFSETS_TOPIC, offsets_partition).replicas[0] != host
    assert coordinator not in cluster.partition("gone").replicas
    at = address(cluster, coordinator)
    with WireClient(at) as client:
        assert commit(client, group, -1, "", {("gone", 0): 3, ("kept", 0): 4}) == {("gone", 0): 0, ("kept", 0): 0}
    assert _wire_committed(at, group) == {("gone", 0): 3, ("kept", 0): 4}

    cluster.delete_topic("gone")  # returns once every broker has applied the deletion
    assert _wire_committed(at, group) == {("kept", 0): 4}

    # The tombstones are in the partition's log and its replicas': through a move of the partition
    # to a follower and back to the restarted coordinator, which loads it from its own log again.
    replica = cluster.nodes[coordinator].replicas.partitions[TopicPartition(OFFSETS_TOPIC, offsets_partition)]
    wait_until(
        lambda: replica.log.high_watermark == replica.log.log_end_offset, "the tombstones to replicate", timeout=30
    )
    cluster.stop_broker(coordinator)
    successor = cluster.wait_for_leader(OFFSETS_TOPIC, offsets_partition, not_on=coordinator)
    assert _wire_committed(address(cluster, successor), group) == {("kept", 0): 4}
    cluster.restart_broker(coordinator)
    cluster.wait_for_isr(OFFSETS_TOPIC, offsets_partition, size=3)
    elected = cluster.controller.elect_leaders([TopicPartition(OFFSETS_TOPIC, offsets_partition)])
    assert set(elected.values()) == {0}, elected
    cluster.wait_for_metadata()
    assert cluster.leader(OFFSETS_TOPIC, offsets_partition) == coordinator
    assert _wire_committed(at, group) == {("kept", 0): 4}

    cluster.create_topic("gone", partitions=1, replication_factor=1)
    assert _wire_committed(at, group) == {("kept", 0): 4}  # the new topic has no offsets of the old


def test_a_starting_broker_refuses_connections_until_it_has_registered_and_applied_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a client would find by connecting at the moment each broker (re)starts registering
    # with the controller: its port bound, and no listener yet. Before, the port listened from
    # the moment it was bound and the broker answered from an empty metadata image.
    import socket

    from kafka_spark.broker.replication.replica_manager import ReplicaManager

    seen: dict[int, str] = {}
    register = ReplicaManager.start

    def start(self: ReplicaManager) -> None:
        try:
            socket.create_connection((self.broker.advertised_host, self.broker.port), timeout=5).close()
            seen[self.node_id] = "accepted"
        except ConnectionRefusedError:
            seen[self.node_id] = "refused"
        register(self)

    monkeypatch.setattr(ReplicaManager, "start", start)
    with EmbeddedCluster(brokers=2, log_dir=tmp_path) as cluster:
        assert seen == {0: "refused", 1: "refused"}
        cluster.create_topic("served", replication_factor=2)
        cluster.kill_broker(1)
        del seen[1]
        cluster.restart_broker(1)
        assert seen == {0: "refused", 1: "refused"}
        assert produce_confluent(cluster.bootstrap_servers, "served", [b"a"]) == []  # and then served
        assert read_all(cluster.bootstrap_servers, "served") == [b"a"]
