"""What the coordinators use of their broker, and what both of them do alike with it.

The group and transaction coordinators keep their state in an internal topic
(``__consumer_offsets``, ``__transaction_state``) and coordinate the keys of the partitions of it
their broker leads, on a single node (a cluster of one, which leads them all) as on a cluster.
They see the broker through the narrow interfaces below, which ``Broker``'s replica manager and
group commit satisfy structurally (a type checker checks them, ``make lint``), never the broker
itself:

* :class:`Replication`: the metadata and this broker's replicas (which partitions it leads, the
  internal topics created on first use, the wait for the in-sync replicas, requests to other
  brokers);
* :class:`Durability`: the fsync of a log up to an offset (the group commit);
* :class:`OwnedPartitions`: the partitions of a coordinator's topic this broker leads, with the
  leader epoch it leads each in (the coordinator epoch of transaction markers), and the error a
  request for a key gets when it is coordinated elsewhere;
* :func:`durable`: what a response waits for after the coordinator wrote to its topic.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from kafka_spark.broker.internal_topics import INTERNAL_TOPICS, partition_for
from kafka_spark.broker.storage.errors import StorageError

if TYPE_CHECKING:
    from kafka_spark.broker.storage.log import Log
    from kafka_spark.broker.storage.log_manager import TopicInfo
    from kafka_spark.common.topic_partition import TopicPartition

logger = logging.getLogger("kafka_spark.broker.coordinator")

#: How long a coordinator's write may wait for the in-sync replicas before the client is told to
#: find its coordinator again.
REPLICATION_TIMEOUT_MS = 10_000


class Replication(Protocol):
    """The metadata and this broker's replicas (replication/replica_manager.py)."""

    node_id: int

    def topics(self) -> dict[str, TopicInfo]: ...

    def leads(self, topic: str, partition: int) -> bool: ...

    def leader_of(self, tp: TopicPartition) -> int: ...

    def ensure_internal_topic(self, topic: str) -> TopicInfo | None: ...

    def check_produce(self, topic: str, partition: int, acks: int) -> int: ...

    def wait_replicated(
        self, log: Log, entry: dict[str, Any], required_offset: int, timeout_ms: float
    ) -> asyncio.Future[None] | None: ...

    async def request(
        self, node: int, api_key: int, version: int, body: dict[str, Any], timeout: float = 30.0
    ) -> Any: ...


class Durability(Protocol):
    """fsyncs, group-committed (durability.py)."""

    def wait_durable(self, log: Log, end_offset: int) -> asyncio.Future[None]: ...


class NotReplicatedError(StorageError):
    """A coordinator's write the in-sync replicas did not all get (the leadership moved, the ISR
    shrank below min.insync.replicas, or the wait timed out): the client finds the coordinator
    again (NOT_COORDINATOR)."""

    error_code = ErrorCode.not_coordinator


class OwnedPartitions:
    """The partitions of ``topic`` this broker leads and coordinates, each with its leader epoch."""

    def __init__(self, topic: str, replication: Replication) -> None:
        self.topic = topic
        self._replication = replication
        self._default_partitions = INTERNAL_TOPICS[topic][0]
        self.epochs: dict[int, int] = {}  # partition -> leader epoch

    def partitions(self) -> int:
        """The topic's partition count, as the metadata has it."""
        info = self._replication.topics().get(self.topic)
        return info.partitions if info is not None else self._default_partitions

    def partition_of(self, key: str) -> int:
        return partition_for(key, self.partitions())

    def owner_error(self, key: str) -> ErrorCode:
        """NONE when this broker coordinates ``key``; NOT_COORDINATOR when another broker leads its
        partition (the client finds it again); COORDINATOR_LOAD_IN_PROGRESS while this one leads
        it but has not loaded it. The topic is created on first use, as FindCoordinator does."""
        if self.topic not in self._replication.topics():
            self._replication.ensure_internal_topic(self.topic)  # a single node leads (and loads) it at once
        partition = self.partition_of(key)
        if partition in self.epochs:
            return ErrorCode.none
        if self._replication.leads(self.topic, partition):
            return ErrorCode.coordinator_load_in_progress
        return ErrorCode.not_coordinator

    def keys_of(self, partition: int, keys: Iterable[str]) -> list[str]:
        """Those of ``keys`` that belong to ``partition``."""
        count = self.partitions()
        return [key for key in keys if partition_for(key, count) == partition]


def durable(written: Mapping[Log, int], replication: Replication, durability: Durability) -> list[asyncio.Future[None]]:
    """The waits a response makes after a coordinator wrote up to ``written[log]`` in each log:
    the fsync where the topic flushes on acks=all, and the in-sync replicas (nothing to wait for
    on a leader alone in its ISR, a single node's case). A failed fsync raises StorageError, a
    replication that did not happen NotReplicatedError (a StorageError answered NOT_COORDINATOR)."""
    waits: list[asyncio.Future[None]] = []
    for log, end in written.items():
        if log.config.flush_on_ack_all:
            waits.append(durability.wait_durable(log, end))
        outcome: dict[str, Any] = {"error_code": ErrorCode.none}
        replicated = replication.wait_replicated(log, outcome, end, REPLICATION_TIMEOUT_MS)
        if outcome["error_code"]:
            waits.append(_failed(NotReplicatedError(f"{log.name}: error {outcome['error_code']} replicating")))
        elif replicated is not None:
            waits.append(asyncio.ensure_future(_replicated(replicated, outcome, log.name)))
    return waits


async def _replicated(wait: asyncio.Future[None], outcome: dict[str, Any], name: str) -> None:
    await wait
    if outcome["error_code"]:
        raise NotReplicatedError(f"{name}: error {outcome['error_code']} waiting for the in-sync replicas")


def _failed(error: Exception) -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.set_exception(error)
    return future


def settled(waits: list[asyncio.Future[None]]) -> Awaitable[None] | None:
    """One awaitable for ``waits`` (None: nothing to wait for), raising the first failure."""
    if not waits:
        return None
    if len(waits) == 1:
        return waits[0]
    return _all(waits)


async def _all(waits: list[asyncio.Future[None]]) -> None:
    failure: BaseException | None = None
    for wait in waits:
        try:
            await wait
        except StorageError as error:
            failure = failure or error
    if failure is not None:
        raise failure


async def answer_after(waits: list[asyncio.Future[None]], response: dict[str, Any], what: str) -> dict[str, Any]:
    """``response`` once ``waits`` are done: NOT_COORDINATOR when a write did not reach the in-sync
    replicas (the client finds its coordinator again), KAFKA_STORAGE_ERROR when an fsync failed
    (the state is applied in memory; the disk failure is reported)."""
    for wait in waits:
        try:
            await wait
        except NotReplicatedError as error:
            logger.warning("%s not replicated: %s", what, error)
            response["error_code"] = ErrorCode.not_coordinator
        except StorageError as error:
            logger.error("%s not durable: %s", what, error)
            response["error_code"] = ErrorCode.kafka_storage_error
    return response


def log_failure(what: str, future: asyncio.Future[None]) -> None:
    """A done callback: say when a write nobody waits for failed (a failover is only a warning)."""
    if not future.cancelled() and future.exception() is not None:
        error = future.exception()
        level = logging.WARNING if isinstance(error, NotReplicatedError) else logging.ERROR
        logger.log(level, "%s failed: %s", what, error)
