"""SASL/OAUTHBEARER on the embedded broker with unsecured tokens (Kafka's default validator):
Kafka's clients log in unchanged, a refused token gets RFC 7628's JSON challenge and then the
reason, and Kafka's server.properties keys configure the listener."""

from __future__ import annotations

import asyncio
import base64
import json
import logging

import pytest
from confluent_kafka import KafkaError, Producer

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.oauthbearer import (
    OAuthBearerToken,
    OAuthBearerValidationError,
    OAuthBearerValidator,
    UnsecuredJwsValidator,
    unsecured_token,
)
from kafka_spark.broker.properties import broker_options
from kafka_spark.broker.storage.errors import InvalidConfigError
from tests.broker.test_request_memory import wait_until
from tests.broker.test_sasl import read_all
from tests.support.wire import WireClient

SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3


def librdkafka(bootstrap: str, principal: str = "alice", **extra) -> dict:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "enable.sasl.oauthbearer.unsecure.jwt": True,
        "sasl.oauthbearer.config": f"principal={principal}",
        **extra,
    }


def initial_response(token: str, authzid: str = "", **extensions: str) -> bytes:
    pairs = "".join(f"{key}={value}\x01" for key, value in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{pairs}\x01".encode()


def login(client: WireClient, token: str, **kwargs) -> object:
    """Handshake v1 and the first SaslAuthenticate (v2); the response."""
    assert client.call(SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
    return client.call(SASL_AUTHENTICATE, 2, {"auth_bytes": initial_response(token, **kwargs)})


def test_librdkafka_kafka_python_and_aiokafka_log_in_with_their_tokens(pylog_oauth_broker):
    """librdkafka's unsecured JWT, and kafka-python's and aiokafka's token providers; the broker
    knows each connection by its token's subject."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider as SyncTokenProvider

    topic = "oauthbearer-clients"
    pylog_oauth_broker.create_topic(topic)
    bootstrap = pylog_oauth_broker.bootstrap_servers
    producer = Producer(librdkafka(bootstrap, "alice"))
    producer.produce(topic, b"librdkafka")
    assert producer.flush(10) == 0
    assert "User:alice" in {connection.principal for connection in pylog_oauth_broker.server.connections}

    class Bob(SyncTokenProvider):
        def token(self) -> str:
            return unsecured_token("bob")

    kp = KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Bob(),
    )
    kp.send(topic, b"kafka-python").get(10)
    assert "User:bob" in {connection.principal for connection in pylog_oauth_broker.server.connections}
    kp.close()

    class Carol(AbstractTokenProvider):
        async def token(self) -> str:
            return unsecured_token("carol")

    async def aio() -> set[str]:
        aio_producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=Carol(),
        )
        await aio_producer.start()
        try:
            await aio_producer.send_and_wait(topic, b"aiokafka")
            return {connection.principal for connection in pylog_oauth_broker.server.connections}
        finally:
            await aio_producer.stop()

    assert "User:carol" in asyncio.run(aio())
    producer.flush(1)
    assert read_all(librdkafka(bootstrap, "dave"), topic, 3) == [b"librdkafka", b"kafka-python", b"aiokafka"]


def _signed_looking(subject: str) -> str:
    header = base64.urlsafe_b64encode(json.dumps({"alg": "RS256", "kid": "k"}).encode()).rstrip(b"=").decode()
    claims = unsecured_token(subject).split(".")[1]
    return f"{header}.{claims}.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (unsecured_token("alice", lifetime_s=-60), "the token expired"),
        (unsecured_token("alice", principal_claim_name="user"), "no 'sub' claim"),
        (_signed_looking("alice"), "carries a signature"),
        ("bm90LWEtand0", "not a JWS compact serialization"),
    ],
    ids=["expired", "no-subject", "signed", "not-a-jwt"],
)
def test_a_refused_token_gets_the_json_challenge_then_the_reason(pylog_oauth_broker, caplog, token, reason):
    """RFC 7628 section 3.2.2 as Kafka serves it: the first answer carries the JSON status, the
    client answers %x01, the broker fails the exchange with the reason and closes; its log says
    why, and neither says the token."""
    caplog.set_level(logging.DEBUG, logger="kafka_spark")
    with WireClient(pylog_oauth_broker.bootstrap_servers) as client:
        challenge = login(client, token)
        assert (challenge.error_code, challenge.auth_bytes) == (0, b'{"status":"invalid_token"}')
        failure = client.call(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x01"})
        assert failure.error_code == KafkaError.SASL_AUTHENTICATION_FAILED
        assert reason in failure.error_message and '{"status":"invalid_token"}' in failure.error_message
        with pytest.raises(ConnectionError):
            client.call(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    assert any(reason in record.getMessage() for record in caplog.records), caplog.text
    assert token not in caplog.text and token not in failure.error_message


def test_nothing_but_the_sasl_requests_before_a_login_and_an_authzid_must_be_the_subject(pylog_oauth_broker):
    with WireClient(pylog_oauth_broker.bootstrap_servers) as client:
        with pytest.raises(ConnectionError):
            client.call(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    with WireClient(pylog_oauth_broker.bootstrap_servers) as client:
        answer = login(client, unsecured_token("alice"), authzid="mallory")
        assert answer.error_code == KafkaError.SASL_AUTHENTICATION_FAILED
        assert "authorization id (mallory)" in answer.error_message
    with WireClient(pylog_oauth_broker.bootstrap_servers) as client:
        answer = login(client, unsecured_token("alice"), authzid="alice", traceId="abc 123")  # with an extension
        assert (answer.error_code, answer.auth_bytes) == (0, b"")
        assert client.call(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False}).brokers


@pytest.fixture(scope="module")
def scoped_broker(tmp_path_factory):
    """Kafka's unsecured validator options, from server.properties: a required scope, a custom
    principal claim and clock skew."""
    options = broker_options(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="kafka" '
                'unsecuredValidatorPrincipalClaimName="client_id" unsecuredValidatorAllowableClockSkewMs="30000";'
            ),
        }
    )
    with EmbeddedBroker(log_dir=tmp_path_factory.mktemp("scoped"), register=False, **options.settings) as broker:
        yield broker


def test_unsecured_validator_options_from_server_properties(scoped_broker):
    validator = scoped_broker.config.sasl_oauthbearer_validator
    assert isinstance(validator, UnsecuredJwsValidator)
    assert (validator.principal_claim_name, validator.required_scope, validator.allowable_clock_skew_ms) == (
        "client_id",
        ("kafka",),
        30_000,
    )
    bootstrap = scoped_broker.bootstrap_servers
    with WireClient(bootstrap) as client:  # expired 10 s ago, within the 30 s of skew allowed
        token = unsecured_token("svc", principal_claim_name="client_id", lifetime_s=-10, scope="kafka other")
        assert login(client, token).error_code == 0
    with WireClient(bootstrap) as client:
        challenge = login(client, unsecured_token("svc", principal_claim_name="client_id", scope=["other"]))
        assert json.loads(challenge.auth_bytes) == {"status": "insufficient_scope", "scope": "kafka"}
        failure = client.call(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x01"})
        assert "scope lacks kafka" in failure.error_message

    # librdkafka's own unsecured JWT, with a principal claim name and a scope of its configuration
    errors: list[KafkaError] = []
    refused = Producer(
        librdkafka(bootstrap, **{"error_cb": errors.append})
        | {"sasl.oauthbearer.config": "principal=svc principalClaimName=client_id scope=other"}
    )
    wait_until(lambda: refused.poll(0.1) is not None or bool(errors), "librdkafka reporting the refusal", 30)
    assert any("scope lacks kafka" in error.str() for error in errors), errors
    accepted = Producer(
        librdkafka(bootstrap) | {"sasl.oauthbearer.config": "principal=svc principalClaimName=client_id scope=kafka"}
    )
    assert accepted.list_topics(timeout=10).brokers


class _PrefixValidator(OAuthBearerValidator):
    """A pluggable validator: tokens 'let-me-in.<name>' for the names its settings allow."""

    def __init__(self, configs):
        self.allowed = set(configs["allowed"].split(","))

    async def validate(self, token, extensions):
        await asyncio.sleep(0)  # a coroutine, as a validator doing I/O is
        prefix, _, name = token.partition(".")
        if prefix != "let-me-in" or name not in self.allowed:
            raise OAuthBearerValidationError(f"{name or 'nobody'} is not let in")
        return OAuthBearerToken(principal_name=name, lifetime_ms=2**62)


def test_a_validator_class_named_in_server_properties(tmp_path, pylog_broker_factory):
    options = broker_options(
        {
            "listeners": "CLIENTS://127.0.0.1:0",
            "listener.security.protocol.map": "CLIENTS:SASL_PLAINTEXT",
            "listener.name.clients.sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.clients.oauthbearer.sasl.server.callback.handler.class": f"{__name__}:_PrefixValidator",
            "listener.name.clients.oauthbearer.sasl.jaas.config": (
                'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required allowed="ann,ben";'
            ),
        }
    )
    broker = pylog_broker_factory(log_dir=tmp_path, **options.settings)
    with WireClient(broker.bootstrap_servers) as client:
        assert login(client, "let-me-in.ben").error_code == 0
    with WireClient(broker.bootstrap_servers) as client:
        assert login(client, "let-me-in.eve").auth_bytes == b'{"status":"invalid_token"}'
        assert "eve is not let in" in client.call(SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x01"}).error_message


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"sasl.enabled.mechanisms": "OAUTHBEARER,GSSAPI"}, "pylog authenticates with"),
        (
            {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "no.such.Module"},
            "cannot import no.such",
        ),
        (
            {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "org.apache.kafka.X"},
            "pylog validates tokens with",
        ),
        ({"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.audeince": "x"}, "unknown OAUTHBEARER"),
        (
            {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": "PlainLoginModule required;"},
            "must name org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
        ),
        ({"connections.max.reauth.ms": "-1"}, "connections.max.reauth.ms=-1 is invalid"),
    ],
)
def test_bad_oauthbearer_settings_are_named(properties, message):
    base = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER"}
    with pytest.raises(InvalidConfigError, match=message):
        broker_options(base | properties)
