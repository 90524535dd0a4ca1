"""Amazon MSK IAM logins end to end, without a network: the Java settings Spark jobs carry
(``AWS_MSK_IAM``, ``IAMLoginModule``, ``IAMClientCallbackHandler``) make pylog's clients sign
tokens with AWS's signer library, and a pylog broker checks them as MSK does
(tests/support/msk_validator.py: the SigV4 signature recomputed with botocore from a stubbed
credential source, the action, the host, the expiry). Tokens are refreshed before they expire, so
a long-running consumer keeps reading across several short-lived tokens."""

from __future__ import annotations

import base64
import logging
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.client.aws_msk import MskLoginError, msk_iam_token, msk_region
from kafka_spark.client.librdkafka_log import routed
from kafka_spark.client.refusal import CredentialsRefused, RefusalWatch, list_topics_watching
from kafka_spark.client.token_provider import TokenLoginError
from kafka_spark.java_properties import CONSUMER, PRODUCER, translate
from tests.support.msk_validator import MskIamValidator

REGION = "eu-west-1"
KEY_ID, SECRET_KEY = "AKIAPYLOGTEST0000001", "pylog/Msk+Secret/0123456789abcdefEXAMPLE"
PRINCIPAL = "arn:aws:iam::123456789012:user/etl"

#: What a Spark job on MSK sets (aws-msk-iam-auth's README), plus the region: pylog's broker has
#: no MSK host name to take it from.
MSK_JAVA = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "AWS_MSK_IAM",
    "sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required;",
    "sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
    "sasl.oauthbearer.config": f"region={REGION}",
}


