"""The Java client properties (kafka.*) in librdkafka's terms: the table covers every Kafka 4.1
consumer and producer property, every name it hands librdkafka is one the installed client
accepts, values convert as documented, and refusals name the option."""

from __future__ import annotations

import importlib.util
import logging
import re
from pathlib import Path

import pytest

from kafka_spark.java_properties import (
    CONSUMER,
    PRODUCER,
    PROPERTIES,
    KafkaConfigError,
    check_client_config,
    translate,
    warn_ignored,
)

GOLDEN = Path(__file__).parent / "golden" / "kafka_client_properties.txt"
DOCS = Path(__file__).parent.parent / "docs"


def java_properties() -> list[tuple[str, str, str]]:
    """(role, name, Java default) of every property of Kafka 4.1's clients."""
    rows = []
    for line in GOLDEN.read_text().splitlines():
        if line and not line.startswith("#"):
            role, name, *default = line.split(" ", 2)
            rows.append((role, name, default[0] if default else ""))
    return rows


def test_every_java_consumer_and_producer_property_has_a_rule_for_its_client():
    missing = [
        (role, name)
        for role, name, _ in java_properties()
        if name not in PROPERTIES or getattr(PROPERTIES[name], role) is None
    ]
    assert missing == []
    stray = sorted(set(PROPERTIES) - {name for _, name, _ in java_properties()})
    assert stray == [], "the table names only real Java client properties"


# Values for properties whose Java default is null or empty (the others use their default).
SAMPLES = {
    "bootstrap.servers": "h:9092",
    "client.id": "etl",
    "client.rack": "rack-1",
    "group.id": "g",
    "group.instance.id": "member-1",
    "group.remote.assignor": "uniform",
    "ssl.cipher.suites": "ECDHE-RSA-AES128-GCM-SHA256",
    "ssl.key.password": "pw",
    "sasl.kerberos.service.name": "kafka",
    "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
    "sasl.oauthbearer.scope": "kafka",
    "sasl.oauthbearer.client.credentials.client.id": "id",
    "sasl.oauthbearer.client.credentials.client.secret": "secret",
    "sasl.oauthbearer.assertion.claim.aud": "aud",
    "sasl.oauthbearer.assertion.claim.iss": "iss",
    "sasl.oauthbearer.assertion.claim.sub": "sub",
    "sasl.oauthbearer.assertion.file": "/tmp/assertion",
    "sasl.oauthbearer.assertion.private.key.file": "/tmp/key.pem",
    "sasl.oauthbearer.assertion.private.key.passphrase": "pw",
    "sasl.oauthbearer.assertion.template.file": "/tmp/t.json",
    "sasl.kerberos.kinit.cmd": "kinit -R -t /k.keytab -k kafka/host",
}


def passed_through() -> list[tuple[str, str, str]]:
    rows = []
    for role, name, default in java_properties():
        rule = getattr(PROPERTIES[name], role)
        if rule.action in ("same", "renamed") and not rule.security:
            value = SAMPLES.get(name, default)
            if value not in ("null", '""', ""):
                rows.append((role, name, value))
    return rows


@pytest.mark.parametrize("role,name,value", passed_through(), ids=lambda v: str(v))
def test_what_reaches_librdkafka_is_accepted_by_the_installed_client(role, name, value):
    config = {name: value}
    if name.startswith("compression.") and name.endswith(".level"):
        config["compression.type"] = name.split(".")[1]
    translated = translate(config, role)
    assert translated.librdkafka, f"{name} reached no librdkafka property"
    kind = "consumer" if role == CONSUMER else "producer"
    client = dict(translated.librdkafka, **({"group.id": "g"} if kind == "consumer" else {}))
    check_client_config(client, kind, translated.origin, "test")


@pytest.mark.parametrize(
    "role,given,expected",
    [
        (PRODUCER, {"buffer.memory": "33554432"}, {"queue.buffering.max.kbytes": "32768"}),
        (PRODUCER, {"buffer.memory": "1000"}, {"queue.buffering.max.kbytes": "1"}),
        (PRODUCER, {"max.request.size": "2097152"}, {"message.max.bytes": "2097152"}),
        (PRODUCER, {"send.buffer.bytes": "-1"}, {"socket.send.buffer.bytes": "0"}),
        (CONSUMER, {"receive.buffer.bytes": "65536"}, {"socket.receive.buffer.bytes": "65536"}),
        (CONSUMER, {"fetch.max.wait.ms": "100"}, {"fetch.wait.max.ms": "100"}),
        (CONSUMER, {"request.timeout.ms": "20000"}, {"socket.timeout.ms": "20000"}),
        (PRODUCER, {"batch.size": "0"}, {"batch.size": "1"}),
        (
            PRODUCER,
            {"compression.type": "zstd", "compression.zstd.level": "7", "compression.gzip.level": "3"},
            {"compression.type": "zstd", "compression.level": "7"},
        ),
        (
            PRODUCER,
            {"partitioner.class": "org.apache.kafka.clients.producer.internals.DefaultPartitioner"},
            {"partitioner": "murmur2_random"},
        ),
        (
            PRODUCER,
            {"partitioner.class": "org.apache.kafka.clients.producer.UniformStickyPartitioner"},
            {"partitioner": "random"},
        ),
        (PRODUCER, {"partitioner.ignore.keys": "true"}, {"partitioner": "random"}),
        (PRODUCER, {"linger.ms": "20", "acks": "all", "fetch.max.wait.ms": "5"}, {"linger.ms": "20", "acks": "all"}),
        (CONSUMER, {"fetch.wait.max.ms": "50"}, {"fetch.wait.max.ms": "50"}),  # librdkafka's own name
        (
            CONSUMER,
            {"ssl.keystore.location": "/k/client.pem", "ssl.keystore.type": "PEM", "ssl.key.password": "pw"},
            {
                "ssl.certificate.location": "/k/client.pem",
                "ssl.key.location": "/k/client.pem",
                "ssl.key.password": "pw",
            },
        ),
        (
            CONSUMER,
            {"ssl.keystore.location": "/k/client.p12", "ssl.keystore.password": "pw"},
            {"ssl.keystore.location": "/k/client.p12", "ssl.keystore.password": "pw"},
        ),
        (
            CONSUMER,
            {"ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----"},
            {"ssl.ca.pem": "-----BEGIN CERTIFICATE-----"},
        ),
    ],
)
def test_java_values_translate_to_librdkafka_settings(role, given, expected):
    assert translate(given, role).librdkafka == expected


