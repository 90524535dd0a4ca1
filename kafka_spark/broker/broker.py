"""The broker node: its state (logs, settings, coordinators) as the API handlers see it.

The socket server (server.py) moves bytes and hands each decoded request to
``kafka_spark.broker.apis.dispatch``, which calls the request's handler with this node (one
module per Kafka API; ``apis/context.py`` lists what a handler may use of the node).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafka_spark.broker.apis.fetch_session import FetchSessionCache
from kafka_spark.broker.authorizer import Authorizer
from kafka_spark.broker.config import BrokerConfig
from kafka_spark.broker.coordinator.group import DEFAULT_INITIAL_REBALANCE_DELAY_MS, GroupCoordinator
from kafka_spark.broker.coordinator.group_offsets import OFFSETS_TOPIC
from kafka_spark.broker.coordinator.transaction import TransactionCoordinator
from kafka_spark.broker.coordinator.transaction_log import TRANSACTION_STATE_TOPIC
from kafka_spark.broker.credentials import CredentialStore
from kafka_spark.broker.durability import GroupCommit
from kafka_spark.broker.notifier import DataNotifier
from kafka_spark.broker.storage.log import Log
from kafka_spark.broker.storage.log_manager import LogManager
from kafka_spark.broker.storage.producer_state import PartitionProducerState, ProducerIdManager
from kafka_spark.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kafka_spark.broker.apis.context import ProducerIds
    from kafka_spark.broker.replication.replica_manager import ReplicaManager

logger = logging.getLogger("kafka_spark.broker")


class Broker:
    """One node. Not thread-safe by itself: requests are handled on one event loop; the
    storage layer underneath locks for the few calls made from other threads."""

    def __init__(
        self,
        config: BrokerConfig,
        loop: asyncio.AbstractEventLoop,
        cluster: Callable[[Broker], ReplicaManager] | None = None,
    ) -> None:
        self.config = config
        self.loop = loop
        self.port = config.port  # replaced by the bound port once the server listens
        # the single node leads every partition in a leader epoch of its own, bumped at each start;
        # a cluster's ReplicaManager keeps the epochs the controller decides
        self.logs = LogManager(config.log_dir, config.log, leader_epochs=cluster is None)
        self.notifier = DataNotifier(loop)
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        self.group_commit = GroupCommit(
            loop, ring_entries=config.log_flush_io_uring_entries, flush_timeout_ms=config.log_flush_timeout_ms
        )
        self.started_ms = int(time.time() * 1000)
        self.producer_ids: ProducerIds = ProducerIdManager(config.log_dir)
        # ACLs (with authorizer.class.name; None: everything is allowed, as in Kafka) and the SCRAM
        # credentials of the broker's metadata, both kept in the log directory.
        self.authorizer = (
            Authorizer(
                config.log_dir,
                super_users=config.super_users,
                allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
            )
            if config.authorizer_class_name
            else None
        )
        self.credentials = CredentialStore(config.log_dir)
        self._producer_states: dict[TopicPartition, PartitionProducerState] = {}
        # Replication (kafka_spark.broker.cluster.ReplicaManager) on a broker of a cluster, made by
        # ``cluster``; None on the single-node broker, which leads every partition alone. Set before
        # the coordinators: on a cluster they load their state when this broker becomes the leader
        # of a partition of their topic (``coordinator_partition_moved``), not at construction.
        self.cluster: ReplicaManager | None = cluster(self) if cluster is not None else None
        # Consumer groups and their committed offsets (replays __consumer_offsets).
        self.groups = GroupCoordinator(
            self,
            initial_rebalance_delay_ms=getattr(
                config, "group_initial_rebalance_delay_ms", DEFAULT_INITIAL_REBALANCE_DELAY_MS
            ),
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
        )
        self.transactions = TransactionCoordinator(  # replays __transaction_state
            self, transactional_id_expiration_ms=config.transactional_id_expiration_ms
        )
        self._producer_expiry = loop.call_later(
            config.producer_id_expiration_check_interval_ms / 1000, self._expire_producers_periodically
        )

    @property
    def advertised_host(self) -> str:
        return self.config.advertised

    def producer_state(self, log: Log) -> PartitionProducerState:
        """Idempotent-producer state and transaction index of a partition, rebuilt from its batch
        headers on first use."""
        topic_partition = TopicPartition(log.topic, log.partition)
        state = self._producer_states.get(topic_partition)
        if state is None:
            state = PartitionProducerState.load(log)
            self._producer_states[topic_partition] = state
        return state

    def expire_producer_ids(self, now_ms: int) -> int:
        """Forget, in every partition, the idempotent producers idle for longer than
        ``producer_id_expiration_ms`` (Kafka's producer.id.expiration.ms); how many were forgotten."""
        forgotten = 0
        for topic_partition, state in self._producer_states.items():
            expired = state.expire(now_ms, self.config.producer_id_expiration_ms)
            if expired:
                logger.debug("%s: forgot %d idle producer id(s)", topic_partition, len(expired))
            forgotten += len(expired)
        return forgotten

    def _expire_producers_periodically(self) -> None:
        try:
            forgotten = self.expire_producer_ids(int(time.time() * 1000))
            if forgotten:
                logger.info("forgot %d idle producer id(s) (producer.id.expiration.ms)", forgotten)
        finally:
            self._producer_expiry = self.loop.call_later(
                self.config.producer_id_expiration_check_interval_ms / 1000, self._expire_producers_periodically
            )

    def coordinator_partition_moved(self, tp: TopicPartition, leader_epoch: int | None) -> None:
        """On a cluster: this broker became the leader of a partition of ``__transaction_state``
        or ``__consumer_offsets`` (``leader_epoch``), or stopped leading it (None)."""
        if tp.topic == TRANSACTION_STATE_TOPIC:
            self.transactions.partition_moved(tp.partition, leader_epoch)
        elif tp.topic == OFFSETS_TOPIC:
            self.groups.partition_moved(tp.partition, leader_epoch)

    def forget_topic(self, name: str) -> None:
        """Drop in-memory state of a deleted topic."""
        for topic_partition in [tp for tp in self._producer_states if tp.topic == name]:
            del self._producer_states[topic_partition]
        self.groups.forget_topic(name)

    def run_retention(self) -> None:
        deleted = self.logs.run_retention()
        if deleted:
            logger.info("retention deleted %d segment(s)", deleted)

    def close(self) -> None:
        self._producer_expiry.cancel()
        self.groups.close()
        self.transactions.close()
        self.group_commit.close()
        self.logs.close()
