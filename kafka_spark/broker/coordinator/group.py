"""The group coordinator: Kafka's classic consumer-group protocol as an explicit state machine.

    Empty ──join──▶ PreparingRebalance ──all rejoined / rebalance timeout──▶ CompletingRebalance
      ▲                 ▲        │ (no member left)                               │ leader's SyncGroup
      └─────────────────┼────────┘                                                ▼
                        └───────── join, leave, session expiry ◀─────────────── Stable

Dead is terminal (a deleted group). ``LEGAL_TRANSITIONS`` is the table every state change is
checked against; an illegal change is a coordinator bug and raises.

How requests are held: a JoinGroup is answered with a future, resolved when the rebalance
completes (every known member rejoined, or the rebalance timeout removed the others); a
follower's SyncGroup is a future resolved by the leader's SyncGroup. The API handlers await them
as coroutines, which mutes only the member's own connection (shared/reference §5 pitfall 12).
Session timers (``loop.call_later``) run per member, reset by JoinGroup, SyncGroup and Heartbeat;
a member whose JoinGroup or SyncGroup is parked is kept alive, as Kafka does.

Static membership (KIP-345): a member that joins with a ``group.instance.id`` is known by it. When
it comes back (a restart within its session timeout) with the same instance id and an unknown
member id, it replaces its old self without a rebalance: a new member id, the old one's
assignment and place (leader included), the old member id fenced (82 FENCED_INSTANCE_ID for its
requests). Only a change of its subscription rebalances the group. A static member that stops
is removed when its session expires (or by a LeaveGroup naming its instance id).

Committed offsets live in :class:`GroupOffsetStore`, records of ``__consumer_offsets``. This broker
coordinates the groups of the partitions of that topic it leads (a single node, a cluster of one,
leads them all): ``partition_moved`` loads a partition's offsets when it becomes the leader and
forgets its groups when it stops (members get NOT_COORDINATOR and join the new coordinator); other
groups are answered NOT_COORDINATOR. Every write waits, before its answer, for the fsync where the
topic flushes on acks=all and for the partition's in-sync replicas (at once for a leader alone).

Thread-safety: none; everything runs on the broker's event loop (other threads go through
``loop.call_soon_threadsafe`` / ``run_coroutine_threadsafe``).
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import struct
import time
import uuid
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.coordinator.consumer_group import (
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_SESSION_TIMEOUT_MS,
    ConsumerGroups,
)
from kafka_spark.broker.coordinator.context import (
    Durability,
    NotReplicatedError,
    OwnedPartitions,
    Replication,
    durable,
    settled,
)
from kafka_spark.broker.coordinator.group_offsets import CommittedOffset, GroupOffsetStore
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kafka_spark.broker.notifier import DataNotifier
    from kafka_spark.broker.storage.log import Log
    from kafka_spark.broker.storage.log_manager import LogManager

logger = logging.getLogger("kafka_spark.broker.coordinator.group")

#: Kafka's group.initial.rebalance.delay.ms is 3000; a laptop broker and its tests want it short.
DEFAULT_INITIAL_REBALANCE_DELAY_MS = 100
#: Kafka's offset.metadata.max.bytes.
MAX_METADATA_BYTES = 4096
#: The ConsumerProtocol assignment with no partitions (version 0, no topics, null user data):
#: what a member missing from the leader's assignment gets (some clients cannot decode b"").
EMPTY_CONSUMER_ASSIGNMENT = b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"


class GroupState(enum.Enum):
    """Kafka's names, as DescribeGroups and ListGroups report them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


#: state -> states it may move to (Kafka's ClassicGroupState valid previous states, inverted).
LEGAL_TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE, GroupState.DEAD}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.COMPLETING_REBALANCE, GroupState.EMPTY, GroupState.DEAD}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.DEAD}),
    GroupState.STABLE: frozenset({GroupState.PREPARING_REBALANCE, GroupState.DEAD}),
    GroupState.DEAD: frozenset(),
}


