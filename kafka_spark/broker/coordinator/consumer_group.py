"""Consumer groups of KIP-848's protocol (``group.protocol=consumer``): ConsumerGroupHeartbeat
and ConsumerGroupDescribe, with the assignment computed by the coordinator.

A member joins with member epoch 0 and its subscription (topic names, or a regular expression),
then heartbeats with its epoch. The group has an epoch, bumped when a member joins, leaves or
changes its subscription, or when a subscribed topic appears, goes or grows; when the group epoch
passes the assignment epoch, the coordinator computes a new **target assignment** for every
member with the group's assignor (``uniform``, the default, or ``range``), and moves to it
member by member, as Kafka's ``CurrentAssignmentBuilder`` does:

* a member that owns partitions its target no longer has is told to give them up and keeps its
  epoch (``unrevoked_partitions``) until a heartbeat no longer lists them among its owned
  partitions; one that does not give them up within its rebalance timeout is removed;
* then it moves to the assignment epoch and gets the partitions of its target that no other
  member still owns (``unreleased_partitions`` while some are still owned elsewhere: they come
  with a later heartbeat, once released);
* a partition is never owned by two members at once.

Epochs fence zombies: a heartbeat, OffsetCommit or OffsetFetch with an epoch other than the
member's current one is refused (FENCED_MEMBER_EPOCH for heartbeats, STALE_MEMBER_EPOCH for
offsets), except a heartbeat with the previous epoch whose owned partitions are still the
member's (its last response was lost), and a commit with an older epoch of partitions the member
has held since that epoch (KIP-1251's assignment epochs: each partition a member holds carries
the epoch it was assigned at). A member that sends no heartbeat within the session
timeout (``group.consumer.session.timeout.ms``) is removed. Leaving is member epoch -1; a static
member (``group.instance.id``) leaving with -2 keeps its assignment until its session expires,
for the same instance to take back when it rejoins.

Group ids are shared with classic groups (group.py), and a group moves between the protocols
while it has members, as Kafka 4's does (migration.py): a member of the consumer protocol joining
a classic group with members converts it (``upgrade``), the classic members staying as members of
the **classic protocol** in the consumer group; when the last member of the consumer protocol
goes and classic members stay, the group goes back to the classic protocol (``downgrade``). An
empty group (committed offsets only) can be taken up by either protocol, keeping its offsets.

A classic member of a consumer group speaks JoinGroup, SyncGroup, Heartbeat and LeaveGroup as
Kafka answers them: its JoinGroup carries its subscription and the partitions it owns (its
ConsumerProtocolSubscription) and is reconciled at once, like a heartbeat; the answer's
generation is its member epoch, and it is no leader (nobody assigns). Its SyncGroup gets its
assignment as it stands (what it keeps while it still owns partitions moving elsewhere, then its
target), serialized as a ConsumerProtocolAssignment. Its Heartbeat is answered
REBALANCE_IN_PROGRESS when it must join again: the group epoch passed its own, it has partitions
to give up, or the partitions it waited for are free. Once told so, it must join within its
rebalance timeout, and sync within it after a join, or it is removed; its session timeout is its
own (its JoinGroup's). OffsetCommit and OffsetFetch take its generation as its epoch
(ILLEGAL_GENERATION when it is not).

Session timers and static members are shared with the classic protocol (membership.py); the
assignors are in assignors.py, Kafka's checks of a heartbeat's fields in heartbeat_checks.py.

Membership is kept in ``__consumer_offsets`` with Kafka's records (consumer_group_log.py): the
group coordinator (group.py) writes what a change altered (``changed(group_id)`` is called after
changes no request made: a session or a rebalance timeout), and :meth:`ConsumerGroups.restore`
takes back a group the coordinator replayed when it loads the partition, after a restart of the
broker or a move of the coordinator on a cluster: members keep their ids, epochs and partitions,
and their sessions (and the rebalance timeouts of members giving partitions up) start over, as
Kafka's do.

Thread-safety: none; everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.coordinator.assignors import ASSIGNORS, Assignment, range_assignment, uniform_assignment
from kafka_spark.broker.coordinator.consumer_protocol import (
    PROTOCOL_TYPE,
    MalformedProtocolError,
    assignment_for,
    decode_subscription,
)
from kafka_spark.broker.coordinator.heartbeat_checks import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    HeartbeatError,
    subscribed_regex,
    validate_heartbeat,
)
from kafka_spark.broker.coordinator.membership import Groups, Sessions, cancel, static_member

logger = logging.getLogger("kafka_spark.broker.coordinator.group")

#: Kafka's group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms defaults.
DEFAULT_SESSION_TIMEOUT_MS = 45_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000


STABLE = "stable"
UNREVOKED = "unrevoked_partitions"
UNRELEASED = "unreleased_partitions"


@dataclass(frozen=True)
class ClassicMetadata:
    """What a member of the classic protocol in a consumer group joined with (Kafka's
    ClassicMemberMetadata): its session timeout and its protocols (name, subscription), in its
    order of preference; the first one is the protocol it is answered with."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0]

    def assignment(self, assigned: Assignment) -> bytes:
        """``assigned`` as its SyncGroup answer: a ConsumerProtocolAssignment of the version of
        its subscription."""
        return assignment_for(assigned, self.protocols[0][1])


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # KIP-1251: each partition it holds (assigned or pending revocation) -> the member epoch it was
    # assigned at; a commit with an older member epoch is accepted for partitions held since then
    assignment_epochs: dict[tuple[str, int], int] = field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None
    revocation_timer: asyncio.TimerHandle | None = None
    classic: ClassicMetadata | None = None  # a member of the classic protocol (JoinGroup, SyncGroup, Heartbeat)
    join_timer: asyncio.TimerHandle | None = None  # classic: told to rejoin, it must within its rebalance timeout
    sync_timer: asyncio.TimerHandle | None = None  # classic: joined, it must sync within its rebalance timeout

    @property
    def group_instance_id(self) -> str | None:
        return self.instance_id

    def cancel_timers(self) -> None:
        for timer in (self.session_timer, self.revocation_timer, self.join_timer, self.sync_timer):
            cancel(timer)
        self.join_timer = self.sync_timer = None

    def track_assignment_epochs(self) -> None:
        """Keep an assignment epoch for every partition the member holds, and only for those: a
        partition new to it is held from its current epoch."""
        held = {
            (topic, index)
            for partitions in (self.assigned, self.pending_revocation)
            for topic, indexes in partitions.items()
            for index in indexes
        }
        self.assignment_epochs = {tp: self.assignment_epochs.get(tp, self.member_epoch) for tp in held}


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> its target assignment
    subscribed_partitions: dict[str, int] = field(default_factory=dict)  # subscribed topic -> partitions
    owners: dict[tuple[str, int], str] = field(default_factory=dict)  # partition -> member owning it
    assignor: str = ASSIGNORS[0]

    @property
    def state(self) -> str:
        """Kafka's names, as ListGroups and ConsumerGroupDescribe report them."""
        active = [member for member in self.members.values() if member.member_epoch != STATIC_LEAVE_EPOCH]
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != STABLE for m in active):
            return "Reconciling"
        return "Stable"