def test_properties_pylog_applies_are_kept_for_the_connector():
    consumer = translate({"default.api.timeout.ms": "5000"}, CONSUMER)
    assert consumer.librdkafka == {} and consumer.honoured == {"default.api.timeout.ms": "5000"}
    producer = translate(
        {
            "max.block.ms": "1000",
            "transaction.timeout.ms": "90000",
            "partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner",
        },
        PRODUCER,
    )
    assert producer.librdkafka == {}
    assert producer.honoured == {
        "max.block.ms": "1000",
        "transaction.timeout.ms": "90000",
        "partitioner.class": "round_robin",
    }


def test_ignored_properties_are_warned_about_once_each(caplog, monkeypatch):
    from kafka_spark import option_names

    monkeypatch.setattr(option_names, "_warned", set())
    config = translate(
        {
            "metric.reporters": "com.acme.Reporter",
            "max.poll.records": "10",
            "linger.ms": "5",
            "sasl.kerberos.kinit.cmd": "/usr/bin/kinit",
        },
        CONSUMER,
    )
    assert config.librdkafka == {}
    with caplog.at_level(logging.WARNING, logger="kafka_spark"):
        warn_ignored(config, "pylog source")
        warn_ignored(config, "pylog source")  # the writer is created again for every micro-batch
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and all(line.startswith("pylog source: ignoring kafka.") for line in lines)
    assert any("kafka.linger.ms: a producer property; the source does not use it" in line for line in lines)


@pytest.mark.parametrize(
    "role,given,message",
    [
        (CONSUMER, {"auto.offset.reset": "earliest"}, "set the source option 'startingOffsets'"),
        (CONSUMER, {"key.deserializer": "x"}, "keys are always deserialized as byte arrays"),
        (PRODUCER, {"value.serializer": "x"}, "serialized with ByteArraySerializer"),
        (PRODUCER, {"transactional.id": "x"}, "use the sink option transactionalIdPrefix"),
        (
            PRODUCER,
            {"partitioner.class": "com.acme.RegionPartitioner"},
            "a Java partitioner cannot run in librdkafka. Give the rows a 'partition' column",
        ),
        (CONSUMER, {"ssl.keystore.location": "/k/client.jks"}, "convert it to PKCS#12"),
        (PRODUCER, {"buffer.memory": "lots"}, "kafka.buffer.memory must be a number"),
    ],
)
def test_what_has_no_translation_is_refused_naming_it(role, given, message):
    with pytest.raises(KafkaConfigError, match=re.escape(message)):
        translate(given, role)


@pytest.mark.parametrize(
    "role,given,kind,message",
    [
        (PRODUCER, {"linger.ms": "soon"}, "producer", "kafka.linger.ms refused by the Kafka client"),
        (
            PRODUCER,
            {"max.request.size": "10"},
            "producer",
            "kafka.max.request.size refused by the Kafka client "
            '(librdkafka): Configuration property "message.max.bytes" value 10',
        ),
        (CONSUMER, {"request.timeout.ms": "900000"}, "consumer", "kafka.request.timeout.ms refused"),
        (PRODUCER, {"acks": "1"}, "producer", "kafka.acks refused"),
        (
            CONSUMER,
            {"fetch.max.wiat.ms": "5"},
            "consumer",
            "kafka.fetch.max.wiat.ms is neither a Kafka client property "
            "nor a librdkafka one. Did you mean kafka.fetch.max.wait.ms?",
        ),
    ],
)
def test_a_value_librdkafka_refuses_fails_naming_the_kafka_option(role, given, kind, message):
    translated = translate(given, role)
    config = dict(translated.librdkafka, **({"group.id": "g"} if kind == "consumer" else {"enable.idempotence": True}))
    with pytest.raises(KafkaConfigError, match=re.escape(message)):
        check_client_config(config, kind, translated.origin, "test")


def test_the_reference_lists_every_java_property_with_what_pylog_does():
    """docs/reference/kafka-settings.md includes the table docs/_ext renders from PROPERTIES: a row
    per property, each client's rule as this test reads it."""
    spec = importlib.util.spec_from_file_location("pylog_reference", DOCS / "_ext" / "pylog_reference.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    assert "_generated/kafka-settings.md" in (DOCS / "reference" / "kafka-settings.md").read_text()
    words = {"same": "same", "renamed": "translated", "pylog": "**pylog**", "ignored": "ignored", "rejected": "refused"}
    rows = {}
    for line in reference.java_properties_table().strip().splitlines()[2:]:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows[cells[0].strip("`")] = cells[1:]
    assert list(rows) == list(PROPERTIES)
    for name, prop in PROPERTIES.items():
        for shown, rule in zip(rows[name], (prop.consumer, prop.producer), strict=True):
            assert shown == "—" if rule is None else shown.startswith(words[rule.action]), (name, shown, rule)
