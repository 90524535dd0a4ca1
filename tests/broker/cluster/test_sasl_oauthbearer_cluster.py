"""A replicated EmbeddedCluster whose listeners take OAUTHBEARER only: its brokers log in to each
other (followers to leaders) with tokens too, re-authenticate within connections.max.reauth.ms
while replicating, and clients log in with unsecured tokens or with OIDC, through a leader's kill."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Producer

from kafka_spark.broker import EmbeddedCluster
from kafka_spark.testing_oidc import OidcProvider
from tests.broker.test_request_memory import wait_until
from tests.broker.test_sasl import read_all
from tests.broker.test_sasl_oauthbearer import librdkafka
from tests.broker.test_sasl_oauthbearer_oidc import oidc_client
from tests.support.partition_reads import read_to_end


def produce(config: dict, topic: str, values: list[bytes]) -> None:
    producer = Producer(config | {"acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


def test_unsecured_tokens_on_a_cluster_through_a_leader_kill(tmp_path):
    """The brokers replicate as User:broker (an unsecured token, as Kafka's unsecured login)."""
    with EmbeddedCluster(
        brokers=3, log_dir=tmp_path, sasl_mechanisms=("OAUTHBEARER",), broker_session_timeout_ms=2_000
    ) as cluster:
        cluster.create_topic("orders", partitions=1, replication_factor=3, config={"min.insync.replicas": "2"})
        config = librdkafka(cluster.bootstrap_servers, "alice")
        produce(config, "orders", [b"before-%d" % i for i in range(20)])
        assert cluster.wait_for_isr("orders", 0, size=3)
        leader = cluster.leader("orders", 0)
        cluster.kill_broker(leader)
        cluster.wait_for_leader("orders", 0, not_on=leader)
        produce(config, "orders", [b"after-%d" % i for i in range(20)])
        values = read_all(config, "orders", 40)
        assert values == [b"before-%d" % i for i in range(20)] + [b"after-%d" % i for i in range(20)]


def test_oidc_cluster_brokers_log_in_and_re_authenticate_while_replicating(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="kafka_spark.broker")
    with OidcProvider() as idp:
        app_id, app_secret = idp.add_client("orders-app")
        broker_id, broker_secret = idp.add_client("cluster-broker", subject="broker")
        with EmbeddedCluster(
            brokers=3,
            log_dir=tmp_path,
            sasl_mechanisms=("OAUTHBEARER",),
            sasl_oauthbearer_validator=idp.validator(),
            sasl_oauthbearer_token_provider=idp.token_provider(broker_id, broker_secret),
            connections_max_reauth_ms=1_500,
        ) as cluster:
            cluster.create_topic("payments", partitions=2, replication_factor=3)
            config = oidc_client(cluster.bootstrap_servers, idp, app_id, app_secret)
            produce(config, "payments", [b"p-%d" % i for i in range(50)])
            logins = idp.token_requests[broker_id]
            # The followers' sessions end every 1.5 s: they re-authenticate with fresh tokens and
            # replication goes on (the ISRs stay whole, new records reach every replica).
            wait_until(lambda: idp.token_requests[broker_id] >= logins + 4, "the brokers' logins renewing", 30)
            produce(config, "payments", [b"q-%d" % i for i in range(50)])
            for partition in (0, 1):
                assert len(cluster.wait_for_isr("payments", partition, size=3)) == 3
            client = {key: value for key, value in config.items() if key != "bootstrap.servers"}
            values = {
                m.value() for p in (0, 1) for m in read_to_end(cluster.bootstrap_servers, "payments", p, **client)
            }
            assert values == {b"p-%d" % i for i in range(50)} | {b"q-%d" % i for i in range(50)}
            reauthenticated = [r for r in caplog.records if "re-authentication of" in r.getMessage()]
            assert any("User:broker" in r.getMessage() for r in reauthenticated)
            assert "expired" not in caplog.text
            assert app_secret not in caplog.text and broker_secret not in caplog.text


def test_a_cluster_whose_brokers_cannot_get_tokens_is_refused_at_once(tmp_path):
    with OidcProvider() as idp, pytest.raises(ValueError, match="give sasl_oauthbearer_token_provider"):
        EmbeddedCluster(
            brokers=1, log_dir=tmp_path, sasl_mechanisms=("OAUTHBEARER",), sasl_oauthbearer_validator=idp.validator()
        ).start()
