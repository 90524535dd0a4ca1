"""One broker's side of replication (Kafka's ReplicaManager; a partition's leader state is in
partition.py, Kafka's Partition, and the follower's fetcher in fetcher.py, its ReplicaFetcherThread).

(About 650 lines, one class: as Kafka's ReplicaManager it is the broker's view of the metadata and
the one place that applies it, so the roles, the checks every request of a partition goes through
and the admin changes a broker forwards to the controller, which it applies at once, stay together.)

Every broker has one (``broker.replicas``), whatever the size of its cluster: a single node is a
cluster of one (its controller is its own, see ``metadata/controller.py``), whose partitions have
one replica, the node leads them all, and local replication is the trivial case (a leader alone in
its ISR: the high watermark is the log end offset, acks=all waits for nothing but the fsync). It
runs on the broker's event loop and applies the controller's metadata images: for each partition
the broker hosts it is the **leader** (serves produce and fetch, tracks its followers) or a
**follower** (fetches from the leader) or neither (the partition is offline).

Errors: a partition the metadata does not have is UNKNOWN_TOPIC_OR_PARTITION; one this broker
does not lead, NOT_LEADER_OR_FOLLOWER. A partition whose local log failed (an I/O error,
``Log.mark_failed``) is reported offline by this broker (LEADER_NOT_AVAILABLE, no leader) until a
restart recovers it, as Kafka reports a partition whose replica sits in a failed log directory.

Leader:

* Produce: only the leader appends (NOT_LEADER_OR_FOLLOWER elsewhere); batches are stamped with
  its leader epoch. acks=all needs ``min.insync.replicas`` in the ISR before appending
  (NOT_ENOUGH_REPLICAS), then waits until the high watermark passes the batch
  (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum meanwhile,
  REQUEST_TIMED_OUT after the request's timeout, NOT_LEADER_OR_FOLLOWER if leadership moved).
* Fetch with a replica id is a follower's: its fetch offset is that follower's log end offset
  (LEO); it reads up to the LEO, not the high watermark. A follower that fetched up to the leader's
  LEO is "caught up" at that time (Kafka's lastCaughtUpTimeMs rule).
* High watermark (HW) = the smallest LEO among the in-sync replicas (the LEO itself for a leader
  alone in its ISR); consumers (replica id -1) read below it only, ListOffsets' latest offset is it.
* ISR: a follower that has not caught up for ``replica.lag.time.max.ms`` is removed; one whose
  LEO reached the HW (and the start of the current leader epoch) is added back — both through the
  controller's AlterPartition, with the leader's epochs, so a deposed leader cannot change it.
* Fetch and OffsetForLeaderEpoch carrying a current leader epoch older than the partition's are
  answered FENCED_LEADER_EPOCH, newer ones UNKNOWN_LEADER_EPOCH (KIP-320).

Follower: one fetcher task per leader broker, with a connection to its listener. After a leader
change it first asks the new leader (OffsetForLeaderEpoch) where its own latest epoch ended and
truncates its log there, then fetches from its LEO, appending the leader's batches verbatim (their
offsets and leader epochs kept) and taking the leader's HW (capped at its own LEO).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from kafka_spark.broker.internal_topics import INTERNAL_TOPICS, partition_for
from kafka_spark.broker.metadata.controller import Controller
from kafka_spark.broker.metadata.image import NO_LEADER, MetadataImage, PartitionState
from kafka_spark.broker.oauthbearer.login import broker_login
from kafka_spark.broker.replication.client import Peers
from kafka_spark.broker.replication.fetcher import ReplicaFetcher
from kafka_spark.broker.replication.partition import (
    FOLLOWER,
    LEADER,
    OFFLINE,
    FollowerState,
    Replica,
    Waiter,
    fail,
    now_ms,
)
from kafka_spark.broker.storage.config import normalize_topic_configs
from kafka_spark.broker.storage.epochs import LeaderEpochCache
from kafka_spark.broker.storage.errors import StorageError, TopicExistsError
from kafka_spark.broker.storage.log import Log
from kafka_spark.broker.storage.log_manager import TopicInfo, check_new_topic, check_partition_count
from kafka_spark.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kafka_spark.broker.config import BrokerConfig
    from kafka_spark.broker.notifier import DataNotifier
    from kafka_spark.broker.storage.log_manager import LogManager

logger = logging.getLogger("kafka_spark.broker.cluster")

#: The coordinators' topics -> (partition count, configs). A key's coordinator is the leader of the
#: key's partition (Kafka's hash of the group / transactional id).
COORDINATOR_TOPICS = INTERNAL_TOPICS
coordinator_partition = partition_for
#: Fetch and OffsetForLeaderEpoch versions the fetchers send (classic encoding, replica id in the body).


class ReplicaHost(Protocol):
    """What the replica manager uses of its broker (broker.py's ``Broker``)."""

    config: BrokerConfig
    loop: asyncio.AbstractEventLoop
    logs: LogManager
    notifier: DataNotifier
    port: int

    @property
    def advertised_host(self) -> str: ...

    def coordinator_partition_moved(self, tp: TopicPartition, leader_epoch: int | None) -> None:
        """This broker leads ``tp`` of an internal topic from ``leader_epoch`` on (None: no more)."""

    def forget_topic(self, name: str) -> None:
        """The metadata dropped topic ``name``: forget what is kept of it in memory."""

    def forget_producer_state(self, tp: TopicPartition) -> None:
        """``tp``'s log changed under its producer state (truncation, a new leader): rebuild it."""


class ReplicaManager:
    """See the module docstring. Every method runs on the broker's event loop unless noted."""

    def __init__(
        self,
        broker: ReplicaHost,
        controller: Controller,
        *,
        replica_lag_time_max_ms: int = 30_000,
        heartbeat_interval_ms: int = 250,
        replica_fetch_wait_max_ms: int = 500,
    ) -> None:
        self.broker = broker
        self.node_id = broker.config.node_id
        self.controller = controller
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.replica_fetch_wait_max_ms = replica_fetch_wait_max_ms
        self.image: MetadataImage | None = None
        self.partitions: dict[TopicPartition, Replica] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.broker_epoch = -1
        self._timers: list[asyncio.TimerHandle] = []
        self._closed = False
        # Coordinators' requests to other brokers (WriteTxnMarkers).
        self._peers = Peers(f"pylog-broker-{self.node_id}", self.login)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.broker.loop

    @property
    def closed(self) -> bool:
        return self._closed

    def forget_producer_state(self, tp: TopicPartition) -> None:
        self.broker.forget_producer_state(tp)

    def login(self) -> Any:
        """How this broker logs in to the others on a SASL listener (None without SASL)."""
        return broker_login(self.broker.config)

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Register with the controller and start heartbeating and ISR checks."""
        self._register()
        self._schedule(self.heartbeat_interval_ms, self._heartbeat)
        self._schedule(max(self.replica_lag_time_max_ms / 2, 20), self._shrink_isrs)

    def _register(self) -> None:
        def push(image: MetadataImage) -> None:  # called on the controller's thread
            self.loop.call_soon_threadsafe(self.apply, image)

        self.broker_epoch = self.controller.register(self.node_id, self.broker.advertised_host, self.broker.port, push)
        self.apply(self.controller.image)

    def _schedule(self, interval_ms: float, action: Callable[[], None]) -> None:
        def tick() -> None:
            if self._closed:
                return
            try:
                action()
            except Exception:  # noqa: BLE001 - a periodic task must survive a bad round
                logger.exception("broker %d: %s failed", self.node_id, action.__name__)
            self._timers.append(self.loop.call_later(interval_ms / 1000, tick))
            del self._timers[:-4]

        self._timers.append(self.loop.call_later(interval_ms / 1000, tick))

    def _heartbeat(self) -> None:
        version = self.image.version if self.image is not None else None
        if not self.controller.heartbeat(self.node_id, self.broker_epoch, version):
            # Fenced while alive (heartbeats delayed past the session timeout): register anew and
            # rejoin as a follower of every partition, as a Kafka broker does after being fenced.
            logger.warning("broker %d was fenced by the controller; registering again", self.node_id)
            self._register()

    def stop(self, controlled: bool) -> None:
        """Stop replicating; ``controlled``: tell the controller first (leadership moves now; a
        broker alone in its cluster has no one to move it to, and its controller stops with it)."""
        if controlled and not self._closed and not self.alone:
            self.controller.shutdown_broker(self.node_id, self.broker_epoch)
        self._closed = True
        for timer in self._timers:
            timer.cancel()
        for fetcher in self.fetchers.values():
            fetcher.stop()
        self.fetchers.clear()
        self._peers.close()
        for replica in self.partitions.values():
            if replica.tp.topic in COORDINATOR_TOPICS and replica.role == LEADER:
                self.broker.coordinator_partition_moved(replica.tp, None)
            replica.role = OFFLINE
            replica.fail_waiters(ErrorCode.not_leader_or_follower)

    # -- metadata ------------------------------------------------------------------------------------

    def apply(self, image: MetadataImage) -> None:
        """Take a new metadata image: create local logs, change roles, start or stop fetching."""
        if self._closed or (self.image is not None and image.version <= self.image.version):
            return
        previous = self.image
        self.image = image
        logs = self.broker.logs
        for name, info in image.topics.items():
            hosted = any(
                self.node_id in image.partitions[TopicPartition(name, p)].replicas for p in range(info.partitions)
            )
            local = logs.topic_info(name)
            if hosted and local is None:
                logs.create_topic(name, info.partitions, dict(info.configs), topic_id=info.topic_id)
            elif local is not None:
                if local.partitions < info.partitions:  # CreatePartitions
                    logs.add_partitions(name, info.partitions)
                if dict(local.configs) != dict(info.configs):  # AlterConfigs, through the controller
                    logs.set_topic_configs(name, info.configs)
        for tp in [tp for tp in self.partitions if tp not in image.partitions]:
            replica = self.partitions.pop(tp)
            replica.fail_waiters(ErrorCode.unknown_topic_or_partition)
            if tp.topic not in image.topics and logs.topic_info(tp.topic) is not None:
                logs.delete_topic(tp.topic)
        for tp, state in image.partitions.items():
            if self.node_id not in state.replicas:
                if tp in self.partitions:  # reassigned away (KIP-455)
                    self._drop_replica(self.partitions.pop(tp))
                continue
            known = self.partitions.get(tp)
            replica = known if known is not None else self._open_replica(tp)
            self._apply_state(replica, state)
        if previous is not None:
            # On every broker, hosting the topic or not (after the roles above: a coordinator that
            # just took over a partition of __consumer_offsets has loaded it): its group coordinator
            # tombstones the committed offsets of deleted topics in the groups it leads, as Kafka's
            # coordinators do when the metadata drops a topic.
            for name, info in previous.topics.items():
                now = image.topics.get(name)
                if now is None or now.topic_id != info.topic_id:
                    self.broker.forget_topic(name)
        for fetcher in self.fetchers.values():
            fetcher.wake()
        self.broker.notifier.notify()

    def _open_replica(self, tp: TopicPartition) -> Replica:
        log = self.broker.logs.get_log(tp.topic, tp.partition)
        epochs = LeaderEpochCache(log.directory)
        if not epochs.path.exists() and log.log_end_offset > log.log_start_offset:
            epochs.rebuild(log.batch_headers(), log.log_end_offset)
        epochs.truncate_from_end(log.log_end_offset)  # recovery may have cut a torn tail
        replica = Replica(tp, log, epochs)
        self.partitions[tp] = replica
        return replica

    def _apply_state(self, replica: Replica, state: PartitionState) -> None:
        old = replica.state
        if old is not None and (state.leader_epoch, state.partition_epoch) <= (old.leader_epoch, old.partition_epoch):
            return
        replica.state = state
        if state.leader == self.node_id:
            if old is None or replica.role != LEADER or old.leader_epoch != state.leader_epoch:
                self._become_leader(replica)
            else:
                if old.replicas != state.replicas:  # a reassignment added or removed followers
                    replica.followers = {
                        node: replica.followers.get(node) or FollowerState()
                        for node in state.replicas
                        if node != self.node_id
                    }
                self._maybe_advance_high_watermark(replica)
        elif old is None or old.leader_epoch != state.leader_epoch or replica.role == LEADER:
            self._become_follower(replica)

    def _become_leader(self, replica: Replica) -> None:
        state, log = replica.state, replica.log
        assert state is not None
        self._stop_fetching(replica.tp)
        replica.role = LEADER
        replica.needs_truncation = False
        log.leader_epoch = state.leader_epoch
        replica.epochs.assign(state.leader_epoch, log.log_end_offset)
        replica.epoch_start_offset = log.log_end_offset
        if log.replicated_high_watermark is None:
            log.replicated_high_watermark = log.log_end_offset
        self.broker.forget_producer_state(replica.tp)  # rebuilt from the log, with the records it got as follower
        now = now_ms()
        replica.followers = {
            node: FollowerState(last_caught_up_ms=now if node in state.isr else 0.0)
            for node in state.replicas
            if node != self.node_id
        }
        logger.info(
            "broker %d leads %s from offset %d (leader epoch %d, ISR %s)",
            self.node_id,
            replica.tp,
            log.log_end_offset,
            state.leader_epoch,
            list(state.isr),
        )
        self._maybe_advance_high_watermark(replica)
        if replica.tp.topic in COORDINATOR_TOPICS:  # its coordinator loads the partition's state
            self.broker.coordinator_partition_moved(replica.tp, state.leader_epoch)

    def _become_follower(self, replica: Replica) -> None:
        state = replica.state
        assert state is not None
        if replica.tp.topic in COORDINATOR_TOPICS and replica.role == LEADER:
            self.broker.coordinator_partition_moved(replica.tp, None)
        replica.fail_waiters(ErrorCode.not_leader_or_follower)
        self._stop_fetching(replica.tp)
        replica.followers = {}
        if state.leader == NO_LEADER:
            replica.role = OFFLINE
            return
        replica.role = FOLLOWER
        replica.needs_truncation = True
        replica.stalled_until = 0.0
        fetcher = self.fetchers.get(state.leader)
        if fetcher is None:
            fetcher = self.fetchers[state.leader] = ReplicaFetcher(self, state.leader)
        fetcher.partitions.add(replica.tp)
        fetcher.wake()
        logger.debug(
            "broker %d follows %s from broker %d (leader epoch %d)",
            self.node_id,
            replica.tp,
            state.leader,
            state.leader_epoch,
        )

    def _drop_replica(self, replica: Replica) -> None:
        """This broker no longer hosts ``replica`` (a reassignment moved it): it stops leading
        or fetching, and its records are removed, as Kafka deletes a removed replica's log."""
        if replica.tp.topic in COORDINATOR_TOPICS and replica.role == LEADER:
            self.broker.coordinator_partition_moved(replica.tp, None)
        replica.fail_waiters(ErrorCode.not_leader_or_follower)
        self._stop_fetching(replica.tp)
        replica.followers = {}
        replica.role = OFFLINE
        replica.log.truncate_fully_and_start_at(0)
        replica.epochs.truncate_from_end(0)
        logger.info("broker %d no longer hosts %s: its records are removed", self.node_id, replica.tp)

    def _stop_fetching(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.partitions.discard(tp)

    # -- leader: produce ------------------------------------------------------------------------------

    def _not_led(self, tp: TopicPartition) -> int:
        """The error of a request for ``tp`` that this broker does not lead."""
        exists = self.image is not None and tp in self.image.partitions
        return ErrorCode.not_leader_or_follower if exists else ErrorCode.unknown_topic_or_partition

    def check_produce(self, topic: str, partition: int, acks: int) -> int:
        """The error a produce to this partition gets before appending (0: go ahead)."""
        tp = TopicPartition(topic, partition)
        replica = self.partitions.get(tp)
        if replica is None or replica.role != LEADER or replica.state is None:
            return self._not_led(tp)
        if acks == -1 and self.image is not None and len(replica.state.isr) < self.image.min_insync_replicas(topic):
            return ErrorCode.not_enough_replicas
        return ErrorCode.none

    def wait_replicated(
        self, log: Log, entry: dict[str, Any], required_offset: int, timeout_ms: float
    ) -> asyncio.Future[None] | None:
        """A future done once the HW reaches ``required_offset`` (acks=all), or None when it has
        already (always so for a leader alone in its ISR: nothing to wait for). A failure is
        written into ``entry`` (the partition's produce response) and the future still completes."""
        replica = self.partitions.get(TopicPartition(log.topic, log.partition))
        if replica is None or replica.role != LEADER or replica.state is None:
            fail(entry, ErrorCode.not_leader_or_follower)
            return None
        if log.high_watermark >= required_offset:
            if self.image is not None and len(replica.state.isr) < self.image.min_insync_replicas(replica.tp.topic):
                fail(entry, ErrorCode.not_enough_replicas_after_append)
            return None
        future: asyncio.Future[None] = self.loop.create_future()
        waiter = Waiter(required_offset, future, entry)
        replica.waiters.append(waiter)

        def expire() -> None:
            if not future.done():
                replica.waiters.remove(waiter)
                fail(entry, ErrorCode.request_timed_out)
                future.set_result(None)

        waiter.timer = self.loop.call_later(max(timeout_ms, 1) / 1000, expire)
        self._complete_waiters(replica)
        return future

    # -- leader: fetch --------------------------------------------------------------------------------

    def check_fetch(
        self, topic: str, partition: int, replica_id: int, fetch_offset: int, current_leader_epoch: int
    ) -> int:
        """The error a Fetch of this partition gets (0: serve it); a follower's fetch also records
        its LEO here, which may move the ISR and the high watermark."""
        tp = TopicPartition(topic, partition)
        replica = self.partitions.get(tp)
        if replica is None or replica.role != LEADER or replica.state is None:
            return self._not_led(tp)
        code = self.check_epoch(replica, current_leader_epoch)
        if code:
            return code
        if replica_id >= 0:
            follower = replica.followers.get(replica_id)
            if follower is None:
                return ErrorCode.not_leader_or_follower
            self._update_follower(replica, replica_id, follower, fetch_offset)
        return ErrorCode.none

    @staticmethod
    def check_epoch(replica: Replica, current_leader_epoch: int) -> int:
        return replica.check_epoch(current_leader_epoch)

    def _update_follower(self, replica: Replica, node: int, follower: FollowerState, fetch_offset: int) -> None:
        replica.record_follower_fetch(follower, fetch_offset)
        if replica.may_join_isr(node, follower):
            assert replica.state is not None
            self._alter_isr(replica, replica.state.isr + (node,))
        self._maybe_advance_high_watermark(replica)

    def _maybe_advance_high_watermark(self, replica: Replica) -> None:
        if replica.advance_high_watermark(self.node_id):
            self.broker.notifier.notify()  # wakes consumers' fetches parked at the old HW
        self._complete_waiters(replica)

    def _complete_waiters(self, replica: Replica) -> None:
        replica.complete_waiters(self.image.min_insync_replicas(replica.tp.topic) if self.image is not None else 1)

    def _shrink_isrs(self) -> None:
        for replica in self.partitions.values():
            state = replica.state
            if replica.role != LEADER or state is None:
                continue
            lagging = replica.lagging_followers(self.node_id, self.replica_lag_time_max_ms)
            if lagging:
                logger.warning(
                    "%s: replica(s) %s fell behind by more than replica.lag.time.max.ms=%d; removing them from the ISR",
                    replica.tp,
                    lagging,
                    self.replica_lag_time_max_ms,
                )
                self._alter_isr(replica, tuple(node for node in state.isr if node not in lagging))

    def _alter_isr(self, replica: Replica, isr: tuple[int, ...]) -> None:
        state = replica.state
        assert state is not None
        code, new_state = self.controller.alter_partition(
            replica.tp, self.node_id, state.leader_epoch, state.partition_epoch, isr
        )
        if code:
            logger.info(
                "%s: ISR change to %s refused (error %d); waiting for newer metadata", replica.tp, list(isr), code
            )
        if new_state is not None:
            self._apply_state(replica, new_state)

    def list_offsets_check(self, topic: str, partition: int, current_leader_epoch: int = -1) -> tuple[int, int, bool]:
        """``(error code, leader epoch, lagging)`` for ListOffsets: the leader answers, when the
        client's current leader epoch (-1: not given) is its own (KIP-320). ``lagging``: the
        leader's high watermark is still below the start offset of its leader epoch (KIP-207): a
        new leader keeps the HW it had as a follower until its followers fetch from it, and a
        consumer's lookup answered from it could move backwards; list_offsets answers those
        OFFSET_NOT_AVAILABLE, which clients retry."""
        tp = TopicPartition(topic, partition)
        replica = self.partitions.get(tp)
        if replica is None or replica.role != LEADER or replica.state is None:
            return self._not_led(tp), -1, False
        code = self.check_epoch(replica, current_leader_epoch)
        if code:
            return code, -1, False
        return ErrorCode.none, replica.state.leader_epoch, replica.log.high_watermark < replica.epoch_start_offset

    # -- OffsetForLeaderEpoch ---------------------------------------------------------------------------

    def end_offset_for(
        self, topic: str, partition: int, current_leader_epoch: int, leader_epoch: int, replica_id: int
    ) -> tuple[int, int, int]:
        """``(error code, epoch, end offset)`` for OffsetForLeaderEpoch."""
        tp = TopicPartition(topic, partition)
        replica = self.partitions.get(tp)
        if replica is None or replica.state is None or (replica.role != LEADER):
            return self._not_led(tp), -1, -1
        code = self.check_epoch(replica, current_leader_epoch)
        if code:
            return code, -1, -1
        epoch, end = replica.epochs.end_offset_for(leader_epoch, replica.log.log_end_offset)
        return ErrorCode.none, epoch, end

    # -- requests to other brokers ----------------------------------------------------------------------

    async def request(self, node: int, api_key: int, version: int, body: dict[str, Any], timeout: float = 30.0) -> Any:
        """Send a request to broker ``node`` (as the image knows it) and return its response
        (``Peers.request``: ConnectionError when that broker is not alive)."""
        registration = self.image.brokers.get(node) if self.image is not None else None
        if self._closed or registration is None or not registration.alive:
            raise ConnectionError(f"broker {node} is not alive")
        return await self._peers.request(registration, api_key, version, body, timeout)

    # -- what Metadata and the admin requests read ------------------------------------------------------

    def topics(self) -> dict[str, TopicInfo]:
        """The cluster's topics (the metadata image's; this broker may host no replica of some)."""
        return dict(self.image.topics) if self.image is not None else {}

    def topic_name(self, topic_id: uuid.UUID | None) -> str | None:
        """The name of the topic with id ``topic_id``, or None when no topic has it."""
        if topic_id is None or self.image is None:
            return None
        return self.image.topic_names.get(topic_id)

    def partition_entry(self, topic: str, index: int) -> dict[str, Any]:
        """Metadata's description of one partition; a partition this broker leads whose log failed
        is offline (no leader, this broker among the offline replicas) until a restart."""
        assert self.image is not None
        tp = TopicPartition(topic, index)
        replica = self.partitions.get(tp)
        failed = replica is not None and replica.role == LEADER and replica.log.failure is not None
        return self.image.partition_entry(tp, failed_leader=failed)

    def broker_entries(self) -> list[dict[str, Any]]:
        assert self.image is not None
        return self.image.broker_entries()

    @property
    def alone(self) -> bool:
        """This broker is the only one its controller ever registered: a single node, a cluster of
        one, leads every partition and coordinates every key."""
        return self.image is not None and set(self.image.brokers) == {self.node_id}

    def ensure_internal_topic(self, topic: str) -> TopicInfo | None:
        """The internal topic ``topic``, created through the controller on first use (its
        partition count and configs from ``internal_topics.INTERNAL_TOPICS``, replication factor
        min(3, live brokers)); None when it cannot be created now (a failure is logged)."""
        assert self.image is not None
        info = self.image.topics.get(topic)
        if info is not None:
            return info
        live = sum(1 for registration in self.image.brokers.values() if registration.alive)
        partitions, configs = COORDINATOR_TOPICS[topic]
        try:
            return self.create_topic(topic, partitions, max(1, min(3, live)), dict(configs))
        except TopicExistsError:
            return self.image.topics.get(topic)
        except StorageError as error:
            logger.warning("creating %s failed: %s", topic, error)
            return None

    def coordinator(self, topic: str, key: str) -> tuple[int, dict[str, Any] | None]:
        """``(error code, broker)`` coordinating ``key`` (a group id in ``__consumer_offsets``, a
        transactional id in ``__transaction_state``): the leader of the key's partition of that
        topic, as in Kafka. The topic is created through the controller on first use; while it was
        just created, only a leader that is this broker (which loaded the partition as it took the
        new metadata) is answered, the others are COORDINATOR_NOT_AVAILABLE until the client asks
        again, as Kafka answers while it creates the topic."""
        assert self.image is not None
        created = topic not in self.image.topics
        info = self.ensure_internal_topic(topic)
        if info is None:
            return ErrorCode.coordinator_not_available, None
        leader = self.image.live_leader(TopicPartition(topic, coordinator_partition(key, info.partitions)))
        if leader is None or (created and leader.node_id != self.node_id):
            return ErrorCode.coordinator_not_available, None
        return ErrorCode.none, {"node_id": leader.node_id, "host": leader.host, "port": leader.port}

    def hosted_replica(self, topic: str, partition: int) -> tuple[int, Log | None, bool]:
        """``(error code, log, leads)`` of this broker's replica of a partition: UNKNOWN_TOPIC_OR_PARTITION
        when the cluster has no such partition, NOT_LEADER_OR_FOLLOWER when this broker holds no
        replica of it (DescribeProducers, which followers answer too, as in Kafka)."""
        tp = TopicPartition(topic, partition)
        replica = self.partitions.get(tp)
        if replica is None or replica.role not in (LEADER, FOLLOWER):
            return self._not_led(tp), None, False
        return ErrorCode.none, replica.log, replica.role == LEADER

    def leads(self, topic: str, partition: int) -> bool:
        replica = self.partitions.get(TopicPartition(topic, partition))
        return replica is not None and replica.role == LEADER

    def leader_of(self, tp: TopicPartition) -> int:
        """The partition's leader in the metadata (NO_LEADER while it has none or does not exist)."""
        return self.image.leader_of(tp) if self.image is not None else NO_LEADER

    @property
    def controller_id(self) -> int:
        return self.image.controller_id if self.image is not None else self.node_id

    # -- what the admin requests change, through the controller -----------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int | None,
        replication_factor: int | None,
        configs: Mapping[str, str | None] | None,
        validate_only: bool = False,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
    ) -> TopicInfo:
        """Check the topic (name, partitions, configs: ``check_new_topic``), then create it through
        the controller; this broker takes the new image at once (others a moment later)."""
        count = (
            len(assignments)
            if assignments
            else self.controller.num_partitions
            if partitions in (None, -1)
            else partitions
        )
        check_new_topic(name, count or 0, configs, self.topics(), self.broker.logs.default_config)
        cleaned = normalize_topic_configs({key: value for key, value in (configs or {}).items() if value is not None})
        info = self.controller.create_topic(
            name,
            count,
            replication_factor,
            cleaned,
            assignments=assignments,
            validate_only=validate_only,
        )
        if not validate_only:
            self._take_new_metadata(lambda: self.controller.delete_topic(name))
        return info

    def _take_new_metadata(self, undo: Callable[[], None]) -> None:
        """Apply the controller's latest image now; if this broker cannot (its disk refused to
        create a log), ``undo`` the change and raise, so the request fails as a whole."""
        try:
            self.apply(self.controller.image)
        except StorageError:
            undo()
            self.apply(self.controller.image)
            raise

    def elect_leaders(self, asked: Any, unclean: bool) -> list[dict[str, Any]]:
        """ElectLeaders results (``asked`` None: every partition, listing those elected)."""
        partitions = (
            None if asked is None else [TopicPartition(entry.topic, p) for entry in asked for p in entry.partitions]
        )
        codes = self.controller.elect_leaders(partitions, unclean=unclean)
        if asked is None:
            codes = {tp: code for tp, code in codes.items() if code != ErrorCode.election_not_needed}
        self.apply(self.controller.image)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, code in codes.items():
            replica = self.partitions.get(tp)
            message = _ELECTION_MESSAGES.get(code)
            if code == ErrorCode.unknown_topic_or_partition:
                message = f"{tp.topic}-{tp.partition} does not exist"
            elif replica is not None and replica.role == LEADER and replica.log.failure is not None:
                # Its leader's log failed and no other replica can take over.
                code = ErrorCode.eligible_leaders_not_available if unclean else ErrorCode.preferred_leader_not_available
                message = f"{tp.topic}-{tp.partition} is offline: its leader's log failed"
            by_topic.setdefault(tp.topic, []).append(
                {"partition_id": tp.partition, "error_code": code, "error_message": message}
            )
        return [{"topic": topic, "partition_result": results} for topic, results in by_topic.items()]

    def reassign(
        self, targets: Mapping[TopicPartition, Sequence[int] | None], allow_replication_factor_change: bool = True
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """AlterPartitionReassignments, decided by the controller (metadata/controller.py)."""
        results = self.controller.reassign(targets, allow_replication_factor_change=allow_replication_factor_change)
        self.apply(self.controller.image)
        return results

    def reassignments(self) -> dict[TopicPartition, PartitionState]:
        """The partitions being reassigned (ListPartitionReassignments)."""
        return self.controller.reassignments()

    def add_partitions(
        self, name: str, count: int, validate_only: bool = False, *, assignments: Sequence[Sequence[int]] | None = None
    ) -> None:
        check_partition_count(name, count)
        self.controller.add_partitions(name, count, assignments=assignments, validate_only=validate_only)
        if not validate_only:
            self.apply(self.controller.image)

    def delete_topic(self, name: str) -> None:
        self.controller.delete_topic(name)
        self.apply(self.controller.image)

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Through the controller, so that every replica (and the leader's min.insync.replicas)
        takes them; this broker at once, the others with the next image."""
        self.controller.alter_topic_configs(name, configs)
        self.apply(self.controller.image)


_ELECTION_MESSAGES: dict[int, str] = {ErrorCode.election_not_needed: "Leader election not needed for topic partition."}
