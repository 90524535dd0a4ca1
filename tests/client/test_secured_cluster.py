"""A Spark job against a cluster that requires TLS and SASL/SCRAM-SHA-512 (as managed Kafka
services do), configured as Spark's Kafka connector is (kafka.sasl.jaas.config, a PEM
kafka.ssl.truststore.location): the source reads, the sinks write, and the password is in none of
the files the job leaves (checkpoints, outputs, the broker's data)."""

from __future__ import annotations

import pathlib
import time

import pytest
from confluent_kafka import Producer

from kafka_spark.broker import EmbeddedBroker
from tests.support.partition_reads import read_to_end
from tests.support.tls_certs import make_pki

SECRET = "Spark-s3cret-9f2"
JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="etl" password="{SECRET}";'


def librdkafka(bootstrap: str, ca: str) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "etl",
        "sasl.password": SECRET,
        "ssl.ca.location": ca,
    }


def committed_values(bootstrap: str, ca: str, topic: str, partitions: int) -> list[bytes]:
    sasl = {k: v for k, v in librdkafka(bootstrap, ca).items() if k != "bootstrap.servers"}
    return [
        message.value()
        for partition in range(partitions)
        for message in read_to_end(bootstrap, topic, partition, **sasl, **{"isolation.level": "read_committed"})
    ]


def test_source_and_sinks_work_against_a_sasl_cluster_and_keep_the_password_out_of_files(spark, tmp_path):
    pki = make_pki(tmp_path / "pki")
    with EmbeddedBroker(
        log_dir=tmp_path / "broker", register=False, sasl_users={"etl": SECRET}, ssl_certfile=str(pki.broker)
    ) as broker:
        bootstrap, ca = broker.bootstrap_servers, str(pki.ca)
        broker.create_topic("orders", partitions=2)
        broker.create_topic("orders-copy", partitions=2)
        producer = Producer(librdkafka(bootstrap, ca))
        for i in range(200):
            producer.produce("orders", key=b"k%d" % (i % 5), value=b"order-%d" % i)
        assert producer.flush(10) == 0
        secured = {
            "kafka.bootstrap.servers": bootstrap,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": JAAS,
            "kafka.ssl.truststore.location": ca,
            "kafka.ssl.truststore.type": "PEM",
        }

        batch = spark.read.format("pylog").options(**secured).option("subscribe", "orders").load()
        assert batch.count() == 200

        stream = (
            spark.readStream.format("pylog")
            .options(**secured)
            .option("subscribe", "orders")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("key", "value")
        )
        to_topic = (
            stream.writeStream.format("pylog")
            .options(**secured)
            .option("topic", "orders-copy")
            .option("checkpointLocation", str(tmp_path / "checkpoint-topic"))
            .trigger(availableNow=True)
            .start()
        )
        to_topic.awaitTermination(180)
        assert to_topic.exception() is None
        to_files = (
            stream.writeStream.format("pylog-files")
            .option("checkpointLocation", str(tmp_path / "checkpoint-files"))
            .option("path", str(tmp_path / "out"))
            .trigger(availableNow=True)
            .start()
        )
        to_files.awaitTermination(180)
        assert to_files.exception() is None

        assert sorted(committed_values(bootstrap, ca, "orders-copy", 2)) == sorted(b"order-%d" % i for i in range(200))
        assert spark.read.parquet(str(tmp_path / "out")).count() == 200

        wrong = {**secured, "kafka.sasl.jaas.config": JAAS.replace(SECRET, "guess")}
        started = time.monotonic()
        with pytest.raises(Exception) as failure:
            (
                spark.read.format("pylog")
                .options(**wrong)
                .option("subscribe", "orders")
                .option("kafkaConsumer.pollTimeoutMs", "5000")
                .load()
                .count()
            )
        assert "refused the connection's credentials" in str(failure.value), str(failure.value)[-2000:]
        assert "Invalid username or password" in str(failure.value)
        assert "guess" not in str(failure.value)
        assert time.monotonic() - started < 30  # the refusal, not 4 retries of a 30 s timeout

    leaked = [
        str(path)
        for path in pathlib.Path(tmp_path).rglob("*")
        if path.is_file() and SECRET.encode() in path.read_bytes()
    ]
    assert leaked == []
