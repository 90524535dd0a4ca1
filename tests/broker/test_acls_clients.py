"""Authenticated is not authorized: two SASL users on a broker with the ACL authorizer, where
alice is granted what her application needs and bob nothing; every client is refused with Kafka's
error for what the ACLs do not allow. ACLs and SCRAM credentials are managed through the admin
clients and survive a restart.

Users: admin (a super user), alice, bob. ACLs (created by admin through CreateAcls): alice may
WRITE and READ topics prefixed "orders", create them, READ group "orders-app" and WRITE
transactional id "orders-tx".
"""

from __future__ import annotations

import asyncio
import json

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from kafka_spark.broker import EmbeddedBroker
from tests.support.waiting import wait_until

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ALLOW = AclPermissionType.ALLOW

ALICE_ACLS = [
    AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.PREFIXED, "User:alice", "*", operation, ALLOW)
    for operation in (AclOperation.WRITE, AclOperation.READ, AclOperation.CREATE)
] + [
    AclBinding(
        ResourceType.GROUP, "orders-app", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ, ALLOW
    ),
    AclBinding(
        ResourceType.TRANSACTIONAL_ID,
        "orders-tx",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.WRITE,
        ALLOW,
    ),
]


def sasl(user: str, mechanism: str = "PLAIN", password: str | None = None) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": USERS.get(user, "") if password is None else password,
    }


def start(log_dir) -> EmbeddedBroker:
    return EmbeddedBroker(
        log_dir, register=False, sasl_users=USERS, authorizer_class_name=AUTHORIZER, super_users=("User:admin",)
    ).start()


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = start(tmp_path_factory.mktemp("acl-broker"))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **sasl("admin")})
    for future in admin.create_acls(ALICE_ACLS).values():
        future.result(10)
    for topic in (NewTopic("orders", 2, 1), NewTopic("audit", 1, 1)):  # no ACL names "audit"
        admin.create_topics([topic])[topic.topic].result(10)
    yield broker
    broker.close()


def admin_of(broker, user: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers, **sasl(user)})


def code_of(future) -> int:
    with pytest.raises(KafkaException) as failure:
        future.result(10)
    return failure.value.args[0].code()


def deliveries(broker, user: str, topic: str, **config) -> list:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, **sasl(user), "message.timeout.ms": 10_000, **config}
    )
    results: list = []
    producer.produce(topic, b"from " + user.encode(), on_delivery=lambda error, _: results.append(error))
    producer.flush(15)
    return results


def first_error(consumer: Consumer, seconds: float = 20):
    """The first message or error (partition EOF aside) the consumer gets."""
    found: list = []  # a Message is falsy when its value is empty: judged by the list instead

    def delivered() -> bool:
        message = consumer.poll(0.5)
        if message is not None and not (message.error() and message.error().code() == KafkaError._PARTITION_EOF):
            found.append(message.error() or message)
        return bool(found)

    wait_until(delivered, "a message or an error for the consumer", seconds, interval=0)
    return found[0]


# -- confluent-kafka ----------------------------------------------------------------------------


