"""The ACL authorizer's decisions, as Kafka's StandardAuthorizer makes them (pure; no broker)."""

from __future__ import annotations

import json

import pytest

from kafka_spark.broker.authorizer import (
    Acl,
    AclFilter,
    Authorizer,
    InvalidAcl,
    PatternType,
    Permission,
    certificate_principal,
)
from kafka_spark.broker.authorizer import Operation as Op
from kafka_spark.broker.authorizer import ResourceType as Rt

LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(
    name: str,
    op: Op,
    permission: Permission = ALLOW,
    principal: str = "User:alice",
    *,
    kind: Rt = Rt.TOPIC,
    pattern: PatternType = LITERAL,
    host: str = "*",
) -> Acl:
    return Acl(kind, name, pattern, principal, host, op, permission).validate()


@pytest.fixture
def authorizer(tmp_path):
    return Authorizer(tmp_path, super_users=["User:admin"])


def can(
    authorizer: Authorizer,
    op: Op,
    name: str = "orders",
    principal: str = "User:alice",
    *,
    kind: Rt = Rt.TOPIC,
    host: str = "10.0.0.1",
) -> bool:
    return authorizer.authorize(principal, host, op, kind, name)


def test_nothing_is_allowed_without_an_acl_unless_everyone_is_allowed_then(tmp_path):
    assert not can(Authorizer(tmp_path), Op.READ)
    assert can(Authorizer(tmp_path, allow_everyone_if_no_acl_found=True), Op.READ)


def test_an_acl_on_a_resource_ends_allow_everyone_for_that_resource(tmp_path):
    authorizer = Authorizer(tmp_path, allow_everyone_if_no_acl_found=True)
    authorizer.add([acl("orders", Op.READ, principal="User:alice")])
    assert can(authorizer, Op.READ, principal="User:alice")
    assert not can(authorizer, Op.READ, principal="User:bob")  # the resource has ACLs now
    assert can(authorizer, Op.READ, "payments", principal="User:bob")  # another one has none


def test_super_users_may_do_anything(authorizer):
    authorizer.add([acl("orders", Op.ALL, DENY, principal="User:*")])
    assert can(authorizer, Op.DELETE, principal="User:admin")


@pytest.mark.parametrize(
    "granted, implied",
    [
        (Op.READ, Op.DESCRIBE),
        (Op.WRITE, Op.DESCRIBE),
        (Op.DELETE, Op.DESCRIBE),
        (Op.ALTER, Op.DESCRIBE),
        (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS),
    ],
)
def test_allowing_an_operation_allows_the_ones_it_implies(authorizer, granted, implied):
    authorizer.add([acl("orders", granted)])
    assert can(authorizer, granted) and can(authorizer, implied)


def test_implied_operations_go_one_way_only(authorizer):
    authorizer.add([acl("orders", Op.DESCRIBE)])
    assert can(authorizer, Op.DESCRIBE) and not can(authorizer, Op.READ)


def test_all_allows_every_operation_and_deny_wins_over_allow(authorizer):
    authorizer.add([acl("orders", Op.ALL), acl("orders", Op.WRITE, DENY)])
    assert can(authorizer, Op.READ) and can(authorizer, Op.ALTER_CONFIGS)
    assert not can(authorizer, Op.WRITE)
    assert can(authorizer, Op.DESCRIBE)  # denying WRITE does not deny what WRITE implies


def test_a_deny_for_everyone_beats_an_allow_for_one(authorizer):
    authorizer.add([acl("orders", Op.READ, principal="User:alice"), acl("orders", Op.READ, DENY, "User:*")])
    assert not can(authorizer, Op.READ)


def test_literal_wildcard_and_prefixed_patterns(authorizer):
    authorizer.add(
        [acl("orders-", Op.READ, pattern=PREFIXED), acl("*", Op.DESCRIBE), acl("audit", Op.WRITE, kind=Rt.TOPIC)]
    )
    assert can(authorizer, Op.READ, "orders-eu") and not can(authorizer, Op.READ, "order")
    assert can(authorizer, Op.DESCRIBE, "anything") and not can(authorizer, Op.WRITE, "anything")
    assert can(authorizer, Op.WRITE, "audit") and not can(authorizer, Op.WRITE, "audit-log")


def test_resource_types_and_hosts_must_match(authorizer):
    authorizer.add([acl("orders", Op.READ, kind=Rt.GROUP), acl("orders", Op.WRITE, host="10.0.0.9")])
    assert can(authorizer, Op.READ, kind=Rt.GROUP) and not can(authorizer, Op.READ, kind=Rt.TOPIC)
    assert not can(authorizer, Op.WRITE, host="10.0.0.1") and can(authorizer, Op.WRITE, host="10.0.0.9")


