"""Regex subscriptions of KIP-848 consumer groups (ConsumerGroupHeartbeat v1's
SubscribedTopicRegex), over the wire against pylog's broker and Apache Kafka: Kafka compiles the
regex with RE2/J, so what RE2 lacks (lookaround, backreferences, atomic groups, possessive
quantifiers, verbose mode) is INVALID_REGULAR_EXPRESSION on both, and what RE2 has joins."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest

from tests.interop.harness import Cluster
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

INVALID_REGULAR_EXPRESSION = 128
# The coordinator is still being elected or loaded (Kafka's first group after it starts).
COORDINATOR_BUSY = {14, 15, 16}

REFUSED = [r"(?=orders)orders-\d+", r"(?<!x)orders", r"(o)\1rders", r"(?>orders)", r"orders-\d++", r"(?x) orders"]
ACCEPTED = [r"orders-\d+", r"(?i)ORDERS.*", r"[a-z]+(-[0-9]{1,3})?", r"^orders$|payments"]


def _join(client: WireClient, group: str, regex: str) -> Any:
    body = {
        "group_id": group,
        "member_id": uuid.uuid4().hex,
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": datetime.timedelta(seconds=30),
        "subscribed_topic_names": None,
        "subscribed_topic_regex": regex,
        "server_assignor": None,
        "topic_partitions": [],
    }
    deadline = time.monotonic() + 60  # one bound for both waits
    wait_until(  # FindCoordinator first: Kafka creates __consumer_offsets when a client looks
        lambda: client.call(10, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0].error_code == 0,
        f"a coordinator for {group}",
        interval=0.2,
    )
    answers = []

    def answered() -> Any:
        answers.append(client.call(68, 1, body))
        return answers[-1] if answers[-1].error_code not in COORDINATOR_BUSY else None

    return wait_until(answered, lambda: f"an answer other than busy: {answers[-1:]}", deadline - time.monotonic(), 0.2)


@pytest.mark.parametrize("regex", REFUSED + ACCEPTED)
def test_a_regex_joins_if_and_only_if_re2j_compiles_it(cluster: Cluster, regex: str):
    group = f"regex-{uuid.uuid4().hex[:8]}"
    with WireClient(cluster.bootstrap_servers) as client:
        answer = _join(client, group, regex)
        if regex in REFUSED:
            assert answer.error_code == INVALID_REGULAR_EXPRESSION, (cluster.name, answer)
            assert f"SubscribedTopicRegex `{regex}` is not a valid regular expression" in answer.error_message
            return
        assert answer.error_code == 0 and answer.member_epoch >= 1, (cluster.name, answer)
        leave = {**_leave_body(group, answer.member_id)}
        assert client.call(68, 1, leave).error_code == 0


def _leave_body(group: str, member_id: str) -> dict[str, Any]:
    return {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": -1,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": datetime.timedelta(milliseconds=-1),
        "subscribed_topic_names": None,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": None,
    }
