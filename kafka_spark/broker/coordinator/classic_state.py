"""The classic group protocol's state machine: group states, the table of legal transitions, the
members and the choices made from them (the protocol a rebalance picks, the topics a consumer
group subscribes to). Pure: no event loop, no I/O; classic_group.py drives it.

Kafka's ``ClassicGroupState``::

    Empty ──join──▶ PreparingRebalance ──all rejoined / rebalance timeout──▶ CompletingRebalance
      ▲                 ▲        │ (no member left)                               │ leader's SyncGroup
      └─────────────────┼────────┘                                                ▼
                        └───────── join, leave, session expiry ◀─────────────── Stable

Dead is terminal (a deleted group). ``LEGAL_TRANSITIONS`` is the table every state change is
checked against (``Group.transition``); an illegal change is a coordinator bug and raises.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

#: Kafka's group.initial.rebalance.delay.ms is 3000; a laptop broker and its tests want it short.
DEFAULT_INITIAL_REBALANCE_DELAY_MS = 100
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
    # Member ids handed out with MEMBER_ID_REQUIRED, not joined yet -> their expiry timers.
    pending_members: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    # members of this generation that have not sent their SyncGroup yet (Kafka's pendingSyncMembers):
    # removed when the rebalance timeout passes, in CompletingRebalance and in Stable alike
    pending_sync: set[str] = field(default_factory=set)

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [set(member.protocol_names) for member in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def rebalance_timeout_ms(self) -> int:
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

    def transition(self, state: GroupState) -> None:
        """Move to ``state``; IllegalGroupTransition if the table does not allow it."""
        if state not in LEGAL_TRANSITIONS[self.state]:
            raise IllegalGroupTransition(
                f"group {self.group_id}: {self.state.value} -> {state.value} is not a legal transition"
            )
        self.state = state


def select_protocol(group: Group) -> str:
    """Kafka's vote: each member votes for its most preferred candidate; most votes wins
    (ties: the first member's preference order)."""
    candidates = group.candidate_protocols()
    votes: dict[str, int] = {}
    for member in group.members.values():
        choice = next(name for name in member.protocol_names if name in candidates)
        votes[choice] = votes.get(choice, 0) + 1
    first = next(iter(group.members.values())).protocol_names
    return max(votes, key=lambda name: (votes[name], -first.index(name)))


def subscribed_topics(group: Group) -> set[str]:
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
