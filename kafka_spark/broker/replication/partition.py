"""One broker's replica of a partition, and what its leader keeps about it (Kafka's ``Partition``).

A :class:`Replica` is the leader, a follower or offline (its role, decided by the metadata the
replica manager applies). As the leader it tracks each follower's log end offset and when it last
caught up, moves the high watermark to the smallest log end offset of the in-sync replicas (the
log end offset itself for a leader alone in its ISR: local replication, a single node's case) and
completes the acks=all waits the high watermark passes. The decisions that involve the controller
(ISR changes) and the broker (waking parked fetches) are the replica manager's.

Thread-safety: event loop only.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.storage.epochs import current_epoch_error

if TYPE_CHECKING:
    from kafka_spark.broker.metadata.image import PartitionState
    from kafka_spark.broker.storage.epochs import LeaderEpochCache
    from kafka_spark.broker.storage.log import Log
    from kafka_spark.common.topic_partition import TopicPartition

LEADER, FOLLOWER, OFFLINE = "leader", "follower", "offline"


@dataclass
class FollowerState:
    """What a leader knows of one follower."""

    leo: int = -1
    last_caught_up_ms: float = 0.0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: float = 0.0


@dataclass
class Waiter:
    required_offset: int
    future: asyncio.Future[None]
    entry: dict[str, Any]
    timer: asyncio.TimerHandle | None = None


@dataclass
class Replica:
    """This broker's replica of one partition."""

    tp: TopicPartition
    log: Log
    epochs: LeaderEpochCache
    state: PartitionState | None = None
    role: str = OFFLINE
    followers: dict[int, FollowerState] = field(default_factory=dict)
    waiters: list[Waiter] = field(default_factory=list)
    epoch_start_offset: int = 0
    needs_truncation: bool = False
    stalled_until: float = 0.0

    def check_epoch(self, current_leader_epoch: int) -> int:
        """KIP-320: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a client's current leader epoch
        other than this leader's (-1, not given, is always answered)."""
        assert self.state is not None
        return current_epoch_error(current_leader_epoch, self.state.leader_epoch)

    def record_follower_fetch(self, follower: FollowerState, fetch_offset: int) -> None:
        """A follower fetched from ``fetch_offset`` (its log end offset): it is caught up when it
        reached this leader's LEO, or the LEO of its previous fetch (Kafka's lastCaughtUpTimeMs)."""
        now = now_ms()
        leader_leo = self.log.log_end_offset
        if fetch_offset >= leader_leo:
            follower.last_caught_up_ms = now
        elif fetch_offset >= follower.last_fetch_leader_leo >= 0:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.last_fetch_leader_leo = leader_leo
        follower.last_fetch_ms = now
        follower.leo = min(fetch_offset, leader_leo)

    def may_join_isr(self, node: int, follower: FollowerState) -> bool:
        """A follower out of the ISR whose LEO reached the HW and the start of this leader's epoch."""
        assert self.state is not None
        return (
            node not in self.state.isr
            and follower.leo >= self.log.high_watermark
            and follower.leo >= self.epoch_start_offset
        )

    def lagging_followers(self, node_id: int, max_lag_ms: int) -> list[int]:
        """The in-sync followers that have not caught up for ``max_lag_ms`` (replica.lag.time.max.ms)."""
        assert self.state is not None
        now = now_ms()
        return [
            node
            for node in self.state.isr
            if node != node_id and now - self.followers.get(node, FollowerState()).last_caught_up_ms > max_lag_ms
        ]

    def advance_high_watermark(self, node_id: int) -> bool:
        """Move the HW to the smallest LEO of the in-sync replicas (this leader being ``node_id``);
        True when it moved (parked consumers' fetches are to be woken)."""
        state, log = self.state, self.log
        assert state is not None
        if state.isr == (node_id,):
            # Alone in its ISR: everything appended is replicated, the HW follows the LEO (None).
            moved = log.replicated_high_watermark is not None
            log.replicated_high_watermark = None
            return moved
        ends = [log.log_end_offset]
        for node in state.isr:
            if node != node_id:
                follower = self.followers.get(node)
                ends.append(follower.leo if follower is not None else -1)
        new = min(ends)  # -1 while an in-sync follower has not fetched from this leader yet
        current = log.high_watermark
        if (new >= 0 and new > current) or log.replicated_high_watermark is None:
            log.replicated_high_watermark = max(new, current)
            return True
        return False

    def complete_waiters(self, min_insync_replicas: int) -> None:
        """Complete the acks=all waits the HW has passed (NOT_ENOUGH_REPLICAS_AFTER_APPEND when
        the ISR shrank below ``min_insync_replicas`` meanwhile)."""
        if not self.waiters or self.state is None:
            return
        high_watermark = self.log.high_watermark
        enough = len(self.state.isr) >= min_insync_replicas
        pending = []
        for waiter in self.waiters:
            if high_watermark >= waiter.required_offset:
                if not enough:
                    fail(waiter.entry, ErrorCode.not_enough_replicas_after_append)
                settle(waiter)
            else:
                pending.append(waiter)
        self.waiters = pending

    def fail_waiters(self, code: int) -> None:
        for waiter in self.waiters:
            fail(waiter.entry, code)
            settle(waiter)
        self.waiters = []


def now_ms() -> float:
    return time.monotonic() * 1000


def fail(entry: dict[str, Any], code: int) -> None:
    entry["error_code"] = code
    entry["base_offset"] = -1


def settle(waiter: Waiter) -> None:
    if waiter.timer is not None:
        waiter.timer.cancel()
    if not waiter.future.done():
        waiter.future.set_result(None)
