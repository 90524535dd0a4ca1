"""SASL/PLAIN on the embedded broker: Kafka's clients authenticate unchanged, nothing is served
before authentication, a wrong password closes only that connection, and Kafka's broker and
client settings (JAAS) configure it."""

from __future__ import annotations

import asyncio
import socket
import struct
import subprocess
import sys

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.properties import broker_options
from kafka_spark.broker.storage.errors import InvalidConfigError
from kafka_spark.common.jaas import JaasConfigError, librdkafka_config, parse_jaas

SECRET = "s3cret-Pa55"
JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="{SECRET}";'


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    with EmbeddedBroker(
        log_dir=tmp_path_factory.mktemp("sasl"), register=False, sasl_users={"alice": SECRET, "bob": "bob-pw"}
    ) as broker:
        yield broker


def client(broker: EmbeddedBroker, password: str = SECRET, **extra) -> dict:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": password,
        **extra,
    }


def read_all(config: dict, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({**config, "group.id": f"read-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    try:
        for _ in range(100):
            for message in consumer.consume(expected, timeout=0.2):
                if not message.error():
                    values.append(message.value())
            if len(values) >= expected:
                break
    finally:
        consumer.close()
    return values


def test_kafka_clients_authenticate_and_work_unchanged(sasl_broker):
    """confluent-kafka (SaslHandshake v1 + SaslAuthenticate), kafka-python and aiokafka."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer

    sasl_broker.create_topic("authenticated", partitions=1)
    producer = Producer(client(sasl_broker))
    for i in range(100):
        producer.produce("authenticated", b"ck-%d" % i)
    assert producer.flush(10) == 0

    settings = dict(
        bootstrap_servers=sasl_broker.bootstrap_servers,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="bob",
        sasl_plain_password="bob-pw",
    )
    kp = KafkaProducer(**settings)
    kp.send("authenticated", b"kp").get(10)
    kp.close()

    async def aio() -> list[bytes]:
        aio_producer = AIOKafkaProducer(**settings)
        await aio_producer.start()
        await aio_producer.send_and_wait("authenticated", b"aio")
        await aio_producer.stop()
        aio_consumer = AIOKafkaConsumer("authenticated", auto_offset_reset="earliest", **settings)
        await aio_consumer.start()
        try:
            batches = await aio_consumer.getmany(timeout_ms=5000, max_records=200)
            return [record.value for records in batches.values() for record in records]
        finally:
            await aio_consumer.stop()

    assert len(asyncio.run(aio())) >= 101
    kc = KafkaConsumer("authenticated", auto_offset_reset="earliest", consumer_timeout_ms=5000, **settings)
    assert len([m.value for m in kc]) == 102
    kc.close()
    assert read_all(client(sasl_broker), "authenticated", 102)[-2:] == [b"kp", b"aio"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_each_client_and_refusals_that_do_not_tell_user_from_password(sasl_broker, mechanism):
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    topic = f"scram-{mechanism.lower()}"
    sasl_broker.create_topic(topic, partitions=1)
    producer = Producer(client(sasl_broker, **{"sasl.mechanism": mechanism}))
    producer.produce(topic, b"confluent")
    assert producer.flush(10) == 0
    settings = dict(
        bootstrap_servers=sasl_broker.bootstrap_servers,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username="bob",
        sasl_plain_password="bob-pw",
    )
    kp = KafkaProducer(**settings)
    kp.send(topic, b"kafka-python").get(10)
    kp.close()

    async def aio() -> None:
        aio_producer = AIOKafkaProducer(**settings)
        await aio_producer.start()
        await aio_producer.send_and_wait(topic, b"aiokafka")
        await aio_producer.stop()

    asyncio.run(aio())
    assert read_all(client(sasl_broker, **{"sasl.mechanism": mechanism}), topic, 3) == [
        b"confluent",
        b"kafka-python",
        b"aiokafka",
    ]

    for user, password in (("alice", "guess"), ("mallory", SECRET)):
        errors: list[KafkaError] = []
        refused = Consumer(
            {
                **client(sasl_broker, **{"sasl.mechanism": mechanism}),
                "sasl.username": user,
                "sasl.password": password,
                "group.id": "refused",
                "error_cb": errors.append,
            }
        )
        with pytest.raises(KafkaException):
            refused.list_topics(timeout=2)
        refused.poll(0)
        refused.close()
        messages = {
            error.str().split(": ", 1)[-1].split(" (after")[0]
            for error in errors
            if error.code() == KafkaError._AUTHENTICATION
        }
        assert messages == {
            f"SASL authentication error: Authentication failed: Invalid username or password ({mechanism})"
        }, errors


def test_a_wrong_password_is_refused_and_nothing_is_served_before_authentication(sasl_broker):
    sasl_broker.create_topic("guarded", partitions=1)
    errors: list[KafkaError] = []
    intruder = Producer(
        client(sasl_broker, password="guess", **{"message.timeout.ms": 3000, "error_cb": errors.append})
    )
    deliveries: list[KafkaError | None] = []
    intruder.produce("guarded", b"must not land", on_delivery=lambda error, _: deliveries.append(error))
    intruder.flush(10)
    assert len(deliveries) == 1 and deliveries[0] is not None  # never delivered
    assert any("Invalid username or password" in error.str() for error in errors), errors
    assert all("guess" not in error.str() for error in errors)

    # A client that skips SASL is cut off at its first request; it cannot even read metadata.
    plain = Consumer({"bootstrap.servers": sasl_broker.bootstrap_servers, "group.id": "plain"})
    with pytest.raises(KafkaException):
        plain.list_topics(timeout=3)
    plain.close()
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=5) as raw:
        metadata_v0 = struct.pack(">hhih", 3, 0, 1, 0) + struct.pack(">i", 0)
        raw.sendall(struct.pack(">i", len(metadata_v0)) + metadata_v0)
        assert raw.recv(4) == b""  # closed without an answer

    alice = Consumer({**client(sasl_broker), "group.id": "alice"})  # the broker still serves alice
    assert alice.get_watermark_offsets(TopicPartition("guarded", 0), timeout=10) == (0, 0)  # nothing landed
    alice.close()


def _frame(raw: socket.socket) -> bytes:
    size = struct.unpack(">i", raw.recv(4, socket.MSG_WAITALL))[0]
    return raw.recv(size, socket.MSG_WAITALL) if size else b""


def test_the_pre_kafka_1_0_flow_handshake_v0_then_a_bare_token(sasl_broker):
    """SaslHandshake v0: the token follows as a bare frame and is answered by an empty one."""

    def handshake(raw: socket.socket, mechanism: bytes) -> tuple[int, bytes]:
        request = struct.pack(">hhih", 17, 0, 7, 0) + struct.pack(">h", len(mechanism)) + mechanism
        raw.sendall(struct.pack(">i", len(request)) + request)
        body = _frame(raw)
        return struct.unpack_from(">ih", body, 0)[1], body

    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=5) as raw:
        code, body = handshake(raw, b"GSSAPI")
        assert code == 33 and b"PLAIN" in body and b"SCRAM-SHA-512" in body  # UNSUPPORTED_SASL_MECHANISM
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=5) as raw:
        assert handshake(raw, b"PLAIN")[0] == 0
        token = b"\0alice\0" + SECRET.encode()
        raw.sendall(struct.pack(">i", len(token)) + token)
        assert raw.recv(4, socket.MSG_WAITALL) == b"\0\0\0\0"
        api_versions = struct.pack(">hhih", 18, 0, 8, 0)
        raw.sendall(struct.pack(">i", len(api_versions)) + api_versions)
        body = _frame(raw)
        assert struct.unpack_from(">ih", body, 0) == (8, 0)  # served once authenticated
    for mechanism, token in ((b"PLAIN", b"\0alice\0wrong"), (b"SCRAM-SHA-256", b"\xffnot a scram message")):
        with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=5) as raw:
            assert handshake(raw, mechanism)[0] == 0
            raw.sendall(struct.pack(">i", len(token)) + token)
            assert raw.recv(4) == b""  # closed


def test_a_plaintext_broker_neither_advertises_nor_serves_sasl(tmp_path):
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        with socket.create_connection(("127.0.0.1", broker.port), timeout=5) as raw:
            api_versions = struct.pack(">hhih", 18, 0, 1, 0)
            raw.sendall(struct.pack(">i", len(api_versions)) + api_versions)
            body = _frame(raw)
            _, error, count = struct.unpack_from(">ihi", body, 0)
            keys = {struct.unpack_from(">h", body, 10 + 6 * i)[0] for i in range(count)}
            assert error == 0 and 18 in keys and not keys & {17, 36}
            handshake = struct.pack(">hhih", 17, 1, 2, 0) + struct.pack(">h", 5) + b"PLAIN"
            raw.sendall(struct.pack(">i", len(handshake)) + handshake)
            assert raw.recv(4) == b""


def test_jaas_lines_read_as_kafka_writes_them():
    module, options = parse_jaas(
        "kafkashaded.org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="al\\"ice" password=pw tokenauth=true;'
    )
    assert module == "org.apache.kafka.common.security.scram.ScramLoginModule"
    assert options == {"username": 'al"ice', "password": "pw", "tokenauth": "true"}
    assert librdkafka_config({"sasl.jaas.config": JAAS, "security.protocol": "SASL_SSL"}) == {
        "security.protocol": "SASL_SSL",
        "sasl.username": "alice",
        "sasl.password": SECRET,
        "sasl.mechanism": "PLAIN",
    }
    assert librdkafka_config(
        {
            "ssl.truststore.location": "/etc/ca.pem",
            "ssl.truststore.type": "PEM",
            "ssl.endpoint.identification.algorithm": "",
        }
    ) == {"ssl.ca.location": "/etc/ca.pem", "ssl.endpoint.identification.algorithm": "none"}
    krb = 'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k.keytab" principal="p@R";'
    assert librdkafka_config({"sasl.jaas.config": krb}) == {
        "sasl.kerberos.keytab": "/k.keytab",
        "sasl.kerberos.principal": "p@R",
    }
    for config, message in [
        ({"sasl.jaas.config": "nonsense"}, "is not a JAAS entry"),
        ({"sasl.jaas.config": JAAS, "sasl.mechanism": "SCRAM-SHA-256"}, "set it to PLAIN"),
        ({"sasl.jaas.config": JAAS.replace("Plain", "Scram").replace("plain", "scram")}, "SCRAM-SHA-256 or"),
        ({"sasl.jaas.config": JAAS, "sasl.password": "x"}, "not both"),
        (
            {"sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"},
            "OAUTHBEARER needs a way to get tokens",
        ),
        ({"ssl.truststore.location": "/etc/truststore.jks"}, "keytool -exportcert"),
    ]:
        with pytest.raises(JaasConfigError, match=message) as error:
            librdkafka_config(config)
        assert SECRET not in str(error.value)


def test_server_properties_configure_a_sasl_listener():
    users = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";'
    )
    settings = broker_options(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": users,
            "security.inter.broker.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
        }
    ).settings
    assert settings["sasl_users"] == {"admin": "admin-pw", "alice": "alice-pw"}
    assert settings["sasl_mechanisms"] == ("PLAIN",)
    for properties, message in [
        ({"listeners": "SASL_PLAINTEXT://:9092", "sasl.enabled.mechanisms": "PLAIN"}, "is not set; give it the users"),
        (
            {"listeners": "SASL_PLAINTEXT://:9092", "listener.name.sasl_plaintext.plain.sasl.jaas.config": users},
            "sasl.enabled.mechanisms=GSSAPI: pylog authenticates with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
        ),
        ({"listeners": "SASL_SSL://:9092", "sasl.enabled.mechanisms": "PLAIN"}, "is not set; give it the users"),
    ]:
        with pytest.raises(InvalidConfigError, match=message) as error:
            broker_options(properties)
        assert "admin-pw" not in str(error.value)


def test_broker_start_and_client_commands_over_sasl(tmp_path, pylog_broker_process):
    """`pylog broker start` with Kafka's SASL settings; client commands authenticate with
    --command-config, as Kafka's tools do."""
    server = tmp_path / "server.properties"
    server.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.enabled.mechanisms=PLAIN\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        f'required user_alice="{SECRET}";\n'
    )
    client_config = tmp_path / "client.properties"
    client_config.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={JAAS}\n")
    broker = pylog_broker_process(str(server), port=None)
    bootstrap, env = broker.bootstrap_servers, broker.env
    try:

        def pylog(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
            return subprocess.run(
                [sys.executable, "-m", "kafka_spark.cli", *args, "--bootstrap-server", bootstrap],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=60,
                env=env,
            )

        secured = ("--command-config", str(client_config))
        assert pylog("topics", "create", "secure", *secured).returncode == 0
        assert pylog("produce", "secure", *secured, stdin="one\ntwo\n").returncode == 0
        consumed = pylog("consume", "secure", "--from-beginning", "--max-messages", "2", *secured)
        assert consumed.stdout.split() == ["one", "two"], consumed.stderr
        refused = pylog("groups", "delete-offsets", "g", "--topic", "secure", *secured)
        assert refused.returncode == 1 and "plaintext connections only" in refused.stderr
    finally:
        broker.stop()
    log = broker.stderr_text()
    assert "security.protocol=SASL_PLAINTEXT" in log and SECRET not in log


def test_refused_credentials_are_reported_at_once_by_the_source_and_the_topic_sink(sasl_broker):
    """Without this, librdkafka only says 'Broker transport failure' after the whole timeout."""
    import time

    from pyspark.sql.types import BinaryType, StructField, StructType

    from kafka_spark.client.offset_reader import OffsetFetchError, OffsetReader
    from kafka_spark.options import parse_source_options
    from kafka_spark.topics.options import TopicSinkError, parse_sink_options
    from kafka_spark.topics.writers import TopicStreamWriter, ensure_marker_topic

    secured = {
        "kafka.bootstrap.servers": sasl_broker.bootstrap_servers,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": JAAS.replace(SECRET, "guess"),
    }
    schema = StructType([StructField("value", BinaryType())])
    started = time.monotonic()
    with pytest.raises(TopicSinkError, match="refused the connection's credentials") as sink_error:
        ensure_marker_topic(parse_sink_options({**secured, "topic": "t"}, schema))
    with pytest.raises(TopicSinkError, match="refused the connection's credentials"):  # no marker topic either
        TopicStreamWriter(parse_sink_options({**secured, "topic": "t", "deliveryGuarantee": "at-least-once"}, schema))
    reader = OffsetReader(parse_source_options({**secured, "subscribe": "t"}), sasl_broker.bootstrap_servers)
    with pytest.raises(OffsetFetchError, match="Invalid username or password") as source_error:
        reader.topic_partitions()
    assert time.monotonic() - started < 10  # not three 15-30 s timeouts
    assert "guess" not in str(sink_error.value) + str(source_error.value)
    ensure_marker_topic(parse_sink_options({**secured, "kafka.sasl.jaas.config": JAAS, "topic": "t"}, schema))
