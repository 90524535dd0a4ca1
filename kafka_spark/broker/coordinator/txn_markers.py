"""The transaction marker channel: COMMIT and ABORT control batches, written at each partition's
leader (Kafka's ``TransactionMarkerChannelManager``).

Ending a transaction writes a marker to every partition of it. Where this broker leads the
partition (on a single node, every partition) the channel appends the marker itself, at once
(:meth:`MarkerChannel.write_here`); elsewhere it sends WriteTxnMarkers [27] (v1) to the leader,
which appends it through the same method. A marker counts as written once the partition's in-sync
replicas have it (at once for a leader alone in its ISR). Appending a marker tells the partition's
producer state (the marker's epoch fences older epochs) and transaction index (which moves the
last stable offset and records aborted transactions), and, on a partition of
``__consumer_offsets``, the group coordinator (the transaction's staged offsets apply on COMMIT).

Failures: a partition whose leader is unknown, moved or unreachable is retried with the newest
metadata, backing off from 50 ms to 1 s; one whose log refused the append (a disk error) is
retried after ``MARKER_RETRY_MS``. The coordinator keeps the transaction in Prepare* meanwhile.
A marker whose producer epoch is older than the epoch the partition last saw is not written (a
late retry: a newer epoch of the producer wrote there since), and a marker written twice is
harmless. A transaction finished after a restart (``only_open``) marks only the partitions where
its producer's transaction is still open, since the first attempt may have marked others.

Thread-safety: event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.coordinator.context import REPLICATION_TIMEOUT_MS, Replication
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC
from kafka_spark.broker.protocol.versions import ApiKey
from kafka_spark.broker.storage.batch import BatchHeader, build_control_batch
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kafka_spark.broker.notifier import DataNotifier
    from kafka_spark.broker.storage.log import Log
    from kafka_spark.broker.storage.log_manager import LogManager
    from kafka_spark.broker.storage.producer_state import PartitionProducerState

logger = logging.getLogger("kafka_spark.broker.coordinator.transaction")

MARKER_RETRY_MS = 1_000  # after a disk refused a marker
_FIRST_BACKOFF_S = 0.05  # after a leader could not be reached
WRITE_TXN_MARKERS_VERSION = 1


@dataclass(frozen=True)
class Marker:
    """What a marker says: the transaction's producer, its outcome and the coordinator epoch."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int

    @property
    def name(self) -> str:
        return "COMMIT" if self.commit else "ABORT"


@dataclass
class Delivery:
    """What one round of writing markers left: ``written`` (log -> end offset) for the response's
    durability wait, ``replicating`` (local markers waiting for the in-sync replicas), and the
    partitions to try again: led elsewhere or by no one (``elsewhere``), or refused by the disk
    (``refused``)."""

    written: dict[Log, int] = field(default_factory=dict)
    replicating: list[tuple[TopicPartition, asyncio.Future[None], dict[str, Any]]] = field(default_factory=list)
    elsewhere: set[TopicPartition] = field(default_factory=set)
    refused: set[TopicPartition] = field(default_factory=set)

    @property
    def done(self) -> bool:
        return not (self.replicating or self.elsewhere or self.refused)


