"""Group membership both protocols share: the groups by id, session timers and static members.

A member of a classic group (classic_group.py) and a member of a consumer-protocol group
(consumer_group.py) both live by their session: a heartbeat (or a join, a sync, an offset commit)
resets a timer on the event loop, and a member whose timer runs out is expired by its protocol.
Both know a static member (KIP-345) by its ``group.instance.id``.

Thread-safety: event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Generic, Protocol, TypeVar


class _Member(Protocol):
    member_id: str
    session_timer: asyncio.TimerHandle | None

    @property
    def group_instance_id(self) -> str | None: ...


class _Group(Protocol):
    @property
    def members(self) -> Mapping[str, object]: ...


G = TypeVar("G", bound=_Group)
M = TypeVar("M", bound=_Member)


class Groups(Generic[G]):
    """The groups of one protocol at one coordinator, by id (one id space for both protocols: the
    group coordinator keeps each protocol off the ids the other's members hold)."""

    def __init__(self) -> None:
        self._groups: dict[str, G] = {}

    def group(self, group_id: str) -> G | None:
        return self._groups.get(group_id)

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def has_members(self, group_id: str) -> bool:
        group = self._groups.get(group_id)
        return group is not None and bool(group.members)


class Sessions(Generic[G, M]):
    """Per-member session timers: ``expired(group, member)`` runs when a member's session runs
    out while it is still a member of the group."""

    def __init__(self, loop: asyncio.AbstractEventLoop, expired: Callable[[G, M], None]) -> None:
        self._loop = loop
        self._expired = expired

    def reset(self, group: G, member: M, timeout_ms: int) -> None:
        """A sign of life: the member's session starts over."""
        cancel(member.session_timer)
        member.session_timer = self._loop.call_later(timeout_ms / 1000, self._run_out, group, member)

    def _run_out(self, group: G, member: M) -> None:
        if group.members.get(member.member_id) is member:
            self._expired(group, member)


def static_member(members: Iterable[M], group_instance_id: str) -> M | None:
    """The member known by ``group_instance_id``, if any."""
    return next((member for member in members if member.group_instance_id == group_instance_id), None)


def cancel(timer: asyncio.TimerHandle | None) -> None:
    if timer is not None:
        timer.cancel()
