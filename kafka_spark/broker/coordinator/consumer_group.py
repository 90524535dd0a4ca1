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
member's (its last response was lost). A member that sends no heartbeat within the session
timeout (``group.consumer.session.timeout.ms``) is removed. Leaving is member epoch -1; a static
member (``group.instance.id``) leaving with -2 keeps its assignment until its session expires,
for the same instance to take back when it rejoins.

Group ids are shared with classic groups (group.py): a consumer heartbeat for a classic group
that has members, or a JoinGroup for a consumer group that has members, is refused with
INCONSISTENT_GROUP_PROTOCOL; an empty group (committed offsets only) can be taken up by either
protocol, keeping its offsets.

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
    session_timer: asyncio.TimerHandle | None = None
    revocation_timer: asyncio.TimerHandle | None = None

    @property
    def group_instance_id(self) -> str | None:
        return self.instance_id


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

    ``topics()`` gives the topics that exist (name -> (topic id, partition count)); ``blocked(group_id)``
    says why the group id is taken by a classic group with members (None when it is not);
    ``changed(group_id)`` is told of a change no request made (a member expired or removed).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        topics: Callable[[], Mapping[str, tuple[uuid.UUID, int]]],
        blocked: Callable[[str], str | None],
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
        changed: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        self._loop = loop
        self._topics = topics
        self._blocked = blocked
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
        reason = self._blocked(group_id)
        if reason is not None and not self.has_members(group_id):
            raise HeartbeatError(ErrorCode.inconsistent_group_protocol, reason)
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
        subscribed = self._subscribed_partitions(group, topics, allowed_topic)
        if subscribed != group.subscribed_partitions:
            group.subscribed_partitions = subscribed
            bump = True
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, topics, allowed_topic)
        before = (member.member_epoch, dict(member.assigned))
        self._reconcile(group, member, _owned(body, topics))
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
        cancel(old.session_timer)
        del group.members[old.member_id]
        new.member_epoch, new.previous_member_epoch = old.previous_member_epoch, old.previous_member_epoch
        new.assigned, new.pending_revocation = old.assigned, old.pending_revocation
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
            cancel(member.revocation_timer)
        else:
            logger.info("group %s: member %s leaves", group_id, member_id)
            self._remove(group, member)
            group.group_epoch += 1
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
        self._remove(group, member)
        group.group_epoch += 1
        self._changed(group.group_id)

    # -- sessions and removal ----------------------------------------------------------------------

    def _reset_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        self._sessions.reset(group, member, self.session_timeout_ms)

    def _on_session_expired(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        logger.info(
            "group %s: member %s expired after %d ms without a heartbeat",
            group.group_id,
            member.member_id,
            self.session_timeout_ms,
        )
        self._remove(group, member)
        group.group_epoch += 1
        self._changed(group.group_id)

    def _remove(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        cancel(member.session_timer)
        cancel(member.revocation_timer)
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

    # -- offsets, deletion -------------------------------------------------------------------------

    def validate_offsets(self, group_id: str, member_id: str, member_epoch: int) -> ErrorCode | None:
        """OffsetCommit and OffsetFetch of a consumer group (None: not a consumer group with
        members, the classic rules apply). A commit without a member (epoch -1, no member id: an
        admin tool or a consumer without a group) is allowed only while the group has no members."""
        group = self._groups.get(group_id)
        if group is None or not group.members:
            return None
        if member_epoch < 0 and not member_id:
            return ErrorCode.unknown_member_id
        member = group.members.get(member_id)
        if member is None or member.member_epoch == STATIC_LEAVE_EPOCH:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    def validate_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+: a member of a consumer group names itself and its epoch, which must be
        current (as for commits); a request without them (an admin tool) is answered."""
        group = self._groups.get(group_id)
        if group is None or (member_id is None and member_epoch < 0):
            return ErrorCode.none
        member = group.members.get(member_id or "")
        if member is None or member.member_epoch == STATIC_LEAVE_EPOCH:
            return ErrorCode.unknown_member_id
        return ErrorCode.none if member_epoch == member.member_epoch else ErrorCode.stale_member_epoch

    def delete(self, group_id: str) -> bool:
        """Forget an empty consumer group (DeleteGroups); False when it has members."""
        group = self._groups.get(group_id)
        if group is not None and group.members:
            return False
        self._groups.pop(group_id, None)
        return True

    def restore(self, group: ConsumerGroup) -> None:
        """Take back a group replayed from ``__consumer_offsets`` (this broker now coordinates it):
        who owns which partition and the group's assignor follow from its members; every member's
        session starts over, and so does the rebalance timeout of a member giving partitions up."""
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
        logger.info("group %s: loaded with %d member(s) (consumer protocol)", group.group_id, len(group.members))

    def forget(self, group_ids: Iterable[str]) -> None:
        """This broker no longer coordinates these groups (their members find the new coordinator
        and join it again)."""
        for group_id in group_ids:
            group = self._groups.pop(group_id, None)
            if group is not None:
                for member in group.members.values():
                    cancel(member.session_timer)
                    cancel(member.revocation_timer)

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
                    "member_type": 1,  # the consumer protocol (0: a classic member of a consumer group)
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
