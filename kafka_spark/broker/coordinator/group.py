"""The group coordinator: the consumer groups this broker coordinates and their committed offsets.

Kafka's ``GroupCoordinator``, split by concern as Kafka's is:

* the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): classic_group.py, on the
  state machine of classic_state.py;
* KIP-848's consumer protocol (ConsumerGroupHeartbeat): consumer_group.py, with its assignors
  (assignors.py);
* what both share: membership (membership.py: session timers, static members), and, here, the
  ownership of groups, the committed offsets (group_offsets.py, ``__consumer_offsets``) and the
  checks of an offset commit, which ask the group's protocol about its member;
* both protocols' membership, written to ``__consumer_offsets`` with Kafka's records and replayed
  with the offsets, so that members go on when the coordinator restarts or moves: a consumer
  group's (consumer_group_log.py) after each change, its members keeping their epochs; a classic
  group's GroupMetadata record (classic_group_log.py) when it becomes Stable or Empty or replaces
  a static member, its members keeping their generation and assignments (written in the
  background: the leader's SyncGroup is answered in its own call, ahead of the followers, without
  waiting for the record's fsync and replicas, which Kafka waits for). A group id converting between
  the protocols tombstones the other protocol's records (replay: the group of the last record);
* the group ids: one space for both protocols. A group id's members are in a classic group or in a
  consumer group, never both: a consumer group takes classic members of a consumer (their
  JoinGroup, SyncGroup, Heartbeat and LeaveGroup go to it), and a group moves between the
  protocols while it has members (migration.py: a consumer-protocol member joining a classic
  group converts it; the last one leaving a consumer group of classic members converts it back),
  as Kafka 4's coordinator does with ``group.consumer.migration.policy=bidirectional``. An empty
  group, committed offsets only, can be taken up by either protocol, keeping its offsets.

Ownership: this broker coordinates the groups of the partitions of ``__consumer_offsets`` it leads
(a single node, a cluster of one, leads them all): ``partition_moved`` loads a partition's offsets
and groups of both protocols when it becomes the leader and forgets its groups when it stops
(members get NOT_COORDINATOR and go on at the new coordinator: a consumer group's with the epochs
they have, a classic group's with its generation); requests for other groups are answered NOT_COORDINATOR.

Durability: every write to ``__consumer_offsets`` waits, before its answer, for the fsync where the
topic flushes on acks=all and for the partition's in-sync replicas (at once for a leader alone in
its ISR); a write the replicas did not all get is answered NOT_COORDINATOR.

Thread-safety: none; everything runs on the broker's event loop (other threads go through
``loop.call_soon_threadsafe`` / ``run_coroutine_threadsafe``).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.coordinator import classic_group_log, consumer_group_log
from kafka_spark.broker.coordinator.classic_group import ClassicGroups
from kafka_spark.broker.coordinator.classic_group_log import ClassicGroupReplay
from kafka_spark.broker.coordinator.classic_state import DEFAULT_INITIAL_REBALANCE_DELAY_MS, Group, GroupState
from kafka_spark.broker.coordinator.consumer_group import (
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_SESSION_TIMEOUT_MS,
    ConsumerGroup,
    ConsumerGroups,
)
from kafka_spark.broker.coordinator.consumer_group_log import ConsumerGroupRecords, ConsumerGroupReplay
from kafka_spark.broker.coordinator.context import (
    Durability,
    NotReplicatedError,
    OwnedPartitions,
    Replication,
    answer_after,
    durable,
    log_failure,
    settled,
)
from kafka_spark.broker.coordinator.group_offsets import CommittedOffset, GroupOffsetStore
from kafka_spark.broker.coordinator.heartbeat_checks import HeartbeatError
from kafka_spark.broker.coordinator.migration import UpgradeRefused, downgradable, to_classic_group, to_consumer_group
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kafka_spark.broker.notifier import DataNotifier
    from kafka_spark.broker.storage.log import Log
    from kafka_spark.broker.storage.log_manager import LogManager

logger = logging.getLogger("kafka_spark.broker.coordinator.group")

#: Kafka's offset.metadata.max.bytes.
MAX_METADATA_BYTES = 4096


class GroupCoordinator:
    """Every consumer group this broker coordinates, of either protocol, plus their committed
    offsets (see the module docstring)."""

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
        migration_policy: str = "bidirectional",
    ) -> None:
        self._loop = loop
        self._migration_policy = migration_policy  # group.consumer.migration.policy (migration.py)
        self._replication = replication
        self._durability = durability
        self._notifier = notifier
        # The partitions of __consumer_offsets this broker leads: their groups are its own.
        self._owned = OwnedPartitions(OFFSETS_TOPIC, replication)
        self.offsets = GroupOffsetStore(logs, partitions=self._owned.partitions)
        # The two protocols' groups, one id space: a group id's members are in one of them, and the
        # group moves from one to the other while it has members (migration.py).
        self.classic = ClassicGroups(
            loop,
            initial_rebalance_delay_ms=initial_rebalance_delay_ms,
            min_session_timeout_ms=min_session_timeout_ms,
            max_session_timeout_ms=max_session_timeout_ms,
            changed=self._classic_group_changed,
        )
        self.consumer = ConsumerGroups(
            loop,
            self._topic_ids,
            self._upgrade,
            self._downgrade,
            session_timeout_ms=consumer_session_timeout_ms,
            heartbeat_interval_ms=consumer_heartbeat_interval_ms,
            changed=self._consumer_group_changed,
        )
        self._consumer_records = ConsumerGroupRecords()  # what is written of each consumer group
        # what the record of each classic group holds (classic_group_log.snapshot), and the write
        # of a record not durable yet (a DeleteGroups waits for its group's tombstone)
        self._classic_written: dict[str, tuple[Any, ...]] = {}
        self._classic_writes: dict[str, asyncio.Future[None]] = {}

    def _topic_ids(self) -> dict[str, tuple[uuid.UUID, int]]:
        return {name: (info.topic_id, info.partitions) for name, info in self._replication.topics().items()}

    # -- a group moving between the protocols (migration.py) ------------------------------------------

    def _upgrade(self, group_id: str) -> ConsumerGroup | None:
        """A member of the consumer protocol joins ``group_id``: its classic group, if it has
        members, becomes a consumer group (returned); an empty one is dropped. Raises
        HeartbeatError (GROUP_ID_NOT_FOUND, Kafka's answer) when the group cannot be converted."""
        classic = self.classic.group(group_id)
        if classic is None:
            return None
        if not classic.members:
            self.classic.delete(group_id)  # its record's tombstone (Kafka's, as the group converts)
            return None
        if self._migration_policy not in ("upgrade", "bidirectional"):
            raise HeartbeatError(
                ErrorCode.group_id_not_found,
                f"Cannot upgrade classic group {group_id} to consumer group because the online upgrade is "
                f"disabled (group.consumer.migration.policy={self._migration_policy}).",
            )
        try:
            converted = to_consumer_group(classic, self._topic_ids())
        except UpgradeRefused as refused:
            logger.info("group %s: not converted to the consumer protocol: %s", group_id, refused)
            raise HeartbeatError(ErrorCode.group_id_not_found, str(refused)) from refused
        self.classic.release(group_id)
        self._classic_group_changed(group_id)  # the classic group's tombstone, before the consumer group's records
        logger.info(
            "group %s: a member of the consumer protocol joins; its %d classic member(s) stay: it is a consumer "
            "group from epoch %d",
            group_id,
            len(converted.members),
            converted.group_epoch,
        )
        return converted

    def _downgrade(self, group: ConsumerGroup, leaving: str) -> bool:
        """``leaving``, a member of the consumer protocol, leaves ``group``: when only classic
        members stay, the group becomes a classic group of them, which rebalances (True)."""
        if self._migration_policy not in ("downgrade", "bidirectional") or not downgradable(group, leaving):
            return False
        reason = f"its last member of the consumer protocol, {leaving}, left: back to the classic protocol"
        logger.info("group %s: %s with %d member(s)", group.group_id, reason, len(group.members) - 1)
        self.classic.adopt(to_classic_group(group, leaving), reason)
        return True

    # -- the partitions of __consumer_offsets this broker leads ---------------------------------------

    def owner_error(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates ``group_id``; NOT_COORDINATOR when another broker
        leads the group's partition of ``__consumer_offsets`` (clients find it again)."""
        return self._owned.owner_error(group_id)

    def partition_moved(self, partition: int, leader_epoch: int | None) -> None:
        """This broker leads ``partition`` of ``__consumer_offsets`` (load its groups' offsets and
        staged transactional offsets), or no longer does (None: forget its groups; their members
        get NOT_COORDINATOR and go on at the new coordinator, which loads them)."""
        if leader_epoch is not None:
            if partition not in self._owned.epochs:
                self._load_groups(partition)
            self._owned.epochs[partition] = leader_epoch
            return
        if self._owned.epochs.pop(partition, None) is None:
            return
        self.offsets.unload_partition(partition)
        consumer_groups = self._owned.keys_of(partition, self.consumer.group_ids())
        self.consumer.forget(consumer_groups)
        self._consumer_records.forget(consumer_groups)
        self.classic.forget(self._owned.keys_of(partition, self.classic.group_ids()))
        for group_id in self._owned.keys_of(partition, list(self._classic_written)):
            self._classic_written.pop(group_id, None)

    def _load_groups(self, partition: int) -> None:
        """Replay ``partition``'s offsets and the membership of its groups of both protocols. A
        group id with a group of each protocol (no order of Kafka's writes leaves one: a group
        converting tombstones the other protocol's records) is the one of its last record."""
        where = f"{OFFSETS_TOPIC}-{partition}"
        consumer_replay, classic_replay = ConsumerGroupReplay(), ClassicGroupReplay()
        sequence = itertools.count()
        last: dict[tuple[str, bool], int] = {}  # (group id, classic?) -> its last record

        def apply(key: bytes, value: bytes | None) -> None:
            if classic_replay.apply(key, value):
                last[(classic_group_log.decode_key(key), True)] = next(sequence)
            elif consumer_replay.apply(key, value):
                last[(consumer_group_log.decode_key(key)[1], False)] = next(sequence)

        def later(group_id: str, classic: bool) -> bool:
            return last[(group_id, classic)] > last.get((group_id, not classic), -1)

        applied = self.offsets.load_partition(partition, apply)
        consumer_groups = consumer_replay.groups(self._topic_ids(), where)
        classic_groups = classic_replay.groups(where)
        both = {group.group_id for group, _ in consumer_groups} & {group.group_id for group, _ in classic_groups}
        consumer_groups = [(g, r) for g, r in consumer_groups if g.group_id not in both or later(g.group_id, False)]
        classic_groups = [(g, v) for g, v in classic_groups if g.group_id not in both or later(g.group_id, True)]
        for group, records in consumer_groups:
            self.consumer.adopt(group)
            self._consumer_records.forget([group.group_id])
            self._consumer_records.written(group.group_id, records.items())
        for classic, _ in classic_groups:
            self.classic.load(classic)
            loaded = classic_group_log.snapshot(classic)
            assert loaded is not None  # a loaded group is Stable or Empty
            self._classic_written[classic.group_id] = loaded
        logger.info(
            "%s-%d: loaded %d offset record(s), %d consumer group(s), %d classic group(s) (%d with members)",
            OFFSETS_TOPIC,
            partition,
            applied,
            len(consumer_groups),
            len(classic_groups),
            sum(1 for group, _ in classic_groups if group.members),
        )

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
        """The classic group ``group_id`` (None: none has members or a state)."""
        return self.classic.group(group_id)

    def group_ids(self) -> list[str]:
        """Groups with members or committed offsets (what ListGroups reports), of either protocol."""
        return sorted(set(self.classic.group_ids()) | set(self.offsets.groups()) | set(self.consumer.group_ids()))

    def group_type(self, group_id: str) -> str:
        """``consumer`` for a group of KIP-848's protocol (its members may use either protocol;
        unless classic members hold the id), else ``classic`` (ListGroups v5's group type)."""
        if self.consumer.group(group_id) is not None and not self.classic.has_members(group_id):
            return "consumer"
        return "classic"

    def state_of(self, group_id: str) -> GroupState:
        group = self.classic.group(group_id)
        if group is not None:
            return group.state
        return GroupState.EMPTY if group_id in self.offsets.groups() else GroupState.DEAD

    # -- the consumer protocol's membership in __consumer_offsets --------------------------------------

    def consumer_heartbeat(
        self, body: Any, client_id: str, client_host: str, allowed_topic: Callable[[str], bool]
    ) -> tuple[dict[str, Any], Awaitable[None] | None]:
        """A ConsumerGroupHeartbeat (where this broker coordinates the group): the response, and
        what it waits for before it goes, the write of what the heartbeat changed in the group
        (None: it changed nothing), as Kafka answers once its records are committed."""
        response = self.consumer.heartbeat(body, client_id, client_host, allowed_topic)
        members = {member_id for member_id in (body.member_id, response["member_id"]) if member_id}
        return response, self._store_consumer_group(body.group_id, members)

    def _store_consumer_group(self, group_id: str, members: Collection[str] = ()) -> Awaitable[None] | None:
        """Write the records of what changed in consumer group ``group_id`` (tombstones when it is
        gone), ``members`` the members a request changed (members removed and a new target
        assignment are found without); returns the durability wait, a failed one when the append
        failed."""
        records = self._consumer_records.changes(group_id, self.consumer.group(group_id), self._topic_ids(), members)
        if not records:
            return None
        appended, stored = self._append_membership(group_id, records)
        if appended:
            self._consumer_records.written(group_id, records)
        return stored

    def _append_membership(
        self, group_id: str, records: list[tuple[bytes, bytes | None]]
    ) -> tuple[bool, Awaitable[None] | None]:
        """Append a group's membership records: whether they were appended, and the durability
        wait (None: nothing to wait for; a failed one when the append failed: memory is ahead of
        the log, and the next change writes it again)."""
        try:
            written = self.offsets.append_records(group_id, records)
        except StorageError as error:
            failed: asyncio.Future[None] = self._loop.create_future()
            failed.set_exception(error)
            return False, failed
        return True, self._durable(written)

    def _consumer_group_changed(self, group_id: str) -> None:
        if self.owner_error(group_id):
            return
        stored = self._store_consumer_group(group_id)
        if stored is not None:
            asyncio.ensure_future(stored).add_done_callback(
                functools.partial(log_failure, f"group {group_id}: writing its membership")
            )

    # -- the classic protocol's membership in __consumer_offsets (classic_group_log.py) ----------------

    def _classic_group_changed(self, group_id: str) -> None:
        """Write the record of classic group ``group_id`` if what it holds changed (its tombstone
        when the group is gone). Nobody waits for it but a DeleteGroups: the leader's SyncGroup is
        answered at once, in its own call, ahead of the followers (see classic_group.py)."""
        if self.owner_error(group_id):
            return
        group = self.classic.group(group_id)
        state = classic_group_log.snapshot(group) if group is not None else None
        if group is not None and state is None:
            return  # in a rebalance: the record keeps the last Stable or Empty generation
        if state == self._classic_written.get(group_id) or (state is None and group_id not in self._classic_written):
            return
        record = None if state is None else classic_group_log.encode_value(state)
        appended, wait = self._append_membership(group_id, [(classic_group_log.encode_key(group_id), record)])
        if appended and state is None:
            del self._classic_written[group_id]
        elif appended and state is not None:
            self._classic_written[group_id] = state
        if wait is not None:
            stored = asyncio.ensure_future(wait)
            self._classic_writes[group_id] = stored
            stored.add_done_callback(functools.partial(self._classic_stored, group_id))

    def _classic_stored(self, group_id: str, stored: asyncio.Future[None]) -> None:
        if self._classic_writes.get(group_id) is stored:
            del self._classic_writes[group_id]
        log_failure(f"group {group_id}: writing its membership", stored)

    # -- the classic protocol, where this broker coordinates the group ---------------------------------

    def join(self, group_id: str, member_id: str, **member: Any) -> dict[str, Any] | asyncio.Future[dict[str, Any]]:
        """A JoinGroup (``member``: ``ClassicGroups.join``'s keywords): a response dict now, or a
        future resolved when the rebalance completes (a classic group) or when what the join
        changed is written (a consumer group with members, which a classic member joins)."""
        if group_id and self.owner_error(group_id):
            return self.classic.join_error(ErrorCode.not_coordinator, member_id)
        consumer = self.consumer.group(group_id) if group_id else None
        if consumer is not None and consumer.members:
            refused = self.classic.join_refusal(group_id, member_id, member["session_timeout_ms"])
            if refused is not None:
                return refused
            response = self.consumer.classic_join(group_id, member_id, **member)
            stored = self._store_consumer_group(group_id, {response["member_id"]})
            if stored is None:
                return response
            return asyncio.ensure_future(
                answer_after([asyncio.ensure_future(stored)], response, f"group {group_id}'s membership")
            )
        if consumer is not None:  # an empty consumer group: the classic group takes the id, as Kafka's does
            self.consumer.delete(group_id)
            self._consumer_group_changed(group_id)
        return self.classic.join(group_id, member_id, **member)

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: Mapping[str, bytes],
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> dict[str, Any] | asyncio.Future[dict[str, Any]]:
        """A SyncGroup (``protocol_type`` and ``protocol_name``: v5+, checked for a classic member
        of a consumer group; classic groups have them checked by the handler)."""
        if self.owner_error(group_id):
            return self.classic.sync_error(ErrorCode.not_coordinator)
        if self.consumer.has_members(group_id):
            return self.consumer.classic_sync(
                group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name
            )
        return self.classic.sync(group_id, generation_id, member_id, assignments, group_instance_id)

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None = None
    ) -> ErrorCode:
        if self.owner_error(group_id):
            return ErrorCode.not_coordinator
        if self.consumer.has_members(group_id):
            return self.consumer.classic_heartbeat(group_id, generation_id, member_id, group_instance_id)
        return self.classic.heartbeat(group_id, generation_id, member_id, group_instance_id)

    def leave(self, group_id: str, member_id: str, group_instance_id: str | None = None) -> ErrorCode:
        """A LeaveGroup's member (a classic member of a consumer group: what its leaving changed is
        written in the background)."""
        if self.owner_error(group_id):
            return ErrorCode.not_coordinator
        if self.consumer.has_members(group_id):
            code = self.consumer.classic_leave(group_id, member_id, group_instance_id)
            self._consumer_group_changed(group_id)
            return code
        return self.classic.leave(group_id, member_id, group_instance_id)

    # -- offsets -------------------------------------------------------------------------------------

    def validate_offset_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        *,
        transactional: bool = False,
        group_instance_id: str | None = None,
        partitions: Iterable[tuple[str, int]] = (),
    ) -> ErrorCode:
        """Whether a commit (or a transactional one, KIP-447) of ``partitions`` (topic, index) may
        go: this broker coordinates the group, and the group's protocol accepts the member (its
        epoch for the consumer protocol, or an older one for partitions held since then; its
        generation for the classic one); a commit counts as a sign of life of the member."""
        if not group_id:
            return ErrorCode.invalid_group_id
        owner = self.owner_error(group_id)
        if owner:
            return owner
        consumer = self.consumer.validate_offsets(group_id, member_id, generation_id, partitions)
        if consumer is not None:  # a group of the consumer protocol: its member and epoch
            if consumer is ErrorCode.none:
                self.consumer.touch(group_id, member_id)
            return consumer
        return self.classic.validate_offset_commit(
            group_id, generation_id, member_id, transactional=transactional, group_instance_id=group_instance_id
        )

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
        if self.classic.has_members(group_id) or self.consumer.has_members(group_id):
            return ErrorCode.non_empty_group, None
        known = self.classic.group(group_id) is not None or self.consumer.group(group_id) is not None
        if not known and group_id not in self.offsets.groups():
            return ErrorCode.group_id_not_found, None
        written = self.offsets.delete(group_id)
        # Kafka's tombstones of a consumer group's own records (its epochs: it has no members left)
        records = self._consumer_records.changes(group_id, None, self._topic_ids())
        if records:
            written = self.offsets.append_records(group_id, records)
            self._consumer_records.written(group_id, records)
        self.consumer.delete(group_id)
        self.classic.delete(group_id)  # its record's tombstone, after the rest: its wait covers them
        tombstone = self._classic_writes.pop(group_id, None)
        return ErrorCode.none, tombstone if tombstone is not None else self._durable(written)

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
        if not self.classic.has_members(group_id) and group_id not in self.offsets.groups():
            if not self.consumer.has_members(group_id):
                return ErrorCode.group_id_not_found, {}, None
        subscribed = self.classic.subscribed_topics(group_id) | self.consumer.subscribed_topics(group_id)
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
        self.classic.close()


def _report_unstored_tombstones(topic: str, stored: asyncio.Future[None]) -> None:
    if not stored.cancelled() and stored.exception() is not None:
        logger.error("the offset tombstones of deleted topic %s were not fsynced: %s", topic, stored.exception())


def write_error_code(error: StorageError) -> ErrorCode:
    """What a client is told when a group write failed: NOT_COORDINATOR (find the coordinator
    again) when the coordinator lost its partition, else KAFKA_STORAGE_ERROR."""
    return ErrorCode.not_coordinator if isinstance(error, NotReplicatedError) else ErrorCode.kafka_storage_error


def _log_fsync_failure(done: asyncio.Future[None]) -> None:
    if not done.cancelled() and done.exception() is not None:
        logger.error("fsync of transactional offsets in __consumer_offsets failed: %s", done.exception())