class IllegalGroupTransition(RuntimeError):
    """A state change outside LEGAL_TRANSITIONS: a coordinator bug, never a client's fault."""


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: asyncio.Future[dict[str, Any]] | None = None
    sync_future: asyncio.Future[dict[str, Any]] | None = None
    session_timer: asyncio.TimerHandle | None = None

    def metadata(self, protocol: str | None) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # join order: first = default leader
    rebalance_timer: asyncio.TimerHandle | None = None
    initial_delay_deadline: float | None = None  # loop time; set while the first join is delayed

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [set(member.protocol_names) for member in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def rebalance_timeout_ms(self) -> int:
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)


class GroupCoordinator:
    """Every consumer group this broker coordinates, plus their committed offsets (see the module
    docstring)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        logs: LogManager,
        replication: Replication,
        durability: Durability,
        notifier: DataNotifier,
        *,
        initial_rebalance_delay_ms: int = DEFAULT_INITIAL_REBALANCE_DELAY_MS,
        min_session_timeout_ms: int = 6_000,
        max_session_timeout_ms: int = 1_800_000,
        consumer_session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        consumer_heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
    ) -> None:
        self._loop = loop
        self._replication = replication
        self._durability = durability
        self._notifier = notifier
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        # The partitions of __consumer_offsets this broker leads: their groups are its own.
        self._owned = OwnedPartitions(OFFSETS_TOPIC, replication)
        self.offsets = GroupOffsetStore(logs, partitions=self._owned.partitions)
        self._groups: dict[str, Group] = {}
        # Groups of KIP-848's consumer protocol (ConsumerGroupHeartbeat); the same id space.
        self.consumer = ConsumerGroups(
            self._loop,
            self._topic_ids,
            self._classic_members,
            session_timeout_ms=consumer_session_timeout_ms,
            heartbeat_interval_ms=consumer_heartbeat_interval_ms,
        )

    def _topic_ids(self) -> dict[str, tuple[uuid.UUID, int]]:
        return {name: (info.topic_id, info.partitions) for name, info in self._replication.topics().items()}

    def _classic_members(self, group_id: str) -> str | None:
        group = self._groups.get(group_id)
        if group is None or not group.members:
            return None
        return (
            f"group {group_id} has members of the classic protocol; a consumer with group.protocol=consumer "
            "can join it once they have left"
        )

    # -- the partitions of __consumer_offsets this broker leads ---------------------------------------

    def owner_error(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates ``group_id``; NOT_COORDINATOR when another broker
        leads the group's partition of ``__consumer_offsets`` (clients find it again)."""
        return self._owned.owner_error(group_id)

    def partition_moved(self, partition: int, leader_epoch: int | None) -> None:
        """This broker leads ``partition`` of ``__consumer_offsets`` (load its groups' offsets and
        staged transactional offsets), or no longer does (None: forget its groups; their members
        get NOT_COORDINATOR and join again at the new coordinator)."""
        if leader_epoch is not None:
            if partition not in self._owned.epochs:
                applied = self.offsets.load_partition(partition)
                logger.info("%s-%d: loaded %d offset record(s)", OFFSETS_TOPIC, partition, applied)
            self._owned.epochs[partition] = leader_epoch
            return
        if self._owned.epochs.pop(partition, None) is None:
            return
        self.offsets.unload_partition(partition)
        self.consumer.forget(self._owned.keys_of(partition, self.consumer.group_ids()))
        for group_id in self._owned.keys_of(partition, list(self._groups)):
            group = self._groups.pop(group_id)
            _cancel(group.rebalance_timer)
            for member in group.members.values():
                _cancel(member.session_timer)
                _resolve(member.join_future, _join_error(ErrorCode.not_coordinator, member.member_id))
                _resolve(member.sync_future, _sync_response(ErrorCode.not_coordinator))

    def stage_txn_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, offsets: Mapping[TopicPartition, CommittedOffset]
    ) -> Awaitable[None] | None:
        """TxnOffsetCommit: stage a transaction's offsets in the group's partition (applied when
        the transaction's COMMIT marker arrives there); returns the durability wait."""
        return self._durable(self.offsets.stage(group_id, producer_id, producer_epoch, offsets))

    def txn_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was written to ``partition`` of ``__consumer_offsets``."""
        if partition in self._owned.epochs:
            self.offsets.complete(partition, producer_id, commit)

    # -- lookups -----------------------------------------------------------------------------------

    def group(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def group_ids(self) -> list[str]:
        """Groups with members or committed offsets (what ListGroups reports), of either protocol."""
        return sorted(set(self._groups) | set(self.offsets.groups()) | set(self.consumer.group_ids()))

    def group_type(self, group_id: str) -> str:
        """``consumer`` for a group of KIP-848's protocol (unless classic members hold the id),
        else ``classic`` (ListGroups v5's group type)."""
        if self.consumer.group(group_id) is not None and self._classic_members(group_id) is None:
            return "consumer"
        return "classic"

    def state_of(self, group_id: str) -> GroupState:
        group = self._groups.get(group_id)
        if group is not None:
            return group.state
        return GroupState.EMPTY if group_id in self.offsets.groups() else GroupState.DEAD

    # -- JoinGroup -------------------------------------------------------------------------------

    def join(
        self,
        group_id: str,
        member_id: str,
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        group_instance_id: str | None = None,
    ) -> dict[str, Any] | asyncio.Future[dict[str, Any]]:
        """A JoinGroup: a response dict now (errors, or a member rejoining unchanged), else a
        future resolved when the rebalance completes. Response keys are JoinGroupResponse's."""
        if not group_id:
            return _join_error(ErrorCode.invalid_group_id, member_id)
        if self.owner_error(group_id):
            return _join_error(ErrorCode.not_coordinator, member_id)
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            logger.warning(
                "group %s: JoinGroup with session.timeout.ms=%d refused: the broker allows %d to %d "
                "(group.min.session.timeout.ms, group.max.session.timeout.ms)",
                group_id,
                session_timeout_ms,
                self.min_session_timeout_ms,
                self.max_session_timeout_ms,
            )
            return _join_error(ErrorCode.invalid_session_timeout, member_id)
        if not protocol_type or not protocols:
            return _join_error(ErrorCode.inconsistent_group_protocol, member_id)
        if self.consumer.has_members(group_id):  # members of the consumer protocol hold the id
            return _join_error(ErrorCode.inconsistent_group_protocol, member_id)
        group = self._groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            group = self._groups[group_id] = Group(group_id)
        if group.members:
            if protocol_type != group.protocol_type or not (
                group.candidate_protocols() & {name for name, _ in protocols}
            ):
                return _join_error(ErrorCode.inconsistent_group_protocol, member_id)
        if rebalance_timeout_ms <= 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 has no rebalance timeout
        static = self._static_member(group, group_instance_id) if group_instance_id is not None else None
        if static is not None:
            if member_id and member_id != static.member_id:
                return _join_error(ErrorCode.fenced_instance_id, member_id)
            if not member_id:
                return self._replace_static_member(
                    group, static, client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocols
                )
        if member_id and member_id not in group.members:
            return _join_error(ErrorCode.unknown_member_id, member_id)

        if not member_id:
            member_id = f"{group_instance_id or client_id or 'member'}-{uuid.uuid4()}"
            member = Member(
                member_id,
                group_instance_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                list(protocols),
            )
            group.members[member_id] = member
            group.protocol_type = protocol_type
            logger.info("group %s: member %s joins", group_id, member_id)
        else:
            member = group.members[member_id]
            unchanged = member.protocols == list(protocols)
            member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
            member.protocols = list(protocols)
            member.client_id, member.client_host = client_id, client_host
            if unchanged and (
                group.state is GroupState.COMPLETING_REBALANCE
                or (group.state is GroupState.STABLE and member_id != group.leader_id)
            ):
                # A member resending its join (lost response, or a follower that only wants to
                # sync again): answer with the current generation instead of rebalancing everyone.
                self._reset_session(group, member)
                return self._join_response(group, member)

        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(_join_error(ErrorCode.rebalance_in_progress, member_id))
        member.join_future = future
        if group.state is GroupState.PREPARING_REBALANCE:
            if group.initial_delay_deadline is not None:
                self._extend_initial_delay(group)
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member_id} joined")
        return future

    def _replace_static_member(
        self,
        group: Group,
        old: Member,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocols: list[tuple[str, bytes]],
    ) -> dict[str, Any] | asyncio.Future[dict[str, Any]]:
        """A static member back under a new member id: it takes the old one's place; the group
        rebalances only when its subscription changed (or a rebalance is under way anyway)."""
        old_id, new_id = old.member_id, f"{old.group_instance_id}-{uuid.uuid4()}"
        _resolve(old.join_future, _join_error(ErrorCode.fenced_instance_id, old_id))
        _resolve(old.sync_future, _sync_response(ErrorCode.fenced_instance_id))
        old.join_future = old.sync_future = None
        group.members = {
            (new_id if member_id == old_id else member_id): member for member_id, member in group.members.items()
        }
        if group.leader_id == old_id:
            group.leader_id = new_id
        unchanged = old.protocols == list(protocols)
        old.member_id, old.client_id, old.client_host = new_id, client_id, client_host
        old.session_timeout_ms, old.rebalance_timeout_ms, old.protocols = (
            session_timeout_ms,
            rebalance_timeout_ms,
            list(protocols),
        )
        logger.info(
            "group %s: static member %s is back as %s (was %s)", group.group_id, old.group_instance_id, new_id, old_id
        )
        if unchanged and group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._reset_session(group, old)
            response = self._join_response(group, old)
            response["skip_assignment"] = group.state is GroupState.STABLE and new_id == group.leader_id
            return response
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        old.join_future = future
        if group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"static member {old.group_instance_id} rejoined with a new subscription")
        return future

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        """Move to PreparingRebalance: pending SyncGroups get 27 and members learn to rejoin from
        their heartbeats (27); the join completes when all rejoined or the timeout expires."""
        initial = group.state is GroupState.EMPTY
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                _resolve(member.sync_future, _sync_response(ErrorCode.rebalance_in_progress))
                member.sync_future = None
        self._transition(group, GroupState.PREPARING_REBALANCE)
        logger.info("group %s: preparing rebalance (generation %d): %s", group.group_id, group.generation_id, reason)
        _cancel(group.rebalance_timer)
        if initial and self.initial_rebalance_delay_ms > 0:
            # Kafka's InitialDelayedJoin: let a fleet of consumers starting together land in one
            # generation instead of rebalancing once per arrival.
            group.initial_delay_deadline = self._loop.time() + group.rebalance_timeout_ms() / 1000
            group.rebalance_timer = self._loop.call_later(
                self.initial_rebalance_delay_ms / 1000, self._on_initial_delay, group
            )
            return
        group.rebalance_timer = self._loop.call_later(
            group.rebalance_timeout_ms() / 1000, self._on_rebalance_timeout, group, group.generation_id
        )
        self._try_complete_join(group)

    def _extend_initial_delay(self, group: Group) -> None:
        assert group.initial_delay_deadline is not None
        _cancel(group.rebalance_timer)
        delay = min(self.initial_rebalance_delay_ms / 1000, max(0.0, group.initial_delay_deadline - self._loop.time()))
        group.rebalance_timer = self._loop.call_later(delay, self._on_initial_delay, group)

    def _on_initial_delay(self, group: Group) -> None:
        group.initial_delay_deadline = None
        group.rebalance_timer = self._loop.call_later(
            group.rebalance_timeout_ms() / 1000, self._on_rebalance_timeout, group, group.generation_id
        )
        self._try_complete_join(group)

    def _on_rebalance_timeout(self, group: Group, generation_id: int) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE or group.generation_id != generation_id:
            return
        for member in [m for m in group.members.values() if m.join_future is None]:
            logger.info(
                "group %s: member %s did not rejoin within the rebalance timeout", group.group_id, member.member_id
            )
            self._remove_member(group, member)
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.initial_delay_deadline is None
            and all(member.join_future is not None for member in group.members.values())
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        _cancel(group.rebalance_timer)
        group.rebalance_timer = None
        group.initial_delay_deadline = None
        group.generation_id += 1
        if not group.members:
            group.protocol_name = group.leader_id = None
            self._transition(group, GroupState.EMPTY)
            logger.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            return
        group.protocol_name = self._select_protocol(group)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        for member in group.members.values():
            member.assignment = b""
        self._transition(group, GroupState.COMPLETING_REBALANCE)
        logger.info(
            "group %s: generation %d with %d member(s), protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for member in group.members.values():
            future, member.join_future = member.join_future, None
            self._reset_session(group, member)
            _resolve(future, self._join_response(group, member))
        # A leader that never sends its SyncGroup must not wedge the group.
        group.rebalance_timer = self._loop.call_later(
            group.rebalance_timeout_ms() / 1000, self._on_sync_timeout, group, group.generation_id
        )

    def _on_sync_timeout(self, group: Group, generation_id: int) -> None:
        if group.state is not GroupState.COMPLETING_REBALANCE or group.generation_id != generation_id:
            return
        for member in [m for m in group.members.values() if m.sync_future is None]:
            self._remove_member(group, member)
        self._prepare_rebalance(group, "the leader's SyncGroup did not arrive within the rebalance timeout")

    @staticmethod
    def _select_protocol(group: Group) -> str:
        """Kafka's vote: each member votes for its most preferred candidate; most votes wins
        (ties: the first member's preference order)."""
        candidates = group.candidate_protocols()
        votes: dict[str, int] = {}
        for member in group.members.values():
            choice = next(name for name in member.protocol_names if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        first = next(iter(group.members.values())).protocol_names
        return max(votes, key=lambda name: (votes[name], -first.index(name)))

    def _join_response(self, group: Group, member: Member) -> dict[str, Any]:
        # skip_assignment (v9) stays false: a leader computes the assignment of a new generation.
        members = []
        if member.member_id == group.leader_id:
            members = [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata(group.protocol_name),
                }
                for m in group.members.values()
            ]
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "generation_id": group.generation_id,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": group.leader_id,
            "member_id": member.member_id,
            "members": members,
        }

    # -- SyncGroup --------------------------------------------------------------------------------

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: Mapping[str, bytes],
        group_instance_id: str | None = None,
    ) -> dict[str, Any] | asyncio.Future[dict[str, Any]]:
        """A SyncGroup: the member's assignment now, or (a follower before the leader's sync) a
        future resolved by the leader's SyncGroup."""
        if self.owner_error(group_id):
            return _sync_response(ErrorCode.not_coordinator)
        group, member, error = self._member(group_id, member_id, generation_id, group_instance_id)
        if error is not ErrorCode.none:
            return _sync_response(error)
        assert group is not None and member is not None
        if group.state is GroupState.PREPARING_REBALANCE:
            return _sync_response(ErrorCode.rebalance_in_progress)
        self._reset_session(group, member)
        if group.state is GroupState.STABLE:
            return _sync_response(ErrorCode.none, member.assignment)
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        _resolve(member.sync_future, _sync_response(ErrorCode.rebalance_in_progress))
        member.sync_future = future
        if member_id == group.leader_id:
            empty = EMPTY_CONSUMER_ASSIGNMENT if group.protocol_type == "consumer" else b""
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id) or empty
            _cancel(group.rebalance_timer)
            group.rebalance_timer = None
            self._transition(group, GroupState.STABLE)
            for other in group.members.values():
                pending, other.sync_future = other.sync_future, None
                _resolve(pending, _sync_response(ErrorCode.none, other.assignment))
        return future

    # -- Heartbeat / LeaveGroup ------------------------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> ErrorCode:
        if self.owner_error(group_id):
            return ErrorCode.not_coordinator
        group, member, error = self._member(group_id, member_id, generation_id, group_instance_id)
        if error is not ErrorCode.none:
            return error
        assert group is not None and member is not None
        self._reset_session(group, member)
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group_id: str, member_id: str, group_instance_id: str | None = None) -> ErrorCode:
        """One member leaves (LeaveGroup). From v3 a static member may be named by its
        ``group_instance_id`` alone; naming both, they must belong together (82 FENCED_INSTANCE_ID
        otherwise, as Kafka answers an instance id now held by a newer member)."""
        if self.owner_error(group_id):
            return ErrorCode.not_coordinator
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        member = group.members.get(member_id) if member_id else None
        if group_instance_id is not None:
            static = self._static_member(group, group_instance_id)
            if static is None:
                return ErrorCode.unknown_member_id
            if member_id and static.member_id != member_id:
                return ErrorCode.fenced_instance_id
            member = static
        if member is None:
            return ErrorCode.unknown_member_id
        logger.info("group %s: member %s leaves", group_id, member.member_id)
        self._remove_member(group, member)
        self._after_departure(group, f"member {member.member_id} left")
        return ErrorCode.none

    @staticmethod
    def _static_member(group: Group, group_instance_id: str) -> Member | None:
        return next((m for m in group.members.values() if m.group_instance_id == group_instance_id), None)

    def _member(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None = None
    ) -> tuple[Group | None, Member | None, ErrorCode]:
        """The checks SyncGroup and Heartbeat share (Kafka's order: instance id, member, then
        generation)."""
        group = self._groups.get(group_id)
        if group is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            return group, None, ErrorCode.unknown_member_id
        if group_instance_id is not None:
            static = self._static_member(group, group_instance_id)
            if static is not None and static.member_id != member_id:
                return group, None, ErrorCode.fenced_instance_id
        member = group.members.get(member_id)
        if member is None:
            return group, None, ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return group, member, ErrorCode.illegal_generation
        return group, member, ErrorCode.none

    # -- sessions ------------------------------------------------------------------------------------

    def _reset_session(self, group: Group, member: Member) -> None:
        _cancel(member.session_timer)
        member.session_timer = self._loop.call_later(
            member.session_timeout_ms / 1000, self._on_session_expired, group, member
        )

    def _on_session_expired(self, group: Group, member: Member) -> None:
        if group.members.get(member.member_id) is not member:
            return
        if _pending(member.join_future) or _pending(member.sync_future):
            self._reset_session(group, member)  # parked in a join/sync: alive by definition
            return
        logger.info(
            "group %s: member %s expired after %d ms without a heartbeat",
            group.group_id,
            member.member_id,
            member.session_timeout_ms,
        )
        self._remove_member(group, member)
        self._after_departure(group, f"member {member.member_id}'s session expired")

    def _remove_member(self, group: Group, member: Member) -> None:
        _cancel(member.session_timer)
        group.members.pop(member.member_id, None)
        _resolve(member.join_future, _join_error(ErrorCode.unknown_member_id, member.member_id))
        _resolve(member.sync_future, _sync_response(ErrorCode.unknown_member_id))
        member.join_future = member.sync_future = None

    def _after_departure(self, group: Group, reason: str) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
            if not group.members and group.state is GroupState.PREPARING_REBALANCE:
                self._complete_join(group)  # nobody left to wait for, even during the initial delay

    def _transition(self, group: Group, state: GroupState) -> None:
        if state not in LEGAL_TRANSITIONS[group.state]:
            raise IllegalGroupTransition(
                f"group {group.group_id}: {group.state.value} -> {state.value} is not a legal transition"
            )
        group.state = state

    # -- offsets -------------------------------------------------------------------------------------

    def validate_offset_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        transactional: bool = False,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        """Kafka 2.x's rules: generation -1 with no member id only for Empty (or unknown) groups,
        which standalone consumers and admin tools use; otherwise a current member of the current
        generation; never while CompletingRebalance (the assignment is not known yet), except for a
        transactional commit (KIP-447), which only proves the member's generation."""
        if not group_id:
            return ErrorCode.invalid_group_id
        owner = self.owner_error(group_id)
        if owner:
            return owner
        consumer = self.consumer.validate_offsets(group_id, member_id, generation_id)
        if consumer is not None:  # a group of the consumer protocol: its member and epoch
            if consumer is ErrorCode.none:
                self.consumer.touch(group_id, member_id)
            return consumer
        group = self._groups.get(group_id)
        standalone = generation_id < 0 and not member_id
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.none if standalone else ErrorCode.illegal_generation
        if standalone and group.state is GroupState.EMPTY:
            return ErrorCode.none
        if group_instance_id is not None:
            static = self._static_member(group, group_instance_id)
            if static is not None and static.member_id != member_id:
                return ErrorCode.fenced_instance_id
        if group.state is GroupState.COMPLETING_REBALANCE and not transactional:
            return ErrorCode.rebalance_in_progress
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        self._reset_session(group, member)  # Kafka counts a commit as a sign of life too
        return ErrorCode.none

    def store_offsets(self, group_id: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> Awaitable[None] | None:
        """Persist ``offsets`` (already validated); returns the fsync wait, or None when nothing
        was written. Raises StorageError when the append fails."""
        return self._durable(self.offsets.commit(group_id, offsets))

    def _durable(self, written: tuple[Log, int] | None) -> Awaitable[None] | None:
        """What a response waits for after ``written``: the fsync when the topic flushes on
        acks=all, and the in-sync replicas (None: nothing). Raises StorageError, or
        NotReplicatedError (answered NOT_COORDINATOR) when the replicas did not all get it."""
        if written is None:
            return None
        log, end_offset = written
        self._notifier.notify()  # the followers' fetches parked here take the records now
        return settled(durable({log: end_offset}, self._replication, self._durability))

    def partition_error(self, topic_partition: TopicPartition, metadata: str | None) -> ErrorCode:
        """Per-partition check of a commit: the partition exists (in the metadata: the coordinator
        may host no replica of it), the metadata fits."""
        info = self._replication.topics().get(topic_partition.topic)
        if info is None or not 0 <= topic_partition.partition < info.partitions:
            return ErrorCode.unknown_topic_or_partition
        if metadata is not None and len(metadata.encode("utf-8")) > MAX_METADATA_BYTES:
            return ErrorCode.offset_metadata_too_large
        return ErrorCode.none

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, tuple[int, str | None, int]]) -> None:
        """Materialize offsets of a committed transaction (TxnOffsetCommit + EndTxn commit).

        Stable API for the transaction coordinator: no generation or member checks (the
        transaction was validated when its offsets were staged); partitions that no longer exist
        are skipped. Written at once (visible to OffsetFetch on return); the fsync of
        ``__consumer_offsets`` is started here and completes in the background (a failure is
        logged). Raises StorageError when the append fails.
        """
        now = int(time.time() * 1000)
        committed = {
            tp: CommittedOffset(offset, leader_epoch, metadata or "", now)
            for tp, (offset, metadata, leader_epoch) in offsets.items()
            if self.partition_error(tp, None) is ErrorCode.none
        }
        durable = self.store_offsets(group_id, committed)
        if durable is not None:
            asyncio.ensure_future(durable).add_done_callback(_log_fsync_failure)

    def committed(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        return self.offsets.fetch(group_id)

    def delete_group(self, group_id: str) -> tuple[ErrorCode, Awaitable[None] | None]:
        """Delete an Empty group and tombstone its offsets (DeleteGroups semantics); returns the
        error and the fsync wait of the tombstones (None when nothing was written or no fsync is
        due). Raises StorageError when the tombstones cannot be appended; the group stays then."""
        if self.owner_error(group_id):
            return ErrorCode.not_coordinator, None
        group = self._groups.get(group_id)
        if (group is not None and group.members) or self.consumer.has_members(group_id):
            return ErrorCode.non_empty_group, None
        if group is None and self.consumer.group(group_id) is None and group_id not in self.offsets.groups():
            return ErrorCode.group_id_not_found, None
        self.consumer.delete(group_id)
        written = self.offsets.delete(group_id)
        if group is not None:
            self._transition(group, GroupState.DEAD)
            del self._groups[group_id]
        return ErrorCode.none, self._durable(written)

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode], Awaitable[None] | None]:
        """OffsetDelete: tombstone the group's offsets of ``partitions``. Kafka's rules: the group
        must exist (GROUP_ID_NOT_FOUND); a partition of a topic that a current member subscribes
        to is refused (GROUP_SUBSCRIBED_TO_TOPIC), a partition that does not exist is
        UNKNOWN_TOPIC_OR_PARTITION; the rest go, committed or not. Returns the group error, the
        error of each partition and the fsync wait of the tombstones."""
        if self.owner_error(group_id):
            return ErrorCode.not_coordinator, {}, None
        group = self._groups.get(group_id)
        if (group is None or not group.members) and group_id not in self.offsets.groups():
            if not self.consumer.has_members(group_id):
                return ErrorCode.group_id_not_found, {}, None
        subscribed = (_subscribed_topics(group) if group is not None else set()) | self.consumer.subscribed_topics(
            group_id
        )
        errors: dict[TopicPartition, ErrorCode] = {}
        for tp in partitions:
            if tp.topic in subscribed:
                errors[tp] = ErrorCode.group_subscribed_to_topic
            else:
                errors[tp] = self.partition_error(tp, None)
        written = self.offsets.delete(group_id, [tp for tp, code in errors.items() if code is ErrorCode.none])
        return ErrorCode.none, errors, self._durable(written)

    def forget_topic(self, topic: str) -> None:
        """A topic was deleted: its committed offsets go too (tombstoned). Every broker is told,
        and writes the tombstones of the groups it coordinates; they are fsynced (where the
        offsets topic flushes on acks=all) and replicated as commits are, so a crash cannot bring
        a deleted topic's offsets back. Nobody waits: the deletion is answered at once, as Kafka
        answers it."""
        for written in self.offsets.delete_topic(topic):
            stored = self._durable(written)
            if stored is not None:
                asyncio.ensure_future(stored).add_done_callback(functools.partial(_report_unstored_tombstones, topic))

    def close(self) -> None:
        self.consumer.close()
        for group in self._groups.values():
            _cancel(group.rebalance_timer)
            for member in group.members.values():
                _cancel(member.session_timer)