class ConsumerGroups(Groups[ConsumerGroup]):
    """The consumer groups of one coordinator.

    ``topics()`` gives the topics that exist (name -> (topic id, partition count));
    ``upgrade(group_id)`` is asked when a member of the consumer protocol joins a group id that
    has no consumer group with members: it gives the classic group of that id converted (None:
    there is none with members) or raises HeartbeatError (it cannot be converted);
    ``downgrade(group, leaving)`` is asked when ``leaving``, a member of the consumer protocol,
    goes: True when it takes the group over as a classic group (only classic members stay), which
    is then no longer one of these; ``changed(group_id)`` is told of a change no request made (a
    member expired or removed).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        topics: Callable[[], Mapping[str, tuple[uuid.UUID, int]]],
        upgrade: Callable[[str], ConsumerGroup | None] = lambda group_id: None,
        downgrade: Callable[[ConsumerGroup, str], bool] = lambda group, leaving: False,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
        changed: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self._loop = loop
        self._topics = topics
        self._upgrade = upgrade
        self._downgrade = downgrade
        self._changed = changed or (lambda group_id: None)
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._sessions: Sessions[ConsumerGroup, ConsumerMember] = Sessions(loop, self._on_session_expired)

    # -- lookups -----------------------------------------------------------------------------------

    def subscribed_topics(self, group_id: str) -> set[str]:
        """Topics the group's members subscribe to (OffsetDelete refuses their partitions)."""
        group = self._groups.get(group_id)
        if group is None:
            return set()
        topics = self._topics()
        return {topic for member in group.members.values() for topic in self._subscription(member, topics)}

    # -- ConsumerGroupHeartbeat --------------------------------------------------------------------

    def heartbeat(
        self, body: Any, client_id: str, client_host: str, allowed_topic: Callable[[str], bool]
    ) -> dict[str, Any]:
        """One ConsumerGroupHeartbeat; the response body (errors included)."""
        try:
            return self._heartbeat(body, client_id, client_host, allowed_topic)
        except HeartbeatError as error:
            return _heartbeat_response(error.error_code, str(error), body.member_id or None, body.member_epoch)

    def _heartbeat(
        self, body: Any, client_id: str, client_host: str, allowed_topic: Callable[[str], bool]
    ) -> dict[str, Any]:
        group_id, member_id, epoch = body.group_id, body.member_id, body.member_epoch
        validate_heartbeat(body)
        if epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group_id, member_id, body.instance_id, epoch)
        for name in body.subscribed_topic_names or ():
            if not allowed_topic(name):
                raise HeartbeatError(
                    ErrorCode.topic_authorization_failed, f"not authorized to DESCRIBE topic {name!r} it subscribes to"
                )
        if epoch == 0 and not self.has_members(group_id):
            converted = self._upgrade(group_id)  # a classic group with members becomes this consumer group
            if converted is not None:
                self.adopt(converted)
        group = self._groups.get(group_id)
        if epoch == 0:
            if group is None:
                group = self._groups[group_id] = ConsumerGroup(group_id)
            member, bump = self._join(group, body, client_id, client_host)
        else:
            known = group.members.get(member_id) if group is not None else None
            if group is None or known is None or known.member_epoch == STATIC_LEAVE_EPOCH:
                raise HeartbeatError(
                    ErrorCode.unknown_member_id,
                    f"member {member_id} is not in group {group_id} (its session expired, it left, or the "
                    "coordinator restarted): join again with member epoch 0",
                )
            member = known
            _check_epoch(member, epoch, _owned(body, self._topics()))
            bump = self._update(member, body)
        topics = self._topics()
        before = (member.member_epoch, dict(member.assigned))
        self._advance(group, member, _owned(body, topics), bump, topics, allowed_topic)
        self._reset_session(group, member)
        full = epoch == 0 or (
            body.rebalance_timeout.total_seconds() >= 0
            and (body.subscribed_topic_names is not None or subscribed_regex(body) is not None)
            and body.topic_partitions is not None
        )
        response = _heartbeat_response(ErrorCode.none, None, member.member_id, member.member_epoch)
        response["heartbeat_interval"] = self.heartbeat_interval_ms
        if full or before != (member.member_epoch, member.assigned):
            response["assignment"] = {"topic_partitions": _by_topic_id(member.assigned, topics)}
        return response

    def _advance(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        owned: Assignment | None,
        bump: bool,
        topics: Mapping[str, tuple[uuid.UUID, int]],
        allowed: Callable[[str], bool],
    ) -> None:
        """After a member's request: the partitions the group subscribes to, the group epoch
        (moved by ``bump``: the member joined or changed its subscription), a new target
        assignment when the epoch passed the assignment's, and the member's reconciliation with
        what it says it owns."""
        subscribed = self._subscribed_partitions(group, topics, allowed)
        if subscribed != group.subscribed_partitions:
            group.subscribed_partitions = subscribed
            bump = True
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, topics, allowed)
        self._reconcile(group, member, owned)

    def _join(self, group: ConsumerGroup, body: Any, client_id: str, client_host: str) -> tuple[ConsumerMember, bool]:
        """The joining member, and whether the group's epoch moves: always for a new member; for a
        static member back under its instance id, only if its subscription changed (as Kafka)."""
        member_id = body.member_id or uuid.uuid4().hex  # v0: the coordinator names the member
        old = group.members.get(member_id)
        if old is not None:  # rejoining under its id (after an error): it starts over with nothing
            self._remove(group, old)
        member = ConsumerMember(
            member_id=member_id,
            instance_id=body.instance_id,
            rack_id=body.rack_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=int(body.rebalance_timeout.total_seconds() * 1000),
        )
        static: ConsumerMember | None = None
        if body.instance_id is not None:
            static = static_member(group.members.values(), body.instance_id)
            if static is not None and static.member_epoch != STATIC_LEAVE_EPOCH:
                raise HeartbeatError(
                    ErrorCode.unreleased_instance_id,
                    f"instance id {body.instance_id!r} is held by member {static.member_id} of group {group.group_id}",
                )
            if static is not None:  # the same instance is back: it takes its assignment over
                self._take_over(group, static, member)
        changed = self._update(member, body)
        group.members[member.member_id] = member
        logger.info("group %s: member %s joins (consumer protocol)", group.group_id, member.member_id)
        return member, changed or static is None

    def _take_over(self, group: ConsumerGroup, old: ConsumerMember, new: ConsumerMember) -> None:
        """``new``, the same static instance as ``old``, takes its place: its epoch (the one it had
        before it left for a while), subscription and partitions."""
        old.cancel_timers()
        del group.members[old.member_id]
        epoch = old.previous_member_epoch if old.member_epoch == STATIC_LEAVE_EPOCH else old.member_epoch
        new.member_epoch, new.previous_member_epoch = epoch, old.previous_member_epoch
        new.assigned, new.pending_revocation = old.assigned, old.pending_revocation
        new.assignment_epochs = dict(old.assignment_epochs)
        new.subscribed_names, new.subscribed_regex = old.subscribed_names, old.subscribed_regex
        new.server_assignor = old.server_assignor
        if old.member_id in group.target:
            group.target[new.member_id] = group.target.pop(old.member_id)
        for key, owner in list(group.owners.items()):
            if owner == old.member_id:
                group.owners[key] = new.member_id

    @staticmethod
    def _update(member: ConsumerMember, body: Any) -> bool:
        """Apply a heartbeat's optional fields; True when the subscription changed."""
        if body.rebalance_timeout.total_seconds() >= 0:
            member.rebalance_timeout_ms = int(body.rebalance_timeout.total_seconds() * 1000)
        if body.rack_id is not None:
            member.rack_id = body.rack_id
        changed = False
        if (
            body.subscribed_topic_names is not None
            and tuple(sorted(body.subscribed_topic_names)) != member.subscribed_names
        ):
            member.subscribed_names, changed = tuple(sorted(body.subscribed_topic_names)), True
        if (given := subscribed_regex(body)) is not None:
            regex = given or None  # an empty string clears it
            if regex != member.subscribed_regex:
                member.subscribed_regex, changed = regex, True
        if body.server_assignor is not None and body.server_assignor != member.server_assignor:
            member.server_assignor, changed = body.server_assignor, True
        return changed

    def _leave(self, group_id: str, member_id: str, instance_id: str | None, epoch: int) -> dict[str, Any]:
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            raise HeartbeatError(ErrorCode.unknown_member_id, f"member {member_id} is not in group {group_id}")
        if epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            logger.info("group %s: static member %s leaves for now", group_id, member_id)
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH  # its session timer still runs
            # Held from epoch 0 by whoever rejoins with the instance id (Kafka's
            # resetAssignedPartitionsEpochsToZero): commits of the new member at its older epochs go.
            member.assignment_epochs = dict.fromkeys(member.assignment_epochs, 0)
            cancel(member.revocation_timer)
        else:
            logger.info("group %s: member %s leaves", group_id, member_id)
            self._fence(group, member)
        return _heartbeat_response(ErrorCode.none, None, member_id, epoch)

    # -- the target assignment ---------------------------------------------------------------------

    def _subscription(self, member: ConsumerMember, topics: Mapping[str, Any]) -> set[str]:
        names = {name for name in member.subscribed_names if name in topics}
        if member.subscribed_regex is not None:
            pattern = re.compile(member.subscribed_regex)
            names |= {name for name in topics if not name.startswith("__") and pattern.fullmatch(name)}
        return names

    def _subscribed_partitions(
        self, group: ConsumerGroup, topics: Mapping[str, tuple[uuid.UUID, int]], allowed: Callable[[str], bool]
    ) -> dict[str, int]:
        names = {name for member in group.members.values() for name in self._subscription(member, topics)}
        return {name: topics[name][1] for name in sorted(names) if allowed(name)}

    def _assign(
        self, group: ConsumerGroup, topics: Mapping[str, tuple[uuid.UUID, int]], allowed: Callable[[str], bool]
    ) -> None:
        group.assignor = _chosen_assignor(group)
        subscriptions = {
            member_id: {t for t in self._subscription(member, topics) if t in group.subscribed_partitions}
            for member_id, member in sorted(group.members.items())
        }
        assign = range_assignment if group.assignor == "range" else uniform_assignment
        group.target = assign(subscriptions, group.subscribed_partitions, group.target)
        group.assignment_epoch = group.group_epoch
        logger.info(
            "group %s: epoch %d, %s assignment of %d partition(s) to %d member(s)",
            group.group_id,
            group.group_epoch,
            group.assignor,
            sum(group.subscribed_partitions.values()),
            len(subscriptions),
        )

    # -- reconciliation ----------------------------------------------------------------------------

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> None:
        if member.state == UNREVOKED:
            if owned is None or _overlap(owned, member.pending_revocation):
                return  # still owns partitions it must give up
            self._release(group, member, member.pending_revocation)
            member.pending_revocation = {}
            member.track_assignment_epochs()
            cancel(member.revocation_timer)
            member.state = STABLE
        if member.state == STABLE and member.member_epoch == group.assignment_epoch:
            return
        target = group.target.get(member.member_id, {})
        keep: Assignment = {}
        revoke: Assignment = {}
        for topic in set(member.assigned) | set(target):
            current, wanted = member.assigned.get(topic, frozenset()), target.get(topic, frozenset())
            if current & wanted:
                keep[topic] = current & wanted
            if current - wanted:
                revoke[topic] = current - wanted
        if revoke and (owned is None or _overlap(owned, revoke)):
            member.assigned, member.pending_revocation, member.state = keep, revoke, UNREVOKED
            member.track_assignment_epochs()
            cancel(member.revocation_timer)
            member.revocation_timer = self._loop.call_later(
                member.rebalance_timeout_ms / 1000, self._on_revocation_timeout, group, member
            )
            return
        if revoke:  # the member says it no longer owns them
            self._release(group, member, revoke)
        assigned = {topic: set(partitions) for topic, partitions in keep.items()}
        unreleased = False
        for topic, partitions in target.items():
            for partition in partitions - member.assigned.get(topic, frozenset()):
                owner = group.owners.get((topic, partition))
                if owner is None or owner == member.member_id:
                    group.owners[(topic, partition)] = member.member_id
                    assigned.setdefault(topic, set()).add(partition)
                else:
                    unreleased = True
        member.assigned = {topic: frozenset(partitions) for topic, partitions in assigned.items() if partitions}
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch, member.member_epoch = member.member_epoch, group.assignment_epoch
        member.state = UNRELEASED if unreleased else STABLE
        member.track_assignment_epochs()

    def _release(self, group: ConsumerGroup, member: ConsumerMember, partitions: Assignment) -> None:
        for topic, indexes in partitions.items():
            for index in indexes:
                if group.owners.get((topic, index)) == member.member_id:
                    del group.owners[(topic, index)]

    def _on_revocation_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if group.members.get(member.member_id) is not member or member.state != UNREVOKED:
            return
        logger.warning(
            "group %s: member %s did not give up %s within its rebalance timeout (%d ms); it is removed",
            group.group_id,
            member.member_id,
            _describe(member.pending_revocation),
            member.rebalance_timeout_ms,
        )
        self._fence(group, member)
        self._changed(group.group_id)

    # -- sessions and removal ----------------------------------------------------------------------

    def _reset_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        self._sessions.reset(group, member, self._session_timeout_ms(member))

    def _session_timeout_ms(self, member: ConsumerMember) -> int:
        return member.classic.session_timeout_ms if member.classic is not None else self.session_timeout_ms

    def _on_session_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        logger.info(
            "group %s: member %s expired after %d ms without a heartbeat",
            group.group_id,
            member.member_id,
            self._session_timeout_ms(member),
        )
        self._fence(group, member)
        self._changed(group.group_id)

    def _fence(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """``member`` goes (it left, or was removed) and the group's epoch moves; or, when it was
        the group's last member of the consumer protocol and members of the classic protocol
        stay, the group becomes a classic group with them (Kafka's online downgrade): it is no
        longer one of these groups."""
        if member.classic is None and self._downgrade(group, member.member_id):
            self.forget([group.group_id])
            return
        self._remove(group, member)
        group.group_epoch += 1

    def _remove(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.cancel_timers()
        group.members.pop(member.member_id, None)
        group.target.pop(member.member_id, None)
        for key in [key for key, owner in group.owners.items() if owner == member.member_id]:
            del group.owners[key]

    def touch(self, group_id: str, member_id: str) -> None:
        """An offset commit counts as a sign of life, as a heartbeat does."""
        group = self._groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is not None and member is not None:
            self._reset_session(group, member)

    # -- members of the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) ------------

    def classic_join(
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
        **_: Any,
    ) -> dict[str, Any]:
        """A JoinGroup to a consumer group with members (ClassicGroups.join's keywords): the member
        joins, or rejoins, with the subscription and the owned partitions of its metadata, and is
        reconciled at once; the answer is Kafka's: the member epoch as the generation, the first
        of its protocols, no leader and no members (nobody assigns: the coordinator did)."""
        group = self._groups[group_id]
        if protocol_type != PROTOCOL_TYPE or not protocols or not self._supports(group, member_id, protocols):
            return _join_answer(ErrorCode.inconsistent_group_protocol, member_id)
        try:
            subscription = decode_subscription(protocols[0][1])
        except MalformedProtocolError as error:
            logger.warning("group %s: JoinGroup of %s refused: its metadata is %s", group_id, member_id, error)
            return _join_answer(ErrorCode.inconsistent_group_protocol, member_id)
        known = bool(member_id)
        member_id = member_id or str(uuid.uuid4())
        if not known and group_instance_id is None and require_member_id:
            logger.info("group %s: new member %s is to join again with its member id", group_id, member_id)
            return _join_answer(ErrorCode.member_id_required, member_id)
        static = static_member(group.members.values(), group_instance_id) if group_instance_id else None
        if static is not None and static.member_id != member_id and known:
            return _join_answer(ErrorCode.fenced_instance_id, member_id)
        member = group.members.get(member_id)
        if member is not None and member.classic is None:
            return _join_answer(ErrorCode.unknown_member_id, member_id)  # a member of the consumer protocol
        if member is None:
            member = ConsumerMember(member_id, group_instance_id, None, client_id, client_host, rebalance_timeout_ms)
            if static is not None:  # the same instance is back under a new id: it takes the old one's place
                self._take_over(group, static, member)
            group.members[member_id] = member
            logger.info("group %s: member %s joins (classic protocol)", group_id, member_id)
        member.client_id, member.client_host = client_id, client_host
        member.rebalance_timeout_ms = rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms
        if subscription.rack_id is not None:
            member.rack_id = subscription.rack_id
        subscribed = tuple(sorted(set(subscription.topics)))
        bump = member.classic is None or subscribed != member.subscribed_names
        member.subscribed_names = subscribed
        member.classic = ClassicMetadata(session_timeout_ms, tuple(protocols))
        cancel(member.join_timer)
        member.join_timer = None
        self._advance(group, member, subscription.owned, bump, self._topics(), lambda topic: True)
        self._reset_session(group, member)
        cancel(member.sync_timer)
        member.sync_timer = self._loop.call_later(
            member.rebalance_timeout_ms / 1000, self._on_classic_timeout, group, member, "sent no SyncGroup"
        )
        answer = _join_answer(ErrorCode.none, member_id)
        answer.update(
            generation_id=member.member_epoch, protocol_type=PROTOCOL_TYPE, protocol_name=member.classic.protocol_name
        )
        return answer

    def _supports(self, group: ConsumerGroup, member_id: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether one of ``protocols`` is one every other classic member has (Kafka's rule)."""
        names = {name for name, _ in protocols}
        for other in group.members.values():
            if other.classic is not None and other.member_id != member_id:
                names &= {name for name, _ in other.classic.protocols}
        return bool(names)

    def classic_sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> dict[str, Any]:
        """A SyncGroup of a classic member of a consumer group: its assignment (what it may own
        now: its target once it has given up what the target moved elsewhere), or
        REBALANCE_IN_PROGRESS when it must join again first."""
        group = self._groups.get(group_id)
        member, error = self._classic_member(group, member_id, group_instance_id)
        if member is None or group is None:
            return {"throttle_time": 0, "error_code": error, "assignment": b""}
        assert member.classic is not None
        if generation_id != member.member_epoch:
            error = ErrorCode.illegal_generation
        elif protocol_type not in (None, PROTOCOL_TYPE) or protocol_name not in (None, member.classic.protocol_name):
            error = ErrorCode.inconsistent_group_protocol
        elif group.group_epoch > member.member_epoch and member.state != UNREVOKED:
            self._expect_rejoin(group, member)
            error = ErrorCode.rebalance_in_progress
        if error is not ErrorCode.none:
            return {"throttle_time": 0, "error_code": error, "assignment": b""}
        cancel(member.sync_timer)
        member.sync_timer = None
        self._reset_session(group, member)
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "assignment": member.classic.assignment(member.assigned),
            "protocol_type": protocol_type,
            "protocol_name": protocol_name,
        }

    def classic_heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> ErrorCode:
        """A Heartbeat of a classic member of a consumer group: REBALANCE_IN_PROGRESS when it must
        join again (the group epoch moved past its own; it has partitions to give up; the
        partitions it waited for are free), and from then on it must within its rebalance
        timeout."""
        group = self._groups.get(group_id)
        member, error = self._classic_member(group, member_id, group_instance_id)
        if member is None or group is None:
            return error
        if generation_id != member.member_epoch:
            return ErrorCode.illegal_generation
        self._reset_session(group, member)
        if (
            member.member_epoch < group.group_epoch
            or member.state == UNREVOKED
            or (member.state == UNRELEASED and not self._waiting_on_unreleased(group, member))
        ):
            self._expect_rejoin(group, member)
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def classic_leave(self, group_id: str, member_id: str, group_instance_id: str | None = None) -> ErrorCode:
        """A classic member leaves a consumer group (LeaveGroup; a static member may be named by
        its instance id alone)."""
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group_instance_id is not None:
            member = static_member(group.members.values(), group_instance_id)
            if member is not None and member_id and member.member_id != member_id:
                return ErrorCode.fenced_instance_id
        else:
            member = group.members.get(member_id)
        if member is None or member.classic is None:
            return ErrorCode.unknown_member_id
        logger.info("group %s: member %s leaves (classic protocol)", group_id, member.member_id)
        self._fence(group, member)
        return ErrorCode.none

    def _classic_member(
        self, group: ConsumerGroup | None, member_id: str, group_instance_id: str | None
    ) -> tuple[ConsumerMember | None, ErrorCode]:
        """The classic member a SyncGroup or Heartbeat names (Kafka's checks: the instance id, then
        the member, which must be of the classic protocol)."""
        if group is None:
            return None, ErrorCode.unknown_member_id
        if group_instance_id is not None:
            member = static_member(group.members.values(), group_instance_id)
            if member is not None and member.member_id != member_id:
                return None, ErrorCode.fenced_instance_id
        else:
            member = group.members.get(member_id)
        if member is None or member.classic is None:
            return None, ErrorCode.unknown_member_id
        return member, ErrorCode.none

    def _waiting_on_unreleased(self, group: ConsumerGroup, member: ConsumerMember) -> bool:
        """Whether a partition of the member's target is still owned by another member."""
        for topic, partitions in group.target.get(member.member_id, {}).items():
            for partition in partitions - member.assigned.get(topic, frozenset()):
                if group.owners.get((topic, partition)) not in (None, member.member_id):
                    return True
        return False

    def _expect_rejoin(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.join_timer is None:
            member.join_timer = self._loop.call_later(
                member.rebalance_timeout_ms / 1000, self._on_classic_timeout, group, member, "did not join again"
            )

    def _on_classic_timeout(self, group: ConsumerGroup, member: ConsumerMember, what: str) -> None:
        if self._groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        logger.warning(
            "group %s: member %s %s within its rebalance timeout (%d ms); it is removed",
            group.group_id,
            member.member_id,
            what,
            member.rebalance_timeout_ms,
        )
        self._fence(group, member)
        self._changed(group.group_id)

    # -- offsets, deletion -------------------------------------------------------------------------

    def validate_offsets(
        self, group_id: str, member_id: str, member_epoch: int, partitions: Iterable[tuple[str, int]] = ()
    ) -> ErrorCode | None:
        """An OffsetCommit or TxnOffsetCommit of ``partitions`` (topic, index) to a consumer group
        (None: not a consumer group with members, the classic rules apply). A commit without a
        member (epoch -1, no member id: an admin tool or a consumer without a group) is allowed
        only while the group has no members.

        The member's epoch commits every partition; a newer one none. An older one commits only
        partitions the member still holds and has held since that epoch or before (KIP-1251, as
        Kafka 4.3): a member whose heartbeat moved its epoch while its commit was on the way is not
        refused for partitions it kept. Otherwise the whole commit is refused."""
        group = self._groups.get(group_id)
        if group is None or not group.members:
            return None
        if member_epoch < 0 and not member_id:
            return ErrorCode.unknown_member_id
        member = group.members.get(member_id)
        if member is None or member.member_epoch == STATIC_LEAVE_EPOCH:
            return ErrorCode.unknown_member_id
        if member_epoch < member.member_epoch and all(
            member.assignment_epochs.get(tp, member.member_epoch) <= member_epoch for tp in partitions
        ):
            return ErrorCode.none
        return _epoch_error(member, member_epoch)

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+: a member of a consumer group names itself and its epoch, which must be
        current (as for commits); a request without them (an admin tool) is answered."""
        group = self._groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return ErrorCode.none
        member = group.members.get(member_id or "")
        if member is None or member.member_epoch == STATIC_LEAVE_EPOCH:
            return ErrorCode.unknown_member_id
        return _epoch_error(member, member_epoch)

    def delete(self, group_id: str) -> bool:
        """Forget an empty consumer group (DeleteGroups); False when it has members."""
        group = self._groups.get(group_id)
        if group is not None and group.members:
            return False
        self._groups.pop(group_id, None)
        return True

    def adopt(self, group: ConsumerGroup) -> None:
        """Take in a group replayed from ``__consumer_offsets`` (this broker now coordinates it), or
        a classic group converted to the consumer protocol: who owns which partition and the
        group's assignor follow from its members; every member's session starts over, and so does
        the rebalance timeout of a member giving partitions up."""
        self.forget([group.group_id])
        group.assignor = _chosen_assignor(group)
        group.owners = {
            (topic, index): member.member_id
            for member in group.members.values()
            for partitions in (member.assigned, member.pending_revocation)
            for topic, indexes in partitions.items()
            for index in indexes
        }
        self._groups[group.group_id] = group
        for member in group.members.values():
            self._reset_session(group, member)
            if member.state == UNREVOKED:
                member.revocation_timer = self._loop.call_later(
                    member.rebalance_timeout_ms / 1000, self._on_revocation_timeout, group, member
                )
        logger.info("group %s: taken in with %d member(s) (consumer protocol)", group.group_id, len(group.members))

    def forget(self, group_ids: Iterable[str]) -> None:
        """This broker no longer coordinates these groups (their members find the new coordinator
        and join it again)."""
        for group_id in group_ids:
            group = self._groups.pop(group_id, None)
            if group is not None:
                for member in group.members.values():
                    member.cancel_timers()

    def close(self) -> None:
        self.forget(list(self._groups))

    # -- ConsumerGroupDescribe ---------------------------------------------------------------------

    def describe(self, group_id: str) -> dict[str, Any]:
        """One DescribedGroup (without its error and authorized operations)."""
        group = self._groups[group_id]
        topics = self._topics()

        def assignment(partitions: Assignment) -> dict[str, Any]:
            return {
                "topic_partitions": [
                    {"topic_id": topics[topic][0], "topic_name": topic, "partitions": sorted(indexes)}
                    for topic, indexes in sorted(partitions.items())
                    if topic in topics
                ]
            }

        return {
            "group_id": group_id,
            "group_state": group.state,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.assignor,
            "members": [
                {
                    "member_id": member.member_id,
                    "instance_id": member.instance_id,
                    "rack_id": member.rack_id,
                    "member_epoch": member.member_epoch,
                    "client_id": member.client_id,
                    "client_host": member.client_host,
                    "subscribed_topic_names": list(member.subscribed_names),
                    "subscribed_topic_regex": member.subscribed_regex,
                    "assignment": assignment(member.assigned),
                    "target_assignment": assignment(group.target.get(member.member_id, {})),
                    "member_type": 0 if member.classic is not None else 1,  # Kafka's: 0 classic, 1 consumer
                }
                for member in group.members.values()
            ],
        }


# -- helpers ---------------------------------------------------------------------------------------


def _check_epoch(member: ConsumerMember, epoch: int, owned: Assignment | None) -> None:
    if epoch == member.member_epoch:
        return
    lost_response = (
        epoch == member.previous_member_epoch
        and owned is not None
        and all(indexes <= member.assigned.get(topic, frozenset()) for topic, indexes in owned.items())
    )
    if epoch > member.member_epoch or not lost_response:
        raise HeartbeatError(
            ErrorCode.fenced_member_epoch,
            f"member {member.member_id} sent epoch {epoch}; its epoch is {member.member_epoch}: "
            "join again with epoch 0",
        )


def _epoch_error(member: ConsumerMember, epoch: int) -> ErrorCode:
    """An offset request's epoch against the member's: a classic member's generation is its
    epoch, and a wrong one ILLEGAL_GENERATION, as Kafka answers it."""
    if epoch == member.member_epoch:
        return ErrorCode.none
    return ErrorCode.illegal_generation if member.classic is not None else ErrorCode.stale_member_epoch


def _chosen_assignor(group: ConsumerGroup) -> str:
    """The assignor most members ask for (the default when none asks)."""
    chosen = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
    return chosen.most_common(1)[0][0] if chosen else ASSIGNORS[0]


def _owned(body: Any, topics: Mapping[str, tuple[uuid.UUID, int]]) -> Assignment | None:
    """The partitions a heartbeat says the member owns (None: not given), by topic name; topics
    whose id no topic has any more are left out (they are gone)."""
    if body.topic_partitions is None:
        return None
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    owned: Assignment = {}
    for entry in body.topic_partitions:
        name = names.get(entry.topic_id)
        if name is not None and entry.partitions:
            owned[name] = frozenset(entry.partitions)
    return owned


def _overlap(first: Assignment, second: Assignment) -> bool:
    return any(first.get(topic, frozenset()) & indexes for topic, indexes in second.items())


def _by_topic_id(assignment: Assignment, topics: Mapping[str, tuple[uuid.UUID, int]]) -> list[dict[str, Any]]:
    return [
        {"topic_id": topics[topic][0], "partitions": sorted(indexes)}
        for topic, indexes in sorted(assignment.items())
        if topic in topics
    ]


def _describe(assignment: Assignment) -> str:
    return ", ".join(f"{topic}-{index}" for topic, indexes in sorted(assignment.items()) for index in sorted(indexes))


def _join_answer(code: ErrorCode, member_id: str) -> dict[str, Any]:
    """A JoinGroup answer to a classic member of a consumer group (leader and members empty)."""
    return {
        "throttle_time": 0,
        "error_code": code,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": "",
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }


def _heartbeat_response(code: ErrorCode, message: str | None, member_id: str | None, epoch: int) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": message,
        "member_id": member_id,
        "member_epoch": epoch,
        "heartbeat_interval": 0,
        "assignment": None,
    }
