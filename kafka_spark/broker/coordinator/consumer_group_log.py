"""The membership of consumer-protocol groups (KIP-848), kept in ``__consumer_offsets`` as Kafka keeps it.

Kafka's group coordinator writes a consumer group's state to the group's partition of
``__consumer_offsets`` beside its committed offsets, and the next coordinator replays it when it
loads the partition, so members keep their ids, epochs and partitions across a restart of the
coordinator or a move of it to another broker. These are Kafka's records, with its layouts: a key
is the record type (int16) followed by the key's fields (``string`` = int16 length + UTF-8); a
value is its version (int16, 0 for all of these) followed by the value's fields in Kafka's flexible
encoding (compact strings and arrays, tagged fields: pylog writes one, type 5's tag 0)::

    type 3  ConsumerGroupMetadata             key: group       value: epoch int32
    type 4  ConsumerGroupPartitionMetadata    key: group       value: [topic id, name, partitions, []]
    type 5  ConsumerGroupMemberMetadata       key: group, member
            value: instance id, rack id, client id, client host, subscribed names, regex,
                   rebalance timeout int32, server assignor; tagged field 0 for a member of
                   the classic protocol (KIP-848's migration): session timeout int32 and
                   protocols [name, metadata bytes]
    type 6  ConsumerGroupTargetAssignmentMetadata  key: group  value: assignment epoch int32
    type 7  ConsumerGroupTargetAssignmentMember    key: group, member  value: [topic id, [partition]]
    type 8  ConsumerGroupCurrentMemberAssignment   key: group, member
            value: member epoch, previous member epoch, state int8 (0 stable, 1 unrevoked
                   partitions, 2 unreleased partitions), assigned [topic id, [partition]],
                   pending revocation [topic id, [partition]]

(Type 4 is the form Kafka 4.0 writes the partitions a group subscribes to in; later versions keep
a hash of them in type 3's tagged field and still read type 4.)

What is written when: after every change of a group (a heartbeat, a classic member's JoinGroup or
LeaveGroup, a member leaving or expiring, a member removed by its rebalance timeout, the group
deleted, or converted to or from the classic protocol) the coordinator writes, in one batch,
the records whose value changed, in Kafka's order: first the tombstones of what is gone (a member's
current assignment, target assignment, then its metadata; for a deleted group the target
assignment epoch, the partition metadata and the group epoch last), then member metadata,
partition metadata, group epoch, target assignments, assignment epoch, current assignments. A
compacted topic keeps the newest record per key, and a tombstone removes its key, so compaction
keeps only the group's current state. A group converted to a classic group (its last member of
the consumer protocol left) leaves only tombstones of all of its records, after the classic
group's own record (classic_group_log.py). A group converted from a classic group is written
whole at the heartbeat that converted it, after the classic group's tombstone.

Replay (:class:`ConsumerGroupReplay`): records are applied in offset order, last per key wins,
and the group is rebuilt once the partition is read. A member record of a group without its group
epoch record, or an assignment of a member without its metadata, is corrupt state (no order of
Kafka's writes leaves it): loading stops with :class:`CorruptOffsetsRecordError` naming it.
Partitions named by a topic id no topic has any more are left out (the topic was deleted).

Thread-safety: event loop only. (No ``from __future__ import annotations`` here: kio reads the
entities' field types at run time.)
"""

import io
import struct
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from kio.serial import entity_reader, entity_writer
from kio.serial.writers import write_unsigned_varint
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, uvarint

from kafka_spark.broker.coordinator.assignors import Assignment
from kafka_spark.broker.coordinator.consumer_group import (
    STABLE,
    UNRELEASED,
    UNREVOKED,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerMember,
)
from kafka_spark.broker.coordinator.group_offsets import CorruptOffsetsRecordError

GROUP_EPOCH = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_EPOCH = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
RECORD_TYPES = frozenset(
    {GROUP_EPOCH, PARTITION_METADATA, MEMBER_METADATA, TARGET_EPOCH, TARGET_MEMBER, CURRENT_ASSIGNMENT}
)

#: Kafka's order of a batch: tombstones of what is gone, then the new values.
_TOMBSTONE_ORDER = (CURRENT_ASSIGNMENT, TARGET_MEMBER, TARGET_EPOCH, MEMBER_METADATA, PARTITION_METADATA, GROUP_EPOCH)
_VALUE_ORDER = (MEMBER_METADATA, PARTITION_METADATA, GROUP_EPOCH, TARGET_MEMBER, TARGET_EPOCH, CURRENT_ASSIGNMENT)

