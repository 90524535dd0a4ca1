"""The membership of classic groups, kept in ``__consumer_offsets`` as Kafka keeps it.

Kafka's group coordinator writes a classic group's state to the group's partition of
``__consumer_offsets`` as one record, and the next coordinator replays it when it loads the
partition, so members keep their ids, generation and assignments across a restart of the
coordinator or a move of it to another broker. Kafka's record, with its layout (non-flexible
encoding: ``string`` = int16 length + UTF-8, null = length -1; ``bytes`` = int32 length; arrays
= int32 count)::

    type 2  GroupMetadata   key: group
            value (version 3, what Kafka 4.3 writes): protocol type, generation int32,
                  protocol (nullable), leader (nullable), current state timestamp int64,
                  members [member id, instance id (nullable), client id, client host,
                           rebalance timeout int32, session timeout int32,
                           subscription bytes (the member's metadata of the group's protocol),
                           assignment bytes]

Version 3 is read; Kafka writes no other since 2.3 (versions 0-2 lack fields, and 4, the
flexible form, is never written), and another is refused as corrupt state.

What is written when (group.py drives it, as Kafka's coordinator writes it): the group's record
after a change that leaves it Stable (the leader's SyncGroup storing the assignment, a static
member replacing its old self) or Empty (a rebalance that ended with no member), when what the
record holds changed; the group's record as it converts from a consumer group (a downgrade,
migration.py); a tombstone when the group is deleted or converted to a consumer group (an
upgrade). A member leaving or expiring moves the group to a rebalance and writes nothing: the
record keeps the last Stable generation until the next one is stored, as Kafka's does.

Replay (:class:`ClassicGroupReplay`): the last record per group wins (a tombstone removes the
group). A group with members is loaded Stable, its members' sessions starting over; an Empty one
keeps its generation and protocol type.

Thread-safety: event loop only. (No ``from __future__ import annotations`` here: kio reads the
entities' field types at run time.)
"""

import io
import struct
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

from kafka_spark.broker.coordinator.classic_state import Group, GroupState, Member
from kafka_spark.broker.coordinator.group_offsets import CorruptOffsetsRecordError

GROUP_METADATA = 2
#: Kafka 4.3 writes version 3, the highest non-flexible one.
VALUE_VERSION = 3

_I16 = struct.Struct(">h")


def _str() -> Any:
    return field(metadata={"kafka_type": "string"})


def _int32() -> Any:
    return field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    group: str = _str()


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberV3:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    member_id: str = _str()
    group_instance_id: str | None = _str()
    client_id: str = _str()
    client_host: str = _str()
    rebalance_timeout: i32 = _int32()
    session_timeout: i32 = _int32()
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    assignment: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _ValueV3:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = _str()
    generation: i32 = _int32()
    protocol: str | None = _str()
    leader: str | None = _str()
    current_state_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    members: tuple[_MemberV3, ...]


_write_key = entity_writer(_GroupKey)
_read_key = entity_reader(_GroupKey)
_write_value = entity_writer(_ValueV3)
_read_value = entity_reader(_ValueV3)


def encode_key(group_id: str) -> bytes:
    buffer = io.BytesIO()
    _write_key(buffer, _GroupKey(group=group_id))
    return _I16.pack(GROUP_METADATA) + buffer.getvalue()


def is_group_metadata(key: bytes) -> bool:
    return len(key) >= 2 and _I16.unpack_from(key, 0)[0] == GROUP_METADATA


def decode_key(key: bytes) -> str:
    decoded, _ = _read_key(key, 2)
    return str(decoded.group)


def snapshot(group: Group) -> tuple[Any, ...] | None:
    """What the record of ``group`` holds (None: a group in a rebalance, which is not written):
    compared to what was written last, to write only changes."""
    if group.state not in (GroupState.STABLE, GroupState.EMPTY):
        return None
    return (
        group.protocol_type or "",
        group.generation_id,
        group.protocol_name,
        group.leader_id,
        tuple(
            (
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(group.protocol_name),
                m.assignment,
            )
            for m in group.members.values()
        ),
    )


def encode_value(state: tuple[Any, ...], timestamp_ms: int | None = None) -> bytes:
    """The record value (version 3) of a group's :func:`snapshot`."""
    protocol_type, generation, protocol, leader, members = state
    value = _ValueV3(
        protocol_type=protocol_type,
        generation=i32(generation),
        protocol=protocol,
        leader=leader,
        current_state_timestamp=i64(int(time.time() * 1000) if timestamp_ms is None else timestamp_ms),
        members=tuple(
            _MemberV3(
                member_id=member[0],
                group_instance_id=member[1],
                client_id=member[2],
                client_host=member[3],
                rebalance_timeout=i32(member[4]),
                session_timeout=i32(member[5]),
                subscription=member[6],
                assignment=member[7],
            )
            for member in members
        ),
    )
    buffer = io.BytesIO()
    _write_value(buffer, value)
    return _I16.pack(VALUE_VERSION) + buffer.getvalue()


def decode_group(group_id: str, value: bytes, where: str) -> Group:
    """The classic group a record value holds: Stable with its members (their sessions are the
    caller's to start), or Empty. Raises CorruptOffsetsRecordError naming what does not decode."""
    (version,) = _I16.unpack_from(value, 0)
    if version != VALUE_VERSION:
        raise CorruptOffsetsRecordError(
            f"{where}: classic group {group_id!r}: GroupMetadata value version {version}; pylog reads "
            f"{VALUE_VERSION}, what Kafka writes since 2.3 (move the topic's directories away to start over)"
        )
    try:
        decoded, _ = _read_value(value, 2)
    except Exception as error:
        raise CorruptOffsetsRecordError(
            f"{where}: classic group {group_id!r}: the GroupMetadata record does not decode: {error}"
        ) from error
    members = {
        m.member_id: Member(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            int(m.session_timeout),
            int(m.rebalance_timeout),
            [(decoded.protocol or "", bytes(m.subscription))],
            assignment=bytes(m.assignment),
        )
        for m in decoded.members
    }
    # (a group converted from a consumer group has no leader until it rebalances)
    if members and (decoded.protocol is None or (decoded.leader is not None and decoded.leader not in members)):
        raise CorruptOffsetsRecordError(
            f"{where}: classic group {group_id!r} has members but no protocol, or a leader that is not one of them"
        )
    return Group(
        group_id,
        state=GroupState.STABLE if members else GroupState.EMPTY,
        generation_id=int(decoded.generation),
        protocol_type=decoded.protocol_type or None,
        protocol_name=decoded.protocol if members else None,
        leader_id=decoded.leader if members else None,
        members=members,
    )


class ClassicGroupReplay:
    """GroupMetadata records of one partition of ``__consumer_offsets`` in offset order: the last
    value per group (None: a tombstone)."""

    def __init__(self) -> None:
        self.values: dict[str, bytes | None] = {}

    def apply(self, key: bytes, value: bytes | None) -> bool:
        """One record (False: not a GroupMetadata record)."""
        if not is_group_metadata(key):
            return False
        self.values[decode_key(key)] = value
        return True

    def groups(self, where: str) -> list[tuple[Group, bytes]]:
        """The groups replayed, each with the value it was loaded from."""
        return [
            (decode_group(group_id, value, where), value)
            for group_id, value in self.values.items()
            if value is not None
        ]
