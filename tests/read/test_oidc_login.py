"""The source logs in with OIDC against pylog's broker validating signed tokens (a JWKS, the issuer
and the audience ``kafka``, as a managed Kafka does; kafka_spark.testing_oidc), configured as a
Spark job on Confluent Cloud is: its driver code and its executors' read path log nothing secret at
librdkafka's and pylog's debug level; a streaming query reads on across several short-lived
tokens; a token for another audience fails the query naming the audience."""

from __future__ import annotations

import logging
import re
import threading
import time

import pytest
from confluent_kafka import Producer

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.client.config import consumer_config
from kafka_spark.client.consumer_pool import close_pooled_consumers
from kafka_spark.client.librdkafka_log import routed
from kafka_spark.client.offset_reader import OffsetReader
from kafka_spark.common.topic_partition import TopicPartition
from kafka_spark.java_properties import PRODUCER, translate
from kafka_spark.offsets import OffsetRange
from kafka_spark.options import parse_source_options
from kafka_spark.planning import plan_for_options
from kafka_spark.read.partition import read_partition
from kafka_spark.testing_oidc import OidcProvider
from tests.support.waiting import wait_until

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
#: A JWT as text: base64url of '{"' begins every header and claims set.
JWT = re.compile(r"eyJ[\w-]{10,}\.eyJ[\w-]{10,}\.[\w-]+")


def oidc(bootstrap: str, idp: OidcProvider, client_id: str, secret: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "OAUTHBEARER",
        "kafka.sasl.login.callback.handler.class": HANDLER,
        "kafka.sasl.oauthbearer.token.endpoint.url": idp.token_endpoint_url,
        "kafka.sasl.jaas.config": f"{MODULE} required clientId='{client_id}' clientSecret='{secret}' scope='kafka';",
    }


@pytest.fixture(scope="module")
def idp():
    """A provider of this module's own: add_client makes the new client the session provider's
    default (pylog_oidc.client_id), which other modules' tests log in with."""
    with OidcProvider() as provider:
        yield provider


@pytest.fixture(scope="module")
def oidc_broker(idp, tmp_path_factory):
    with EmbeddedBroker(
        log_dir=tmp_path_factory.mktemp("oidc-broker"),
        register=False,
        sasl_mechanisms=("OAUTHBEARER",),
        sasl_oauthbearer_validator=idp.validator(),
    ) as broker:
        yield broker


def produce(options: dict[str, str], topic: str, values: list[bytes]) -> None:
    java = {k[len("kafka.") :]: v for k, v in options.items()}
    producer = Producer(routed(translate(java, PRODUCER).librdkafka))
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def test_driver_and_executor_code_log_no_secret_and_no_token_at_debug_level(idp, oidc_broker, caplog):
    client_id, secret = idp.add_client("debug-etl", scope="kafka")
    login = oidc(oidc_broker.bootstrap_servers, idp, client_id, secret)
    oidc_broker.create_topic("oidc-debug", partitions=1)
    caplog.set_level(logging.DEBUG)
    produce(login, "oidc-debug", [b"v%d" % i for i in range(30)])
    options = parse_source_options({**login, "kafka.debug": "all", "subscribe": "oidc-debug"}, warn=True)
    reader = OffsetReader(options, oidc_broker.bootstrap_servers)  # the driver's lookups
    try:
        tp = TopicPartition("oidc-debug", 0)
        latest = reader.latest_offsets({tp})
    finally:
        reader.close()
    assert latest == {tp: 30}
    config = consumer_config(options, oidc_broker.bootstrap_servers, "oidc-debug-reader")
    [partition] = plan_for_options([OffsetRange(tp, 0, 30)], options, config)
    assert partition.fetcher == "librdkafka"  # SASL: the executors' librdkafka read path
    try:
        rows = [row for batch in read_partition(partition) for row in batch.to_pylist()]
    finally:
        close_pooled_consumers()
    assert [row["value"] for row in rows] == [b"v%d" % i for i in range(30)]
    assert idp.token_requests[client_id] >= 3  # producer, driver, executor logged in
    assert "OAUTHBEARER" in caplog.text and "kafka_spark.librdkafka" in {r.name for r in caplog.records}
    assert secret not in caplog.text
    assert JWT.search(caplog.text) is None


def test_a_streaming_query_reads_on_across_short_lived_tokens(spark, pylog_broker_factory):
    """Tokens live 4 s and the broker ends each session when its token expires (KIP-368): the
    query's executors and driver keep reading only by logging in again with new tokens."""
    with OidcProvider(token_lifetime_s=4) as idp:
        client_id, secret = idp.add_client("stream-etl", scope="kafka")
        broker = pylog_broker_factory(sasl_mechanisms=("OAUTHBEARER",), sasl_oauthbearer_validator=idp.validator())
        broker.create_topic("short-tokens", partitions=2)
        login = oidc(broker.bootstrap_servers, idp, client_id, secret)
        stop, sent = threading.Event(), []

        def write() -> None:
            java = {k[len("kafka.") :]: v for k, v in login.items()}
            producer = Producer(routed(translate(java, PRODUCER).librdkafka))
            while not stop.is_set():
                producer.produce("short-tokens", value=b"%d" % len(sent))
                sent.append(len(sent))
                producer.poll(0.02)
            assert producer.flush(30) == 0

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        query = (
            spark.readStream.format("pylog")
            .options(**login)
            .option("subscribe", "short-tokens")
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("CAST(value AS STRING) AS v")
            .writeStream.format("memory")
            .queryName("short_tokens")
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        try:
            requests = idp.token_requests[client_id]
            writing = time.monotonic() + 7  # the query runs across two lifetimes of the first tokens
            wait_until(lambda: time.monotonic() > writing or query.exception() is not None, "7 s of writing", 30)
            stop.set()
            writer.join(30)
            wait_until(
                lambda: query.exception() is not None or spark.table("short_tokens").count() >= len(sent),
                "the query reading every record written",
                60,
            )
            assert query.exception() is None, query.exception()
            read = sorted(int(row.v) for row in spark.table("short_tokens").collect())
        finally:
            query.stop()
        assert read == sent and len(sent) > 50
        # 7 s of 4 s tokens: the clients (producer, driver lookups, executors' consumers) asked again
        assert idp.token_requests[client_id] - requests >= 6


def test_a_token_for_another_audience_fails_the_query_naming_the_audience(spark, idp, oidc_broker):
    client_id, secret = idp.add_client("billing-job", audience="billing")
    login = oidc(oidc_broker.bootstrap_servers, idp, client_id, secret)
    login["kafka.sasl.jaas.config"] = login["kafka.sasl.jaas.config"].replace(" scope='kafka'", "")
    with pytest.raises(Exception) as failure:  # noqa: PT011 - Spark wraps the source's error
        spark.read.format("pylog").options(**login).option("subscribe", "t").load().count()
    message = str(failure.value)
    assert "rejected the login token (wrong audience: " in message
    assert "the token's audience 'billing' is not the expected ['kafka']" in message
    assert secret not in message
