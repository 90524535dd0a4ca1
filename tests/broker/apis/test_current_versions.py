"""What the current protocol versions add, through the clients that use them and, where no
client here sends a version, through kio-encoded requests over a socket (tests/support/wire.py).

ListOffsets v7+ special timestamps (KIP-734 max timestamp, KIP-405 earliest local), topic ids
in Metadata, Produce v13 and Fetch v13+ (KIP-516), DescribeTopicPartitions (KIP-966).
"""

from __future__ import annotations

import base64
import time
import uuid

import pytest
from confluent_kafka import Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kafka_spark.broker.protocol.versions import ApiKey
from kafka_spark.broker.storage.batch import build_record_batch, iter_batches
from tests.support.wire import WireClient

UNKNOWN_TOPIC_ID = 100
INVALID_REQUEST = 42


def _produce(bootstrap: str, topic: str, timestamps: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for index, timestamp in enumerate(timestamps):
        producer.produce(topic, value=b"v%d" % index, partition=0, timestamp=timestamp)
        producer.flush(10)  # one batch per record, so the max is inside the log, not one batch
    assert producer.flush(10) == 0


def _topic_id(pylog_broker, topic: str) -> uuid.UUID:
    return pylog_broker._broker.logs.topic_info(topic).topic_id


def test_max_timestamp_lists_the_record_with_the_largest_timestamp(pylog_broker, pylog_topic):
    topic = pylog_topic()
    _produce(pylog_broker.bootstrap_servers, topic, [1_700_000_000_100, 1_700_000_000_900, 1_700_000_000_300])
    admin = AdminClient({"bootstrap.servers": pylog_broker.bootstrap_servers})
    futures = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp()})  # ListOffsets v7
    result = futures[TopicPartition(topic, 0)].result(10)
    assert (result.offset, result.timestamp) == (1, 1_700_000_000_900)


def test_max_timestamp_inside_one_batch_is_that_records_offset_not_the_batchs(pylog_broker, pylog_topic):
    topic = pylog_topic()
    batch = build_record_batch([(None, b"a", (), 5_000), (None, b"b", (), 9_000), (None, b"c", (), 7_000)])
    with WireClient(pylog_broker.bootstrap_servers) as client:
        produced = client.call(
            ApiKey.PRODUCE,
            9,
            {
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
        assert produced.responses[0].partition_responses[0].error_code == 0
        listed = client.call(
            ApiKey.LIST_OFFSETS,
            7,
            {"replica_id": -1, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -3}]}]},
        )
    partition = listed.topics[0].partitions[0]
    assert (partition.offset, partition.timestamp) == (1, 9_000)


def test_earliest_local_is_the_log_start_offset_and_needs_v8(pylog_broker, pylog_topic):
    topic = pylog_topic()
    _produce(pylog_broker.bootstrap_servers, topic, [1, 2, 3, 4])
    admin = AdminClient({"bootstrap.servers": pylog_broker.bootstrap_servers})
    admin.delete_records([TopicPartition(topic, 0, 2)])[TopicPartition(topic, 0, 2)].result(10)

    def listed(version: int, timestamp: int):
        with WireClient(pylog_broker.bootstrap_servers) as client:
            response = client.call(
                ApiKey.LIST_OFFSETS,
                version,
                {
                    "replica_id": -1,
                    "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
                },
            )
        return response.topics[0].partitions[0]

    assert (listed(8, -4).error_code, listed(8, -4).offset) == (0, 2)
    assert listed(7, -4).error_code == INVALID_REQUEST  # -4 is KIP-405's, from v8
    assert listed(6, -3).error_code == INVALID_REQUEST  # -3 is KIP-734's, from v7
    tiered = listed(9, -5)  # no tiered storage: nothing tiered
    assert (tiered.error_code, tiered.offset) == (0, -1)


def test_metadata_gives_topic_ids_and_answers_by_id(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=2)
    admin = AdminClient({"bootstrap.servers": pylog_broker.bootstrap_servers})
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(10)  # Metadata v12
    expected = _topic_id(pylog_broker, topic)
    assert str(described.topic_id) == base64.b64encode(expected.bytes).decode().rstrip("=")  # Kafka's spelling
    with WireClient(pylog_broker.bootstrap_servers) as client:
        unknown = uuid.uuid4()
        response = client.call(
            ApiKey.METADATA, 12, {"topics": [{"topic_id": expected, "name": None}, {"topic_id": unknown, "name": None}]}
        )
    found, missing = response.topics
    assert (found.name, found.topic_id, found.error_code, len(found.partitions)) == (topic, expected, 0, 2)
    assert (missing.name, missing.topic_id, missing.error_code) == (None, unknown, UNKNOWN_TOPIC_ID)


