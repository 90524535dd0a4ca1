"""TLS listeners (SSL, SASL_SSL): Kafka's clients connect with the CA that signed the broker's
certificate, refuse a broker they cannot verify, and present client certificates when the broker
requires them (ssl.client.auth=required)."""

from __future__ import annotations

import asyncio
import ssl

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kafka_spark.broker.properties import broker_options
from tests.support.tls_certs import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def produce_and_count(config: dict, topic: str, count: int) -> int:
    producer = Producer(config)
    for i in range(count):
        producer.produce(topic, b"%d" % i)
    assert producer.flush(15) == 0
    consumer = Consumer({**config, "group.id": "tls-check"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def test_ssl_listener_serves_verified_clients_only(pki, tmp_path, pylog_broker_factory):
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    broker = pylog_broker_factory(log_dir=tmp_path, ssl_certfile=str(pki.broker))
    broker.create_topic("tls", partitions=1)
    bootstrap = broker.bootstrap_servers
    tls = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    assert produce_and_count(tls, "tls", 50) == 50
    kp = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=str(pki.ca))
    kp.send("tls", b"kafka-python").get(10)
    kp.close()

    async def aio() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            security_protocol="SSL",
            ssl_context=ssl.create_default_context(cafile=str(pki.ca)),
        )
        await producer.start()
        await producer.send_and_wait("tls", b"aiokafka")
        await producer.stop()

    asyncio.run(aio())

    # A client that does not trust this broker's CA refuses it; one that skips TLS gets nothing.
    errors: list[KafkaError] = []
    untrusting = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SSL",
            "group.id": "x",
            "ssl.ca.location": str(pki.client_cert),
            "error_cb": errors.append,
        }
    )
    with pytest.raises(KafkaException):
        untrusting.list_topics(timeout=3)
    untrusting.poll(0)
    untrusting.close()
    assert any(error.code() == KafkaError._SSL and "certificate verify failed" in error.str() for error in errors)
    plain = Consumer({"bootstrap.servers": bootstrap, "group.id": "x"})
    with pytest.raises(KafkaException):
        plain.list_topics(timeout=3)
    plain.close()
    counter = Consumer({**tls, "group.id": "count"})
    assert counter.get_watermark_offsets(TopicPartition("tls", 0), timeout=10)[1] == 52
    counter.close()


def test_sasl_ssl_with_required_client_certificates_from_server_properties(pki, tmp_path, pylog_broker_factory):
    users = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";'
    settings = broker_options(
        {
            "listeners": "SASL_SSL://127.0.0.1:0",
            "advertised.listeners": "SASL_SSL://localhost:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": users,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.broker),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca),
            "ssl.client.auth": "required",
        }
    ).settings
    broker = pylog_broker_factory(log_dir=tmp_path, **settings)
    assert broker.config.security_protocol == "SASL_SSL"
    broker.create_topic("mtls", partitions=1)
    secured = {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-pw",
    }
    with_certificate = {
        **secured,
        "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key),
    }
    assert produce_and_count(with_certificate, "mtls", 20) == 20
    errors: list[KafkaError] = []
    no_certificate = Consumer({**secured, "group.id": "x", "error_cb": errors.append})
    with pytest.raises(KafkaException):
        no_certificate.list_topics(timeout=3)
    no_certificate.poll(0)
    no_certificate.close()
    assert errors, "a client without a certificate was served"
