"""The broker node: its state (logs, settings, replicas, coordinators) as the API handlers see it.

The socket server (server.py) moves bytes and hands each decoded request to
``kafka_spark.broker.apis.dispatch``, which calls the request's handler with this node (one
module per Kafka API; ``apis/context.py`` lists what a handler may use of the node).

Every node is a member of a cluster, of one on its own: it has a replica manager
(replication/replica_manager.py) that applies its controller's metadata, and a single node is its
own controller (``Controller.of_one``, KRaft's combined mode), built from its log directory. The
coordinators keep their state in the internal topics on any cluster size.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from kafka_spark.broker.apis.fetch_session import FetchSessionCache
from kafka_spark.broker.authorizer import Authorizer
from kafka_spark.broker.config import BrokerConfig
from kafka_spark.broker.coordinator.classic_state import DEFAULT_INITIAL_REBALANCE_DELAY_MS
from kafka_spark.broker.coordinator.group import GroupCoordinator
from kafka_spark.broker.coordinator.transaction import TransactionCoordinator
from kafka_spark.broker.coordinator.txn_markers import MarkerChannel
from kafka_spark.broker.credentials import CredentialStore
from kafka_spark.broker.durability import GroupCommit
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from kafka_spark.broker.metadata.controller import Controller
from kafka_spark.broker.notifier import DataNotifier
from kafka_spark.broker.replication.replica_manager import ReplicaManager
from kafka_spark.broker.storage import epochs
from kafka_spark.broker.storage.log import Log
from kafka_spark.broker.storage.log_manager import LogManager
from kafka_spark.broker.storage.producer_state import PartitionProducerState, ProducerIdManager
from kafka_spark.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kafka_spark.broker.apis.context import ProducerIds

logger = logging.getLogger("kafka_spark.broker")


class Broker:
    """One node. Not thread-safe by itself: requests are handled on one event loop; the
    storage layer underneath locks for the few calls made from other threads."""

    def __init__(
        self,
        config: BrokerConfig,
        loop: asyncio.AbstractEventLoop,
        controller: Controller | None = None,
        *,
        producer_ids: ProducerIds | None = None,
        **replication: Any,
    ) -> None:
        """``controller``: the controller of this node's cluster; None makes the node a cluster of
        one, its own controller over its log directory. ``producer_ids``: where producer ids come
        from (default: the log directory's allocator; a cluster's nodes hand out ids unique across
        it). ``replication``: the replica manager's settings (replica_lag_time_max_ms,
        heartbeat_interval_ms, replica_fetch_wait_max_ms)."""
        self.config = config
        self.loop = loop
        self.port = config.port  # replaced by the bound port once the server listens
        self.logs = LogManager(config.log_dir, config.log)
        self.notifier = DataNotifier(loop)
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        self.group_commit = GroupCommit(
            loop, ring_entries=config.log_flush_io_uring_entries, flush_timeout_ms=config.log_flush_timeout_ms
        )
        self.started_ms = int(time.time() * 1000)
        self.producer_ids: ProducerIds = producer_ids or ProducerIdManager(config.log_dir)
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
        # This broker's replicas of the partitions the metadata assigns it. The coordinators load
        # their state when it becomes the leader of a partition of their topic (at ``start``, on a
        # single node), through ``coordinator_partition_moved``, not at construction.
        self.replicas = ReplicaManager(
            self, controller if controller is not None else self._own_controller(), **replication
        )
        # The coordinators, each given the narrow interfaces it uses (coordinator/context.py).
        # Consumer groups and their committed offsets (__consumer_offsets).
        self.groups = GroupCoordinator(
            loop,
            self.logs,
            self.replicas,
            self.group_commit,
            self.notifier,
            initial_rebalance_delay_ms=getattr(
                config, "group_initial_rebalance_delay_ms", DEFAULT_INITIAL_REBALANCE_DELAY_MS
            ),
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            migration_policy=config.group_consumer_migration_policy,
        )
        # Transaction markers at the partitions' leaders, here or with WriteTxnMarkers.
        self.markers = MarkerChannel(
            self.logs, self.replicas, self.producer_state, self.notifier, self.groups.txn_marker
        )
        # Transactional ids and their transactions (__transaction_state).
        self.transactions = TransactionCoordinator(
            loop,
            self.logs,
            self.replicas,
            self.group_commit,
            self.markers,
            self.producer_ids,
            self.producer_state,
            self.groups.commit_offsets,
            self.notifier,
            transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        )
        self._producer_expiry = loop.call_later(
            config.producer_id_expiration_check_interval_ms / 1000, self._expire_producers_periodically
        )

    def _own_controller(self) -> Controller:
        """A single node's controller: its topics and each partition's last leader epoch as its
        log directory holds them (see ``Controller.of_one``)."""
        last_epochs = {
            TopicPartition(log.topic, log.partition): epochs.last_epoch_used(
                log.directory, log.batch_headers, log.log_start_offset, log.log_end_offset
            )
            for log in self.logs.logs()
        }
        return Controller.of_one(
            self.config.node_id, self.logs.topics().values(), last_epochs, num_partitions=self.config.num_partitions
        )

    def start(self) -> None:
        """Join the cluster (register with the controller, take the metadata: lead and follow),
        once the server has bound its port and before it serves; on the event loop."""
        self.replicas.start()

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
        """This broker became the leader of a partition of ``__transaction_state`` or
        ``__consumer_offsets`` (``leader_epoch``), or stopped leading it (None)."""
        if tp.topic == TRANSACTION_STATE_TOPIC:
            self.transactions.partition_moved(tp.partition, leader_epoch)
        elif tp.topic == OFFSETS_TOPIC:
            self.groups.partition_moved(tp.partition, leader_epoch)

    def forget_producer_state(self, tp: TopicPartition) -> None:
        self._producer_states.pop(tp, None)

    def forget_topic(self, name: str) -> None:
        """Drop in-memory state of a deleted topic."""
        for topic_partition in [tp for tp in self._producer_states if tp.topic == name]:
            del self._producer_states[topic_partition]
        self.groups.forget_topic(name)

    def run_retention(self) -> None:
        deleted = self.logs.run_retention()
        if deleted:
            logger.info("retention deleted %d segment(s)", deleted)

    def stop(self, controlled: bool) -> None:
        """Leave the cluster (``controlled``: tell the controller first, so leadership moves now);
        on the event loop."""
        self.replicas.stop(controlled)

    def close(self) -> None:
        self._producer_expiry.cancel()
        self.groups.close()
        self.transactions.close()
        self.group_commit.close()
        self.logs.close()