# -- helpers -------------------------------------------------------------------------------------


def _report_unstored_tombstones(topic: str, stored: asyncio.Future[None]) -> None:
    if not stored.cancelled() and stored.exception() is not None:
        logger.error("the offset tombstones of deleted topic %s were not fsynced: %s", topic, stored.exception())


def write_error_code(error: StorageError) -> ErrorCode:
    """What a client is told when a group write failed: NOT_COORDINATOR (find the coordinator
    again) when the coordinator lost its partition, else KAFKA_STORAGE_ERROR."""
    return ErrorCode.not_coordinator if isinstance(error, NotReplicatedError) else ErrorCode.kafka_storage_error


def _join_error(code: ErrorCode, member_id: str) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": "",
        "leader": "",
        "member_id": member_id,
        "members": [],
    }


def _sync_response(code: ErrorCode, assignment: bytes = b"") -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "assignment": assignment}


def _resolve(future: asyncio.Future[dict[str, Any]] | None, response: dict[str, Any]) -> None:
    # A parked request whose connection closed has a cancelled future: nobody to answer.
    if future is not None and not future.done():
        future.set_result(response)


def _pending(future: asyncio.Future[Any] | None) -> bool:
    return future is not None and not future.done()


def _log_fsync_failure(done: asyncio.Future[None]) -> None:
    if not done.cancelled() and done.exception() is not None:
        logger.error("fsync of transactional offsets in __consumer_offsets failed: %s", done.exception())


def _subscribed_topics(group: Group) -> set[str]:
    """Topics the members of a "consumer" group subscribe to, from their subscription metadata
    (ConsumerProtocolSubscription: int16 version, then an array of topic names)."""
    if group.protocol_type != "consumer":
        return set()
    topics: set[str] = set()
    for member in group.members.values():
        for _, metadata in member.protocols:
            try:
                (count,) = struct.unpack_from(">i", metadata, 2)
                position = 6
                for _ in range(max(count, 0)):
                    (length,) = struct.unpack_from(">h", metadata, position)
                    topics.add(bytes(metadata[position + 2 : position + 2 + length]).decode("utf-8"))
                    position += 2 + length
            except (struct.error, UnicodeDecodeError):
                continue  # not a consumer subscription we can read: it protects nothing
    return topics


def _cancel(timer: asyncio.TimerHandle | None) -> None:
    if timer is not None:
        timer.cancel()
