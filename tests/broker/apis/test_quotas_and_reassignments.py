"""DescribeClientQuotas (48) and ListPartitionReassignments (46): the broker sets no quotas and
moves no replicas, and says so to Kafka's tools (kafka-configs --describe --entity-type users /
clients, kafka-reassign-partitions --list); filters Kafka refuses are refused with the reason,
and both need the ACLs Kafka asks for. (The tools themselves: tests/interop/test_kafka_tools.py.)"""

from __future__ import annotations

import pytest

from tests.support.wire import WireClient


def quotas(bootstrap: str, *components: tuple[str, int, str | None], version: int = 1) -> tuple[int, str | None, list]:
    body = {
        "components": [
            {"entity_type": kind, "match_type": match_type, "match": match} for kind, match_type, match in components
        ],
        "strict": False,
    }
    with WireClient(bootstrap) as client:
        answer = client.call(48, version, body)
    return int(answer.error_code), answer.error_message, list(answer.entries or [])


@pytest.mark.parametrize("version", [0, 1])
def test_every_valid_filter_matches_no_quota(pylog_broker, version):
    for components in (
        (),
        (("user", 0, "alice"),),
        (("user", 1, None), ("client-id", 2, None)),
        (("ip", 0, "127.0.0.1"),),
    ):
        assert quotas(pylog_broker.bootstrap_servers, *components, version=version) == (0, None, [])


@pytest.mark.parametrize(
    ("components", "reason"),
    [
        ((("group", 0, "g"),), "'group' is not a quota entity type"),
        ((("user", 0, "a"), ("user", 0, "b")), "'user' appears twice"),
        ((("ip", 2, None), ("user", 2, None)), "ip filter cannot be combined"),
        ((("user", 5, None),), "match type 5 is not"),
        ((("client-id", 0, None),), "exact match of entity type 'client-id' needs a name"),
    ],
)
def test_filters_kafka_refuses_are_refused_with_the_reason(pylog_broker, components, reason):
    code, message, entries = quotas(pylog_broker.bootstrap_servers, *components)
    assert (code, entries) == (42, [])  # INVALID_REQUEST
    assert reason in message


def test_no_reassignment_is_ever_in_progress(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=2)
    with WireClient(pylog_broker.bootstrap_servers) as client:
        every = client.call(46, 0, {"timeout": 10_000, "topics": None})
        some = client.call(46, 0, {"timeout": 10_000, "topics": [{"name": topic, "partition_indexes": [0, 1]}]})
    assert (int(every.error_code), list(every.topics)) == (0, [])
    assert (int(some.error_code), list(some.topics)) == (0, [])


def test_both_need_acls_on_the_cluster(tmp_path, pylog_broker_factory):
    broker = pylog_broker_factory(
        log_dir=tmp_path, authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    )
    assert quotas(broker.bootstrap_servers, ("user", 1, None))[0] == 31  # CLUSTER_AUTHORIZATION_FAILED
    with WireClient(broker.bootstrap_servers) as client:
        listed = client.call(46, 0, {"timeout": 10_000, "topics": None})
    assert int(listed.error_code) == 31
