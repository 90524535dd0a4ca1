"""A live group moving between the classic protocol and KIP-848's consumer protocol, on pylog's broker
and on Apache Kafka 4.3.1 (whose ``group.consumer.migration.policy`` is ``bidirectional`` by
default), asserted the same on both:

* confluent-kafka-python's test_consumer_upgrade_downgrade with librdkafka consumers (classic ones
  with the cooperative-sticky assignor; the eager ones run on pylog in
  tests/broker/coordinator/test_group_migration.py): a classic member, a consumer-protocol one
  joining (the group becomes a consumer group, 5 + 5 partitions), the classic one leaving, a classic
  one joining the consumer group, the consumer-protocol one leaving (a classic group again); each
  step with the group's type, every partition owned once, and 100 records read once each;
* the same answers over the wire, step by step: the upgrade (a classic member's generation is its
  member epoch, it is no leader, its heartbeat says when to rejoin, its assignment comes in two
  steps while it owns partitions moving elsewhere), the refusals (GROUP_ID_NOT_FOUND for a group
  that is not a consumer's), the downgrade (a classic group again, rebalancing at the group epoch).
"""

from __future__ import annotations

import uuid

from tests.broker.coordinator.test_group_migration import (
    EXPECTED_STEPS,
    Place,
    downgrade,
    refusals,
    upgrade,
    upgrade_and_downgrade,
)
from tests.interop.harness import Cluster, wait_for_group_coordinator
from tests.support.waiting import wait_until
from tests.support.wire import WireClient


def place(cluster: Cluster, partitions: int) -> Place:
    """A new topic of ``partitions`` on ``cluster``, and a group of the same name whose coordinator
    is ready."""
    topic = cluster.topic(partitions, prefix="migration")
    wait_for_group_coordinator(cluster.bootstrap_servers, topic)
    with WireClient(cluster.bootstrap_servers) as client:
        body = {
            "topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        (described,) = client.call(3, 12, body).topics  # Metadata v12: the topic's id
    where = Place(cluster, topic, topic, described.topic_id)
    # Kafka's group coordinator learns of a new topic a little after its broker answers for it (a
    # group converted before would lose its partitions): a member of a group of its own is assigned
    # some first.
    probe = where.modern("probe", f"{topic}-probe")
    probe.join()
    wait_until(lambda: probe.heartbeat(owned=probe.owned).error_code == 0 and probe.owned, "the topic's partitions")
    probe.heartbeat(member_epoch=-1)
    probe.close()
    return where


def test_librdkafka_consumers_of_both_protocols_move_a_group_between_them(cluster: Cluster) -> None:
    where = place(cluster, 10)
    steps = upgrade_and_downgrade(cluster.bootstrap_servers, where.topic, 10, "cooperative-sticky")
    assert steps == EXPECTED_STEPS, cluster.name


def test_a_classic_member_of_a_consumer_group_is_answered_alike(cluster: Cluster) -> None:
    upgrade(place(cluster, 6))


def test_groups_that_are_not_a_consumers_are_refused_alike(cluster: Cluster) -> None:
    where = place(cluster, 6)
    for name in ("workers", "modern-only"):  # the groups refusals() uses
        wait_for_group_coordinator(cluster.bootstrap_servers, f"{where.group}-{name}")
    refusals(where)


def test_the_group_goes_back_to_the_classic_protocol_alike(cluster: Cluster) -> None:
    downgrade(place(cluster, 6))
