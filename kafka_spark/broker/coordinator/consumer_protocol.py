"""The consumer's embedded protocol (Kafka's ``ConsumerProtocol``): what a classic member of a
"consumer" group puts in its JoinGroup metadata (a ``ConsumerProtocolSubscription``: the topics it
subscribes to, and from version 1 the partitions it owns, from version 3 its rack) and what its
SyncGroup answer carries (a ``ConsumerProtocolAssignment``). Both are an int16 version followed by
the struct at that version, in Kafka's non-flexible encoding; a version above the highest known
is read as the highest, as Kafka's clients read it (newer versions only append fields).

The group coordinator reads them when a group moves between the protocols (migration.py) and
when a classic member belongs to a consumer group (consumer_group.py). Pure.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_assignment.v1 import data as assignment_v1
from kio.schema.consumer_protocol_assignment.v2 import data as assignment_v2
from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
from kio.schema.consumer_protocol_subscription.v0 import data as subscription_v0
from kio.schema.consumer_protocol_subscription.v1 import data as subscription_v1
from kio.schema.consumer_protocol_subscription.v2 import data as subscription_v2
from kio.schema.consumer_protocol_subscription.v3 import data as subscription_v3
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from kafka_spark.broker.coordinator.assignors import Assignment

#: The embedded protocol's type, as a JoinGroup names it.
PROTOCOL_TYPE = "consumer"

_SUBSCRIPTIONS: tuple[Any, ...] = (
    subscription_v0.ConsumerProtocolSubscription,
    subscription_v1.ConsumerProtocolSubscription,
    subscription_v2.ConsumerProtocolSubscription,
    subscription_v3.ConsumerProtocolSubscription,
)
_ASSIGNMENTS: tuple[Any, ...] = (
    assignment_v0.ConsumerProtocolAssignment,
    assignment_v1.ConsumerProtocolAssignment,
    assignment_v2.ConsumerProtocolAssignment,
    assignment_v3.ConsumerProtocolAssignment,
)
_ASSIGNED: tuple[Any, ...] = (
    assignment_v0.TopicPartition,
    assignment_v1.TopicPartition,
    assignment_v2.TopicPartition,
    assignment_v3.TopicPartition,
)
_I16 = struct.Struct(">h")


class MalformedProtocolError(ValueError):
    """Metadata or an assignment that is not the consumer's embedded protocol."""


@dataclass(frozen=True)
class Subscription:
    """A classic member's ``ConsumerProtocolSubscription``: ``owned`` is empty before version 1."""

    version: int
    topics: tuple[str, ...]
    owned: Assignment
    rack_id: str | None = None


def version_of(data: bytes) -> int:
    """The version a subscription or an assignment starts with."""
    if len(data) < 2:
        raise MalformedProtocolError(f"{len(data)} byte(s): too short for the consumer protocol's version")
    (version,) = _I16.unpack_from(data, 0)
    if version < 0:
        raise MalformedProtocolError(f"version {version} is not a consumer protocol version")
    return int(version)


def decode_subscription(metadata: bytes) -> Subscription:
    """A JoinGroup's metadata as a subscription (MalformedProtocolError when it is not one)."""
    version = version_of(metadata)
    schema = _SUBSCRIPTIONS[min(version, len(_SUBSCRIPTIONS) - 1)]
    try:
        decoded, _ = entity_reader(schema)(metadata, 2)
    except Exception as error:  # kio raises what the bytes make it raise
        raise MalformedProtocolError(f"not a consumer subscription (version {version}): {error}") from error
    owned: dict[str, frozenset[int]] = {}
    for entry in getattr(decoded, "owned_partitions", ()):
        if entry.partitions:
            owned[entry.topic] = owned.get(entry.topic, frozenset()) | frozenset(int(p) for p in entry.partitions)
    return Subscription(version, tuple(decoded.topics), owned, getattr(decoded, "rack_id", None))


def decode_assignment(data: bytes) -> Assignment:
    """A SyncGroup assignment's partitions by topic (MalformedProtocolError when it is not one)."""
    version = version_of(data)
    schema = _ASSIGNMENTS[min(version, len(_ASSIGNMENTS) - 1)]
    try:
        decoded, _ = entity_reader(schema)(data, 2)
    except Exception as error:
        raise MalformedProtocolError(f"not a consumer assignment (version {version}): {error}") from error
    assigned: dict[str, frozenset[int]] = {}
    for entry in decoded.assigned_partitions:
        if entry.partitions:
            assigned[entry.topic] = assigned.get(entry.topic, frozenset()) | frozenset(int(p) for p in entry.partitions)
    return assigned


def assignment_for(assignment: Assignment, metadata: bytes) -> bytes:
    """``assignment`` as the SyncGroup answer to a member whose subscription is ``metadata``: of
    the subscription's version, as Kafka answers it (version 0 when it has none)."""
    try:
        version = version_of(metadata)
    except MalformedProtocolError:
        version = 0
    return encode_assignment(assignment, version)


def encode_assignment(assignment: Assignment, version: int) -> bytes:
    """``assignment`` as a ``ConsumerProtocolAssignment`` of ``version`` (the version of the
    member's subscription, capped at the highest known, as Kafka answers it)."""
    version = min(max(version, 0), len(_ASSIGNMENTS) - 1)
    partition = _ASSIGNED[version]
    entity = _ASSIGNMENTS[version](
        assigned_partitions=tuple(
            partition(topic=topic, partitions=tuple(i32(p) for p in sorted(indexes)))
            for topic, indexes in sorted(assignment.items())
            if indexes
        ),
        user_data=None,
    )
    buffer = io.BytesIO()
    buffer.write(_I16.pack(version))
    entity_writer(_ASSIGNMENTS[version])(buffer, entity)
    return buffer.getvalue()
