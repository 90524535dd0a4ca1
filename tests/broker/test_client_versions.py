"""Current clients negotiate the same request versions with pylog's broker as with Apache Kafka.

Each client runs a typical workload (admin calls, an idempotent producer, a transactional
producer sending consumer offsets, a consumer group committing) against the embedded broker; the
highest version of each API it sends must be the one it sends to Apache Kafka 4.3.1 for the same
workload. Those expected versions were measured by running the same workloads against a real
Apache Kafka 4.3.1 node (KRaft) with its ``kafka.request.logger`` at DEBUG, which logs every
request's API key, version and client id. Where they differ here, the broker advertises a lower
version than Kafka (or a client's choice depends on something the broker tells it).
"""

from __future__ import annotations

import asyncio
import collections

import pytest
from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

import kafka_spark.broker.server as server
from kafka_spark.broker.protocol.versions import ApiKey
from tests.support.waiting import wait_until

#: client id -> API -> highest version the client sent to Apache Kafka 4.3.1 for the workloads
#: below (confluent-kafka 2.16 / librdkafka 2.16, kafka-python 3.0.12, aiokafka 0.14).
WITH_APACHE_KAFKA = {
    "rdk-admin": {
        "ConsumerGroupDescribe": 0,  # describe_consumer_groups asks it first, then DescribeGroups
        "ListOffsets": 7,
        "Metadata": 13,
        "FindCoordinator": 2,
        "DescribeGroups": 5,
        "ListGroups": 5,
        "ApiVersions": 3,
        "CreateTopics": 4,
        "DescribeConfigs": 1,
    },
    "rdk-producer": {"Produce": 10, "Metadata": 13, "ApiVersions": 3},
    "rdk-txn": {
        "Produce": 10,
        "Metadata": 13,
        "FindCoordinator": 2,
        "ApiVersions": 3,
        "InitProducerId": 4,
        "AddPartitionsToTxn": 0,
        "AddOffsetsToTxn": 0,
        "EndTxn": 1,
        "TxnOffsetCommit": 3,
    },
    "rdk-consumer": {
        "Fetch": 16,
        "ListOffsets": 7,
        "Metadata": 13,
        "OffsetCommit": 9,
        "OffsetFetch": 9,
        "FindCoordinator": 2,
        "JoinGroup": 5,
        "Heartbeat": 3,
        "LeaveGroup": 1,
        "SyncGroup": 3,
        "ApiVersions": 3,
    },
    "kp-producer": {"Produce": 9, "Metadata": 13, "ApiVersions": 4, "InitProducerId": 4},
    "kp-txn": {
        "Produce": 9,
        "Metadata": 13,
        "FindCoordinator": 6,
        "ApiVersions": 4,
        "InitProducerId": 4,
        "AddPartitionsToTxn": 3,
        "EndTxn": 3,
    },
    "kp-consumer": {
        "Fetch": 12,
        "ListOffsets": 11,
        "Metadata": 13,
        "OffsetCommit": 8,
        "OffsetFetch": 8,
        "FindCoordinator": 6,
        "JoinGroup": 7,
        "LeaveGroup": 5,
        "SyncGroup": 5,
        "ApiVersions": 4,
    },
    "kp-admin": {
        "Metadata": 13,
        "FindCoordinator": 6,
        "DescribeGroups": 6,
        "ListGroups": 5,
        "ApiVersions": 4,
        "DescribeConfigs": 4,
        "DescribeCluster": 2,
        "DescribeTopicPartitions": 0,
    },
    "aio-producer": {"Produce": 7, "Metadata": 5, "ApiVersions": 0},
    "aio-txn": {
        "Produce": 7,
        "Metadata": 5,
        "FindCoordinator": 1,
        "ApiVersions": 0,
        "InitProducerId": 0,
        "AddPartitionsToTxn": 0,
        "EndTxn": 0,
    },
    "aio-consumer": {
        "Fetch": 11,
        "ListOffsets": 3,
        "Metadata": 5,
        "OffsetCommit": 3,
        "OffsetFetch": 3,
        "FindCoordinator": 1,
        "JoinGroup": 5,
        "LeaveGroup": 1,
        "SyncGroup": 3,
        "ApiVersions": 0,
    },
}
#: APIs a client sends to Apache Kafka that this broker does not serve (none since it serves
#: ConsumerGroupDescribe).
NOT_SERVED: set[str] = set()

