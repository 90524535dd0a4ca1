"""Admin APIs that operators and tools use on a running cluster: CreatePartitions, DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs and DeleteRecords, through confluent-kafka's, kafka-python's
and aiokafka's admin clients. Changes persist across a restart and reach the logs at once."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from confluent_kafka.error import KafkaException

from kafka_spark.broker import EmbeddedBroker
from tests.support.partition_reads import read_to_end


def partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(timeout=10).topics[topic].partitions)


def error_code(future) -> int:  # noqa: ANN001
    with pytest.raises(KafkaException) as raised:
        future.result(10)
    return raised.value.args[0].code()


def describe(admin: AdminClient, resource: ConfigResource) -> dict:
    return admin.describe_configs([resource])[resource].result(10)


def test_confluent_admin_grows_a_topic_and_refuses_what_kafka_refuses(pylog_broker, pylog_topic):
    admin = AdminClient({"bootstrap.servers": pylog_broker.bootstrap_servers})
    topic = pylog_topic(partitions=2)
    assert admin.create_partitions([NewPartitions(topic, 3)], validate_only=True)[topic].result(10) is None
    assert partition_count(admin, topic) == 2  # validate_only changes nothing
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(10)
    assert partition_count(admin, topic) == 5
    assert error_code(admin.create_partitions([NewPartitions(topic, 4)])[topic]) == 37  # INVALID_PARTITIONS
    assert error_code(admin.create_partitions([NewPartitions("no-such-topic", 4)])["no-such-topic"]) == 3
    # A replica on a broker that does not exist: INVALID_REPLICA_ASSIGNMENT (on this broker, [[0]] works).
    assert error_code(admin.create_partitions([NewPartitions(topic, 6, replica_assignment=[[1]])])[topic]) == 39

    # The new partitions take writes and serve reads like the first ones.
    producer = Producer({"bootstrap.servers": pylog_broker.bootstrap_servers})
    delivered = []
    for partition in range(5):
        producer.produce(
            topic,
            value=b"p%d" % partition,
            partition=partition,
            on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())),
        )
    producer.flush(10)
    assert sorted(delivered) == [(None, p, 0) for p in range(5)]


def test_confluent_admin_describes_and_alters_topic_configs(pylog_broker, pylog_topic):
    admin = AdminClient({"bootstrap.servers": pylog_broker.bootstrap_servers})
    topic = pylog_topic(partitions=2, config={"retention.ms": "3600000"})
    resource = ConfigResource("topic", topic)
    configs = describe(admin, resource)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not configs["retention.ms"].is_default
    # as Kafka lists them: the topic's override; no broker-level default (log.retention.hours is in hours)
    assert [(s.name, s.value) for s in configs["retention.ms"].synonyms.values()] == [("retention.ms", "3600000")]
    assert [(s.name, s.value) for s in configs["cleanup.policy"].synonyms.values()] == [
        ("log.cleanup.policy", "delete")
    ]
    assert configs["cleanup.policy"].value == "delete" and configs["cleanup.policy"].is_default
    assert configs["compression.type"].value == "producer"

    # Incremental: APPEND to a list config, DELETE an override (back to the default).
    change = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([change])[change].result(10)
    configs = describe(admin, resource)
    assert (configs["cleanup.policy"].value, configs["retention.ms"].value, configs["segment.bytes"].value) == (
        "delete,compact",  # appended after the effective value, as Kafka does
        "604800000",
        "1048576",
    )
    for partition in range(2):  # the logs apply it at once
        log = pylog_broker.broker.logs.get_log(topic, partition)
        assert log.config.compacts and log.config.deletes and log.config.segment_bytes == 1048576

    # Refused: a bad value, APPEND to a scalar config, an unknown name. Nothing changes.
    for entry, code in [
        (ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET), 40),
        (ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND), 40),
        (ConfigEntry("retention.mss", "5", incremental_operation=AlterConfigOpType.SET), 40),
    ]:
        bad = ConfigResource("topic", topic, incremental_configs=[entry])
        assert error_code(admin.incremental_alter_configs([bad])[bad]) == code
    assert describe(admin, resource)["retention.ms"].value == "604800000"

    # validate_only checks and changes nothing.
    trial = ConfigResource(
        "topic",
        topic,
        incremental_configs=[ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([trial], validate_only=True)[trial].result(10)
    assert describe(admin, resource)["retention.ms"].value == "604800000"

    unknown = ConfigResource("topic", "no-such-topic")
    assert error_code(admin.describe_configs([unknown])[unknown]) == 3


def test_broker_configs_are_described_and_read_only(pylog_broker):
    admin = AdminClient({"bootstrap.servers": pylog_broker.bootstrap_servers})
    configs = describe(admin, ConfigResource("broker", str(pylog_broker.broker.config.node_id)))
    assert configs["log.retention.ms"].value == "604800000"
    assert configs["num.partitions"].value == str(pylog_broker.broker.config.num_partitions)
    assert configs["log.dirs"].value == str(pylog_broker.log_dir)
    assert all(entry.is_read_only for entry in configs.values())
    change = ConfigResource(
        "broker",
        "0",
        incremental_configs=[ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)],
    )
    assert error_code(admin.incremental_alter_configs([change])[change]) == 42


def test_partitions_and_configs_survive_a_restart_and_retention_follows_the_new_setting(tmp_path):
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("kept", 1, config={"internal.segment.bytes": "1024"})])["kept"].result(10)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        old = int(time.time() * 1000) - 3_600_000  # an hour ago
        for i in range(20):
            producer.produce("kept", value=b"x" * 300, partition=0, timestamp=old + i)
            producer.flush(10)  # one batch each: several segments
        admin.create_partitions([NewPartitions("kept", 3)])["kept"].result(10)
        change = ConfigResource(
            "topic", "kept", set_config={"internal.segment.bytes": "1024", "retention.ms": "600000"}
        )
        with pytest.warns(DeprecationWarning):  # confluent-kafka prefers incremental_alter_configs
            admin.alter_configs([change])[change].result(10)
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert partition_count(admin, "kept") == 3
        assert describe(admin, ConfigResource("topic", "kept"))["retention.ms"].value == "600000"
        log = broker.broker.logs.get_log("kept", 0)
        assert log.log_start_offset == 0
        broker.broker.logs.run_retention()  # ten minutes' retention: the hour-old segments go
        assert log.log_start_offset > 0


def test_kafka_python_admin_grows_topics_and_alters_configs(pylog_broker, pylog_topic):
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewPartitions as KpPartitions

    topic = pylog_topic(partitions=1)
    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    try:
        admin.create_partitions({topic: KpPartitions(total_count=3)})
        assert len(admin.describe_topics([topic])[0]["partitions"]) == 3
        admin.alter_configs([KpResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "120000"})])
        # By default kafka-python lists the modified configs only: it goes by config_source.
        # DescribeConfigs v3+ adds the type (Kafka's: retention.ms is a LONG); the documentation
        # comes only when asked for.
        described = admin.describe_configs([KpResource(ConfigResourceType.TOPIC, topic)])
        assert described == {
            "topic": {
                topic: {
                    "retention.ms": {
                        "value": "120000",
                        "read_only": False,
                        "config_source": "DYNAMIC_TOPIC_CONFIG",
                        "is_sensitive": False,
                        "synonyms": [],
                        "config_type": "LONG",
                        "documentation": None,
                    }
                }
            }
        }
    finally:
        admin.close()


def test_aiokafka_admin_grows_topics_and_describes_configs(pylog_broker, pylog_topic):
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewPartitions as AioPartitions
    from aiokafka.admin.config_resource import ConfigResource as AioResource
    from aiokafka.admin.config_resource import ConfigResourceType as AioType

    topic = pylog_topic(partitions=1, config={"retention.ms": "90000"})

    async def run() -> dict[str, str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_partitions({topic: AioPartitions(total_count=2)})
            described = await admin.describe_configs([AioResource(AioType.TOPIC, topic)])
            return {
                entry[0]: entry[1] for response in described for result in response.resources for entry in result[4]
            }
        finally:
            await admin.close()

    assert asyncio.run(run())["retention.ms"] == "90000"
    assert pylog_broker.broker.logs.topics()[topic].partitions == 2


def consume_offsets(bootstrap: str, topic: str) -> list[int]:
    return [message.offset() for message in read_to_end(bootstrap, topic)]


def test_delete_records_moves_the_log_start_and_removes_whole_segments(tmp_path):
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        bootstrap = broker.bootstrap_servers
        broker.create_topic("trim", partitions=1, config={"internal.segment.bytes": "1024"})
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for _ in range(30):
            producer.produce("trim", value=b"x" * 200, partition=0)
            producer.flush(10)  # one batch each: a few per segment
        segments_before = len(list((tmp_path / "trim-0").glob("*.log")))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        (future,) = admin.delete_records([TopicPartition("trim", 0, 17)]).values()
        assert future.result(10).low_watermark == 17
        assert consume_offsets(bootstrap, "trim") == list(range(17, 30))
        assert len(list((tmp_path / "trim-0").glob("*.log"))) < segments_before
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "admin-apis"})
        assert consumer.get_watermark_offsets(TopicPartition("trim", 0), timeout=10) == (17, 30)
        consumer.close()

        (beyond,) = admin.delete_records([TopicPartition("trim", 0, 31)]).values()
        assert error_code(beyond) == 1  # OFFSET_OUT_OF_RANGE: past the end
        (lower,) = admin.delete_records([TopicPartition("trim", 0, 5)]).values()
        assert lower.result(10).low_watermark == 17  # below the start: nothing changes
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        assert consume_offsets(broker.bootstrap_servers, "trim") == list(range(17, 30))
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        (everything,) = admin.delete_records([TopicPartition("trim", 0, -1)]).values()  # -1: the end
        assert everything.result(10).low_watermark == 30
        assert consume_offsets(broker.bootstrap_servers, "trim") == []


def test_kafka_python_admin_deletes_records(pylog_broker, pylog_topic):
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import KafkaAdminClient

    topic = pylog_topic(partitions=1)
    producer = Producer({"bootstrap.servers": pylog_broker.bootstrap_servers})
    for i in range(10):
        producer.produce(topic, value=b"%d" % i, partition=0)
    producer.flush(10)
    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    try:
        result = admin.delete_records({KpTopicPartition(topic, 0): 4})
    finally:
        admin.close()
    assert result[KpTopicPartition(topic, 0)]["low_watermark"] == 4
    assert consume_offsets(pylog_broker.bootstrap_servers, topic) == list(range(4, 10))


def test_describe_cluster_names_this_node_as_broker_and_controller(pylog_broker):
    from kafka.admin import KafkaAdminClient

    config = pylog_broker.broker.config
    admin = AdminClient({"bootstrap.servers": pylog_broker.bootstrap_servers})
    cluster = admin.describe_cluster(request_timeout=10).result(10)
    host, port = pylog_broker.bootstrap_servers.rsplit(":", 1)
    assert cluster.cluster_id == config.cluster_id
    assert (cluster.controller.id, cluster.controller.host, cluster.controller.port) == (
        config.node_id,
        host,
        int(port),
    )
    assert [(node.id, node.host, node.port) for node in cluster.nodes] == [(config.node_id, host, int(port))]

    kp_admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    try:
        described = kp_admin.describe_cluster()
    finally:
        kp_admin.close()
    assert described["cluster_id"] == config.cluster_id and described["controller_id"] == config.node_id


def test_describe_cluster_of_controllers_is_refused_as_a_broker_refuses_it(pylog_broker):
    from tests.support.wire import WireClient

    with WireClient(pylog_broker.bootstrap_servers) as client:
        brokers = client.call(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
        controllers = client.call(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 2})
        unknown = client.call(60, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 7})
    assert (int(brokers.error_code), len(brokers.brokers)) == (0, 1)
    assert (int(controllers.error_code), controllers.brokers) == (114, ())  # MISMATCHED_ENDPOINT_TYPE
    assert (int(unknown.error_code), unknown.brokers) == (115, ())  # UNSUPPORTED_ENDPOINT_TYPE


def test_describe_log_dirs_reports_each_partitions_size_on_disk(pylog_broker, pylog_topic):
    from kafka.admin import KafkaAdminClient

    topic = pylog_topic(partitions=2)
    producer = Producer({"bootstrap.servers": pylog_broker.bootstrap_servers})
    for _ in range(10):
        producer.produce(topic, value=b"x" * 100, partition=0)
    assert producer.flush(10) == 0
    admin = KafkaAdminClient(bootstrap_servers=pylog_broker.bootstrap_servers)
    try:
        everything = admin.describe_log_dirs()
        one = admin.describe_log_dirs({topic: [1], "no-such-topic": [0]})
    finally:
        admin.close()
    (log_dir,) = everything[0]["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"] == str(pylog_broker.log_dir)
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
    on_disk = sum(path.stat().st_size for path in (pylog_broker.log_dir / f"{topic}-0").glob("*.log"))
    assert sizes[(topic, 0)] == on_disk > 1000 and sizes[(topic, 1)] == 0
    # Kafka lists its internal topics too, where they exist; only topic partitions live on disk.
    assert all((pylog_broker.log_dir / f"{name}-{p}").is_dir() for name, p in sizes)
    (asked,) = one[0]["log_dirs"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in asked["topics"]] == [(topic, [1])]
