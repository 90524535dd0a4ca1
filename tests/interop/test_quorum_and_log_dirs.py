"""DescribeQuorum, ListConfigResources, DescribeLogDirs and AlterReplicaLogDirs on pylog's broker
and on Apache Kafka 4.3.1 (one node, one log directory): Kafka's tools (kafka-metadata-quorum,
kafka-log-dirs) and kafka-python's admin client (its integration suite's
test_describe_metadata_quorum, test_list_config_resources and test_alter_replica_log_dirs) get
the same answers from both."""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.errors import NoError
from kafka.structs import TopicPartitionReplica

from tests.interop.harness import Cluster
from tests.support.wire import WireClient

DESCRIBE_QUORUM, LIST_CONFIG_RESOURCES, ALTER_REPLICA_LOG_DIRS = 55, 74, 34
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32


@pytest.fixture
def admin(cluster: Cluster):
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30_000)
    yield client
    client.close()


def _node_id(admin: KafkaAdminClient) -> int:
    (broker,) = admin.describe_cluster()["brokers"]
    return broker["broker_id"]


def test_metadata_quorum_is_one_voter_leading_itself(cluster: Cluster, admin: KafkaAdminClient):
    node = _node_id(admin)
    status = cluster.tool("kafka-metadata-quorum", "describe", "--status").stdout
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", status, re.MULTILINE))
    assert int(fields["LeaderId"]) == node and int(fields["LeaderEpoch"]) >= 1, status
    assert int(fields["HighWatermark"]) > 0 and fields["MaxFollowerLag"] == "0", status
    assert fields["MaxFollowerLagTimeMs"] == "0" and fields["CurrentObservers"] == "[]", status
    (voter,) = json.loads(fields["CurrentVoters"])
    assert voter["id"] == node and len(voter["endpoints"]) == 1, status
    assert fields["ClusterId"] == admin.describe_cluster()["cluster_id"]

    replication = cluster.tool("kafka-metadata-quorum", "describe", "--replication").stdout.splitlines()
    assert replication[0].split() == [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    (row,) = [line.split() for line in replication[1:] if line.strip()]
    now_ms = time.time() * 1000
    assert (int(row[0]), row[1], row[3], row[6]) == (node, "AAAAAAAAAAAAAAAAAAAAAA", "0", "Leader"), row
    assert int(row[2]) > 0 and abs(int(row[4]) - now_ms) < 120_000 and abs(int(row[5]) - now_ms) < 120_000

    # kafka-python's test_describe_metadata_quorum
    result = admin.describe_metadata_quorum()
    assert "error_code" not in result and "error_message" not in result
    (topic,) = result["topics"]
    assert topic["topic_name"] == "__cluster_metadata"
    (partition,) = topic["partitions"]
    assert partition["partition_index"] == 0 and partition["error"] is None
    assert partition["leader_id"] == node and partition["leader_epoch"] >= 0 and partition["high_watermark"] >= 0
    assert [voter["replica_id"] for voter in partition["current_voters"]] == [node]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_of_another_partition_is_unknown(cluster: Cluster, version: int):
    with WireClient(cluster.bootstrap_servers) as client:
        asked = [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 1}]}]
        response = client.call(DESCRIBE_QUORUM, version, {"topics": asked})
        (topic,) = response.topics
        (partition,) = topic.partitions
        assert (topic.topic_name, partition.partition_index, partition.error_code) == ("__cluster_metadata", 1, 3)
        assert (partition.leader_id, partition.high_watermark, partition.current_voters) == (0, 0, ())
        if version >= 2:
            assert partition.error_message == "This server does not host this topic-partition."
            assert response.nodes == ()
        whole = client.call(DESCRIBE_QUORUM, version, {"topics": []})
        assert (whole.error_code, whole.topics) == (0, ())


