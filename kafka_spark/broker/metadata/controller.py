"""The cluster controller: broker liveness and the state of every partition's replicas.

One ``Controller`` object per :class:`~kafka_spark.broker.cluster.EmbeddedCluster` holds the
cluster's metadata — registered brokers (alive or fenced), topics, and per partition its leader,
leader epoch, partition epoch, replicas and in-sync replicas — and publishes every change as an
immutable :class:`MetadataImage` that it pushes to each live broker (``on_image`` callbacks,
which the brokers run on their own event loops). It is the in-process counterpart of KRaft's
active controller: Kafka's controller appends the same records (RegisterBroker, Fence/Unfence,
PartitionRecord, PartitionChangeRecord) to the replicated ``__cluster_metadata`` log and brokers
apply them to their metadata image; here the record log is the controller's memory (the brokers
of one process cannot outlive it), so the image is handed over directly.

Which broker "is" the controller: the live broker with the lowest id hosts the active controller
role and is named ``controller_id`` in Metadata; when it dies the role moves to the next one and
the controller epoch is bumped, as a KRaft quorum elects a new active controller. The state
survives the move, as it survives in KRaft's replicated metadata log.

Liveness: a broker registers (getting a new broker epoch) and heartbeats every
``broker.heartbeat.interval.ms``; a broker whose heartbeats stop for ``broker.session.timeout.ms``
is fenced: it leaves every ISR, and each partition it led gets a new leader from the ISR (the
first live in-sync replica in replica order) with the leader epoch and partition epoch bumped. With
no live in-sync replica the partition goes offline (leader -1) and keeps its last ISR member, the
one replica known to hold every acknowledged record, until it returns — unless
``unclean.leader.election.enable`` lets an out-of-sync replica lead (and lose records). A clean
shutdown moves leadership away before the broker stops (Kafka's controlled shutdown).

Leaders change their ISR through :meth:`Controller.alter_partition` (Kafka's AlterPartition, API
56): the request carries the leader's epoch and partition epoch, and a stale one is refused with
FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION, which is what stops a deposed leader from changing
anything.

Persistence: with a ``metadata_dir`` (an EmbeddedCluster's ``<log_dir>/controller``) every change
is written to ``metadata.json`` there (topics, partition states, broker addresses) — what KRaft keeps
in its metadata log and snapshots — so a cluster restarted on the same log directory has its
topics and leaders back. Brokers known from it count as alive for one session timeout after the
load; one that does not register by then is fenced like a broker that died.

A single node is a cluster of one, its own controller (KRaft's combined mode):
:meth:`Controller.of_one` builds that controller from the node's log directory, which plays the
metadata log (its topics, and each partition's leader epochs in its leader-epoch checkpoint): every
partition starts offline in the last epoch its log used, and the node's registration makes it the
leader in the next one, as a KRaft broker that restarts leads anew. That controller watches no
heartbeats (the node cannot be fenced by itself) and writes no ``metadata.json``.

Thread-safety: every method takes the controller's lock; pushes only schedule work on the
brokers' loops, so no broker ever waits for another.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from types import MappingProxyType

from kio.schema.errors import ErrorCode

from kafka_spark.broker.metadata.image import NO_LEADER, BrokerRegistration, MetadataImage, PartitionState
from kafka_spark.broker.metadata.quorum import QuorumState, VoterState
from kafka_spark.broker.storage import checkpoint
from kafka_spark.broker.storage.config import normalize_topic_configs
from kafka_spark.broker.storage.errors import (
    InvalidPartitionsError,
    StorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kafka_spark.broker.storage.log_manager import TopicInfo
from kafka_spark.common.kafka_uuid import random_uuid
from kafka_spark.common.topic_partition import TopicPartition

logger = logging.getLogger("kafka_spark.broker.cluster")


class InvalidReplicationFactorError(StorageError):
    """CreateTopics with a replication factor the live brokers cannot host (38)."""

    error_code = ErrorCode.invalid_replication_factor


class InvalidReplicaAssignmentError(StorageError):
    """A replica assignment naming no broker, one twice, or one not registered (39)."""

    error_code = ErrorCode.invalid_replica_assignment


class Controller:
    """See the module docstring. ``start()`` begins watching heartbeats; ``close()`` stops."""

    def __init__(
        self,
        *,
        default_replication_factor: int = 1,
        min_insync_replicas: int = 1,
        unclean_leader_election_enable: bool = False,
        broker_session_timeout_ms: int = 3000,
        num_partitions: int = 1,
        metadata_dir: Path | None = None,
    ) -> None:
        self.default_replication_factor = default_replication_factor
        self.num_partitions = num_partitions
        self.session_timeout_ms = broker_session_timeout_ms
        self._defaults = MappingProxyType(
            {
                "min.insync.replicas": str(min_insync_replicas),
                "unclean.leader.election.enable": str(unclean_leader_election_enable).lower(),
                "default.replication.factor": str(default_replication_factor),
            }
        )
        self._lock = threading.RLock()
        self._brokers: dict[int, BrokerRegistration] = {}
        self._last_heartbeat: dict[int, float] = {}
        # node -> (metadata version it last applied, when it said so, when that was the newest; wall ms)
        self._fetched: dict[int, tuple[int, int, int]] = {}
        self._listeners: dict[int, Callable[[MetadataImage], None]] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._partitions: dict[TopicPartition, PartitionState] = {}
        self._version = 0
        self._controller_id = NO_LEADER
        self._controller_epoch = 0
        self._next_broker_epoch = 1
        self._path = Path(metadata_dir) / "metadata.json" if metadata_dir is not None else None
        if self._path is not None and self._path.exists():
            self._load(self._path)
        self._image = self._snapshot()
        self._stop = threading.Event()
        self._monitor: threading.Thread | None = None

    @classmethod
    def of_one(
        cls,
        node_id: int,
        topics: Iterable[TopicInfo],
        last_epochs: Mapping[TopicPartition, int],
        *,
        num_partitions: int,
    ) -> Controller:
        """The controller of a single node (see the module docstring): ``topics`` as its log
        directory holds them, each partition offline in ``last_epochs[partition]`` (-1 for a log
        that never had a leader), with the node as its only replica and last in-sync replica."""
        controller = cls(default_replication_factor=1, num_partitions=num_partitions)
        with controller._lock:
            for info in topics:
                controller._topics[info.name] = info
                for partition in range(info.partitions):
                    tp = TopicPartition(info.name, partition)
                    controller._partitions[tp] = PartitionState(
                        NO_LEADER, last_epochs.get(tp, -1), 0, (node_id,), (node_id,)
                    )
            controller._image = controller._snapshot()
        return controller

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        if self._monitor is None:
            self._monitor = threading.Thread(target=self._watch, name="pylog-controller", daemon=True)
            self._monitor.start()

    def close(self) -> None:
        self._stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=10)
            self._monitor = None

    def _watch(self) -> None:
        interval = min(0.1, self.session_timeout_ms / 4000)
        while not self._stop.wait(interval):
            now = time.monotonic()
            with self._lock:
                expired = [
                    node
                    for node, last in self._last_heartbeat.items()
                    if self._brokers[node].alive and (now - last) * 1000 > self.session_timeout_ms
                ]
                for node in expired:
                    logger.warning(
                        "broker %d missed its heartbeats for %d ms: fencing it", node, self.session_timeout_ms
                    )
                    self._fence(node)
                if expired:
                    self._publish()

    # -- what the brokers call ------------------------------------------------------------------------

    def register(self, node_id: int, host: str, port: int, on_image: Callable[[MetadataImage], None]) -> int:
        """A broker (re)starting: returns its new broker epoch. Partitions left offline with this
        broker as their last in-sync replica get it as leader again."""
        with self._lock:
            epoch = self._next_broker_epoch
            self._next_broker_epoch += 1
            self._brokers[node_id] = BrokerRegistration(node_id, host, port, epoch, True)
            self._last_heartbeat[node_id] = time.monotonic()
            self._listeners[node_id] = on_image
            now = _wall_ms()
            self._fetched[node_id] = (self._version, now, now)  # it applies the image it is handed
            for tp, state in self._partitions.items():
                if (
                    state.leader == NO_LEADER
                    and node_id in state.replicas
                    and (node_id in state.isr or self._unclean(tp.topic))
                ):
                    self._partitions[tp] = replace(
                        state,
                        leader=node_id,
                        leader_epoch=state.leader_epoch + 1,
                        partition_epoch=state.partition_epoch + 1,
                        isr=state.isr if node_id in state.isr else (node_id,),
                    )
                    logger.info("%s: broker %d is back and leads again (epoch %d)", tp, node_id, state.leader_epoch + 1)
            self._publish()
            logger.info("broker %d registered at %s:%d (broker epoch %d)", node_id, host, port, epoch)
            return epoch

    def heartbeat(self, node_id: int, broker_epoch: int, metadata_version: int | None = None) -> bool:
        """False when the broker was fenced or re-registered since (it must stop acting).
        ``metadata_version``: the newest image the broker applied (KRaft's heartbeat carries the
        broker's metadata offset), which DescribeQuorum reports."""
        with self._lock:
            registration = self._brokers.get(node_id)
            if registration is None or registration.epoch != broker_epoch or not registration.alive:
                return False
            self._last_heartbeat[node_id] = time.monotonic()
            if metadata_version is not None:
                now = _wall_ms()
                _, _, caught_up = self._fetched.get(node_id, (-1, -1, -1))
                self._fetched[node_id] = (
                    metadata_version,
                    now,
                    now if metadata_version >= self._version else caught_up,
                )
            return True

    def quorum(self) -> QuorumState:
        """The controller quorum as DescribeQuorum describes it (see metadata/quorum.py): every
        registered broker a voter, the active controller their leader."""
        with self._lock:
            now = _wall_ms()
            voters = []
            for node_id, registration in sorted(self._brokers.items()):
                if node_id == self._controller_id:
                    fetched = (self._version, now, now)
                else:
                    fetched = self._fetched.get(node_id, (-1, -1, -1))
                voters.append(VoterState(node_id, registration.host, registration.port, *fetched))
            return QuorumState(self._controller_id, self._controller_epoch, self._version, tuple(voters))

    def shutdown_broker(self, node_id: int, broker_epoch: int) -> None:
        """Controlled shutdown: move leadership off the broker and fence it now."""
        with self._lock:
            registration = self._brokers.get(node_id)
            if registration is None or registration.epoch != broker_epoch or not registration.alive:
                return
            self._fence(node_id)
            self._publish()

    def alter_partition(
        self, tp: TopicPartition, leader: int, leader_epoch: int, partition_epoch: int, isr: Sequence[int]
    ) -> tuple[int, PartitionState | None]:
        """A leader's ISR change: ``(error code, new state)``."""
        with self._lock:
            state = self._partitions.get(tp)
            if state is None:
                return ErrorCode.unknown_topic_or_partition, None
            if state.leader != leader or state.leader_epoch != leader_epoch:
                return ErrorCode.fenced_leader_epoch, state
            if state.partition_epoch != partition_epoch:
                return ErrorCode.invalid_update_version, state
            new_isr = tuple(node for node in state.replicas if node in isr and (node == leader or self._alive(node)))
            if leader not in new_isr:
                return ErrorCode.invalid_request, state
            if new_isr == state.isr:
                return ErrorCode.none, state
            state = replace(state, isr=new_isr, partition_epoch=state.partition_epoch + 1)
            logger.info(
                "%s: ISR is now %s (leader %d, partition epoch %d)", tp, list(new_isr), leader, state.partition_epoch
            )
            if state.adding and set(state.adding) <= set(new_isr):  # the new replicas caught up
                state = self._complete_reassignment(tp, state)
            self._partitions[tp] = state
            self._publish()
            return ErrorCode.none, state

    # -- partition reassignments (KIP-455) ------------------------------------------------------------

    def reassign(
        self, targets: Mapping[TopicPartition, Sequence[int] | None], *, allow_replication_factor_change: bool = True
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """AlterPartitionReassignments, as Kafka's controller does it: a partition's replicas
        become its target plus the current ones not in it (``adding`` the new, ``removing`` the
        rest); the new replicas fetch from the leader, and once they are all in sync the
        partition keeps the target only (a leader outside it hands over to the first in-sync
        replica of the target, in a new leader epoch). A target already in sync completes at
        once; None cancels a reassignment under way (back to the replicas before it). Returns
        (error code, message) per partition."""
        results: dict[TopicPartition, tuple[int, str | None]] = {}
        with self._lock:
            for tp, target in targets.items():
                state = self._partitions.get(tp)
                if state is None or tp.topic not in self._topics:
                    results[tp] = (
                        ErrorCode.unknown_topic_or_partition,
                        "This server does not host this topic-partition.",
                    )
                    continue
                original = tuple(node for node in state.replicas if node not in state.adding)
                if target is None:
                    if not (state.adding or state.removing):
                        results[tp] = (
                            ErrorCode.no_reassignment_in_progress,
                            f"No ongoing reassignment for {tp.topic}-{tp.partition}.",
                        )
                        continue
                    self._partitions[tp] = self._with_replicas(tp, state, original)
                    results[tp] = (ErrorCode.none, None)
                    continue
                error = self._replica_assignment_error(tuple(target))
                if error is not None:
                    results[tp] = (ErrorCode.invalid_replica_assignment, error)
                    continue
                if not allow_replication_factor_change and len(target) != len(original):
                    results[tp] = (
                        ErrorCode.invalid_replication_factor,
                        f"The replication factor is changed from {len(original)} to {len(target)} "
                        "but allowReplicationFactorChange is false",
                    )
                    continue
                target = tuple(target)
                adding = tuple(node for node in target if node not in original)
                removing = tuple(node for node in original if node not in target)
                if not adding and not removing and not (state.adding or state.removing):
                    if target != state.replicas:  # the same replicas in another order
                        self._partitions[tp] = replace(
                            state, replicas=target, partition_epoch=state.partition_epoch + 1
                        )
                    results[tp] = (ErrorCode.none, None)
                    continue
                state = replace(
                    state,
                    replicas=target + removing,
                    isr=tuple(node for node in state.isr if node in target + removing),
                    adding=adding,
                    removing=removing,
                    partition_epoch=state.partition_epoch + 1,
                )
                if set(adding) <= set(state.isr):
                    state = self._complete_reassignment(tp, state)
                else:
                    logger.info(
                        "%s: reassignment to %s under way (adding %s, removing %s)",
                        tp,
                        list(target),
                        list(adding),
                        list(removing),
                    )
                self._partitions[tp] = state
                results[tp] = (ErrorCode.none, None)
            if any(code == ErrorCode.none for code, _ in results.values()):
                self._publish()
        return results

    def reassignments(self) -> dict[TopicPartition, PartitionState]:
        """The partitions with a reassignment under way (ListPartitionReassignments)."""
        with self._lock:
            return {tp: state for tp, state in self._partitions.items() if state.adding or state.removing}

    def _replica_assignment_error(self, target: tuple[int, ...]) -> str | None:
        """Kafka's checks of a manual replica assignment, with its messages."""
        if not target:
            return "The manual partition assignment includes an empty replica list."
        for node in target:
            if target.count(node) > 1:
                return f"The manual partition assignment includes the broker {node} more than once."
            if node not in self._brokers:
                return f"The manual partition assignment includes broker {node}, but no such broker is registered."
        return None

    def _complete_reassignment(self, tp: TopicPartition, state: PartitionState) -> PartitionState:
        target = tuple(node for node in state.replicas if node not in state.removing)
        logger.info("%s: reassignment to %s complete", tp, list(target))
        return self._with_replicas(tp, state, target)

    def _with_replicas(self, tp: TopicPartition, state: PartitionState, replicas: tuple[int, ...]) -> PartitionState:
        """``state`` keeping only ``replicas`` (no reassignment): the ISR shrinks to them, and a
        leader outside them hands over to the first of them alive and in sync."""
        isr = tuple(node for node in state.isr if node in replicas)
        leader, leader_epoch = state.leader, state.leader_epoch
        if leader not in replicas:
            candidates = [node for node in replicas if node in isr and self._alive(node)]
            leader = candidates[0] if candidates else NO_LEADER
            leader_epoch += 1
            if leader == NO_LEADER:
                isr = isr or replicas[:1]
        return replace(
            state,
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=state.partition_epoch + 1,
            replicas=replicas,
            isr=isr or (leader,),
            adding=(),
            removing=(),
        )

    # -- what users and admin requests call -----------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, str] | None = None,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Create a topic and assign its replicas across the live brokers (Kafka's rack-unaware
        assignment: partition p's replicas are consecutive brokers from a random start + p), or
        as ``assignments`` says (one replica list per partition, of registered brokers).
        ``replication_factor`` None or -1: default.replication.factor; ``configs`` may set
        min.insync.replicas and unclean.leader.election.enable per topic."""
        configs = normalize_topic_configs({key: value for key, value in (configs or {}).items() if value is not None})
        with self._lock:
            if name in self._topics:
                raise TopicExistsError(
                    f"topic {name!r} already exists with {self._topics[name].partitions} partition(s)"
                )
            live = sorted(node for node, registration in self._brokers.items() if registration.alive)
            if assignments is not None:
                placed = [self._assigned(name, replicas) for replicas in assignments]
                count, factor = len(placed), len(placed[0]) if placed else 0
            else:
                count = self.num_partitions if partitions in (None, -1) else partitions
                factor = self.default_replication_factor if replication_factor in (None, -1) else replication_factor
                if not 1 <= factor <= len(live):
                    raise InvalidReplicationFactorError(
                        f"Replication factor: {factor} larger than available brokers: {len(live)}."
                        if factor > len(live)
                        else f"replication factor {factor} is invalid for topic {name!r}: give 1 to {len(live)}"
                    )
                placed = self._place(count, factor, live)
            if count < 1:
                raise InvalidPartitionsError(f"topic {name!r} needs at least 1 partition, not {count}")
            _check_min_insync(name, configs)
            info = TopicInfo(name, count, MappingProxyType(dict(configs)), random_uuid())
            if validate_only:
                return info
            self._topics[name] = info
            for partition, replicas in enumerate(placed):
                self._partitions[TopicPartition(name, partition)] = self._new_partition(replicas)
            self._publish()
            logger.info("created topic %s: %d partition(s), replication factor %d", name, count, factor)
            return info

    def _assigned(self, topic: str, replicas: Sequence[int]) -> tuple[int, ...]:
        unknown = [node for node in replicas if node not in self._brokers]
        if not replicas or len(set(replicas)) != len(replicas) or unknown:
            raise InvalidReplicaAssignmentError(
                f"topic {topic!r}: replicas {list(replicas)} must name distinct registered brokers "
                f"(registered: {sorted(self._brokers)})"
            )
        return tuple(replicas)

    @staticmethod
    def _place(count: int, factor: int, live: Sequence[int]) -> list[tuple[int, ...]]:
        start = random.randrange(len(live))
        return [tuple(live[(start + partition + j) % len(live)] for j in range(factor)) for partition in range(count)]

    def _new_partition(self, replicas: tuple[int, ...]) -> PartitionState:
        """A new partition: its first live replica leads (every live replica is in sync with an
        empty log); with none alive it is offline until one registers."""
        live = tuple(node for node in replicas if self._alive(node))
        if not live:
            return PartitionState(NO_LEADER, 0, 0, replicas, replicas[:1])
        return PartitionState(leader=live[0], leader_epoch=0, partition_epoch=0, replicas=replicas, isr=live)

    def add_partitions(
        self,
        name: str,
        count: int,
        *,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicInfo:
        """CreatePartitions: grow ``name`` to ``count`` partitions, the new ones assigned as at
        creation (same replication factor, spread over the live brokers), or as ``assignments``
        says (one replica list per new partition)."""
        with self._lock:
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"cannot add partitions to topic {name!r}: it does not exist")
            if count <= info.partitions:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {info.partitions} partition(s); the new total must be above that, not {count}"
                )
            if assignments is not None:
                placed = [self._assigned(name, replicas) for replicas in assignments]
            else:
                factor = len(self._partitions[TopicPartition(name, 0)].replicas)
                live = sorted(node for node, registration in self._brokers.items() if registration.alive)
                if factor > len(live):
                    raise InvalidReplicationFactorError(
                        f"topic {name!r} has replication factor {factor}; only {len(live)} broker(s) are alive"
                    )
                placed = self._place(count, factor, live)[info.partitions :]
            grown = TopicInfo(name, count, info.configs, info.topic_id)
            if validate_only:
                return grown
            for partition, replicas in enumerate(placed, start=info.partitions):
                self._partitions[TopicPartition(name, partition)] = self._new_partition(replicas)
            self._topics[name] = grown
            self._publish()
            return grown

    def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        """AlterConfigs / IncrementalAlterConfigs of a topic: ``configs`` replaces its overrides
        (the caller validated them as log settings) and every broker takes them from the next
        image, as Kafka's controller publishes a ConfigRecord; min.insync.replicas and
        unclean.leader.election.enable act on the leaders from then on."""
        configs = {key: value for key, value in configs.items() if value is not None}
        _check_min_insync(name, configs)
        with self._lock:
            info = self._topics.get(name)
            if info is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            changed = TopicInfo(name, info.partitions, MappingProxyType(dict(configs)), info.topic_id)
            self._topics[name] = changed
            self._publish()
            logger.info("topic %s: configs now %s", name, dict(configs))
            return changed

    def delete_topic(self, name: str) -> None:
        with self._lock:
            if name not in self._topics:
                raise UnknownTopicOrPartitionError(f"cannot delete topic {name!r}: it does not exist")
            info = self._topics.pop(name)
            for partition in range(info.partitions):
                self._partitions.pop(TopicPartition(name, partition), None)
            self._publish()

    def elect_leaders(
        self, partitions: Sequence[TopicPartition] | None = None, *, unclean: bool = False
    ) -> dict[TopicPartition, int]:
        """ElectLeaders. Preferred (election type 0): make each partition's first replica its
        leader where it is alive and in sync (ELECTION_NOT_NEEDED when it leads already).
        Unclean (type 1): give an offline partition a live replica as leader even if out of sync
        (ELECTION_NOT_NEEDED when it has a leader). Returns an error code per partition."""
        results: dict[TopicPartition, int] = {}
        with self._lock:
            for tp in partitions if partitions is not None else list(self._partitions):
                state = self._partitions.get(tp)
                if state is None:
                    results[tp] = ErrorCode.unknown_topic_or_partition
                    continue
                if unclean:
                    live = [node for node in state.replicas if self._alive(node)]
                    if state.leader != NO_LEADER:
                        results[tp] = ErrorCode.election_not_needed
                    elif not live:
                        results[tp] = ErrorCode.eligible_leaders_not_available
                    else:
                        self._partitions[tp] = replace(
                            state,
                            leader=live[0],
                            leader_epoch=state.leader_epoch + 1,
                            partition_epoch=state.partition_epoch + 1,
                            isr=(live[0],),
                        )
                        results[tp] = ErrorCode.none
                    continue
                preferred = state.replicas[0]
                if state.leader == preferred:
                    results[tp] = ErrorCode.election_not_needed
                elif preferred in state.isr and self._alive(preferred):
                    self._partitions[tp] = replace(
                        state,
                        leader=preferred,
                        leader_epoch=state.leader_epoch + 1,
                        partition_epoch=state.partition_epoch + 1,
                    )
                    results[tp] = ErrorCode.none
                else:
                    results[tp] = ErrorCode.preferred_leader_not_available
            if any(code == ErrorCode.none for code in results.values()):
                self._publish()
        return results

    @property
    def image(self) -> MetadataImage:
        with self._lock:
            return self._image

    # -- internals ------------------------------------------------------------------------------------

    def _alive(self, node_id: int) -> bool:
        registration = self._brokers.get(node_id)
        return registration is not None and registration.alive

    def _unclean(self, topic: str) -> bool:
        return self._image.unclean_leader_election(topic) if topic in self._topics else False

    def _fence(self, node_id: int) -> None:
        """The broker is gone: out of every ISR, and its partitions get new leaders."""
        registration = self._brokers[node_id]
        self._brokers[node_id] = replace(registration, alive=False)
        self._listeners.pop(node_id, None)
        for tp, state in self._partitions.items():
            if node_id not in state.replicas:
                continue
            isr = tuple(node for node in state.isr if node != node_id)
            if state.leader == node_id:
                candidates = [node for node in state.replicas if node in isr and self._alive(node)]
                if candidates:
                    leader = candidates[0]
                elif self._unclean(tp.topic) and any(self._alive(node) for node in state.replicas):
                    leader = next(node for node in state.replicas if self._alive(node))
                    isr = (leader,)
                    logger.warning(
                        "%s: unclean leader election of out-of-sync broker %d: records may be lost", tp, leader
                    )
                else:
                    leader = NO_LEADER
                    isr = isr or (node_id,)  # the last in-sync replica stays, the partition waits for it
                    logger.warning("%s: no in-sync replica left to lead; offline until broker %d returns", tp, node_id)
                self._partitions[tp] = replace(
                    state,
                    leader=leader,
                    leader_epoch=state.leader_epoch + 1,
                    partition_epoch=state.partition_epoch + 1,
                    isr=isr,
                )
                if leader != NO_LEADER:
                    logger.info("%s: broker %d leads now (leader epoch %d)", tp, leader, state.leader_epoch + 1)
            elif isr and isr != state.isr:
                self._partitions[tp] = replace(state, isr=isr, partition_epoch=state.partition_epoch + 1)

    def _snapshot(self) -> MetadataImage:
        live = sorted(node for node, registration in self._brokers.items() if registration.alive)
        controller = live[0] if live else NO_LEADER
        if controller != self._controller_id:
            self._controller_id = controller
            self._controller_epoch += 1
        self._version += 1
        return MetadataImage(
            self._version,
            self._controller_id,
            self._controller_epoch,
            MappingProxyType(dict(self._brokers)),
            MappingProxyType(dict(self._topics)),
            MappingProxyType(dict(self._partitions)),
            self._defaults,
        )

    def _load(self, path: Path) -> None:
        document = json.loads(path.read_text())
        for raw in document["topics"]:
            info, _ = TopicInfo.from_json(json.dumps(raw).encode())
            self._topics[info.name] = info
        for raw in document["partitions"]:
            self._partitions[TopicPartition(raw["topic"], raw["partition"])] = PartitionState(
                raw["leader"],
                raw["leader_epoch"],
                raw["partition_epoch"],
                tuple(raw["replicas"]),
                tuple(raw["isr"]),
                tuple(raw.get("adding", ())),
                tuple(raw.get("removing", ())),
            )
        now = time.monotonic()
        for raw in document["brokers"]:  # alive until their first session timeout passes without them
            self._brokers[raw["node_id"]] = BrokerRegistration(raw["node_id"], raw["host"], raw["port"], 0, True)
            self._last_heartbeat[raw["node_id"]] = now
        self._next_broker_epoch = document.get("next_broker_epoch", 1)
        logger.info(
            "controller: loaded %d topic(s) and %d partition(s) from %s", len(self._topics), len(self._partitions), path
        )

    def _save(self) -> None:
        assert self._path is not None
        document = {
            "version": 1,
            "next_broker_epoch": self._next_broker_epoch,
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port} for b in self._brokers.values()],
            "topics": [json.loads(info.to_json()) for info in self._topics.values()],
            "partitions": [
                dict(asdict(state), topic=tp.topic, partition=tp.partition) for tp, state in self._partitions.items()
            ],
        }
        self._path.parent.mkdir(parents=True, exist_ok=True)
        checkpoint.atomic_write(self._path, json.dumps(document, indent=1).encode())

    def _publish(self) -> None:
        if self._path is not None:
            self._save()
        self._image = image = self._snapshot()
        for node_id, on_image in list(self._listeners.items()):
            try:
                on_image(image)
            except RuntimeError:  # its loop is closed: the broker died; its heartbeats will lapse
                logger.debug("broker %d did not take metadata version %d", node_id, image.version)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_min_insync(topic: str, configs: Mapping[str, str]) -> None:
    min_isr = configs.get("min.insync.replicas")
    if min_isr is not None and not (min_isr.lstrip("-").isdigit() and 1 <= int(min_isr)):
        from kafka_spark.broker.storage.errors import InvalidConfigError

        raise InvalidConfigError(f"min.insync.replicas={min_isr!r} for topic {topic!r}: give a whole number >= 1")
