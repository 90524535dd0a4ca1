"""KIP-368 on the embedded broker: a SASL session lasts as long as its token (or
connections.max.reauth.ms), the client learns it from SaslAuthenticate v1+, re-authenticates over
the same connection and keeps it (librdkafka does, with unsecured tokens and with OIDC tokens it
refreshes), and a connection used after its session ended without re-authenticating is closed."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import KafkaError, Producer

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.oauthbearer import unsecured_token
from kafka_spark.testing_oidc import OidcProvider
from tests.broker.test_request_memory import wait_until
from tests.broker.test_sasl_oauthbearer import (
    METADATA,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    initial_response,
    librdkafka,
    login,
)
from tests.broker.test_sasl_oauthbearer_oidc import oidc_client
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

METADATA_BODY = {"topics": None, "allow_auto_topic_creation": False}


def lifetime_ms(answer) -> float:
    return answer.session_lifetime.total_seconds() * 1000


def test_re_authenticating_before_the_token_expires_keeps_the_connection(pylog_oauth_broker):
    with WireClient(pylog_oauth_broker.bootstrap_servers) as client:
        first = login(client, unsecured_token("alice", lifetime_s=1.5))
        expires = time.time() + lifetime_ms(first) / 1000
        assert first.error_code == 0 and 0 < lifetime_ms(first) <= 1_500
        assert client.call(METADATA, 12, METADATA_BODY).brokers
        again = login(client, unsecured_token("alice", lifetime_s=3_600))  # SaslHandshake + SaslAuthenticate again
        assert again.error_code == 0 and 3_500_000 < lifetime_ms(again) <= 3_600_000
        served = 0
        while time.time() < expires + 0.5:  # the first token's end passes; the session goes on
            assert client.call(METADATA, 12, METADATA_BODY).brokers
            served += 1
        assert served


def test_a_connection_used_after_its_session_expired_is_closed(pylog_oauth_broker, caplog):
    caplog.set_level(logging.INFO, logger="kafka_spark")
    with WireClient(pylog_oauth_broker.bootstrap_servers) as client:
        answer = login(client, unsecured_token("alice", lifetime_s=1))
        ends = time.time() + lifetime_ms(answer) / 1000

        def closed() -> bool:
            try:
                client.call(METADATA, 12, METADATA_BODY)
            except ConnectionError:
                return True
            return False

        wait_until(closed, "the broker closing the expired session", 30)
        assert time.time() >= ends
    assert "the SASL session of User:alice expired" in caplog.text


def test_re_authentication_keeps_the_principal_and_allows_only_sasl_requests(pylog_oauth_broker):
    with WireClient(pylog_oauth_broker.bootstrap_servers) as client:
        assert login(client, unsecured_token("alice")).error_code == 0
        refused = login(client, unsecured_token("bob"))
        assert refused.error_code == KafkaError.SASL_AUTHENTICATION_FAILED
        assert refused.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"
        with pytest.raises(ConnectionError):
            client.call(METADATA, 12, METADATA_BODY)
    with WireClient(pylog_oauth_broker.bootstrap_servers) as client:
        assert login(client, unsecured_token("alice")).error_code == 0
        assert client.call(SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
        with pytest.raises(ConnectionError):  # a re-authentication is under way: nothing else
            client.call(METADATA, 12, METADATA_BODY)
    with WireClient(pylog_oauth_broker.bootstrap_servers) as client:  # v0 (no session lifetime) still works
        assert client.call(SASL_HANDSHAKE, 1, {"mechanism": "OAUTHBEARER"}).error_code == 0
        answer = client.call(SASL_AUTHENTICATE, 0, {"auth_bytes": initial_response(unsecured_token("alice"))})
        assert (answer.error_code, answer.auth_bytes) == (0, b"")


def produce_until(producer: Producer, topic: str, condition, what: str) -> int:
    """Produce a record every ~50 ms until ``condition()`` holds; the number delivered."""
    delivered: list[KafkaError | None] = []

    def produced_until() -> bool:
        producer.produce(topic, b"tick", on_delivery=lambda error, _: delivered.append(error))
        producer.poll(0.05)
        return condition()

    wait_until(produced_until, what, interval=0)
    assert producer.flush(30) == 0
    assert all(error is None for error in delivered), [error for error in delivered if error]
    return len(delivered)


def session_expiries(caplog) -> list[str]:
    """The broker's lines for a connection cut because its SASL session expired (only those: the
    process's other brokers log other expiries, such as a group member's session, meanwhile)."""
    return [m for m in (r.getMessage() for r in caplog.records) if "the SASL session of" in m and "expired" in m]


def reauthentications(caplog) -> int:
    return sum("SASL OAUTHBEARER re-authentication of" in record.getMessage() for record in caplog.records)


def test_librdkafka_re_authenticates_within_connections_max_reauth_ms(tmp_path, caplog, pylog_broker_factory):
    caplog.set_level(logging.DEBUG, logger="kafka_spark")
    broker = pylog_broker_factory(log_dir=tmp_path, sasl_mechanisms=("OAUTHBEARER",), connections_max_reauth_ms=1_000)
    broker.create_topic("ticks")
    producer = Producer(librdkafka(broker.bootstrap_servers, "alice", **{"linger.ms": 0}))
    assert produce_until(producer, "ticks", lambda: reauthentications(caplog) >= 2, "two re-authentications") > 10
    assert reauthentications(caplog) >= 2
    assert not session_expiries(caplog)  # no connection was cut for want of re-authentication


def test_librdkafka_refreshes_its_oidc_token_and_re_authenticates(tmp_path, caplog):
    """Tokens of 6 s: librdkafka fetches new ones from the token endpoint before they expire (at
    80% of their life) and re-authenticates its connections with them before their sessions end;
    nothing is disconnected, every record delivered."""
    caplog.set_level(logging.DEBUG, logger="kafka_spark")
    with OidcProvider(token_lifetime_s=6) as idp:
        client_id, secret = idp.add_client("ticker")
        with EmbeddedBroker(
            log_dir=tmp_path,
            register=False,
            sasl_mechanisms=("OAUTHBEARER",),
            sasl_oauthbearer_validator=idp.validator(),
        ) as broker:
            broker.create_topic("ticks")
            producer = Producer(oidc_client(broker.bootstrap_servers, idp, client_id, secret, **{"linger.ms": 0}))
            assert (
                produce_until(
                    producer,
                    "ticks",
                    lambda: idp.token_requests[client_id] >= 2 and reauthentications(caplog) >= 1,
                    "a second token and a re-authentication with it",
                )
                > 10
            )
            assert idp.token_requests[client_id] >= 2
            assert reauthentications(caplog) >= 1
            assert not session_expiries(caplog)
            assert secret not in caplog.text
