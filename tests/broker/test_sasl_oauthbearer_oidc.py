"""SASL/OAUTHBEARER with signed tokens from an OpenID Connect provider (the pylog_oidc fixture),
checked against its JWKS as Kafka's OAuthBearerValidatorCallbackHandler checks them: librdkafka's
OIDC login, every kind of bad token refused with its reason, key rotation, ACLs on the token's
subject, and no token or secret in any log."""

from __future__ import annotations

import json
import logging

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.oauthbearer import JwksValidator, unsecured_token
from kafka_spark.broker.properties import broker_options
from kafka_spark.testing_oidc import OidcProvider
from tests.broker.test_request_memory import wait_until
from tests.broker.test_sasl import read_all
from tests.broker.test_sasl_oauthbearer import METADATA, SASL_AUTHENTICATE, login
from tests.support.wire import WireClient


def oidc_client(bootstrap: str, idp: OidcProvider, client_id: str, secret: str, **extra) -> dict:
    """librdkafka's own OIDC login (sasl.oauthbearer.method=oidc), against the local provider."""
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": idp.token_endpoint_url,
        "sasl.oauthbearer.client.id": client_id,
        "sasl.oauthbearer.client.secret": secret,
        **extra,
    }


def test_librdkafka_logs_in_with_oidc_client_credentials(pylog_oidc, pylog_oidc_broker, caplog):
    caplog.set_level(logging.DEBUG, logger="kafka_spark")
    bootstrap = pylog_oidc_broker.bootstrap_servers
    pylog_oidc_broker.create_topic("oidc-orders")
    before = pylog_oidc.token_requests[pylog_oidc.client_id]
    config = oidc_client(bootstrap, pylog_oidc, pylog_oidc.client_id, pylog_oidc.client_secret)
    producer = Producer(config | {"sasl.oauthbearer.scope": "kafka"})
    for i in range(10):
        producer.produce("oidc-orders", b"order-%d" % i)
    assert producer.flush(10) == 0
    assert "User:pylog-client" in {connection.principal for connection in pylog_oidc_broker.server.connections}
    assert read_all(config, "oidc-orders", 10) == [b"order-%d" % i for i in range(10)]
    assert pylog_oidc.token_requests[pylog_oidc.client_id] > before  # the tokens came from the endpoint
    assert pylog_oidc.client_secret not in caplog.text

    errors: list[KafkaError] = []
    wrong_secret = Producer(
        oidc_client(bootstrap, pylog_oidc, pylog_oidc.client_id, "not-the-secret", error_cb=errors.append)
    )
    wait_until(lambda: wrong_secret.poll(0.1) is not None or bool(errors), "librdkafka reporting the token failure", 30)
    assert any("401" in error.str() or "invalid_client" in error.str() for error in errors), errors


@pytest.fixture(scope="module")
def foreign_key(pylog_oidc):
    return pylog_oidc.new_key(kid="pylog-1")  # the provider's first kid, but not its key


BAD_TOKENS = {
    "expired": (lambda idp, key: idp.issue("mallory", lifetime_s=-120), "the token expired at"),
    "wrong-audience": (
        lambda idp, key: idp.issue("mallory", audience="billing"),
        "audience 'billing' is not the expected",
    ),
    "wrong-issuer": (
        lambda idp, key: idp.issue("mallory", issuer="https://evil.example"),
        "issuer 'https://evil.example'",
    ),
    "bad-signature": (lambda idp, key: idp.issue("mallory", key=key), "signature does not verify"),
    "unknown-kid": (
        lambda idp, key: idp.issue("mallory", kid="no-such-kid"),
        "has no key with the token's kid 'no-such-kid'",
    ),
    "unsecured": (lambda idp, key: unsecured_token("mallory"), "algorithm 'none' is not accepted"),
    "no-subject": (lambda idp, key: idp.issue("", sub=None), "has no 'sub' claim"),
    "no-issued-at": (lambda idp, key: idp.issue("mallory", iat=None), "no 'iat' claim"),
}