_STATES = {STABLE: 0, UNREVOKED: 1, UNRELEASED: 2}
_STATE_NAMES = {code: name for name, code in _STATES.items()}
_I16 = struct.Struct(">h")
_VALUE_VERSION = b"\x00\x00"


# -- Kafka's schemas, as kio entities (kio reads and writes them) --------------------------------------


def _str() -> Any:
    return field(metadata={"kafka_type": "string"})


def _int32() -> Any:
    return field(metadata={"kafka_type": "int32"})


class _Key:
    """A key's fields (after the record type): Kafka's non-flexible encoding."""

    __slots__ = ()
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False


class _Value:
    """A value's fields (after its version, 0): Kafka's flexible encoding."""

    __slots__ = ()
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True


class _Nested:
    __slots__ = ()
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True


@dataclass(frozen=True, slots=True, kw_only=True)
class _GroupKey(_Key):
    group_id: str = _str()


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberKey(_Key):
    group_id: str = _str()
    member_id: str = _str()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Epoch(
    _Value
):  # ConsumerGroupMetadataValue (epoch), ConsumerGroupTargetAssignmentMetadataValue (assignment epoch)
    epoch: i32 = _int32()


@dataclass(frozen=True, slots=True, kw_only=True)
class _PartitionRacks(_Nested):
    partition: i32 = _int32()
    racks: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class _TopicMetadata(_Nested):
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    topic_name: str = _str()
    num_partitions: i32 = _int32()
    partition_metadata: tuple[_PartitionRacks, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class _PartitionMetadata(_Value):  # ConsumerGroupPartitionMetadataValue
    topics: tuple[_TopicMetadata, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _ClassicProtocol(_Nested):
    name: str = _str()
    metadata: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _ClassicMemberMetadata(_Nested):
    session_timeout_ms: i32 = _int32()
    supported_protocols: tuple[_ClassicProtocol, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _MemberMetadata(_Value):  # ConsumerGroupMemberMetadataValue
    instance_id: str | None = _str()
    rack_id: str | None = _str()
    client_id: str = _str()
    client_host: str = _str()
    subscribed_topic_names: tuple[str, ...] = _str()
    subscribed_topic_regex: str | None = _str()
    rebalance_timeout_ms: i32 = _int32()
    server_assignor: str | None = _str()
    # tagged field 0: a member of the classic protocol's session timeout and protocols (null otherwise)
    classic_member_metadata: _ClassicMemberMetadata | None = field(metadata={"tag": 0}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class _TopicPartitions(_Nested):
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    # tagged field 0 (Kafka 4.3, KIP-1251), in a current assignment: the epoch each partition was
    # assigned at, in the order of ``partitions``
    assignment_epochs: tuple[i32, ...] = field(metadata={"kafka_type": "int32", "tag": 0}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class _TargetMember(_Value):  # ConsumerGroupTargetAssignmentMemberValue
    topic_partitions: tuple[_TopicPartitions, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _CurrentAssignment(_Value):  # ConsumerGroupCurrentMemberAssignmentValue
    member_epoch: i32 = _int32()
    previous_member_epoch: i32 = _int32()
    state: i8 = field(metadata={"kafka_type": "int8"})
    assigned_partitions: tuple[_TopicPartitions, ...]
    partitions_pending_revocation: tuple[_TopicPartitions, ...]


_VALUE_CLASSES: dict[int, Any] = {
    GROUP_EPOCH: _Epoch,
    PARTITION_METADATA: _PartitionMetadata,
    MEMBER_METADATA: _MemberMetadata,
    TARGET_EPOCH: _Epoch,
    TARGET_MEMBER: _TargetMember,
    CURRENT_ASSIGNMENT: _CurrentAssignment,
}
_MEMBER_TYPES = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})
_WRITERS = {
    cls: entity_writer(cls) for cls in {_GroupKey, _MemberKey, _ClassicMemberMetadata, *_VALUE_CLASSES.values()}
}
_READERS = {cls: entity_reader(cls) for cls in {_GroupKey, _MemberKey, *_VALUE_CLASSES.values()}}


def _encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    classic = entity.classic_member_metadata if isinstance(entity, _MemberMetadata) else None
    if classic is None:
        _WRITERS[type(entity)](buffer, entity)
        return buffer.getvalue()
    # kio writes a nullable struct in a tagged field without the presence byte Kafka writes before
    # it (and reads, as kio's reader does): this tagged field is written here.
    _WRITERS[_MemberMetadata](buffer, replace(entity, classic_member_metadata=None))
    tagged = b"\x01" + _encode(classic)
    buffer.seek(-1, io.SEEK_END)  # over kio's "no tagged field"
    for number in (1, 0, len(tagged)):  # one tagged field: tag 0, its size, then its bytes
        write_unsigned_varint(buffer, uvarint(number))
    buffer.write(tagged)
    return buffer.getvalue()


def encode_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    """The key of a consumer-group record of ``record_type`` (member records name the member)."""
    if record_type in _MEMBER_TYPES:
        return _I16.pack(record_type) + _encode(_MemberKey(group_id=group_id, member_id=member_id or ""))
    return _I16.pack(record_type) + _encode(_GroupKey(group_id=group_id))


def record_type(key: bytes) -> int:
    (kind,) = _I16.unpack_from(key, 0)
    return int(kind)


def decode_key(key: bytes) -> tuple[int, str, str | None]:
    """``(record type, group, member or None)`` of a consumer-group record's key."""
    kind = record_type(key)
    if kind in _MEMBER_TYPES:
        member, _ = _READERS[_MemberKey](key, 2)
        return kind, member.group_id, member.member_id
    group, _ = _READERS[_GroupKey](key, 2)
    return kind, group.group_id, None


def decode_value(kind: int, value: bytes) -> Any:
    (version,) = _I16.unpack_from(value, 0)
    if version != 0:
        raise CorruptOffsetsRecordError(f"consumer-group record of type {kind}: value version {version}; pylog reads 0")
    decoded, _ = _READERS[_VALUE_CLASSES[kind]](value, 2)
    return decoded


# -- a group as records -------------------------------------------------------------------------------


def _partitions(
    assignment: Assignment,
    topics: Mapping[str, tuple[uuid.UUID, int]],
    member: ConsumerMember | None = None,
) -> tuple[_TopicPartitions, ...]:
    """``assignment`` as Kafka's TopicPartitions, with each partition's assignment epoch when
    it is what ``member`` holds (None: a target assignment, which has none)."""
    return tuple(
        _TopicPartitions(
            topic_id=topics[topic][0],
            partitions=tuple(i32(p) for p in sorted(indexes)),
            assignment_epochs=()
            if member is None
            else tuple(i32(member.assignment_epochs.get((topic, p), member.member_epoch)) for p in sorted(indexes)),
        )
        for topic, indexes in sorted(assignment.items())
        if topic in topics and indexes
    )


def group_records(
    group: ConsumerGroup,
    topics: Mapping[str, tuple[uuid.UUID, int]],
    members: Collection[str] | None = None,
    *,
    all_targets: bool = True,
) -> dict[bytes, bytes]:
    """The records of ``group``'s current state, key -> value: the group's own, and those of
    ``members`` (None: every member; ``all_targets``: every member's target assignment), by id."""
    group_id = group.group_id
    records: dict[bytes, Any] = {
        encode_key(GROUP_EPOCH, group_id): _Epoch(epoch=i32(group.group_epoch)),
        encode_key(PARTITION_METADATA, group_id): _PartitionMetadata(
            topics=tuple(
                _TopicMetadata(topic_id=topics[name][0], topic_name=name, num_partitions=i32(count))
                for name, count in sorted(group.subscribed_partitions.items())
                if name in topics
            )
        ),
        encode_key(TARGET_EPOCH, group_id): _Epoch(epoch=i32(group.assignment_epoch)),
    }
    chosen = sorted(group.members if members is None else set(members) & set(group.members))
    targets = sorted(group.target) if all_targets or members is None else sorted(set(chosen) & set(group.target))
    for member_id in targets:
        records[encode_key(TARGET_MEMBER, group_id, member_id)] = _TargetMember(
            topic_partitions=_partitions(group.target[member_id], topics)
        )
    for member_id in chosen:
        member = group.members[member_id]
        records[encode_key(MEMBER_METADATA, group_id, member_id)] = _MemberMetadata(
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=tuple(member.subscribed_names),
            subscribed_topic_regex=member.subscribed_regex,
            rebalance_timeout_ms=i32(member.rebalance_timeout_ms),
            server_assignor=member.server_assignor,
            classic_member_metadata=None
            if member.classic is None
            else _ClassicMemberMetadata(
                session_timeout_ms=i32(member.classic.session_timeout_ms),
                supported_protocols=tuple(
                    _ClassicProtocol(name=name, metadata=metadata) for name, metadata in member.classic.protocols
                ),
            ),
        )
        records[encode_key(CURRENT_ASSIGNMENT, group_id, member_id)] = _CurrentAssignment(
            member_epoch=i32(member.member_epoch),
            previous_member_epoch=i32(member.previous_member_epoch),
            state=i8(_STATES[member.state]),
            assigned_partitions=_partitions(member.assigned, topics, member),
            partitions_pending_revocation=_partitions(member.pending_revocation, topics, member),
        )
    return {key: _VALUE_VERSION + _encode(value) for key, value in records.items()}


@dataclass
class _Written:
    """What is in the log of one group: key -> value, and each member's keys."""

    values: dict[bytes, bytes] = field(default_factory=dict)
    members: dict[str, dict[int, bytes]] = field(default_factory=dict)  # member id -> record type -> key
    assignment_epoch: int | None = None


class ConsumerGroupRecords:
    """What this coordinator has written of each consumer group it coordinates, to write only what
    changes. A change looks at the group's own records, the members it names (a heartbeat changes
    its member only), every member's target when the assignment epoch moved (a new target
    assignment), the members not written yet (those of a group just converted from the classic
    protocol) and the records of members no longer in the group (tombstones): encoding every
    member at every heartbeat would cost a large group's coordinator milliseconds per heartbeat."""

    def __init__(self) -> None:
        self._written: dict[str, _Written] = {}

    def changes(
        self,
        group_id: str,
        group: ConsumerGroup | None,
        topics: Mapping[str, tuple[uuid.UUID, int]],
        members: Collection[str] | None = None,
    ) -> list[tuple[bytes, bytes | None]]:
        """The records to write for ``group`` (None: it is deleted) after a change of ``members``
        (None: any member), in Kafka's order."""
        written = self._written.get(group_id) or _Written()
        if group is None:
            wanted: dict[bytes, bytes] = {}
            gone = [(key, None) for key in written.values]
        else:
            all_targets = members is None or group.assignment_epoch != written.assignment_epoch
            if members is not None:  # and the members never written (a group converted from the classic protocol)
                members = set(members) | (group.members.keys() - written.members.keys())
            wanted = group_records(group, topics, members, all_targets=all_targets)
            gone = [
                (key, None)
                for member_id, keys in written.members.items()
                for kind, key in keys.items()
                if member_id not in (group.target if kind == TARGET_MEMBER else group.members)
            ]
        changed = [(key, value) for key, value in wanted.items() if written.values.get(key) != value]
        gone.sort(key=lambda item: _TOMBSTONE_ORDER.index(record_type(item[0])))
        changed.sort(key=lambda item: _VALUE_ORDER.index(record_type(item[0])))
        return [*gone, *changed]

    def written(self, group_id: str, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """``records`` of ``group_id`` are in the log now."""
        state = self._written.setdefault(group_id, _Written())
        for key, value in records:
            kind, _, member_id = decode_key(key)
            if value is None:
                state.values.pop(key, None)
                if member_id is not None:
                    state.members.get(member_id, {}).pop(kind, None)
                    if not state.members.get(member_id, True):
                        del state.members[member_id]
                continue
            state.values[key] = value
            if member_id is not None:
                state.members.setdefault(member_id, {})[kind] = key
            elif kind == TARGET_EPOCH:
                state.assignment_epoch = int(decode_value(kind, value).epoch)
        if not state.values:
            del self._written[group_id]

    def forget(self, group_ids: Iterable[str]) -> None:
        for group_id in group_ids:
            self._written.pop(group_id, None)


# -- replay ---------------------------------------------------------------------------------------------


@dataclass
class _Replayed:
    records: dict[bytes, bytes] = field(default_factory=dict)
    group_epoch: int | None = None
    assignment_epoch: int = 0
    subscribed: dict[str, int] = field(default_factory=dict)
    members: dict[str, _MemberMetadata] = field(default_factory=dict)
    targets: dict[str, _TargetMember] = field(default_factory=dict)
    current: dict[str, _CurrentAssignment] = field(default_factory=dict)


class ConsumerGroupReplay:
    """Consumer-group records of one partition of ``__consumer_offsets``, applied in offset order;
    :meth:`groups` rebuilds the groups once the partition is read."""

    def __init__(self) -> None:
        self._groups: dict[str, _Replayed] = {}

    def apply(self, key: bytes, value: bytes | None) -> bool:
        """One record (False: not a consumer-group record; the caller skips it)."""
        kind = record_type(key)
        if kind not in RECORD_TYPES:
            return False
        kind, group_id, member_id = decode_key(key)
        state = self._groups.setdefault(group_id, _Replayed())
        decoded = None if value is None else decode_value(kind, value)
        if value is None:
            state.records.pop(key, None)
        else:
            state.records[key] = value
        if kind == GROUP_EPOCH:
            state.group_epoch = None if decoded is None else int(decoded.epoch)
        elif kind == TARGET_EPOCH:
            state.assignment_epoch = 0 if decoded is None else int(decoded.epoch)
        elif kind == PARTITION_METADATA:
            state.subscribed = {} if decoded is None else {t.topic_name: int(t.num_partitions) for t in decoded.topics}
        else:
            tables: dict[int, dict[str, Any]] = {
                MEMBER_METADATA: state.members,
                TARGET_MEMBER: state.targets,
                CURRENT_ASSIGNMENT: state.current,
            }
            table = tables[kind]
            if decoded is None:
                table.pop(member_id or "", None)
            else:
                table[member_id or ""] = decoded
        return True

    def groups(
        self, topics: Mapping[str, tuple[uuid.UUID, int]], where: str
    ) -> list[tuple[ConsumerGroup, dict[bytes, bytes]]]:
        """The groups replayed, each with the records it stands on (``where`` names the partition
        in errors). Raises CorruptOffsetsRecordError on a state Kafka's writes never leave."""
        names = {topic_id: name for name, (topic_id, _) in topics.items()}

        def assignment(entries: Iterable[_TopicPartitions]) -> Assignment:
            return {
                names[entry.topic_id]: frozenset(int(p) for p in entry.partitions)
                for entry in entries
                if entry.topic_id in names and entry.partitions
            }

        def epochs(*held: Iterable[_TopicPartitions]) -> dict[tuple[str, int], int]:
            return {
                (names[entry.topic_id], int(partition)): int(epoch)
                for entries in held
                for entry in entries
                if entry.topic_id in names and len(entry.assignment_epochs) == len(entry.partitions)
                for partition, epoch in zip(entry.partitions, entry.assignment_epochs, strict=True)
            }

        rebuilt = []
        for group_id, state in self._groups.items():
            if state.group_epoch is None:
                if state.records:
                    raise CorruptOffsetsRecordError(
                        f"{where}: consumer group {group_id!r} has member or assignment records but no group "
                        "epoch record (ConsumerGroupMetadata); the partition was not written by a group coordinator"
                    )
                continue
            orphans = (set(state.targets) | set(state.current)) - set(state.members)
            if orphans or set(state.members) - set(state.current):
                raise CorruptOffsetsRecordError(
                    f"{where}: consumer group {group_id!r} has member(s) "
                    f"{sorted(orphans or set(state.members) - set(state.current))} with an assignment but no "
                    "metadata record, or metadata but no current assignment record"
                )
            group = ConsumerGroup(
                group_id,
                group_epoch=state.group_epoch,
                assignment_epoch=state.assignment_epoch,
                subscribed_partitions=dict(state.subscribed),
            )
            for member_id, metadata in state.members.items():
                current = state.current[member_id]
                member = group.members[member_id] = ConsumerMember(
                    member_id=member_id,
                    instance_id=metadata.instance_id,
                    rack_id=metadata.rack_id,
                    client_id=metadata.client_id,
                    client_host=metadata.client_host,
                    rebalance_timeout_ms=int(metadata.rebalance_timeout_ms),
                    subscribed_names=tuple(metadata.subscribed_topic_names),
                    subscribed_regex=metadata.subscribed_topic_regex,
                    server_assignor=metadata.server_assignor,
                    member_epoch=int(current.member_epoch),
                    previous_member_epoch=int(current.previous_member_epoch),
                    state=_STATE_NAMES.get(int(current.state), STABLE),
                    assigned=assignment(current.assigned_partitions),
                    pending_revocation=assignment(current.partitions_pending_revocation),
                    classic=_classic(metadata.classic_member_metadata),
                    assignment_epochs=epochs(current.assigned_partitions, current.partitions_pending_revocation),
                )
                member.track_assignment_epochs()  # written before Kafka 4.3's epochs: held since its epoch
            group.target = {
                member_id: assignment(target.topic_partitions) for member_id, target in state.targets.items()
            }
            rebuilt.append((group, dict(state.records)))
        return rebuilt


def _classic(metadata: "_ClassicMemberMetadata | None") -> ClassicMetadata | None:
    if metadata is None:
        return None
    return ClassicMetadata(
        int(metadata.session_timeout_ms),
        tuple((protocol.name, bytes(protocol.metadata)) for protocol in metadata.supported_protocols),
    )
