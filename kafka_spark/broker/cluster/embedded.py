"""EmbeddedCluster: N replicating brokers and their controller, in this process.

    with EmbeddedCluster(brokers=3) as cluster:
        cluster.create_topic("orders", partitions=3, replication_factor=3,
                             config={"min.insync.replicas": "2"})
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        ...
        cluster.kill_broker(cluster.leader("orders", 0))   # as a crash: its heartbeats stop
        ...
        cluster.restart_broker(node_id)                    # same port, same log dir: it catches up

Each broker is an :class:`~kafka_spark.broker.embedded.EmbeddedBroker` node with its own loopback
listener, log directory (``<log_dir>/broker-<id>``) and node id, plus a
:class:`~kafka_spark.broker.replication.replica_manager.ReplicaManager`; the
:class:`~kafka_spark.broker.metadata.controller.Controller` holds the partition states and pushes
metadata to the brokers (see those modules for the design and its KRaft counterpart).
Settings keep Kafka's server.properties names: ``default_replication_factor``
(default.replication.factor; default min(3, brokers)), ``min_insync_replicas``,
``unclean_leader_election_enable``, ``replica_lag_time_max_ms``, ``broker_session_timeout_ms``,
``broker_heartbeat_interval_ms``, ``replica_fetch_wait_max_ms``; topics may override
``min.insync.replicas`` and ``unclean.leader.election.enable``.

Coordinators: ``__consumer_offsets`` and ``__transaction_state`` are replicated topics; the leader
of a group's or transactional id's partition coordinates it, loads its state when it becomes the
leader and writes transaction markers at each partition's leader (WriteTxnMarkers), so committed
offsets and transactions survive the loss of any broker (docs/architecture.md, "Coordinators").
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from kafka_spark.broker import meta_properties
from kafka_spark.broker.broker import Broker
from kafka_spark.broker.embedded import EmbeddedBroker
from kafka_spark.broker.metadata.controller import Controller
from kafka_spark.broker.metadata.image import NO_LEADER, PartitionState
from kafka_spark.broker.oauthbearer.login import broker_login
from kafka_spark.broker.replication.replica_manager import ReplicaManager
from kafka_spark.broker.storage.producer_state import ProducerIdManager
from kafka_spark.common.topic_partition import TopicPartition

logger = logging.getLogger("kafka_spark.broker.cluster")


class _NodeProducerIds:
    """Producer ids unique across the cluster: broker ``node`` of ``count`` hands out the ids
    ``k * count + node`` (each broker allocates its own ``k`` durably)."""

    def __init__(self, inner: Any, node: int, count: int) -> None:
        self._inner, self._node, self._count = inner, node, count

    def next_id(self) -> int:
        return self._inner.next_id() * self._count + self._node


class ClusterNode(EmbeddedBroker):
    """One broker of an EmbeddedCluster."""

    def __init__(self, controller: Controller, cluster_size: int, replication: dict[str, int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        broker_login(self.config)  # a SASL listener the brokers cannot log in to each other on fails here
        self._controller = controller
        self._cluster_size = cluster_size
        self._replication = replication

    def _make_broker(self, loop: asyncio.AbstractEventLoop) -> Broker:
        producer_ids = _NodeProducerIds(ProducerIdManager(self.config.log_dir), self.config.node_id, self._cluster_size)
        return Broker(self.config, loop, self._controller, producer_ids=producer_ids, **self._replication)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def replicas(self) -> ReplicaManager:
        return self.broker.replicas

    def close(self) -> None:
        """Controlled shutdown: leadership moves to other in-sync replicas first."""
        super().close()

    def kill(self) -> None:
        """Stop as a crash would: no goodbye to the controller, which notices the missing
        heartbeats; connections drop. (Written data stays, as in the page cache of a killed process.)"""
        self._killed = True
        self.close()


class EmbeddedCluster:
    """N brokers replicating each other's partitions, in background threads of this process."""

    def __init__(
        self,
        brokers: int = 3,
        log_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        *,
        default_replication_factor: int | None = None,
        min_insync_replicas: int = 1,
        unclean_leader_election_enable: bool = False,
        replica_lag_time_max_ms: int = 30_000,
        broker_session_timeout_ms: int = 3_000,
        broker_heartbeat_interval_ms: int = 250,
        replica_fetch_wait_max_ms: int = 500,
        num_partitions: int = 1,
        ports: list[int] | None = None,
        **broker_settings: Any,
    ) -> None:
        """``ports``: the brokers' ports (default: any free ones; a cluster restarted on the same
        ``log_dir`` tries its previous ports first)."""
        if brokers < 1:
            raise ValueError(f"brokers={brokers}: a cluster needs at least one broker")
        factor = min(3, brokers) if default_replication_factor is None else default_replication_factor
        if not 1 <= factor <= brokers:
            raise ValueError(f"default_replication_factor={factor}: give 1 to {brokers} (the number of brokers)")
        if min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas={min_insync_replicas}: give a whole number >= 1")
        if broker_heartbeat_interval_ms * 2 > broker_session_timeout_ms:
            raise ValueError(
                f"broker_session_timeout_ms={broker_session_timeout_ms} must be at least twice "
                f"broker_heartbeat_interval_ms={broker_heartbeat_interval_ms}"
            )
        self.size = brokers
        self._temporary = log_dir is None
        self.log_dir = Path(tempfile.mkdtemp(prefix="pylog-cluster-")) if log_dir is None else Path(log_dir)
        self.host = host
        self.controller = Controller(
            default_replication_factor=factor,
            min_insync_replicas=min_insync_replicas,
            unclean_leader_election_enable=unclean_leader_election_enable,
            broker_session_timeout_ms=broker_session_timeout_ms,
            num_partitions=num_partitions,
            metadata_dir=self.log_dir / "controller",
        )
        self._replication = {
            "replica_lag_time_max_ms": replica_lag_time_max_ms,
            "heartbeat_interval_ms": broker_heartbeat_interval_ms,
            "replica_fetch_wait_max_ms": replica_fetch_wait_max_ms,
        }
        self._settings = dict(broker_settings, num_partitions=num_partitions)
        self._cluster_id: str | None = None
        self.nodes: dict[int, ClusterNode] = {}
        self._ports: dict[int, int] = {}
        if ports is not None:
            if len(ports) != brokers:
                raise ValueError(f"ports={ports}: give one port per broker ({brokers})")
            self._ports = dict(enumerate(ports))
        else:  # a restart: the ports clients last knew, where still free
            self._ports = {
                node: registration.port
                for node, registration in self.controller.image.brokers.items()
                if node < brokers
            }
        self._fixed_ports = ports is not None
        self._started = False

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> EmbeddedCluster:
        """Start the controller and every broker (a second call does nothing); returns the cluster."""
        if self._started:
            return self
        self._started = True
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._cluster_id = self._stored_cluster_id()
        self.controller.start()
        try:
            for node_id in range(self.size):
                self._start_node(node_id)
        except BaseException:
            self.close()
            raise
        logger.info("embedded cluster of %d brokers at %s", self.size, self.bootstrap_servers)
        return self

    def _stored_cluster_id(self) -> str | None:
        """The cluster id the brokers' log directories were formatted with (meta.properties), or
        None for a new cluster; directories of different clusters are refused, naming them."""
        found = {
            node_id: stored
            for node_id in range(self.size)
            if (stored := meta_properties.stored_cluster_id(self.log_dir / f"broker-{node_id}")) is not None
        }
        if len(set(found.values())) > 1:
            raise meta_properties.ClusterIdMismatch(
                f"the brokers' log directories in {self.log_dir} belong to different clusters "
                f"({', '.join(f'broker-{node}: {cluster}' for node, cluster in sorted(found.items()))}); "
                "start the cluster on one cluster's directories"
            )
        return next(iter(found.values()), None)

    def _start_node(self, node_id: int) -> ClusterNode:
        def make(port: int) -> ClusterNode:
            return ClusterNode(
                self.controller,
                self.size,
                self._replication,
                log_dir=self.log_dir / f"broker-{node_id}",
                host=self.host,
                port=port,
                node_id=node_id,
                **({"cluster_id": self._cluster_id} if self._cluster_id else {}),
                **self._settings,
            )

        node = make(self._ports.get(node_id, 0))
        try:
            node.start()
        except OSError:
            if self._fixed_ports or not self._ports.get(node_id):
                raise
            logger.warning("broker %d: port %d is taken now; listening on another", node_id, self._ports[node_id])
            node = make(0)
            node.start()
        self._cluster_id = node.config.cluster_id
        self._ports[node_id] = node.port
        self.nodes[node_id] = node
        return node

    def close(self) -> None:
        """Stop every broker and the controller."""
        for node in list(self.nodes.values()):
            node.kill()  # no leadership moves while everything stops
        self.nodes.clear()
        self.controller.close()
        self._started = False
        if self._temporary:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- failures ------------------------------------------------------------------------------------

    def kill_broker(self, node_id: int) -> None:
        """Crash broker ``node_id``: its listener closes and its heartbeats stop; the controller
        fences it after broker_session_timeout_ms and moves its leaderships."""
        self._node(node_id).kill()
        del self.nodes[node_id]

    def stop_broker(self, node_id: int) -> None:
        """Shut broker ``node_id`` down cleanly: its leaderships move first."""
        self._node(node_id).close()
        del self.nodes[node_id]

    def restart_broker(self, node_id: int) -> ClusterNode:
        """Start a stopped or killed broker again, on its old port and log directory; it recovers
        its logs, truncates where its history diverged from the leaders', and catches up."""
        if node_id in self.nodes:
            raise ValueError(f"broker {node_id} is running; kill_broker or stop_broker it first")
        if node_id not in self._ports:
            raise ValueError(f"there is no broker {node_id}: this cluster has brokers 0-{self.size - 1}")
        return self._start_node(node_id)

    def _node(self, node_id: int) -> ClusterNode:
        node = self.nodes.get(node_id)
        if node is None:
            raise ValueError(f"broker {node_id} is not running (running: {sorted(self.nodes)})")
        return node

    # -- what users need -------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's ``host:port`` (stopped ones too: clients skip them and come back later)."""
        host = self.host if self.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        return ",".join(f"{host}:{self._ports[node]}" for node in sorted(self._ports))

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int | None = None,
        config: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create a topic through the controller and wait until every replica's broker has it
        and its leaders serve it."""
        self.controller.create_topic(name, partitions, replication_factor, config)
        self.wait_for_metadata(timeout)

    def delete_topic(self, name: str, timeout: float = 30.0) -> None:
        """Delete a topic, waiting until every running broker has applied the deletion."""
        self.controller.delete_topic(name)
        self.wait_for_metadata(timeout)

    def wait_for_metadata(self, timeout: float = 30.0) -> None:
        """Until every running broker has applied the controller's latest metadata."""
        version = self.controller.image.version
        self._wait(
            lambda: all(
                node.replicas.image is not None and node.replicas.image.version >= version
                for node in self.nodes.values()
            ),
            timeout,
            f"metadata version {version}",
        )

    def partition(self, topic: str, partition: int = 0) -> PartitionState:
        """The controller's view of one partition: leader, epochs, replicas, ISR."""
        state = self.controller.image.partitions.get(TopicPartition(topic, partition))
        if state is None:
            raise ValueError(f"there is no partition {topic}-{partition}")
        return state

    def leader(self, topic: str, partition: int = 0) -> int:
        """The id of the broker leading a partition, as the controller sees it."""
        return self.partition(topic, partition).leader

    def wait_for_leader(
        self, topic: str, partition: int = 0, *, not_on: int | None = None, timeout: float = 30.0
    ) -> int:
        """Until the partition has a leader (other than ``not_on``); returns it."""
        self._wait(
            lambda: self.leader(topic, partition) not in (NO_LEADER, not_on),
            timeout,
            f"a leader of {topic}-{partition} other than {not_on}",
        )
        return self.leader(topic, partition)

    def wait_for_isr(
        self, topic: str, partition: int = 0, size: int | None = None, timeout: float = 30.0
    ) -> tuple[int, ...]:
        """Until the partition's ISR has ``size`` members (default: all its replicas)."""

        def done() -> bool:
            state = self.partition(topic, partition)
            return len(state.isr) == (len(state.replicas) if size is None else size)

        self._wait(done, timeout, f"an ISR of {size or 'all'} replica(s) for {topic}-{partition}")
        return self.partition(topic, partition).isr

    def describe(self) -> dict[str, Any]:
        """Brokers, controller and every partition's leader, replicas, ISR and offline replicas."""
        image = self.controller.image
        return {
            "controller": image.controller_id,
            "controller_epoch": image.controller_epoch,
            "brokers": [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "alive": b.alive}
                for b in sorted(image.brokers.values(), key=lambda b: b.node_id)
            ],
            "topics": {
                name: [
                    {
                        "partition": p,
                        "leader": s.leader,
                        "leader_epoch": s.leader_epoch,
                        "replicas": list(s.replicas),
                        "isr": list(s.isr),
                        "offline": [n for n in s.replicas if not image.alive(n)],
                    }
                    for p in range(info.partitions)
                    for s in [image.partitions[TopicPartition(name, p)]]
                ]
                for name, info in sorted(image.topics.items())
            },
        }

    @staticmethod
    def _wait(condition: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout:.0f} s for {what}")
            time.sleep(0.01)