def test_list_config_resources_lists_brokers_loggers_and_topics(cluster: Cluster, admin: KafkaAdminClient):
    topic = cluster.topic()
    node = str(_node_id(admin))
    # kafka-python's test_list_config_resources
    listed = admin.list_config_resources()
    assert "broker" in listed
    with WireClient(cluster.bootstrap_servers) as client:
        old = client.call(LIST_CONFIG_RESOURCES, 0, {})  # v0: client-metrics subscriptions, none
        assert (old.error_code, old.config_resources) == (0, ())
        every = client.call(LIST_CONFIG_RESOURCES, 1, {"resource_types": []})
        assert every.error_code == 0
        pairs = [(resource.resource_type, resource.resource_name) for resource in every.config_resources]
        assert pairs[:2] == [(BROKER_LOGGER, node), (BROKER, node)]  # Kafka's order: loggers, brokers, topics
        assert (TOPIC, topic) in pairs[2:] and {kind for kind, _ in pairs[2:]} == {TOPIC}
        for kinds, expected in [([BROKER], [(BROKER, node)]), ([CLIENT_METRICS], []), ([GROUP], [])]:
            answer = client.call(LIST_CONFIG_RESOURCES, 1, {"resource_types": kinds})
            assert [(r.resource_type, r.resource_name) for r in answer.config_resources] == expected, kinds
        topics = client.call(LIST_CONFIG_RESOURCES, 1, {"resource_types": [TOPIC, TOPIC]})
        assert (TOPIC, topic) in [(r.resource_type, r.resource_name) for r in topics.config_resources]
        for unknown in ([1], [3], [TOPIC, 64]):
            refused = client.call(LIST_CONFIG_RESOURCES, 1, {"resource_types": unknown})
            assert (refused.error_code, refused.config_resources) == (35, ()), unknown  # UNSUPPORTED_VERSION


def test_log_dirs_are_one_directory_and_moves_within_it_succeed(cluster: Cluster, admin: KafkaAdminClient):
    topic = cluster.topic(partitions=2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for partition in (0, 1):
        producer.produce(topic, b"record", partition=partition)
    assert producer.flush(30) == 0
    described = json.loads(
        cluster.tool("kafka-log-dirs", "--describe", "--topic-list", topic).stdout.strip().splitlines()[-1]
    )
    (broker,) = described["brokers"]
    (log_dir,) = broker["logDirs"]
    path = log_dir["logDir"]
    assert path.startswith("/") and log_dir["error"] is None
    partitions = {entry["partition"]: entry for entry in log_dir["partitions"]}
    assert set(partitions) == {f"{topic}-0", f"{topic}-1"}
    assert sum(entry["size"] for entry in partitions.values()) > 0
    assert all(entry["offsetLag"] == 0 and not entry["isFuture"] for entry in partitions.values())

    # kafka-python's test_alter_replica_log_dirs: a move to the replica's own directory is a no-op
    replica = TopicPartitionReplica(topic, 0, broker["broker"])
    assert admin.alter_replica_log_dirs({replica: path}) == {replica: NoError}

    for version in (1, 2):
        with WireClient(cluster.bootstrap_servers) as client:
            dirs = [
                {
                    "path": path,
                    "topics": [{"name": topic, "partitions": [0, 1, 7]}, {"name": "no-such", "partitions": [0]}],
                },
                {"path": path + "/", "topics": [{"name": topic, "partitions": [1]}]},  # the last path wins
                {"path": "/no/such/dir", "topics": [{"name": "no-such-either", "partitions": [0]}]},
            ]
            response = client.call(ALTER_REPLICA_LOG_DIRS, version, {"dirs": dirs})
        answers = {
            (result.topic_name, partition.partition_index): partition.error_code
            for result in response.results
            for partition in result.partitions
        }
        assert answers == {
            (topic, 0): 0,
            (topic, 1): 57,  # LOG_DIR_NOT_FOUND: the path must be the directory's, spelled exactly
            (topic, 7): 3,  # UNKNOWN_TOPIC_OR_PARTITION
            ("no-such", 0): 3,
            ("no-such-either", 0): 57,  # the directory is checked first
        }, version