def test_alice_writes_and_reads_what_the_acls_grant(secured):
    assert deliveries(secured, "alice", "orders") == [None]
    consumer = Consumer(
        {
            "bootstrap.servers": secured.bootstrap_servers,
            **sasl("alice"),
            "group.id": "orders-app",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["orders"])
    try:
        message = first_error(consumer)
        assert message is not None and not message.error() and message.value() == b"from alice"
        consumer.commit(message=message, asynchronous=False)
    finally:
        consumer.close()


def test_bob_signs_in_but_may_not_write_read_or_join(secured):
    (refused,) = deliveries(secured, "bob", "orders")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    consumer = Consumer(
        {
            "bootstrap.servers": secured.bootstrap_servers,
            **sasl("bob"),
            "group.id": "orders-app",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["orders"])
    try:
        error = first_error(consumer)
        assert error is not None and error.code() in (
            KafkaError.GROUP_AUTHORIZATION_FAILED,
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
        )
    finally:
        consumer.close()
    own = [
        AclBinding(
            ResourceType.GROUP, "bob-own", ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.READ, ALLOW
        ),
        AclBinding(
            ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.DESCRIBE, ALLOW
        ),
    ]
    admin = admin_of(secured, "admin")
    for future in admin.create_acls(own).values():  # his own group, and seeing the topic: not reading it
        future.result(10)
    reader = Consumer({"bootstrap.servers": secured.bootstrap_servers, **sasl("bob"), "group.id": "bob-own"})
    reader.assign([TopicPartition("orders", 0, 0)])
    try:
        error = first_error(reader)
        assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        reader.close()


def test_users_do_not_see_the_topics_they_may_not_describe(secured):
    alice, bob, admin = admin_of(secured, "alice"), admin_of(secured, "bob"), admin_of(secured, "admin")
    assert {"orders", "audit"} <= set(admin.list_topics(timeout=10).topics)
    assert "orders" in alice.list_topics(timeout=10).topics
    assert "audit" not in alice.list_topics(timeout=10).topics and "audit" not in bob.list_topics(timeout=10).topics


def test_topic_creation_needs_create_on_the_topic_or_the_cluster(secured):
    alice, bob = admin_of(secured, "alice"), admin_of(secured, "bob")
    alice.create_topics([NewTopic("orders-eu", 1, 1)])["orders-eu"].result(10)
    assert code_of(bob.create_topics([NewTopic("bobs", 1, 1)])["bobs"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert (
        code_of(alice.create_topics([NewTopic("payments", 1, 1)])["payments"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )


def test_transactional_ids_need_write_on_the_id(secured):
    alice = Producer({"bootstrap.servers": secured.bootstrap_servers, **sasl("alice"), "transactional.id": "orders-tx"})
    alice.init_transactions(15)
    alice.begin_transaction()
    alice.produce("orders", b"in a transaction")
    alice.commit_transaction(15)
    bob = Producer({"bootstrap.servers": secured.bootstrap_servers, **sasl("bob"), "transactional.id": "orders-tx"})
    with pytest.raises(KafkaException) as refused:
        bob.init_transactions(15)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_cluster_operations_need_acls_on_the_cluster(secured):
    bob = admin_of(secured, "bob")
    broker_configs = ConfigResource(ConfigResource.Type.BROKER, "0")
    assert code_of(bob.describe_configs([broker_configs])[broker_configs]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    grant = AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.ALL, ALLOW)
    assert code_of(bob.create_acls([grant])[grant]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # librdkafka drops DescribeAcls' top-level error (against Apache Kafka too): bob sees no ACLs.
    assert (
        bob.describe_acls(
            AclBindingFilter(
                ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
            )
        ).result(10)
        == []
    )


def test_kafka_python_is_refused_the_acls_without_describe_on_the_cluster(secured):
    from kafka import KafkaAdminClient
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePatternFilter
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import ClusterAuthorizationFailedError

    everything = ACLFilter(
        principal=None,
        host="*",
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY),
    )
    bob = KafkaAdminClient(bootstrap_servers=secured.bootstrap_servers, **kp_sasl("bob"))
    admin = KafkaAdminClient(bootstrap_servers=secured.bootstrap_servers, **kp_sasl("admin"))
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.describe_acls(everything)
        acls, error = admin.describe_acls(everything)
        assert {acl.principal for acl in acls} >= {"User:alice"}
    finally:
        bob.close()
        admin.close()


def test_authorized_operations_say_what_each_user_may_do(secured):
    for user, expected in (
        ("alice", {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE}),
        ("admin", None),
    ):
        admin = admin_of(secured, user)
        described = admin.describe_topics(TopicCollection(["orders"]), include_authorized_operations=True)[
            "orders"
        ].result(10)
        if expected is not None:
            assert set(described.authorized_operations) == expected
        else:  # a super user may do everything there is to do with a topic
            assert AclOperation.ALTER_CONFIGS in described.authorized_operations
    alice = admin_of(secured, "alice")
    cluster = alice.describe_cluster(include_authorized_operations=True).result(10)
    assert not cluster.authorized_operations  # nothing on the cluster was granted to alice


def test_acls_are_listed_deleted_and_denies_win(secured):
    admin = admin_of(secured, "admin")
    listed = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY, AclPermissionType.ANY
        )
    ).result(10)
    assert set(listed) == set(ALICE_ACLS)
    deny = AclBinding(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.WRITE,
        AclPermissionType.DENY,
    )
    admin.create_acls([deny])[deny].result(10)
    try:
        (refused,) = deliveries(secured, "alice", "orders")
        assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert deliveries(secured, "alice", "orders-eu") == [None]  # the prefixed ALLOW still applies there
    finally:
        (deleted,) = admin.delete_acls(
            [
                AclBindingFilter(
                    ResourceType.TOPIC,
                    "orders",
                    ResourcePatternType.LITERAL,
                    None,
                    None,
                    AclOperation.ANY,
                    AclPermissionType.DENY,
                )
            ]
        ).values()
        assert deleted.result(10) == [deny]
    assert deliveries(secured, "alice", "orders") == [None]


# -- kafka-python ---------------------------------------------------------------------------------


def kp_sasl(user: str) -> dict[str, str]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": user,
        "sasl_plain_password": USERS[user],
    }


def test_kafka_python_users_get_the_authorization_errors(secured):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
    from kafka.errors import KafkaError as KpError

    producer = KafkaProducer(bootstrap_servers=secured.bootstrap_servers, **kp_sasl("alice"))  # idempotent
    producer.send("orders", b"kafka-python").get(15)
    producer.close()
    # An idempotent producer needs WRITE on some topic for its producer id (KIP-679): bob has none.
    producer = KafkaProducer(bootstrap_servers=secured.bootstrap_servers, max_block_ms=10_000, **kp_sasl("bob"))
    with pytest.raises(KpError, match="ClusterAuthorizationFailed"):
        producer.send("orders", b"bob").get(15)
    producer.close()
    producer = KafkaProducer(
        bootstrap_servers=secured.bootstrap_servers, max_block_ms=10_000, enable_idempotence=False, **kp_sasl("bob")
    )
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("orders", b"bob").get(15)
    producer.close()
    consumer = KafkaConsumer(
        "orders", bootstrap_servers=secured.bootstrap_servers, group_id="orders-app", **kp_sasl("bob")
    )
    try:
        with pytest.raises((GroupAuthorizationFailedError, TopicAuthorizationFailedError)):
            for _ in range(20):
                consumer.poll(timeout_ms=500)
    finally:
        consumer.close()


# -- aiokafka ----------------------------------------------------------------------------------------


def test_aiokafka_users_get_the_authorization_errors(secured):
    import aiokafka
    from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

    def aio_sasl(user: str) -> dict[str, str]:
        return {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user,
            "sasl_plain_password": USERS[user],
        }

    async def scenario() -> None:
        alice = aiokafka.AIOKafkaProducer(bootstrap_servers=secured.bootstrap_servers, **aio_sasl("alice"))
        await alice.start()
        try:
            await alice.send_and_wait("orders", b"aiokafka")
        finally:
            await alice.stop()
        bob = aiokafka.AIOKafkaProducer(
            bootstrap_servers=secured.bootstrap_servers, request_timeout_ms=10_000, **aio_sasl("bob")
        )
        await bob.start()
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                await bob.send_and_wait("orders", b"bob")
        finally:
            await bob.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            "orders", bootstrap_servers=secured.bootstrap_servers, group_id="orders-app", **aio_sasl("bob")
        )
        try:
            with pytest.raises((GroupAuthorizationFailedError, TopicAuthorizationFailedError)):
                await consumer.start()  # its first metadata request already names the topic
                await asyncio.wait_for(consumer.getone(), 20)
        finally:
            await consumer.stop()

    asyncio.run(scenario())


# -- SCRAM credentials and restarts ----------------------------------------------------------------


def test_scram_users_are_managed_in_the_broker_and_survive_a_restart(tmp_path):
    broker = start(tmp_path)
    admin = admin_of(broker, "admin")
    carol = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"carol-secret"
    )
    admin.alter_user_scram_credentials([carol])["carol"].result(10)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(10)
    assert [(info.mechanism, info.iterations) for info in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 8192)
    ]
    grant = AclBinding(
        ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "User:carol", "*", AclOperation.DESCRIBE, ALLOW
    )
    admin.create_acls([grant])[grant].result(10)
    stored = (tmp_path / "scram-credentials.json").read_text()
    assert "carol-secret" not in stored and json.loads(stored)["users"]["carol"]["SCRAM-SHA-256"]["iterations"] == 8192
    assert (tmp_path / "scram-credentials.json").stat().st_mode & 0o077 == 0  # not readable by others
    broker.close()

    broker = start(tmp_path)  # the credential and the ACL come back from the log directory
    try:
        signed_in = AdminClient(
            {"bootstrap.servers": broker.bootstrap_servers, **sasl("carol", "SCRAM-SHA-256", "carol-secret")}
        )
        assert signed_in.list_topics(timeout=10).topics is not None
        admin = admin_of(broker, "admin")
        listed = admin.describe_acls(
            AclBindingFilter(
                ResourceType.ANY,
                None,
                ResourcePatternType.ANY,
                "User:carol",
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ).result(10)
        assert listed == [grant]
        admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)])[
            "carol"
        ].result(10)
        refused = AdminClient(
            {"bootstrap.servers": broker.bootstrap_servers, **sasl("carol", "SCRAM-SHA-256", "carol-secret")}
        )
        with pytest.raises(KafkaException) as failure:
            refused.list_topics(timeout=5)
        assert failure.value.args[0].code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT)
    finally:
        broker.close()


def test_bad_scram_credentials_are_refused_with_kafkas_errors(secured):
    admin = admin_of(secured, "admin")
    too_few = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 1000), b"pw")
    assert code_of(admin.alter_user_scram_credentials([too_few])["dave"]) == KafkaError.UNACCEPTABLE_CREDENTIAL
    # Two credentials of one user in one request: refused as a whole, as Kafka refuses it.
    twice = [
        UserScramCredentialUpsertion("erin", ScramCredentialInfo(mechanism, 4096), b"pw")
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ]
    assert code_of(admin.alter_user_scram_credentials(twice)["erin"]) == KafkaError.DUPLICATE_RESOURCE
    assert code_of(admin.describe_user_scram_credentials(["erin"])["erin"]) == KafkaError.RESOURCE_NOT_FOUND
    missing = UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_512)
    assert code_of(admin.alter_user_scram_credentials([missing])["nobody"]) == KafkaError.RESOURCE_NOT_FOUND
    assert code_of(admin.describe_user_scram_credentials(["nobody"])["nobody"]) == KafkaError.RESOURCE_NOT_FOUND
    bob = admin_of(secured, "bob")
    alter = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"x")
    assert code_of(bob.alter_user_scram_credentials([alter])["bob"]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
