"""DescribeQuorum on an EmbeddedCluster: its brokers are the voters of the metadata quorum, the
active controller their leader (kafka-python's describe_metadata_quorum, as ``kafka-metadata-quorum``
reads it; the single node's quorum of one is in tests/interop/test_quorum_and_log_dirs.py)."""

from __future__ import annotations

from kafka import KafkaAdminClient

from tests.broker.test_request_memory import wait_until


def _quorum(bootstrap: str) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        (topic,) = admin.describe_metadata_quorum()["topics"]
        (partition,) = topic["partitions"]
        return partition
    finally:
        admin.close()


def test_the_brokers_are_the_voters_and_the_controller_leads_them(pylog_cluster):
    cluster = pylog_cluster
    controller = cluster.controller.image.controller_id
    quorum = _quorum(cluster.bootstrap_servers)
    assert quorum["leader_id"] == controller == 0 and quorum["leader_epoch"] >= 1
    assert sorted(voter["replica_id"] for voter in quorum["current_voters"]) == [0, 1, 2]
    assert quorum["observers"] == []

    def caught_up() -> bool:  # the followers report the versions they applied with their heartbeats
        state = _quorum(cluster.bootstrap_servers)
        return all(voter["log_end_offset"] == state["high_watermark"] for voter in state["current_voters"])

    wait_until(caught_up, "every voter at the high watermark")

    epoch = quorum["leader_epoch"]
    cluster.stop_broker(0)  # the active controller goes: broker 1 takes the role, in a new epoch
    survivors = ",".join(address for address in cluster.bootstrap_servers.split(",")[1:])
    moved = _quorum(survivors)
    assert moved["leader_id"] == 1 and moved["leader_epoch"] == epoch + 1
    assert sorted(voter["replica_id"] for voter in moved["current_voters"]) == [0, 1, 2]  # 0 is still a voter
    stale = next(voter for voter in moved["current_voters"] if voter["replica_id"] == 0)
    assert stale["log_end_offset"] < moved["high_watermark"]  # it missed the change its leaving made
