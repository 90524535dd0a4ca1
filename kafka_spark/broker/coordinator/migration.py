"""A live group moving between the classic protocol and KIP-848's consumer protocol, as Kafka 4's
coordinator moves it (``group.consumer.migration.policy=bidirectional``, Kafka's default):

* **upgrade**: a member of the consumer protocol joins a classic group that has members. The
  group must be a consumer's (protocol type ``consumer``) and every member's metadata of the
  group's protocol a ``ConsumerProtocolSubscription``; else the heartbeat is refused with
  GROUP_ID_NOT_FOUND and Kafka's reason. The classic members stay, as classic members of the
  consumer group: their subscription from their metadata, their partitions (assigned and target)
  from their last assignment, their epoch the classic generation, which becomes the group's
  epoch and assignment epoch. The joining member then moves the group epoch, and the
  coordinator's assignor assigns everyone; the classic members learn it from their heartbeats
  (REBALANCE_IN_PROGRESS) and rejoin.
* **downgrade**: the last member of the consumer protocol leaves (or is removed) while classic
  members stay: the group becomes a classic group of them, Stable at the group epoch as its
  generation, each with its target assignment as a ConsumerProtocolAssignment, and it rebalances
  at once, so that they join again and their leader assigns.

The group coordinator (group.py) drives the conversions: :func:`to_consumer_group` and
:func:`to_classic_group` only build the other protocol's group. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_spark.broker.coordinator.assignors import Assignment
from kafka_spark.broker.coordinator.classic_state import Group, GroupState, Member, select_protocol
from kafka_spark.broker.coordinator.consumer_group import STABLE, ClassicMetadata, ConsumerGroup, ConsumerMember
from kafka_spark.broker.coordinator.consumer_protocol import (
    PROTOCOL_TYPE,
    MalformedProtocolError,
    assignment_for,
    decode_assignment,
    decode_subscription,
)

#: Kafka's group.consumer.migration.policy values: which conversions a coordinator makes.
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


class UpgradeRefused(Exception):
    """A classic group that cannot become a consumer group, and Kafka's reason."""


def to_consumer_group(classic: Group, topics: Mapping[str, object]) -> ConsumerGroup:
    """The consumer group ``classic`` (which has members) becomes; UpgradeRefused when it cannot.
    Partitions of topics that no longer exist are left out."""
    group_id = classic.group_id
    if classic.protocol_type != PROTOCOL_TYPE:
        raise UpgradeRefused(
            f"Cannot upgrade classic group {group_id} to consumer group because the group does not use the "
            "consumer embedded protocol."
        )
    protocol = classic.protocol_name
    if protocol is None and classic.candidate_protocols():
        protocol = select_protocol(classic)
    group = ConsumerGroup(group_id, group_epoch=classic.generation_id, assignment_epoch=classic.generation_id)
    for member in classic.members.values():
        try:
            subscription = decode_subscription(member.metadata(protocol))
            assigned = decode_assignment(member.assignment) if member.assignment else {}
        except MalformedProtocolError as error:
            raise UpgradeRefused(
                f"Cannot upgrade classic group {group_id} to consumer group because the embedded consumer "
                f"protocol is malformed (member {member.member_id}: {error})."
            ) from error
        assigned = {topic: partitions for topic, partitions in assigned.items() if topic in topics}
        converted = group.members[member.member_id] = ConsumerMember(
            member_id=member.member_id,
            instance_id=member.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            subscribed_names=tuple(sorted(set(subscription.topics))),
            member_epoch=classic.generation_id,
            previous_member_epoch=classic.generation_id,
            state=STABLE,
            assigned=assigned,
            classic=ClassicMetadata(member.session_timeout_ms, tuple(member.protocols)),
        )
        converted.track_assignment_epochs()  # held since the generation it had
        group.target[member.member_id] = dict(assigned)
    return group


def downgradable(group: ConsumerGroup, leaving: str) -> bool:
    """Whether ``leaving``, a member of the consumer protocol, leaves only classic members that
    share a protocol (a classic group needs one)."""
    others = [member for member_id, member in group.members.items() if member_id != leaving]
    protocols = [{name for name, _ in member.classic.protocols} for member in others if member.classic is not None]
    return bool(others) and len(protocols) == len(others) and bool(set.intersection(*protocols))


def to_classic_group(group: ConsumerGroup, leaving: str) -> Group:
    """The classic group ``group`` becomes when ``leaving`` goes (see :func:`downgradable`):
    Stable at generation ``group.group_epoch``, no leader yet, each member's assignment its
    target (the coordinator rebalances it at once)."""
    classic = Group(
        group.group_id, state=GroupState.STABLE, generation_id=group.group_epoch, protocol_type=PROTOCOL_TYPE
    )
    for member_id, member in group.members.items():
        if member_id == leaving or member.classic is None:
            continue
        classic.members[member_id] = Member(
            member_id,
            member.instance_id,
            member.client_id,
            member.client_host,
            member.classic.session_timeout_ms,
            member.rebalance_timeout_ms,
            list(member.classic.protocols),
        )
    classic.protocol_name = select_protocol(classic)
    for member_id, classic_member in classic.members.items():
        target: Assignment = group.target.get(member_id, {})
        classic_member.assignment = assignment_for(target, classic_member.metadata(classic.protocol_name))
    return classic
