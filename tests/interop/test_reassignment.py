"""Partition reassignment on a one-broker cluster, against pylog's broker and Apache Kafka 4.3.1:
``kafka-reassign-partitions --execute`` / ``--verify`` of a partition onto the one broker it is
on succeed and complete at once, and AlterPartitionReassignments refuses what Kafka refuses (a
broker that is not registered, a broker twice, no broker, a cancellation with nothing under way,
an unknown topic) with the same errors. Reassignments across brokers are tested on an
EmbeddedCluster (tests/broker/cluster/test_reassignment.py)."""

from __future__ import annotations

import json

from tests.broker.cluster.test_reassignment import ongoing, reassign
from tests.interop.harness import Cluster
from tests.support.wire import WireClient

UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS = 3, 39, 85
DESCRIBE_CLUSTER = 60


def node_id(cluster: Cluster) -> int:
    with WireClient(cluster.bootstrap_servers) as client:
        (broker,) = client.call(DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False}).brokers
    return broker.broker_id


def test_the_tool_moves_a_partition_onto_its_own_broker(cluster: Cluster, tmp_path) -> None:
    topic, node = cluster.topic(partitions=1), node_id(cluster)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [node]}]}))
    executed = cluster.tool("kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(plan)).stdout
    assert f"Successfully started partition reassignment for {topic}-0" in executed, (cluster.name, executed)
    verified = cluster.tool("kafka-reassign-partitions", "--verify", "--reassignment-json-file", str(plan)).stdout
    assert f"Reassignment of partition {topic}-0 is completed." in verified, (cluster.name, verified)
    assert cluster.tool("kafka-reassign-partitions", "--list").stdout.strip() == "No partition reassignments found."


def test_what_a_one_broker_cluster_refuses(cluster: Cluster) -> None:
    topic, node = cluster.topic(partitions=1), node_id(cluster)
    bootstrap = cluster.bootstrap_servers
    assert reassign(bootstrap, topic, [node]) == (0, None)
    assert ongoing(bootstrap) == {}
    code, message = reassign(bootstrap, topic, [node, node + 41])
    assert (code, message) == (
        INVALID_REPLICA_ASSIGNMENT,
        f"The manual partition assignment includes broker {node + 41}, but no such broker is registered.",
    ), cluster.name
    assert reassign(bootstrap, topic, []) == (
        INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes an empty replica list.",
    ), cluster.name
    code, _ = reassign(bootstrap, topic, [node, node])
    assert code == INVALID_REPLICA_ASSIGNMENT, cluster.name
    assert reassign(bootstrap, topic, None)[0] == NO_REASSIGNMENT_IN_PROGRESS, cluster.name
    assert reassign(bootstrap, f"{topic}-absent", [node])[0] == UNKNOWN_TOPIC_OR_PARTITION, cluster.name