@pytest.mark.parametrize("kind", sorted(BAD_TOKENS))
def test_bad_tokens_are_refused_with_the_reason(pylog_oidc, pylog_oidc_broker, foreign_key, caplog, kind):
    caplog.set_level(logging.DEBUG, logger="kafka_spark")
    make, reason = BAD_TOKENS[kind]
    token = make(pylog_oidc, foreign_key)
    with WireClient(pylog_oidc_broker.bootstrap_servers) as client:
        challenge = login(client, token)
        assert (challenge.error_code, json.loads(challenge.auth_bytes)) == (0, {"status": "invalid_token"})
        failure = client.call(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x01"})
        assert failure.error_code == KafkaError.SASL_AUTHENTICATION_FAILED
        assert reason in failure.error_message
        with pytest.raises(ConnectionError):
            client.call(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    assert any(reason in record.getMessage() and record.levelno == logging.WARNING for record in caplog.records)
    assert token not in caplog.text


def test_librdkafka_reports_the_reason_a_token_was_refused(pylog_oidc, pylog_oidc_broker):
    """A token the provider issues for another audience: librdkafka's error names why."""
    client_id, secret = pylog_oidc.add_client("billing-job", audience="billing")
    errors: list[KafkaError] = []
    refused = Producer(
        oidc_client(pylog_oidc_broker.bootstrap_servers, pylog_oidc, client_id, secret, error_cb=errors.append)
    )
    wait_until(lambda: refused.poll(0.1) is not None or bool(errors), "librdkafka reporting the refusal", 30)
    assert any("audience 'billing' is not the expected ['kafka']" in error.str() for error in errors), errors
    assert all(secret not in error.str() for error in errors)


def test_a_rotated_key_is_fetched_when_a_token_names_it(tmp_path):
    """The identity provider rotates its signing key: the first token naming the new kid makes
    the broker fetch the JWKS again (not on the event loop), and is accepted."""
    with OidcProvider(algorithm="ES256") as idp:
        validator = idp.validator()
        with EmbeddedBroker(
            log_dir=tmp_path, register=False, sasl_mechanisms=("OAUTHBEARER",), sasl_oauthbearer_validator=validator
        ) as broker:
            with WireClient(broker.bootstrap_servers) as client:
                assert login(client, idp.issue("svc")).error_code == 0
            assert validator.keys.fetches == 1
            new_kid = idp.rotate_key()
            with WireClient(broker.bootstrap_servers) as client:
                assert (login(client, idp.issue("svc")).auth_bytes, new_kid) == (b"", "pylog-2")
            assert validator.keys.fetches == 2
            for _ in range(2):  # an unknown kid: one fetch for it, then none again within the minute
                with WireClient(broker.bootstrap_servers) as client:
                    assert login(client, idp.issue("svc", kid="pylog-9")).auth_bytes == b'{"status":"invalid_token"}'
                assert validator.keys.fetches == 3


def test_an_unreachable_jwks_names_the_step_that_failed(tmp_path, pylog_oidc, pylog_broker_factory):
    validator = JwksValidator("http://127.0.0.1:9/jwks.json", jwks_retry_backoff_ms=10, jwks_retry_backoff_max_ms=50)
    broker = pylog_broker_factory(
        log_dir=tmp_path, sasl_mechanisms=("OAUTHBEARER",), sasl_oauthbearer_validator=validator
    )
    with WireClient(broker.bootstrap_servers) as client:
        assert login(client, pylog_oidc.issue("svc")).auth_bytes == b'{"status":"invalid_token"}'
        failure = client.call(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x01"})
        assert "the JWKS at http://127.0.0.1:9/jwks.json could not be read" in failure.error_message


def test_server_properties_configure_jwks_validation(tmp_path, pylog_oidc, pylog_broker_factory):
    properties = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", **pylog_oidc.broker_properties()}
    properties["sasl.oauthbearer.expected.audience"] = "kafka,kafka-eu"
    properties["listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.sub.claim.name"] = "client_id"
    validator = broker_options(properties).settings["sasl_oauthbearer_validator"]
    assert isinstance(validator, JwksValidator)
    assert (validator.expected_audience, validator.expected_issuer, validator.sub_claim_name) == (
        ("kafka", "kafka-eu"),
        pylog_oidc.issuer,
        "client_id",
    )
    broker = pylog_broker_factory(log_dir=tmp_path, **broker_options(properties).settings)
    with WireClient(broker.bootstrap_servers) as client:
        answer = login(client, pylog_oidc.issue("ignored", audience=["kafka-eu"], client_id="etl"))
        assert (answer.error_code, answer.auth_bytes) == (0, b"")
        assert client.call(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False}).brokers
        assert "User:etl" in {connection.principal for connection in broker.server.connections}


def test_authenticated_is_not_authorized(tmp_path, pylog_oidc, pylog_broker_factory):
    """With the ACL authorizer, the token's subject is the principal ACLs name: a valid token
    without ACLs is refused every topic, and an ACL on User:<sub> lets it in."""
    idp = pylog_oidc
    _, admin_secret = idp.add_client("kafka-admin", scope="kafka")
    _, etl_secret = idp.add_client("etl-job", scope="kafka")
    broker = pylog_broker_factory(
        log_dir=tmp_path,
        sasl_mechanisms=("OAUTHBEARER",),
        sasl_oauthbearer_validator=idp.validator(),
        authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        super_users=("User:kafka-admin",),
    )
    broker.create_topic("payments")
    etl = oidc_client(broker.bootstrap_servers, idp, "etl-job", etl_secret)
    deliveries: list[KafkaError | None] = []
    refused = Producer(etl | {"message.timeout.ms": 5_000})
    refused.produce("payments", b"x", on_delivery=lambda error, _: deliveries.append(error))
    refused.flush(10)
    assert deliveries and deliveries[0] is not None
    assert deliveries[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    admin = AdminClient(oidc_client(broker.bootstrap_servers, idp, "kafka-admin", admin_secret))
    binding = AclBinding(
        ResourceType.TOPIC,
        "payments",
        ResourcePatternType.LITERAL,
        "User:etl-job",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([binding]).values():
        future.result(10)
    allowed = Producer(etl)
    allowed.produce("payments", b"paid")
    assert allowed.flush(10) == 0


def test_pylog_broker_start_serves_an_oidc_listener_from_server_properties(pylog_oidc, tmp_path, pylog_broker_process):
    """`pylog broker start server.properties` with a Kafka broker's OAUTHBEARER settings."""
    server = tmp_path / "server.properties"
    properties = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", **pylog_oidc.broker_properties()}
    server.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    broker = pylog_broker_process(str(server), port=None)
    bootstrap = broker.bootstrap_servers
    producer = Producer(oidc_client(bootstrap, pylog_oidc, pylog_oidc.client_id, pylog_oidc.client_secret))
    producer.produce("from-cli-broker", b"hello")
    assert producer.flush(20) == 0
    with WireClient(bootstrap) as client:  # an unsigned token is refused there
        assert login(client, unsecured_token("mallory")).auth_bytes == b'{"status":"invalid_token"}'
    broker.stop()
    log = broker.stderr_text()
    assert "security.protocol=SASL_PLAINTEXT sasl.enabled.mechanisms=OAUTHBEARER" in log
    assert "algorithm 'none' is not accepted" in log
    assert pylog_oidc.client_secret not in log


def test_no_token_or_secret_reaches_any_log_at_any_level(pylog_oidc, pylog_oidc_broker, pylog_oauth_broker, caplog):
    """Every logger at DEBUG while clients log in, succeed, fail and re-authenticate: neither a
    token (accepted or refused) nor the client secret appears."""
    caplog.set_level(logging.DEBUG)
    tokens = [pylog_oidc.issue("alice"), pylog_oidc.issue("alice", audience="billing"), unsecured_token("bob")]
    for broker in (pylog_oidc_broker, pylog_oauth_broker):
        for token in tokens:
            with WireClient(broker.bootstrap_servers) as client:
                if login(client, token).auth_bytes:
                    client.call(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x01"})
                else:
                    assert login(client, token).error_code == 0  # a re-authentication
    producer = Producer(
        oidc_client(pylog_oidc_broker.bootstrap_servers, pylog_oidc, pylog_oidc.client_id, pylog_oidc.client_secret)
    )
    producer.produce("secrets-check", b"x")
    assert producer.flush(20) == 0
    assert sum("authentication of" in record.getMessage() for record in caplog.records) >= 6  # the logins were logged
    for secret in [*tokens, pylog_oidc.client_secret, *(token.split(".")[2] for token in tokens[:2])]:
        assert secret not in caplog.text
