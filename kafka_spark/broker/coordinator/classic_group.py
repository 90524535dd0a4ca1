"""Kafka's classic consumer-group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as an
explicit state machine, one per group.

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
Session timers (membership.py, shared with the consumer protocol) run per member, reset by
JoinGroup, SyncGroup, Heartbeat and offset commits; a member whose JoinGroup or SyncGroup is
parked is kept alive, as Kafka does. Every member of a new generation owes a SyncGroup within the
rebalance timeout (Kafka's pending sync): one that has not sent it by then is removed and the group
rebalances, whether the leader's SyncGroup made the group Stable meanwhile or not.

A dynamic member's first JoinGroup (v4+, no member id) is answered 79 MEMBER_ID_REQUIRED with the
id it is to join with, as Kafka answers it; until it joins with that id (or its session timeout
passes) it is pending, and a rebalance waits for it as for a member.

Static membership (KIP-345): a member that joins with a ``group.instance.id`` is known by it. When
it comes back (a restart within its session timeout) with the same instance id and an unknown
member id, it replaces its old self: a new member id, the old one's assignment and place (leader
included), the old member id fenced (82 FENCED_INSTANCE_ID for its requests). In a Stable group
that is all, unless the protocol the group would choose changes; in CompletingRebalance the group
rebalances (the leader may have assigned the old id). A static member that does not rejoin a
rebalance stays a member (its session decides), and one that stops is removed when its session
expires (or by a LeaveGroup naming its instance id).

Who is answered first: when a request completes a rebalance (the last JoinGroup, the leader's
SyncGroup), the leader is answered first, then the others, as Kafka's coordinator answers: a
leader's own request is answered at once, a follower's after the leader's.

Membership is kept in ``__consumer_offsets`` (classic_group_log.py, Kafka's GroupMetadata record):
``changed(group_id)`` is called when a group becomes Stable (the leader's SyncGroup) or Empty,
replaces a static member in a Stable group, is deleted or converts from a consumer group, and the
group coordinator writes the record if what it holds changed; :meth:`ClassicGroups.load` takes
back a group replayed when the coordinator loads the partition (Stable with its members, their
sessions starting over, or Empty with its generation).

The group coordinator (group.py) owns these groups beside those of the consumer protocol
(consumer_group.py): it checks that this broker coordinates a group before anything here runs,
and keeps their committed offsets. Group ids are shared: the coordinator sends the requests of a
group id whose members are in a consumer group to it (a classic member of a consumer group), and
moves a group between the protocols (migration.py): :meth:`ClassicGroups.release` hands a group
over to the consumer protocol, :meth:`ClassicGroups.adopt` takes one back.

Thread-safety: none; everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.coordinator.classic_state import (
    DEFAULT_INITIAL_REBALANCE_DELAY_MS,
    EMPTY_CONSUMER_ASSIGNMENT,
    Group,
    GroupState,
    Member,
    select_protocol,
    subscribed_topics,
)
from kafka_spark.broker.coordinator.membership import Groups, Sessions, cancel, static_member

logger = logging.getLogger("kafka_spark.broker.coordinator.group")


class ClassicGroups(Groups[Group]):
    """The classic groups of one coordinator; see the module docstring."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        initial_rebalance_delay_ms: int = DEFAULT_INITIAL_REBALANCE_DELAY_MS,
        min_session_timeout_ms: int = 6_000,
        max_session_timeout_ms: int = 1_800_000,
        changed: Callable[[str], None] | None = None,
    ) -> None:
        """``changed(group id)``: a group became Stable or Empty, replaced a static member or
        is gone (the coordinator writes its record, classic_group_log.py)."""
        super().__init__()
        self._loop = loop
        self._changed = changed or (lambda group_id: None)
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self._sessions: Sessions[Group, Member] = Sessions(loop, self._on_session_expired)

    # -- lookups -----------------------------------------------------------------------------------

    @staticmethod
    def join_error(code: ErrorCode, member_id: str) -> dict[str, Any]:
        return _join_error(code, member_id)

    @staticmethod
    def sync_error(code: ErrorCode) -> dict[str, Any]:
        return _sync_response(code)

    def join_refusal(self, group_id: str, member_id: str, session_timeout_ms: int) -> dict[str, Any] | None:
        """The answer to a JoinGroup refused before any group sees it, whatever its protocol (an
        empty group id, a session timeout out of the broker's bounds); None when it goes on."""
        if not group_id:
            return _join_error(ErrorCode.invalid_group_id, member_id)
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
        return None

    def subscribed_topics(self, group_id: str) -> set[str]:
        """Topics the members of a "consumer" group subscribe to (OffsetDelete refuses their partitions)."""
        group = self._groups.get(group_id)
        return subscribed_topics(group) if group is not None else set()

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
        require_member_id: bool = False,
        skip_assignment: bool = True,
    ) -> dict[str, Any] | asyncio.Future[dict[str, Any]]:
        """A JoinGroup: a response dict now (errors, a member rejoining unchanged, the leader whose
        join completed the rebalance), else a future resolved when the rebalance completes.
        Response keys are JoinGroupResponse's. ``require_member_id``: the request is v4+ (a new
        dynamic member gets MEMBER_ID_REQUIRED first); ``skip_assignment``: v9+ (a static leader
        back in a Stable group is told not to assign again)."""
        refused = self.join_refusal(group_id, member_id, session_timeout_ms)
        if refused is not None:
            return refused
        if not protocol_type or not protocols:
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
                    group,
                    static,
                    client_id,
                    client_host,
                    session_timeout_ms,
                    rebalance_timeout_ms,
                    protocols,
                    skip_assignment,
                )
        pending = member_id in group.pending_members
        if pending:
            cancel(group.pending_members.pop(member_id))
        elif member_id and member_id not in group.members:
            return _join_error(ErrorCode.unknown_member_id, member_id)
        if not member_id and group_instance_id is None and require_member_id:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            group.pending_members[member_id] = self._loop.call_later(
                session_timeout_ms / 1000, self._on_pending_member_expired, group, member_id
            )
            logger.info("group %s: new member %s is to join again with its member id", group_id, member_id)
            return _join_error(ErrorCode.member_id_required, member_id)

        if not member_id or pending:
            member_id = member_id or f"{group_instance_id or client_id or 'member'}-{uuid.uuid4()}"
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
        return self._answer(group, member, future)

    def _answer(
        self, group: Group, member: Member, future: asyncio.Future[dict[str, Any]]
    ) -> dict[str, Any] | asyncio.Future[dict[str, Any]]:
        """The leader's answer, when its own request completed the rebalance, goes out at once,
        ahead of the others' (theirs were resolved first, but wait for the next turn of the
        loop); everyone else is answered through the future, after the leader."""
        if future.done() and member.member_id == group.leader_id:
            return future.result()
        return future

    def _on_pending_member_expired(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is None:
            return
        logger.info("group %s: pending member %s did not join within its session timeout", group.group_id, member_id)
        self._try_complete_join(group)

    def _replace_static_member(
        self,
        group: Group,
        old: Member,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocols: list[tuple[str, bytes]],
        skip_assignment: bool,
    ) -> dict[str, Any] | asyncio.Future[dict[str, Any]]:
        """A static member back under a new member id: it takes the old one's place. Kafka's
        rules: in a Stable group nothing else happens unless the protocol the group would choose
        changes; in CompletingRebalance the group rebalances (the leader may have assigned the
        old id); in PreparingRebalance the member has joined the rebalance under way."""
        old_id, new_id = old.member_id, f"{old.group_instance_id}-{uuid.uuid4()}"
        _resolve(old.join_future, _join_error(ErrorCode.fenced_instance_id, old_id))
        _resolve(old.sync_future, _sync_response(ErrorCode.fenced_instance_id))
        old.join_future = old.sync_future = None
        group.members = {
            (new_id if member_id == old_id else member_id): member for member_id, member in group.members.items()
        }
        if group.leader_id == old_id:
            group.leader_id = new_id
        if old_id in group.pending_sync:  # its SyncGroup is still due, under the new id
            group.pending_sync = (group.pending_sync - {old_id}) | {new_id}
        old.member_id, old.client_id, old.client_host = new_id, client_id, client_host
        old.session_timeout_ms, old.rebalance_timeout_ms, old.protocols = (
            session_timeout_ms,
            rebalance_timeout_ms,
            list(protocols),
        )
        logger.info(
            "group %s: static member %s is back as %s (was %s)", group.group_id, old.group_instance_id, new_id, old_id
        )
        self._reset_session(group, old)
        if (
            group.state is GroupState.STABLE
            and group.candidate_protocols()
            and select_protocol(group) == (group.protocol_name)
        ):
            self._changed(group.group_id)  # the new member id in the group's record
            response = self._join_response(group, old)
            if skip_assignment:  # v9+: the leader gets the members and is told not to assign again
                response["skip_assignment"] = new_id == group.leader_id
            else:  # older versions: nobody gets the members (a leader would assign again), and
                # Kafka names the leader as it was before the replacement
                response["members"] = []
                response["leader"] = old_id if group.leader_id == new_id else group.leader_id
            return response
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        old.join_future = future
        if group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"static member {old.group_instance_id} rejoined as {new_id}")
        return self._answer(group, old, future)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        """Move to PreparingRebalance: pending SyncGroups get 27 and members learn to rejoin from
        their heartbeats (27); the join completes when all rejoined or the timeout expires."""
        initial = group.state is GroupState.EMPTY
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                _resolve(member.sync_future, _sync_response(ErrorCode.rebalance_in_progress))
                member.sync_future = None
        self._transition(group, GroupState.PREPARING_REBALANCE)
        group.pending_sync.clear()  # the next generation's members sync again
        logger.info("group %s: preparing rebalance (generation %d): %s", group.group_id, group.generation_id, reason)
        cancel(group.rebalance_timer)
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
        cancel(group.rebalance_timer)
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
        for member in [m for m in group.members.values() if m.join_future is None and m.group_instance_id is None]:
            logger.info(
                "group %s: member %s did not rejoin within the rebalance timeout", group.group_id, member.member_id
            )
            self._remove_member(group, member)
        # Static members that did not rejoin stay (their session decides). The leader must have
        # rejoined: else one that did leads; if none did, the rebalance waits another timeout.
        joined = [m for m in group.members.values() if m.join_future is not None]
        if group.members and not joined:
            logger.info("group %s: no member rejoined within the rebalance timeout; waiting again", group.group_id)
            group.rebalance_timer = self._loop.call_later(
                group.rebalance_timeout_ms() / 1000, self._on_rebalance_timeout, group, generation_id
            )
            return
        if group.leader_id not in {m.member_id for m in joined} and joined:
            group.leader_id = joined[0].member_id
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.initial_delay_deadline is None
            and not group.pending_members
            and all(member.join_future is not None for member in group.members.values())
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        cancel(group.rebalance_timer)
        group.rebalance_timer = None
        group.initial_delay_deadline = None
        group.generation_id += 1
        if not group.members:
            group.protocol_name = group.leader_id = None
            self._transition(group, GroupState.EMPTY)
            logger.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            return
        group.protocol_name = select_protocol(group)
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
        for member in _leader_first(group):
            future, member.join_future = member.join_future, None
            self._reset_session(group, member)
            _resolve(future, self._join_response(group, member))
        # Every member must send its SyncGroup within the rebalance timeout, the leader's completing the
        # rebalance or not: a leader that never sends it must not wedge the group, and a follower that
        # never asks for its assignment must not hold partitions nobody reads (Kafka's pending sync).
        group.pending_sync = set(group.members)
        group.rebalance_timer = self._loop.call_later(
            group.rebalance_timeout_ms() / 1000, self._on_sync_timeout, group, group.generation_id
        )

    def _on_sync_timeout(self, group: Group, generation_id: int) -> None:
        if (
            group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            or group.generation_id != generation_id
            or not group.pending_sync
        ):
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            self._remove_member(group, group.members[member_id])
        self._prepare_rebalance(group, f"member(s) {', '.join(missing)} sent no SyncGroup within the rebalance timeout")

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
        group, member, error = self._member(group_id, member_id, generation_id, group_instance_id)
        if error is not ErrorCode.none:
            return _sync_response(error)
        assert group is not None and member is not None
        if group.state is GroupState.PREPARING_REBALANCE:
            return _sync_response(ErrorCode.rebalance_in_progress)
        self._reset_session(group, member)
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.state is GroupState.STABLE:
            cancel(group.rebalance_timer)  # everyone has synced: the sync timeout has nothing left to do
            group.rebalance_timer = None
        if group.state is GroupState.STABLE:
            return _sync_response(ErrorCode.none, member.assignment)
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        _resolve(member.sync_future, _sync_response(ErrorCode.rebalance_in_progress))
        member.sync_future = future
        if member_id == group.leader_id:
            empty = EMPTY_CONSUMER_ASSIGNMENT if group.protocol_type == "consumer" else b""
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id) or empty
            if not group.pending_sync:
                cancel(group.rebalance_timer)
                group.rebalance_timer = None
            self._transition(group, GroupState.STABLE)
            for other in _leader_first(group):
                pending, other.sync_future = other.sync_future, None
                _resolve(pending, _sync_response(ErrorCode.none, other.assignment))
        return self._answer(group, member, future)

    # -- Heartbeat / LeaveGroup ------------------------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> ErrorCode:
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
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if member_id in group.pending_members:
            cancel(group.pending_members.pop(member_id))
            logger.info("group %s: pending member %s leaves", group_id, member_id)
            self._try_complete_join(group)
            return ErrorCode.none
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
        return static_member(group.members.values(), group_instance_id)

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
        self._sessions.reset(group, member, member.session_timeout_ms)

    def _on_session_expired(self, group: Group, member: Member) -> None:
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
        cancel(member.session_timer)
        group.members.pop(member.member_id, None)
        group.pending_sync.discard(member.member_id)
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
        group.transition(state)
        if state in (GroupState.STABLE, GroupState.EMPTY, GroupState.DEAD):
            self._changed(group.group_id)

    # -- offsets, deletion -------------------------------------------------------------------------

    def validate_offset_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        transactional: bool = False,
        group_instance_id: str | None = None,
    ) -> ErrorCode:
        """Kafka's rules: generation -1 only for Empty (or unknown) groups, which standalone
        consumers and admin tools use, whatever member id they send (a KIP-848 consumer that never
        subscribed sends the id it made itself); otherwise a current member of the current
        generation; never while CompletingRebalance (the assignment is not known yet), except for a
        transactional commit (KIP-447), which only proves the member's generation."""
        group = self._groups.get(group_id)
        standalone = generation_id < 0
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

    # -- moving to and from the consumer protocol (migration.py) ------------------------------------

    def release(self, group_id: str) -> Group | None:
        """Hand the group over to the consumer protocol (it becomes a consumer group): members
        parked in a JoinGroup or a SyncGroup are answered REBALANCE_IN_PROGRESS (they join the
        consumer group by joining again), its timers stop, and members that were only given an id
        (MEMBER_ID_REQUIRED) join the consumer group with it."""
        group = self._groups.pop(group_id, None)
        if group is None:
            return None
        _cancel_timers(group)
        for member in group.members.values():
            _resolve(member.join_future, _join_error(ErrorCode.rebalance_in_progress, member.member_id))
            _resolve(member.sync_future, _sync_response(ErrorCode.rebalance_in_progress))
            member.join_future = member.sync_future = None
        group.pending_members.clear()
        return group

    def adopt(self, group: Group, reason: str) -> None:
        """Take over a consumer group become classic (Stable, its members' assignments set): their
        sessions start, and it rebalances at once, so that they join again and a leader assigns."""
        self._groups[group.group_id] = group
        for member in group.members.values():
            self._reset_session(group, member)
        self._changed(group.group_id)  # its record, as it is before the rebalance (Kafka's)
        self._prepare_rebalance(group, reason)

    def load(self, group: Group) -> None:
        """A group replayed from ``__consumer_offsets`` (Stable with its members, or Empty): its
        members' sessions start now."""
        self._groups[group.group_id] = group
        for member in group.members.values():
            self._reset_session(group, member)

    def delete(self, group_id: str) -> None:
        """Forget a group without members (DeleteGroups): Dead."""
        group = self._groups.pop(group_id, None)
        if group is not None:
            _cancel_timers(group)
            self._transition(group, GroupState.DEAD)

    def forget(self, group_ids: Iterable[str]) -> None:
        """This broker no longer coordinates these groups: their members get NOT_COORDINATOR and
        go on at the new coordinator, which loads the groups' records."""
        for group_id in group_ids:
            group = self._groups.pop(group_id, None)
            if group is None:
                continue
            _cancel_timers(group)
            for member in group.members.values():
                _resolve(member.join_future, _join_error(ErrorCode.not_coordinator, member.member_id))
                _resolve(member.sync_future, _sync_response(ErrorCode.not_coordinator))

    def close(self) -> None:
        for group in self._groups.values():
            _cancel_timers(group)


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


def _cancel_timers(group: Group) -> None:
    cancel(group.rebalance_timer)
    for member in group.members.values():
        cancel(member.session_timer)
    for timer in group.pending_members.values():
        cancel(timer)


def _leader_first(group: Group) -> list[Member]:
    return sorted(group.members.values(), key=lambda member: member.member_id != group.leader_id)


def _pending(future: asyncio.Future[Any] | None) -> bool:
    return future is not None and not future.done()