class MarkerChannel:
    """Writes transaction markers at the partitions' leaders; see the module docstring.

    ``producer_state(log)`` is the partition's producer state (the broker's cache);
    ``offsets_marker(partition, producer_id, commit)`` tells the group coordinator that a marker
    reached its ``partition`` of ``__consumer_offsets``.
    """

    def __init__(
        self,
        logs: LogManager,
        replication: Replication,
        producer_state: Callable[[Log], PartitionProducerState],
        notifier: DataNotifier,
        offsets_marker: Callable[[int, int, bool], None],
    ) -> None:
        self._logs = logs
        self._replication = replication
        self._producer_state = producer_state
        self._notifier = notifier
        self._offsets_marker = offsets_marker

    # -- one partition, here -----------------------------------------------------------------------

    def write_here(self, tp: TopicPartition, marker: Marker, *, only_open: bool = False) -> tuple[int, Log | None]:
        """Append ``marker`` to ``tp``, which this broker must lead (WriteTxnMarkers, and the
        coordinator's own partitions). Returns the error code and the log written (None when
        nothing was: a late marker, or, with ``only_open``, no transaction of the producer open)."""
        code = self._replication.check_produce(tp.topic, tp.partition, 1)
        if code:
            return code, None
        try:
            log = self._logs.get_log(tp.topic, tp.partition)
        except StorageError as error:
            return error.error_code, None
        state = self._producer_state(log)
        index = state.txn_index
        if only_open and (index is None or marker.producer_id not in index.ongoing):
            return ErrorCode.none, None
        known = state.producers.get(marker.producer_id)
        if known is not None and known.epoch > marker.producer_epoch:
            # A newer epoch of the producer wrote here since: this marker's transaction is over (a
            # retry arriving late). Kafka refuses it; the coordinator need not write it anywhere.
            return ErrorCode.none, None
        batch = build_control_batch(
            0, marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch, _now_ms()
        )
        try:
            result = log.append(batch, acks=1)
        except StorageError as error:
            logger.error("writing the %s marker to %s failed: %s", marker.name, tp, error)
            return error.error_code, None
        header: BatchHeader = result.headers[0]
        state.record(header)  # the marker's epoch fences older epochs on this partition
        if index is not None:
            index.on_marker(marker.producer_id, header.base_offset, marker.commit)
        if tp.topic == OFFSETS_TOPIC:  # the transaction's consumer offsets apply (or not) now
            self._offsets_marker(tp.partition, marker.producer_id, marker.commit)
        self._notifier.notify()
        return ErrorCode.none, log

    # -- a transaction's partitions ------------------------------------------------------------------

    def write(
        self, marker: Marker, partitions: Iterable[TopicPartition], *, only_open: bool = False, transaction: str = ""
    ) -> Delivery:
        """One round, without waiting: the markers of the partitions this broker leads are
        appended now; the others are left for :meth:`deliver`."""
        delivery = Delivery()
        topics = self._replication.topics()
        for tp in sorted(partitions):
            info = topics.get(tp.topic)
            if info is None or not 0 <= tp.partition < info.partitions:
                logger.warning("transaction %r: %s was deleted; no marker written there", transaction, tp)
                continue
            if self._replication.leader_of(tp) != self._replication.node_id:
                delivery.elsewhere.add(tp)
                continue
            code, log = self.write_here(tp, marker, only_open=only_open)
            if code == ErrorCode.unknown_topic_or_partition or (not code and log is None):
                continue  # deleted, or nothing to write
            if code == ErrorCode.not_leader_or_follower:
                delivery.elsewhere.add(tp)
                continue
            if code or log is None:
                delivery.refused.add(tp)
                continue
            delivery.written[log] = log.log_end_offset
            outcome: dict[str, Any] = {"error_code": ErrorCode.none}
            replicated = self._replication.wait_replicated(log, outcome, log.log_end_offset, REPLICATION_TIMEOUT_MS)
            if replicated is not None:
                delivery.replicating.append((tp, replicated, outcome))
            elif outcome["error_code"]:
                delivery.elsewhere.add(tp)
        return delivery

    async def deliver(
        self, marker: Marker, delivery: Delivery, still_wanted: Callable[[], bool], transaction: str
    ) -> None:
        """Finish ``delivery``: wait for the local markers' in-sync replicas, send WriteTxnMarkers
        to the other partitions' leaders, and retry what failed (see the module docstring) until
        every marker is written or ``still_wanted()`` turns false (this broker stopped
        coordinating the transaction: the new coordinator finishes it)."""
        remaining = set(delivery.elsewhere) | delivery.refused
        for tp, wait, outcome in delivery.replicating:
            await wait
            if outcome["error_code"]:
                remaining.add(tp)
        # Led elsewhere: at once. Refused by this broker's disk a moment ago: not again at once.
        delay = MARKER_RETRY_MS / 1000 if delivery.refused else 0.0
        backoff = _FIRST_BACKOFF_S
        while remaining:
            if delay:
                logger.info(
                    "transaction %r: markers missing on %s; retrying in %d ms",
                    transaction,
                    ", ".join(map(str, sorted(remaining))),
                    delay * 1000,
                )
                await asyncio.sleep(delay)
            if not still_wanted():
                return
            remaining, refused = await self._round(marker, remaining, transaction)
            delay = MARKER_RETRY_MS / 1000 if refused else backoff
            backoff = min(backoff * 2, MARKER_RETRY_MS / 1000)

    async def _round(
        self, marker: Marker, partitions: set[TopicPartition], transaction: str
    ) -> tuple[set[TopicPartition], bool]:
        """Write the markers of ``partitions`` at their leaders; returns those still missing and
        whether a disk refused some."""
        here = self.write(marker, partitions, transaction=transaction)
        missing = set(here.refused)
        for tp, wait, outcome in here.replicating:
            await wait
            if outcome["error_code"]:
                missing.add(tp)
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in here.elsewhere:
            leader = self._replication.leader_of(tp)
            if leader < 0 or leader == self._replication.node_id:
                missing.add(tp)  # no leader yet, or leadership moved here after the lookup: next round
            else:
                by_leader.setdefault(leader, []).append(tp)
        for failed in await asyncio.gather(
            *(self._send(leader, marker, tps, transaction) for leader, tps in by_leader.items())
        ):
            missing.update(failed)
        return missing, bool(here.refused)

    async def _send(
        self, leader: int, marker: Marker, partitions: list[TopicPartition], transaction: str
    ) -> list[TopicPartition]:
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "markers": [
                {
                    "producer_id": marker.producer_id,
                    "producer_epoch": marker.producer_epoch,
                    "transaction_result": marker.commit,
                    "topics": [{"name": name, "partition_indexes": indexes} for name, indexes in topics.items()],
                    "coordinator_epoch": marker.coordinator_epoch,
                }
            ]
        }
        try:
            response = await self._replication.request(
                leader, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body
            )
        except (TimeoutError, OSError, EOFError, asyncio.IncompleteReadError, ValueError) as error:
            logger.info("transaction %r: WriteTxnMarkers to broker %d failed: %r", transaction, leader, error)
            return partitions
        failed = []
        for answered in response.markers:
            for topic in answered.topics:
                for result in topic.partitions:
                    if result.error_code not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
                        failed.append(TopicPartition(topic.name, result.partition_index))
        return failed


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
