"""The cluster's metadata as the controller publishes it: an immutable :class:`MetadataImage` of
the registered brokers, the topics and every partition's state (KRaft's ``MetadataImage`` and its
PartitionRecord), and the questions a broker asks of it. Pure values: no I/O, no clock.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

if TYPE_CHECKING:
    from kafka_spark.broker.storage.log_manager import TopicInfo
    from kafka_spark.common.topic_partition import TopicPartition

#: A partition's leader while it has none (offline, LEADER_NOT_AVAILABLE).
NO_LEADER = -1


@dataclass(frozen=True)
class PartitionState:
    """What the controller decided about one partition (KRaft's PartitionRecord)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    # A reassignment under way (KIP-455): the replicas joining and the ones to leave once the
    # joining ones are in sync; ``replicas`` holds both meanwhile.
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


@dataclass(frozen=True)
class BrokerRegistration:
    node_id: int
    host: str
    port: int
    epoch: int
    alive: bool


@dataclass(frozen=True)
class MetadataImage:
    """An immutable snapshot of the cluster metadata; ``version`` grows with every change."""

    version: int
    controller_id: int
    controller_epoch: int
    brokers: Mapping[int, BrokerRegistration]
    topics: Mapping[str, TopicInfo]
    partitions: Mapping[TopicPartition, PartitionState]
    defaults: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def alive(self, node_id: int) -> bool:
        registration = self.brokers.get(node_id)
        return registration is not None and registration.alive

    @functools.cached_property
    def topic_names(self) -> Mapping[uuid.UUID, str]:
        """topic id -> topic name (KIP-516's requests name topics by id)."""
        return {info.topic_id: name for name, info in self.topics.items()}

    def min_insync_replicas(self, topic: str) -> int:
        info = self.topics.get(topic)
        value = (info.configs.get("min.insync.replicas") if info is not None else None) or self.defaults.get(
            "min.insync.replicas", "1"
        )
        return int(value)

    def unclean_leader_election(self, topic: str) -> bool:
        info = self.topics.get(topic)
        value = (info.configs.get("unclean.leader.election.enable") if info is not None else None) or self.defaults.get(
            "unclean.leader.election.enable", "false"
        )
        return str(value).lower() == "true"

    def leader_of(self, tp: TopicPartition) -> int:
        """The partition's leader (NO_LEADER while it has none, or when there is no such partition)."""
        state = self.partitions.get(tp)
        return state.leader if state is not None else NO_LEADER

    def live_leader(self, tp: TopicPartition) -> BrokerRegistration | None:
        """The partition's leader while it is alive (None: no leader, or it is not alive)."""
        registration = self.brokers.get(self.leader_of(tp))
        return registration if registration is not None and registration.alive else None

    def partition_entry(self, tp: TopicPartition, *, failed_leader: bool = False) -> dict[str, Any]:
        """Metadata's description of one partition (Kafka's field names); ``failed_leader``: its
        leader's log failed, so it is offline (no leader, the leader among the offline replicas)."""
        state = self.partitions[tp]
        offline = tuple(node for node in state.replicas if not self.alive(node))
        leader = state.leader
        if failed_leader:
            offline, leader = tuple(sorted({*offline, leader})), NO_LEADER
        return {
            "error_code": ErrorCode.leader_not_available if leader == NO_LEADER else ErrorCode.none,
            "partition_index": tp.partition,
            "leader_id": leader,
            "leader_epoch": state.leader_epoch,
            "replica_nodes": state.replicas,
            "isr_nodes": state.isr,
            "offline_replicas": offline,
        }

    def broker_entries(self) -> list[dict[str, Any]]:
        """The live brokers, as Metadata lists them."""
        return [
            {"node_id": registration.node_id, "host": registration.host, "port": registration.port, "rack": None}
            for registration in sorted(self.brokers.values(), key=lambda b: b.node_id)
            if registration.alive
        ]