def test_write_on_some_topic_is_found_for_idempotent_producers(authorizer):
    assert not authorizer.authorize_any("User:alice", "h", Op.WRITE, Rt.TOPIC)
    authorizer.add([acl("orders-", Op.WRITE, pattern=PREFIXED)])
    assert authorizer.authorize_any("User:alice", "h", Op.WRITE, Rt.TOPIC)
    authorizer.add([acl("orders-", Op.WRITE, DENY, pattern=PREFIXED)])
    assert not authorizer.authorize_any("User:alice", "h", Op.WRITE, Rt.TOPIC)


def test_authorized_operations_are_a_bit_field_of_operation_codes(authorizer):
    authorizer.add([acl("orders", Op.READ)])
    bits = authorizer.authorized_operations("User:alice", "h", Rt.TOPIC, "orders")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


@pytest.mark.parametrize(
    "bad, reason",
    [
        (Acl(Rt.ANY, "x", LITERAL, "User:a", "*", Op.READ, ALLOW), "resource type"),
        (Acl(Rt.TOPIC, "x", PatternType.MATCH, "User:a", "*", Op.READ, ALLOW), "LITERAL or PREFIXED"),
        (Acl(Rt.TOPIC, "x", LITERAL, "alice", "*", Op.READ, ALLOW), "TYPE:NAME"),
        (Acl(Rt.TOPIC, "x", LITERAL, "User:a", "*", Op.ANY, ALLOW), "needs an operation"),
        (Acl(Rt.CLUSTER, "x", LITERAL, "User:a", "*", Op.ALTER, ALLOW), "kafka-cluster"),
        (Acl(Rt.GROUP, "x", LITERAL, "User:a", "*", Op.WRITE, ALLOW), "does not apply to GROUP"),
    ],
)
def test_acls_kafka_would_refuse_are_refused_with_the_reason(bad, reason):
    with pytest.raises(InvalidAcl, match=reason):
        bad.validate()


def test_filters_select_by_every_field_and_match_finds_the_acls_that_apply(authorizer):
    acls = [
        acl("orders", Op.READ),
        acl("orders-", Op.WRITE, pattern=PREFIXED, principal="User:bob"),
        acl("*", Op.DESCRIBE),
        acl("orders", Op.READ, kind=Rt.GROUP),
    ]
    authorizer.add(acls)
    assert len(authorizer.acls(AclFilter())) == 4
    assert authorizer.acls(AclFilter(principal="User:bob")) == [acls[1]]
    assert authorizer.acls(AclFilter(Rt.TOPIC, "orders", PatternType.LITERAL)) == [acls[0]]
    applying = authorizer.acls(AclFilter(Rt.TOPIC, "orders-eu", PatternType.MATCH))
    assert set(applying) == {acls[1], acls[2]}


def test_acls_survive_a_restart_and_removal_is_persisted(tmp_path):
    first = Authorizer(tmp_path)
    first.add([acl("orders", Op.READ), acl("orders", Op.WRITE)])
    assert first.remove(AclFilter(operation=Op.WRITE)) == [acl("orders", Op.WRITE)]
    again = Authorizer(tmp_path)
    assert again.acls() == [acl("orders", Op.READ)] and can(again, Op.READ)
    assert json.loads((tmp_path / "acls.json").read_text())["acls"][0]["operation"] == "READ"


def test_a_damaged_acl_file_is_named_not_ignored(tmp_path):
    (tmp_path / "acls.json").write_text("{not json")
    with pytest.raises(ValueError, match="acls.json does not hold this broker's ACLs"):
        Authorizer(tmp_path)


def test_a_client_certificate_names_its_principal_as_kafka_does():
    subject = ((("countryName", "US"),), (("organizationName", "acme, inc"),), (("commonName", "writer"),))
    assert certificate_principal({"subject": subject}) == "User:CN=writer,O=acme\\, inc,C=US"
    assert certificate_principal(None) is None and certificate_principal({}) is None


def test_the_authorizer_is_configured_with_kafkas_broker_properties():
    from kafka_spark.broker.config import BrokerConfig
    from kafka_spark.broker.properties import broker_options
    from kafka_spark.broker.storage.errors import InvalidConfigError

    options = broker_options(
        {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin; User:ops",
            "allow.everyone.if.no.acl.found": "true",
        }
    )
    assert options.settings == {
        "authorizer_class_name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super_users": ("User:admin", "User:ops"),
        "allow_everyone_if_no_acl_found": True,
    }
    with pytest.raises(InvalidConfigError, match="'admin' is not TYPE:NAME"):
        broker_options({"super.users": "admin"})
    with pytest.raises(ValueError, match="pylog's authorizer is the ACL authorizer"):
        BrokerConfig(log_dir="/tmp", authorizer_class_name="com.example.Custom")