_NAMES = {int(key): "".join(part.capitalize() for part in key.name.split("_")) for key in ApiKey}
_NAMES.update(
    {
        ApiKey.API_VERSIONS: "ApiVersions",
        ApiKey.INIT_PRODUCER_ID: "InitProducerId",
        ApiKey.ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn",
        ApiKey.ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn",
        ApiKey.END_TXN: "EndTxn",
        ApiKey.TXN_OFFSET_COMMIT: "TxnOffsetCommit",
    }
)


@pytest.fixture
def recorded(monkeypatch):
    """client id -> API name -> highest version decoded by the broker's socket server."""
    seen: dict[str, dict[str, int]] = collections.defaultdict(dict)
    decode = server.decode_request

    def recording(frame, *context):
        request = decode(frame, *context)
        versions = seen[request.client_id or ""]
        name = _NAMES[request.api_key]
        versions[name] = max(versions.get(name, -1), request.api_version)
        return request

    monkeypatch.setattr(server, "decode_request", recording)
    return seen


def _confluent(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "rdk-admin"})
    admin.create_topics([NewTopic("t", 2, 1)])["t"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "rdk-producer"})
    for i in range(20):
        producer.produce("t", b"v%d" % i, key=b"k%d" % i)
    assert producer.flush(30) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "client.id": "rdk-txn", "transactional.id": "tx"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce("t", b"x")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g",
            "client.id": "rdk-consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["t"])
    received = 0

    def received_20() -> bool:
        nonlocal received
        message = consumer.poll(0.5)
        received += bool(message and not message.error())
        return received >= 20

    wait_until(received_20, lambda: f"20 records, {received} received", interval=0)
    consumer.commit(asynchronous=False)
    txn.send_offsets_to_transaction([TopicPartition("t", 0, 1)], consumer.consumer_group_metadata(), 30)
    txn.commit_transaction(30)
    consumer.close()
    for future in admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "t")]).values():
        future.result(30)
    admin.list_offsets({TopicPartition("t", 0): OffsetSpec.max_timestamp()})[TopicPartition("t", 0)].result(30)
    admin.describe_topics(TopicCollection(["t"]))["t"].result(30)
    admin.list_consumer_groups().result(30)
    admin.describe_consumer_groups(["g"])["g"].result(30)
    admin.describe_cluster().result(30)


def _kafka_python(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType

    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="kp-producer")
    for _ in range(5):
        producer.send("t", b"x")
    producer.flush()
    producer.close()
    txn = KafkaProducer(bootstrap_servers=bootstrap, client_id="kp-txn", transactional_id="kp-tx")
    txn.init_transactions()
    txn.begin_transaction()
    txn.send("t", b"y")
    txn.commit_transaction()
    txn.close()
    consumer = KafkaConsumer(
        "t",
        bootstrap_servers=bootstrap,
        group_id="g2",
        client_id="kp-consumer",
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    for index, _ in enumerate(consumer):
        if index > 3:
            break
    consumer.commit()
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin")
    admin.list_topics()
    admin.describe_topics(["t"])
    admin.list_groups()
    admin.describe_groups(["g2"])
    admin.describe_topic_partitions(["t"])
    admin.describe_configs([KpResource(ConfigResourceType.TOPIC, "t")])
    admin.describe_cluster()
    admin.close()


def _aiokafka(bootstrap: str) -> None:
    import aiokafka

    async def work() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="aio-producer")
        await producer.start()
        await producer.send_and_wait("t", b"y")
        await producer.stop()
        txn = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="aio-txn", transactional_id="aio-tx")
        await txn.start()
        async with txn.transaction():
            await txn.send_and_wait("t", b"z")
        await txn.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            "t", bootstrap_servers=bootstrap, group_id="g3", client_id="aio-consumer", auto_offset_reset="earliest"
        )
        await consumer.start()
        await consumer.getone()
        await consumer.commit()
        await consumer.stop()

    asyncio.run(work())


def test_python_clients_send_the_versions_they_send_to_apache_kafka(recorded, pylog_broker_factory):
    broker = pylog_broker_factory()
    _confluent(broker.bootstrap_servers)
    _kafka_python(broker.bootstrap_servers)
    _aiokafka(broker.bootstrap_servers)
    for client, expected in WITH_APACHE_KAFKA.items():
        served = {api: version for api, version in expected.items() if api not in NOT_SERVED}
        assert recorded[client] == served, client