@pytest.fixture
def aws_keys(monkeypatch):
    """The stubbed credential source: fixed access keys in the environment (botocore's default
    chain reads them first)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture(scope="module")
def msk_validator() -> MskIamValidator:
    return MskIamValidator(REGION, {KEY_ID: (SECRET_KEY, PRINCIPAL)})


@pytest.fixture(scope="module")
def msk_broker(msk_validator, tmp_path_factory):
    with EmbeddedBroker(
        log_dir=tmp_path_factory.mktemp("msk-broker"),
        register=False,
        sasl_mechanisms=("OAUTHBEARER",),
        sasl_oauthbearer_validator=msk_validator,
    ) as broker:
        yield broker


def client_config(broker, role: str = CONSUMER, **extra: str) -> dict:
    translated = translate({**MSK_JAVA, **extra}, role).librdkafka
    return {**translated, "bootstrap.servers": broker.bootstrap_servers}


def test_msk_iam_settings_log_in_with_a_signed_token_and_produce_and_consume(aws_keys, msk_broker, msk_validator):
    msk_broker.create_topic("msk-orders", partitions=1)
    accepted = len(msk_validator.accepted)
    producer = Producer(routed({**client_config(msk_broker, PRODUCER), "enable.idempotence": True}))
    for i in range(20):
        producer.produce("msk-orders", value=b"order-%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer(routed({**client_config(msk_broker), "group.id": "msk-reader", "enable.partition.eof": True}))
    consumer.assign([TopicPartition("msk-orders", 0, 0)])
    values = []
    while len(values) < 20:
        message = consumer.poll(10)
        assert message is not None
        if message.error() is None:
            values.append(message.value())
    consumer.close()
    assert values == [b"order-%d" % i for i in range(20)]
    assert msk_validator.accepted[accepted:] and set(msk_validator.accepted[accepted:]) == {PRINCIPAL}


def test_a_token_signed_with_another_secret_is_rejected_naming_the_reason(monkeypatch, msk_broker):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-the-broker-knows")
    watch = RefusalWatch()
    admin_config = {**client_config(msk_broker), "error_cb": watch}
    admin_config.pop("group.id", None)
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(routed(admin_config))
    with pytest.raises(CredentialsRefused) as refused:
        list_topics_watching(admin, watch, msk_broker.bootstrap_servers, 15)
    assert "rejected the login token" in str(refused.value)
    assert "the token's signature does not match" in str(refused.value)


def test_the_validator_refuses_what_msk_refuses(aws_keys, msk_validator):
    from kafka_spark.broker.oauthbearer import OAuthBearerValidationError

    token, _ = msk_iam_token({"region": REGION})
    url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()

    def encoded(text: str) -> str:
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    for tampered, reason in [
        (url.replace("Action=kafka-cluster%3AConnect", "Action=kafka-cluster%3AAlterCluster"), "action"),
        (url.replace(f"kafka.{REGION}.", "kafka.us-east-1."), "not signed for"),
        (url.replace("X-Amz-Expires=900", "X-Amz-Expires=901"), "signature does not match"),
        (url.replace(KEY_ID, "AKIAUNKNOWN000000000"), "unknown access key"),
    ]:
        with pytest.raises(OAuthBearerValidationError, match=reason):
            msk_validator.validate(encoded(tampered), {})
    assert msk_validator.validate(token, {}).principal_name == PRINCIPAL


def test_the_region_comes_from_the_option_the_msk_host_names_or_the_environment(monkeypatch):
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    host = "b-{}.etl.abc123.c2.kafka.ap-southeast-2.amazonaws.com:9098"
    hosts = f"{host.format(1)},{host.format(2)}"
    assert msk_region({"bootstrap.servers": hosts}) == "ap-southeast-2"
    assert msk_region({"bootstrap.servers": "boot-x.c1.kafka-serverless.us-east-2.amazonaws.com:9098"}) == "us-east-2"
    assert msk_region({"bootstrap.servers": hosts, "region": "eu-west-1"}) == "eu-west-1"
    with pytest.raises(MskLoginError, match=r"set kafka.sasl.oauthbearer.config=region=<region>"):
        msk_region({"bootstrap.servers": "kafka.internal:9098"})
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    assert msk_region({"bootstrap.servers": "kafka.internal:9098"}) == "eu-central-1"


def test_missing_credentials_fail_the_client_build_naming_the_credential_step(monkeypatch, msk_broker):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(TokenLoginError) as failure:
        routed(client_config(msk_broker))
    assert str(failure.value) == (
        "could not get a login token from the AWS MSK IAM signer: no AWS credentials in the default credential "
        "chain (environment, shared files, container or instance role)"
    )


def test_tokens_are_refreshed_before_they_expire_and_a_long_running_consumer_keeps_reading(
    aws_keys, msk_broker, msk_validator, monkeypatch, caplog
):
    """The signer's tokens live 15 minutes; here 3 s (the signer's lifetime setting, patched in
    this process): the broker ends each session when its token expires (KIP-368), so the consumer
    reads on only because librdkafka fetched new tokens (at 80 % of each lifetime) and logged in
    again with them."""
    import aws_msk_iam_sasl_signer.MSKAuthTokenProvider as signer

    monkeypatch.setattr(signer, "DEFAULT_TOKEN_EXPIRY_SECONDS", 3)
    caplog.set_level(logging.DEBUG)
    msk_broker.create_topic("msk-long-read", partitions=1)
    producer = Producer(routed(client_config(msk_broker, PRODUCER)))
    consumer = Consumer(routed({**client_config(msk_broker), "group.id": "msk-long"}))
    consumer.assign([TopicPartition("msk-long-read", 0, 0)])
    stop = threading.Event()
    sent: list[int] = []

    def produce() -> None:
        while not stop.is_set():
            producer.produce("msk-long-read", value=b"%d" % len(sent))
            sent.append(len(sent))
            producer.poll(0)
            time.sleep(0.05)

    writer = threading.Thread(target=produce, daemon=True)
    seen_before = set(msk_validator.signatures)
    started = time.monotonic()
    writer.start()
    received: list[int] = []
    try:
        while time.monotonic() - started < 7.5:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                received.append(int(message.value()))
    finally:
        stop.set()
        writer.join(10)
    assert producer.flush(30) == 0
    deadline = time.monotonic() + 30
    while len(received) < len(sent) and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            received.append(int(message.value()))
    consumer.close()
    assert received == sent and len(sent) > 100
    new_tokens = msk_validator.signatures - seen_before
    # Two clients over 7.5 s of 3 s tokens (signed to the second: 2-3 s left when signed): each
    # logs in with a token and again at least twice. Two tokens signed in the same second with
    # the same key are the same token, hence at least 3 distinct ones.
    assert len(new_tokens) >= 3, len(new_tokens)
    assert SECRET_KEY not in caplog.text
    assert not any(token_part in caplog.text for token_part in new_tokens)  # no signature in any log


def test_spark_and_the_cli_log_in_to_msk_with_iam_and_leave_no_key_or_token_behind(
    spark, aws_keys, msk_broker, msk_validator, tmp_path
):
    """The source (driver and executors), the topic sink's transactions and `pylog
    produce/consume` with MSK's Java settings (the file sink logs in nowhere: the OIDC tests in
    tests/interop run it). Spark's Python workers do not see this
    process's environment, so the query names a token function standing in for the credential
    source there (tests/support/token_functions.py: it sets the same fixed keys in the worker and
    calls pylog's MSK signer); the CLI runs with the keys in its environment and no stand-in."""
    import os

    from tests.support.cli_run import pylog

    msk_broker.create_topic("msk-spark-in", partitions=1)
    msk_broker.create_topic("msk-spark-out", partitions=1)
    seen = set(msk_validator.signatures)
    config = tmp_path / "msk.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in MSK_JAVA.items()))
    cli = ("--bootstrap-server", msk_broker.bootstrap_servers, "--command-config", str(config))
    produced = pylog(
        "produce", "msk-spark-in", *cli, env=dict(os.environ), stdin=b"".join(b"r%d\n" % i for i in range(30))
    )

    options = {
        **{f"kafka.{k}": v for k, v in MSK_JAVA.items()},
        "kafka.bootstrap.servers": msk_broker.bootstrap_servers,
        "kafka.sasl.oauthbearer.token.provider": "tests.support.token_functions:msk_with_fixed_keys",
        "kafka.sasl.oauthbearer.config": f"region={REGION} stubAccessKeyId={KEY_ID} stubSecretAccessKey={SECRET_KEY}",
    }
    stream = (
        spark.readStream.format("pylog")
        .options(**options)
        .option("subscribe", "msk-spark-in")
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        stream.selectExpr("value")
        .writeStream.format("pylog")
        .options(**options)
        .option("topic", "msk-spark-out")
        .option("checkpointLocation", str(tmp_path / "checkpoint-topic"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180) and query.exception() is None
    progress = [str(p) for p in query.recentProgress]
    consumed = pylog("consume", "msk-spark-out", *cli, "--from-beginning", "-c", "30", env=dict(os.environ))
    assert sorted(consumed.stdout.split()) == sorted(b"r%d" % i for i in range(30))

    tokens = msk_validator.signatures - seen
    assert len(tokens) >= 2  # the CLI, the driver and the executors signed
    texts = [produced.stdout, produced.stderr, consumed.stderr, "\n".join(progress).encode()]
    texts += [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p != config]
    assert not [t for t in texts if SECRET_KEY.encode() in t or any(s.encode() in t for s in tokens)]
