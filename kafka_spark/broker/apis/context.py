"""What an API handler may use of the broker node: the type the handlers' ``broker`` is checked against.

``Broker`` (broker.py) satisfies it structurally; a handler that reaches for anything not listed
here fails ``mypy`` (``make lint``), so this list is the handlers' whole view of the node. The
concrete types are imported for the type checker only: this module costs nothing at run time and
adds no import edge from the handlers back to the node.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kafka_spark.broker.apis.fetch_session import FetchSessionCache
    from kafka_spark.broker.authorizer import Authorizer
    from kafka_spark.broker.config import BrokerConfig
    from kafka_spark.broker.coordinator.group import GroupCoordinator
    from kafka_spark.broker.coordinator.transaction import TransactionCoordinator
    from kafka_spark.broker.coordinator.txn_markers import MarkerChannel
    from kafka_spark.broker.credentials import CredentialStore
    from kafka_spark.broker.durability import GroupCommit
    from kafka_spark.broker.notifier import DataNotifier
    from kafka_spark.broker.replication.replica_manager import ReplicaManager
    from kafka_spark.broker.storage.log import Log
    from kafka_spark.broker.storage.log_manager import LogManager
    from kafka_spark.broker.storage.producer_state import PartitionProducerState


class ProducerIds(Protocol):
    """Hands out producer ids (storage/producer_state.ProducerIdManager; on a broker of a cluster,
    ids unique across its brokers)."""

    def next_id(self) -> int: ...


class BrokerContext(Protocol):
    """The node as its API handlers see it."""

    config: BrokerConfig
    loop: asyncio.AbstractEventLoop
    port: int  # the bound port once the server listens
    logs: LogManager
    notifier: DataNotifier  # wakes parked fetches
    fetch_sessions: FetchSessionCache  # incremental fetches (KIP-227)
    group_commit: GroupCommit  # acks=all: fsync before the response
    producer_ids: ProducerIds
    replicas: ReplicaManager  # this broker's replicas and the cluster's metadata (a cluster of one on its own)
    authorizer: Authorizer | None  # None: no authorizer.class.name, everything is allowed
    credentials: CredentialStore
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    markers: MarkerChannel  # transaction markers (WriteTxnMarkers)

    @property
    def advertised_host(self) -> str: ...

    def producer_state(self, log: Log) -> PartitionProducerState: ...

    def forget_topic(self, name: str) -> None: ...
