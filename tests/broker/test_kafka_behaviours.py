"""Behaviours where the broker answered differently from Apache Kafka, each through the client
that showed the difference: topic compression, session timeout bounds, static membership,
internal topics in Metadata, leader epochs of transactional offsets, explicit replica
assignments, the broker's listeners in DescribeConfigs, ElectLeaders and per-record errors.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from kafka_spark.broker.protocol.versions import ApiKey
from kafka_spark.broker.storage.batch import build_record_batch, iter_batches
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def _admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def _stored_codecs(broker, topic: str) -> list[int]:
    with WireClient(broker.bootstrap_servers) as client:
        fetched = client.call(
            ApiKey.FETCH,
            11,
            {
                "max_wait": 0,
                "min_bytes": 0,
                "max_bytes": 1 << 24,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 24}],
                    }
                ],
            },
        )
    return [header.compression for header in iter_batches(bytes(fetched.responses[0].partitions[0].records))]


def _values(broker, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"{topic}-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []

    def read_all() -> bool:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            values.append(message.value())
        return len(values) >= count

    try:
        wait_until(read_all, lambda: f"{count} records of {topic}, read {len(values)}", 30, interval=0)
    finally:
        consumer.close()
    return values


def _produce(broker, topic: str, values: list[bytes], compression: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": compression})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(10) == 0


# -- compression.type --------------------------------------------------------------------------


def test_topic_compression_type_is_accepted_and_batches_are_recompressed_on_append(pylog_broker):
    admin = _admin(pylog_broker)
    topic = f"zstd-{time.monotonic_ns()}"
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": "zstd"})])[topic].result(10)
    _produce(pylog_broker, topic, [b"plain-%d" % i for i in range(50)], "none")
    _produce(pylog_broker, topic, [b"gzipped-%d" % i for i in range(50)], "gzip")
    assert set(_stored_codecs(pylog_broker, topic)) == {ZSTD}  # both producers' batches, in the topic's codec

    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[ConfigEntry("compression.type", "lz4", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(10)
    _produce(pylog_broker, topic, [b"later-%d" % i for i in range(50)], "snappy")
    assert _stored_codecs(pylog_broker, topic)[-1] == LZ4
    expected = (
        [b"plain-%d" % i for i in range(50)]
        + [b"gzipped-%d" % i for i in range(50)]
        + [b"later-%d" % i for i in range(50)]
    )
    assert _values(pylog_broker, topic, 150) == expected


def test_uncompressed_topics_store_what_a_compressing_producer_sends_uncompressed(pylog_broker):
    topic = f"plain-{time.monotonic_ns()}"
    admin = _admin(pylog_broker)
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": "uncompressed"})])[topic].result(10)
    _produce(pylog_broker, topic, [b"x" * 100] * 20, "gzip")
    assert set(_stored_codecs(pylog_broker, topic)) == {0}
    assert _values(pylog_broker, topic, 20) == [b"x" * 100] * 20


def test_an_unknown_compression_type_is_an_invalid_config(pylog_broker):
    topic = f"brotli-{time.monotonic_ns()}"
    admin = _admin(pylog_broker)
    future = admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": "brotli"})])[topic]
    with pytest.raises(KafkaException) as refused:
        future.result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG


# -- group.min/max.session.timeout.ms ---------------------------------------------------------


def test_join_group_refuses_a_session_timeout_below_the_broker_minimum(pylog_broker, pylog_topic):
    topic = pylog_topic()
    consumer = Consumer(
        {
            "bootstrap.servers": pylog_broker.bootstrap_servers,
            "group.id": f"{topic}-fast",
            "session.timeout.ms": 100,
            "heartbeat.interval.ms": 20,
        }
    )
    consumer.subscribe([topic])
    try:

        def first_error() -> KafkaError | None:
            message = consumer.poll(0.5)
            return message.error() if message is not None else None

        error = wait_until(first_error, "an error for the consumer", 30, interval=0)
    finally:
        consumer.close()
    assert error is not None and error.code() == KafkaError.INVALID_SESSION_TIMEOUT


def test_kafka_python_is_told_the_session_timeout_is_invalid(pylog_broker, pylog_topic):
    from kafka import KafkaConsumer
    from kafka.errors import InvalidSessionTimeoutError

    topic = pylog_topic()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=pylog_broker.bootstrap_servers,
        group_id=f"{topic}-kp",
        session_timeout_ms=3_000_000,
        heartbeat_interval_ms=1000,
        request_timeout_ms=3_100_000,
        connections_max_idle_ms=3_200_000,
    )
    try:
        with pytest.raises(InvalidSessionTimeoutError):  # above group.max.session.timeout.ms (30 min)
            consumer.poll(timeout_ms=10_000)
    finally:
        consumer.close()


def test_the_session_timeout_bounds_are_broker_settings(pylog_broker_factory):
    from kafka_spark.broker.properties import broker_options

    options = broker_options({"group.min.session.timeout.ms": "50", "group.max.session.timeout.ms": "60000"})
    assert options.settings == {"group_min_session_timeout_ms": 50, "group_max_session_timeout_ms": 60000}
    broker = pylog_broker_factory(**options.settings)
    join = {
        "group_id": "g",
        "session_timeout": 100,
        "rebalance_timeout": 100,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    with WireClient(broker.bootstrap_servers) as client:
        told = client.call(ApiKey.JOIN_GROUP, 5, join)
        assert told.error_code == 79  # MEMBER_ID_REQUIRED: the timeout passed (a refused one is 26)
        joined = client.call(ApiKey.JOIN_GROUP, 5, {**join, "member_id": told.member_id})
    assert joined.error_code == 0


# -- static membership (KIP-345) ----------------------------------------------------------------


def test_a_static_member_that_comes_back_keeps_its_assignment_without_a_rebalance(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=4)
    group = f"{topic}-static"
    assignments: dict[str, list[set[int]]] = {"a": [], "b": []}

    def member(instance: str) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": pylog_broker.bootstrap_servers,
                "group.id": group,
                "group.instance.id": instance,
                "session.timeout.ms": 30_000,
                "heartbeat.interval.ms": 500,
                "partition.assignment.strategy": "range",
            }
        )
        consumer.subscribe([topic], on_assign=lambda c, ps: assignments[instance].append({p.partition for p in ps}))
        return consumer

    def poll_until(consumers: list[Consumer], condition) -> None:
        def polled() -> bool:
            if condition():
                return True
            for consumer in consumers:
                consumer.poll(0.1)
            return False

        wait_until(polled, lambda: f"the assignments to settle: {assignments}", interval=0)

    a, b = member("a"), member("b")
    coordinator = pylog_broker._broker.groups
    poll_until(
        [a, b],
        lambda: (
            assignments["a"] and assignments["b"] and sum(map(len, (assignments["a"][-1], assignments["b"][-1]))) == 4
        ),
    )
    generation = coordinator.group(group).generation_id
    held_by_a, rebalances_seen_by_b = assignments["a"][-1], len(assignments["b"])
    a.close()  # a static member's close sends no LeaveGroup: its place is kept for its session
    again = member("a")
    poll_until([again, b], lambda: len(assignments["a"]) == 2)
    for _ in range(20):  # give a rebalance, were there one, every chance to show
        b.poll(0.1)
        again.poll(0.1)
    assert assignments["a"][-1] == held_by_a
    assert len(assignments["b"]) == rebalances_seen_by_b
    assert coordinator.group(group).generation_id == generation
    again.close()
    b.close()


def test_an_old_member_id_of_a_static_member_is_fenced(pylog_broker):
    join = {
        "group_id": "fence",
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "group_instance_id": "i",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    with WireClient(pylog_broker.bootstrap_servers) as client:
        first = client.call(ApiKey.JOIN_GROUP, 5, {**join, "member_id": ""})
        synced = client.call(
            ApiKey.SYNC_GROUP,
            3,
            {
                "group_id": "fence",
                "generation_id": first.generation_id,
                "member_id": first.member_id,
                "group_instance_id": "i",
                "assignments": [{"member_id": first.member_id, "assignment": b"mine"}],
            },
        )
        assert synced.error_code == 0
        second = client.call(ApiKey.JOIN_GROUP, 5, {**join, "member_id": ""})  # the restarted instance
        assert (second.error_code, second.generation_id) == (0, first.generation_id)
        assert second.member_id != first.member_id
        beat = client.call(
            ApiKey.HEARTBEAT,
            3,
            {
                "group_id": "fence",
                "generation_id": first.generation_id,
                "member_id": first.member_id,
                "group_instance_id": "i",
            },
        )
        assert beat.error_code == 82  # FENCED_INSTANCE_ID: the old process, if it is still around
        assignment = client.call(
            ApiKey.SYNC_GROUP,
            3,
            {
                "group_id": "fence",
                "generation_id": second.generation_id,
                "member_id": second.member_id,
                "group_instance_id": "i",
                "assignments": [],
            },
        )
        assert (assignment.error_code, assignment.assignment) == (0, b"mine")


# -- internal topics ---------------------------------------------------------------------------


def test_internal_topics_are_listed_to_clients_that_ask_for_them(pylog_broker, pylog_topic):
    from kafka import KafkaConsumer

    topic = pylog_topic()
    committer = Consumer({"bootstrap.servers": pylog_broker.bootstrap_servers, "group.id": f"{topic}-g"})
    committer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # creates __consumer_offsets
    committer.close()
    subscribed = {}
    for exclude in (False, True):  # kafka-python applies exclude_internal_topics to pattern subscriptions
        consumer = KafkaConsumer(
            bootstrap_servers=pylog_broker.bootstrap_servers,
            group_id=f"{topic}-{exclude}",
            exclude_internal_topics=exclude,
        )
        consumer.subscribe(pattern=f"^(__consumer_offsets|{topic})$")

        def subscribed_to_topic(consumer=consumer) -> bool:
            if topic in (consumer.subscription() or ()):
                return True
            consumer.poll(timeout_ms=200)
            return False

        wait_until(subscribed_to_topic, f"the pattern to match {topic}", 30, interval=0)
        subscribed[exclude] = set(consumer.subscription() or ())
        consumer.close()
    assert subscribed == {False: {"__consumer_offsets", topic}, True: {topic}}
    admin = _admin(pylog_broker)
    assert admin.list_topics(timeout=10).topics["__consumer_offsets"].error is None


# -- TxnOffsetCommit keeps committed_leader_epoch ---------------------------------------------------


def test_offsets_committed_in_a_transaction_keep_their_leader_epoch(pylog_broker, pylog_topic):
    topic = pylog_topic()
    group = f"{topic}-g"
    consumer = Consumer({"bootstrap.servers": pylog_broker.bootstrap_servers, "group.id": group})
    producer = Producer({"bootstrap.servers": pylog_broker.bootstrap_servers, "transactional.id": f"{topic}-t"})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.send_offsets_to_transaction(
        [TopicPartition(topic, 0, 7, leader_epoch=0)], consumer.consumer_group_metadata(), 10
    )
    producer.commit_transaction(10)
    (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    consumer.close()
    assert (committed.offset, committed.leader_epoch) == (7, 0)


# -- explicit replica assignments ----------------------------------------------------------------


def test_replica_assignments_that_name_this_broker_are_accepted(pylog_broker):
    admin = _admin(pylog_broker)
    topic = f"assigned-{time.monotonic_ns()}"
    admin.create_topics([NewTopic(topic, 2, replica_assignment=[[0], [0]])])[topic].result(10)
    admin.create_partitions([NewPartitions(topic, 3, replica_assignment=[[0]])])[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3
    elsewhere = f"elsewhere-{time.monotonic_ns()}"
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic(elsewhere, 2, replica_assignment=[[0], [1]])])[elsewhere].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "broker 1" in refused.value.args[0].str()
    with pytest.raises(KafkaException) as refused:
        admin.create_partitions([NewPartitions(topic, 4, replica_assignment=[[2]])])[topic].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT


# -- DescribeConfigs of the broker ---------------------------------------------------------------


def test_broker_configs_include_its_listeners(pylog_broker):
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    admin = _admin(pylog_broker)
    configs = admin.describe_configs([resource])[resource].result(10)
    address = f"PLAINTEXT://127.0.0.1:{pylog_broker.port}"
    assert (configs["listeners"].value, configs["advertised.listeners"].value) == (address, address)
    assert configs["listeners"].source == ConfigSource.STATIC_BROKER_CONFIG.value


# -- ElectLeaders -----------------------------------------------------------------------------------


def test_elect_leaders_answers_that_no_election_is_needed(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=2)
    admin = _admin(pylog_broker)
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0), TopicPartition(topic, 5)]).result(
        10
    )
    codes = {tp.partition: error.code() for tp, error in result.items()}
    assert codes == {0: KafkaError.ELECTION_NOT_NEEDED, 5: KafkaError.UNKNOWN_TOPIC_OR_PART}


# -- Produce v8+ record errors (KIP-467) ----------------------------------------------------------


def test_kafka_python_learns_which_records_made_the_batch_fail(pylog_broker, pylog_topic):
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError
    from kafka.errors import KafkaError as KpError

    topic = pylog_topic(config={"cleanup.policy": "compact"})
    producer = KafkaProducer(bootstrap_servers=pylog_broker.bootstrap_servers, linger_ms=100, retries=0)
    keyed, keyless = producer.send(topic, b"v", key=b"k"), producer.send(topic, b"no key")
    producer.flush()
    producer.close()
    with pytest.raises(InvalidRecordError, match="without key in topic partition"):
        keyless.get(10)
    with pytest.raises(KpError, match="part of a batch which had one more more invalid records"):
        keyed.get(10)


@pytest.mark.parametrize("version", [7, 8, 9, 13])
def test_produce_answers_the_index_and_reason_of_each_invalid_record(pylog_broker, pylog_topic, version):
    topic = pylog_topic(config={"cleanup.policy": "compact"})
    future = int(time.time() * 1000) + 7_200_000  # beyond message.timestamp.after.max.ms (1 hour)
    batch = build_record_batch([(b"k", b"ok", (), 1_000), (None, b"keyless", (), 1_000), (b"k", b"late", (), future)])
    name = {"topic_id": pylog_broker._broker.logs.topic_info(topic).topic_id} if version >= 13 else {"name": topic}
    with WireClient(pylog_broker.bootstrap_servers) as client:
        response = client.call(
            ApiKey.PRODUCE,
            version,
            {"acks": -1, "timeout": 5000, "topic_data": [{**name, "partition_data": [{"index": 0, "records": batch}]}]},
        )
    result = response.responses[0].partition_responses[0]
    assert result.error_code == 32  # INVALID_TIMESTAMP wins, as in Kafka's LogValidator
    if version >= 8:
        errors = [(e.batch_index, e.batch_index_error_message) for e in result.record_errors]
        assert [index for index, _ in errors] == [1, 2]
        assert "without key" in errors[0][1] and f"Timestamp {future} of message with offset 2" in errors[1][1]
        assert result.error_message == "One or more records have been rejected due to invalid timestamp"