def test_produce_v13_and_fetch_v18_name_topics_by_id(pylog_broker, pylog_topic):
    """No client here sends Produce v13 or Fetch v17-18 (Kafka 4.x's Java client does): the
    records written by topic id come back by topic id, and an unknown id is UNKNOWN_TOPIC_ID."""
    topic = pylog_topic()
    topic_id = _topic_id(pylog_broker, topic)
    batch = build_record_batch([(b"k", b"by-id", (), 1_000)])
    stranger = uuid.uuid4()
    from_start = [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]
    with WireClient(pylog_broker.bootstrap_servers) as client:
        produced = client.call(
            ApiKey.PRODUCE,
            13,
            {
                "acks": -1,
                "timeout": 5000,
                "topic_data": [
                    {"topic_id": topic_id, "partition_data": [{"index": 0, "records": batch}]},
                    {"topic_id": stranger, "partition_data": [{"index": 0, "records": batch}]},
                ],
            },
        )
        fetched = client.call(
            ApiKey.FETCH,
            18,
            {
                "max_wait": 0,
                "min_bytes": 0,
                "max_bytes": 1 << 20,
                "topics": [
                    {"topic_id": topic_id, "partitions": from_start},
                    {"topic_id": stranger, "partitions": from_start},
                ],
            },
        )
    ours, theirs = produced.responses
    assert (ours.topic_id, ours.partition_responses[0].error_code, ours.partition_responses[0].base_offset) == (
        topic_id,
        0,
        0,
    )
    assert (theirs.topic_id, theirs.partition_responses[0].error_code) == (stranger, UNKNOWN_TOPIC_ID)
    data, unknown = fetched.responses
    assert data.topic_id == topic_id and unknown.topic_id == stranger
    assert unknown.partitions[0].error_code == UNKNOWN_TOPIC_ID
    records = bytes(data.partitions[0].records)
    assert [header.base_offset for header in iter_batches(records)] == [0]
    assert b"by-id" in records


def test_describe_topic_partitions_pages_through_topics_with_a_cursor(pylog_broker, pylog_topic):
    prefix = f"dtp-{time.monotonic_ns()}"
    for name in ("a", "b", "c"):
        pylog_broker.create_topic(f"{prefix}-{name}", partitions=3)
    names = [f"{prefix}-{name}" for name in ("c", "a", "b")] + [f"{prefix}-missing"]
    seen: list[tuple[str, int]] = []
    cursor = None
    with WireClient(pylog_broker.bootstrap_servers) as client:
        for _ in range(10):
            response = client.call(
                ApiKey.DESCRIBE_TOPIC_PARTITIONS,
                0,
                {"topics": [{"name": name} for name in names], "response_partition_limit": 4, "cursor": cursor},
            )
            for topic in response.topics:
                if topic.error_code:
                    assert (topic.name, topic.error_code) == (f"{prefix}-missing", 3)
                    continue
                assert topic.topic_id == _topic_id(pylog_broker, topic.name) and not topic.is_internal
                seen += [(topic.name, partition.partition_index) for partition in topic.partitions]
                assert all(p.leader_id == 0 and p.replica_nodes == (0,) for p in topic.partitions)
            if response.next_cursor is None:
                break
            cursor = {
                "topic_name": response.next_cursor.topic_name,
                "partition_index": response.next_cursor.partition_index,
            }
    assert seen == [(f"{prefix}-{name}", index) for name in ("a", "b", "c") for index in range(3)]


def test_kafka_python_describes_topics_with_describe_topic_partitions(pylog_broker, pylog_topic):
    from kafka import KafkaAdminClient

    topic = pylog_topic(partitions=2)
    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    try:
        described = admin.describe_topic_partitions([topic])
    finally:
        admin.close()
    (entry,) = (
        [t for t in described["topics"] if t["name"] == topic]
        if isinstance(described, dict)
        else [t for t in described if t["name"] == topic]
    )
    assert [p["partition_index"] for p in entry["partitions"]] == [0, 1]


@pytest.mark.parametrize("version", [3, 4, 5])
def test_api_versions_v5_refuses_a_client_that_means_another_cluster(pylog_broker, version):
    body = {"client_software_name": "t", "client_software_version": "1"}
    with WireClient(pylog_broker.bootstrap_servers) as client:
        if version < 5:
            assert client.call(ApiKey.API_VERSIONS, version, body).error_code == 0
            return
        cluster_id = pylog_broker._broker.config.cluster_id
        assert client.call(ApiKey.API_VERSIONS, 5, {**body, "cluster_id": cluster_id, "node_id": 0}).error_code == 0
        wrong = client.call(ApiKey.API_VERSIONS, 5, {**body, "cluster_id": "another-cluster", "node_id": 0})
        assert wrong.error_code == 129  # REBOOTSTRAP_REQUIRED (KIP-1242)


def test_transactions_are_listed_and_described_as_kafka_transactions_shows_them(pylog_broker, pylog_topic):
    from confluent_kafka import Producer
    from kafka import KafkaAdminClient
    from kafka.errors import TransactionalIdNotFoundError

    topic = pylog_topic(partitions=2)
    producer = Producer({"bootstrap.servers": pylog_broker.bootstrap_servers, "transactional.id": f"{topic}-tx"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"open", partition=1)
    producer.flush(10)
    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    try:
        listed = admin.list_transactions(state_filters=["Ongoing"], transactional_id_pattern=f"{topic}-.*")
        described = admin.describe_transactions([f"{topic}-tx"])
        with pytest.raises(TransactionalIdNotFoundError):  # 105, as Kafka answers an unknown id
            admin.describe_transactions(["nobody"])
    finally:
        admin.close()
        producer.abort_transaction(10)
    assert [(t.transactional_id, t.state.value) for listings in listed.values() for t in listings] == [
        (f"{topic}-tx", "Ongoing")
    ]
    mine = described[f"{topic}-tx"]
    assert (mine.state.value, mine.transaction_timeout_ms, mine.producer_epoch) == ("Ongoing", 60_000, 0)
    assert {(tp.topic, tp.partition) for tp in mine.topic_partitions} == {(topic, 1)}
    assert mine.transaction_start_time_ms > 0
