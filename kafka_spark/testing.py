"""pytest plugin: a Kafka-compatible broker for your pipeline tests, with no setup.

Installed with pylog (entry point ``pytest11``), so these fixtures are available in any test:

    def test_my_pipeline(pylog_broker, pylog_topic):
        topic = pylog_topic(partitions=3)          # a fresh, uniquely named topic
        producer = confluent_kafka.Producer({"bootstrap.servers": pylog_broker.bootstrap_servers})
        ...

``pylog_broker`` is one EmbeddedBroker per test session (temporary data, removed at the end);
``pylog_topic(partitions=1, name=None, config=None)`` creates a topic and returns its name.

``pylog_oauth_broker`` is a second session broker whose listener takes SASL/OAUTHBEARER only
(SASL_PLAINTEXT), validating unsecured JWTs as Kafka's default OAUTHBEARER validator does: any
client can name its principal, which is what a test of a login path needs. librdkafka logs in
with::

    {"bootstrap.servers": pylog_oauth_broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
     "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
     "sasl.oauthbearer.config": "principal=alice"}

and kafka-python or aiokafka with a token provider returning
``kafka_spark.broker.oauthbearer.unsecured_token("alice")``.

``pylog_oidc`` is a local OpenID Connect provider (kafka_spark.testing_oidc: a client-credentials
token endpoint and a JWKS on loopback, with a client ``pylog_oidc.client_id`` /
``pylog_oidc.client_secret``), and ``pylog_oidc_broker`` a broker whose OAUTHBEARER listener
accepts only tokens signed by it (audience ``kafka``, its issuer), as a managed Kafka's would::

    {"bootstrap.servers": pylog_oidc_broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
     "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
     "sasl.oauthbearer.token.endpoint.url": pylog_oidc.token_endpoint_url,
     "sasl.oauthbearer.client.id": pylog_oidc.client_id, "sasl.oauthbearer.client.secret": pylog_oidc.client_secret}

``pylog_cluster`` is a fresh three-broker EmbeddedCluster per test (replication factor 3, a
two-second broker session timeout so a killed broker is noticed fast), for testing a pipeline
through a broker failure:

    def test_survives_a_broker_loss(pylog_cluster):
        pylog_cluster.create_topic("orders", partitions=3, config={"min.insync.replicas": "2"})
        ...                                                   # start the pipeline
        pylog_cluster.kill_broker(pylog_cluster.leader("orders", 0))
        ...                                                   # it carries on
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported lazily: loading this plugin must not start importing the broker
    from kafka_spark.broker import EmbeddedBroker, EmbeddedCluster
    from kafka_spark.testing_oidc import OidcProvider

_counter = itertools.count()


@pytest.fixture(scope="session")
def pylog_broker() -> Iterator[EmbeddedBroker]:
    """A broker for the whole test session, with temporary data. It is not registered for
    discovery, so tests never pick up (or replace) a broker the user runs: give your code
    ``pylog_broker.bootstrap_servers`` (e.g. the ``kafka.bootstrap.servers`` option).

    Its topics have Kafka's defaults (``retention.ms`` 7 days), but retention never runs on its
    own: records with fixed timestamps from the past (event-time fixtures) stay for the whole
    session instead of vanishing when a periodic check fires mid-test. A test of retention calls
    ``pylog_broker.run_retention()``."""
    from kafka_spark.broker import EmbeddedBroker

    # Members of consumer-protocol groups (KIP-848) heartbeat every second instead of Kafka's 5 s:
    # a group settles in a few heartbeats, and tests should not wait for them.
    with EmbeddedBroker(
        register=False, retention_check_interval_ms=None, group_consumer_heartbeat_interval_ms=1_000
    ) as broker:
        yield broker


@pytest.fixture(scope="session")
def pylog_oauth_broker() -> Iterator[EmbeddedBroker]:
    """A broker for the whole session whose listener is SASL_PLAINTEXT with OAUTHBEARER only,
    validating unsecured JWTs (alg none; the principal is the ``sub`` claim), as Kafka's
    ``OAuthBearerUnsecuredValidatorCallbackHandler``. Not registered for discovery."""
    from kafka_spark.broker import EmbeddedBroker

    with EmbeddedBroker(
        register=False,
        retention_check_interval_ms=None,
        group_consumer_heartbeat_interval_ms=1_000,  # as pylog_broker's
        sasl_mechanisms=("OAUTHBEARER",),
    ) as broker:
        yield broker


@pytest.fixture(scope="session")
def pylog_oidc() -> Iterator[OidcProvider]:
    """A local OpenID Connect provider for the session (client-credentials grant, JWKS), with one
    client registered: ``pylog_oidc.client_id`` (the subject of its tokens, scope ``kafka``) and
    ``pylog_oidc.client_secret``. Register more with ``pylog_oidc.add_client(...)``."""
    from kafka_spark.testing_oidc import OidcProvider

    with OidcProvider() as provider:
        provider.add_client("pylog-client", scope="kafka")
        yield provider


@pytest.fixture(scope="session")
def pylog_oidc_broker(pylog_oidc: OidcProvider) -> Iterator[EmbeddedBroker]:
    """A broker for the session whose SASL_PLAINTEXT listener takes OAUTHBEARER tokens signed by
    ``pylog_oidc`` (checked against its JWKS, with its issuer and the audience ``kafka``), as
    Kafka's ``OAuthBearerValidatorCallbackHandler`` checks them. Not registered for discovery."""
    from kafka_spark.broker import EmbeddedBroker

    with EmbeddedBroker(
        register=False,
        retention_check_interval_ms=None,
        group_consumer_heartbeat_interval_ms=1_000,  # as pylog_broker's
        sasl_mechanisms=("OAUTHBEARER",),
        sasl_oauthbearer_validator=pylog_oidc.validator(),
    ) as broker:
        yield broker


@pytest.fixture
def pylog_topic(pylog_broker: EmbeddedBroker, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Factory: ``pylog_topic(partitions=1, name=None, config=None) -> name``."""

    def create(partitions: int = 1, name: str | None = None, config: dict[str, str] | None = None) -> str:
        if name is None:
            base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
            name = f"{base}-{next(_counter)}"
        pylog_broker.create_topic(name, partitions=partitions, config=config)
        return name

    return create


@pytest.fixture
def pylog_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """Three replicating brokers and their controller, with temporary data; one per test, since
    tests kill and restart its brokers."""
    from kafka_spark.broker import EmbeddedCluster

    with EmbeddedCluster(
        brokers=3,
        log_dir=tmp_path_factory.mktemp("pylog-cluster"),
        broker_session_timeout_ms=2_000,
        group_consumer_heartbeat_interval_ms=1_000,  # as pylog_broker's
    ) as cluster:
        yield cluster
