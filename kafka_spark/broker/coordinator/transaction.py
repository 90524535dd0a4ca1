"""Transaction coordinator: transactional ids, producer epochs, and the transactions' lifecycle.

Kafka's ``TransactionCoordinator``. Three collaborators do the work, as in Kafka:

* the state machine (transaction_state.py: ``TransactionMetadata`` per transactional id, every
  check and move, pure);
* the log (transaction_log.py: ``__transaction_state``, one record per state change, replayed
  when this broker becomes the leader of a partition of it);
* the marker channel (txn_markers.py: COMMIT / ABORT markers at each partition's leader, here or
  with WriteTxnMarkers).

(About 600 lines, 50 of them this docstring: one class, as Kafka's TransactionCoordinator,
whose methods are the transaction APIs' entry points; the checks and moves are the state machine's.)

This module ties them together: it owns the transactional ids of the partitions of
``__transaction_state`` its broker leads (a single node, a cluster of one, leads them all;
``partition_moved`` loads and drops them, other ids are answered NOT_COORDINATOR so the client
finds their coordinator), answers the transaction APIs, aborts transactions past their timeout,
expires idle ids, and makes responses wait until what they changed is durable.

Ending a transaction persists PrepareCommit / PrepareAbort, then writes the markers: the
partitions this broker leads at once, within the request (so on a single node the last stable
offset has moved when EndTxn is answered), the others in the background; the transaction stays in
Prepare* (requests get 51 CONCURRENT_TRANSACTIONS) until every marker is written, then
CompleteCommit / CompleteAbort is persisted. A coordinator that loads a transaction in Prepare*
(its broker died between, or the previous coordinator did) finishes it, marking only the
partitions where its producer's transaction is still open. The markers' coordinator epoch is the
leader epoch of the transactional id's partition of ``__transaction_state``.

Consumer offsets of a transaction (TxnOffsetCommit) are staged by the group's coordinator in the
group's partition of ``__consumer_offsets``, as transactional records of the producer; AddOffsetsToTxn
makes that partition one of the transaction's, so its COMMIT marker applies them (ABORT drops
them). A single node before issue 39 staged them in the transaction's own record instead
(``pending_offsets``); such records are honoured (committed on commit).

Transaction protocol v2 (KIP-890 part 2, finalized by ApiVersions where the partitions' leader is
the coordinator, a cluster of one): Produce v12+ and TxnOffsetCommit v5+ add the partition or group
to the transaction themselves, and EndTxn v5+ bumps the epoch (transaction_state.py). Elsewhere a
partition's leader accepts transactional batches of producers its own coordinator does not know,
as Kafka did before KIP-890 (the markers' epochs fence older epochs). Fencing: InitProducerId on a
known id, and the abort of a transaction past its timeout, bump the epoch; the abandoned producer
gets INVALID_PRODUCER_EPOCH (47) or PRODUCER_FENCED (90). Expiry: an id unused for
``transactional_id_expiration_ms`` (7 days) with no transaction open is tombstoned and forgotten.

Durability: responses that changed state wait (``respond``) for the fsync of the state log and of
the markers written within the request when their ``flush_on_ack_all`` is on, like acks=all
produces, and for the in-sync replicas of the state log (at once for a leader alone in its ISR).

Thread-safety: event loop only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from kio.schema.errors import ErrorCode

from kafka_spark.broker.coordinator.context import (
    Durability,
    OwnedPartitions,
    Replication,
    answer_after,
    durable,
    log_failure,
)
from kafka_spark.broker.coordinator.transaction_log import TransactionLog
from kafka_spark.broker.coordinator.transaction_state import (
    PREPARING,
    EndAction,
    InitAction,
    Offsets,
    TransactionMetadata,
    TxnState,
    end_txn_check,
    init_check,
    offsets_check,
    produce_check,
    validate,
)
from kafka_spark.broker.coordinator.txn_markers import Marker, MarkerChannel
from kafka_spark.broker.deferred import Deferred
from kafka_spark.broker.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, is_internal_topic, partition_for
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kafka_spark.broker.notifier import DataNotifier
    from kafka_spark.broker.storage.batch import BatchHeader
    from kafka_spark.broker.storage.log import Log
    from kafka_spark.broker.storage.log_manager import LogManager
    from kafka_spark.broker.storage.producer_state import PartitionProducerState

logger = logging.getLogger("kafka_spark.broker.coordinator.transaction")

MAX_TRANSACTION_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms default
ABORT_CHECK_INTERVAL_MS = 1_000  # Kafka checks every 10 s; a laptop broker can afford 1 s
TRANSACTIONAL_ID_EXPIRATION_MS = 7 * 24 * 3_600_000  # Kafka's transactional.id.expiration.ms default
EXPIRATION_CHECK_INTERVAL_MS = 3_600_000  # Kafka's transaction.remove.expired.transaction.cleanup.interval.ms


class ProducerIds(Protocol):
    def next_id(self) -> int: ...


class TransactionCoordinator:
    """Every transactional id this broker coordinates. See the module docstring.

    ``commit_offsets(group_id, offsets)`` commits offsets a transaction staged in its own record
    (the group coordinator's ``commit_offsets``); ``producer_state(log)`` is a partition's
    producer state (loading it holds the partition's last stable offset at an open transaction).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        logs: LogManager,
        replication: Replication,
        durability: Durability,
        markers: MarkerChannel,
        producer_ids: ProducerIds,
        producer_state: Callable[[Log], PartitionProducerState],
        commit_offsets: Callable[[str, Offsets], None],
        notifier: DataNotifier,
        *,
        abort_check_interval_ms: int = ABORT_CHECK_INTERVAL_MS,
        transactional_id_expiration_ms: int = TRANSACTIONAL_ID_EXPIRATION_MS,
        expiration_check_interval_ms: int = EXPIRATION_CHECK_INTERVAL_MS,
    ) -> None:
        self._loop = loop
        self._logs = logs
        self._replication = replication
        self._durability = durability
        self._markers = markers
        self._producer_ids = producer_ids
        self._producer_state = producer_state
        self._commit_offsets = commit_offsets
        self._notifier = notifier
        self.abort_check_interval_ms = abort_check_interval_ms
        self.transactional_id_expiration_ms = transactional_id_expiration_ms
        self.expiration_check_interval_ms = expiration_check_interval_ms
        # The partitions of __transaction_state this broker leads, with their leader epochs (the
        # coordinator epoch of the markers).
        self._owned = OwnedPartitions(TRANSACTION_STATE_TOPIC, replication)
        self._log = TransactionLog(logs, self._owned.partitions)
        self._txns: dict[str, TransactionMetadata] = {}
        self._by_producer_id: dict[int, TransactionMetadata] = {}
        self._unsynced: dict[Log, int] = {}
        self._completing: dict[str, asyncio.Task[None]] = {}  # transactions writing markers elsewhere
        self._timer: asyncio.TimerHandle | None = None
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._schedule_abort_check()
        self._schedule_expiry()

    # -- the partitions of __transaction_state this broker leads -------------------------------------

    def owner_error(self, transactional_id: str) -> int:
        """0 when this broker coordinates ``transactional_id``; NOT_COORDINATOR when another
        broker leads its partition of ``__transaction_state`` (the client finds it again),
        COORDINATOR_LOAD_IN_PROGRESS while this one is loading it."""
        return self._owned.owner_error(transactional_id)

    def partition_moved(self, partition: int, leader_epoch: int | None) -> None:
        """This broker leads ``partition`` of ``__transaction_state`` from ``leader_epoch`` on
        (load its transactional ids from the log, finish the transactions left in Prepare*), or
        no longer leads it (None: forget them; the new leader carries on)."""
        if leader_epoch is None:
            if self._owned.epochs.pop(partition, None) is None:
                return
            gone = [self._txns[t] for t in self._owned.keys_of(partition, list(self._txns))]
            for meta in gone:
                del self._txns[meta.transactional_id]
                if self._by_producer_id.get(meta.producer_id) is meta:
                    del self._by_producer_id[meta.producer_id]
                task = self._completing.pop(meta.transactional_id, None)
                if task is not None:
                    task.cancel()
            logger.info(
                "%s-%d moved away: %d transactional id(s) unloaded", TRANSACTION_STATE_TOPIC, partition, len(gone)
            )
            return
        if partition in self._owned.epochs:
            self._owned.epochs[partition] = leader_epoch
            return
        interrupted = []
        for transactional_id, record in self._log.load(partition).items():
            meta = TransactionMetadata.from_record(transactional_id, record)
            self._register(meta)
            if meta.state in PREPARING:
                interrupted.append(meta)
            if meta.state is not TxnState.EMPTY:
                for tp in meta.partitions:  # holds the last stable offset of what it leads at once
                    self._local_state(tp)
        self._owned.epochs[partition] = leader_epoch
        if interrupted:
            # On the loop's next turn, before any request (the broker serves once it has taken its
            # metadata): every partition of this broker leads by then.
            self._loop.call_soon(self._finish_loaded, interrupted)

    def _finish_loaded(self, interrupted: list[TransactionMetadata]) -> None:
        for meta in interrupted:
            if self._txns.get(meta.transactional_id) is not meta or meta.state not in PREPARING:
                continue
            logger.info("finishing transaction %r (%s) left unfinished", meta.transactional_id, meta.state.value)
            self._finish(meta, meta.state is TxnState.PREPARE_COMMIT, only_open=True)
        self._drain_unsynced()

    def _register(self, meta: TransactionMetadata) -> None:
        self._txns[meta.transactional_id] = meta
        self._by_producer_id[meta.producer_id] = meta

    def _persist(self, meta: TransactionMetadata) -> None:
        now = _now_ms()
        meta.last_update_ms = now
        log, end = self._log.append(meta.transactional_id, meta.to_record(), now)
        self._unsynced[log] = end

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        """The metadata of ``transactional_id`` (for tests and tools; do not mutate)."""
        return self._txns.get(transactional_id)

    def all(self) -> list[TransactionMetadata]:
        """Every transactional id's metadata, by id (ListTransactions; do not mutate)."""
        return [self._txns[transactional_id] for transactional_id in sorted(self._txns)]

    # -- InitProducerId ------------------------------------------------------------------------------

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int, api_version: int
    ) -> tuple[int, int, int]:
        """``(error_code, producer_id, producer_epoch)`` for a transactional producer starting up.

        A new id gets a new producer id at epoch 0. A known one has its ongoing transaction
        aborted and its epoch bumped, fencing the previous instance (``init_check``)."""
        if not 0 < timeout_ms <= MAX_TRANSACTION_TIMEOUT_MS:
            logger.warning(
                "InitProducerId for %r: transaction.timeout.ms=%d is outside (0, %d]",
                transactional_id,
                timeout_ms,
                MAX_TRANSACTION_TIMEOUT_MS,
            )
            return ErrorCode.invalid_transaction_timeout, -1, -1
        owner = self.owner_error(transactional_id)
        if owner:
            return owner, -1, -1
        meta = self._txns.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(transactional_id, self._producer_ids.next_id(), 0, timeout_ms)
            self._register(meta)
            self._persist(meta)
            return ErrorCode.none, meta.producer_id, meta.producer_epoch
        code, action = init_check(meta, producer_id, producer_epoch, api_version)
        if action is InitAction.REFUSE:
            return code, -1, -1
        if action is InitAction.ANSWER:
            return ErrorCode.none, meta.producer_id, meta.producer_epoch
        if meta.state is TxnState.ONGOING:
            # As Kafka: fence (epoch + 1, markers with it), abort, then the init's own bump.
            meta.fence()
            logger.info(
                "InitProducerId for %r aborts its ongoing transaction (epoch now %d)",
                transactional_id,
                meta.producer_epoch,
            )
            self._end(meta, commit=False)
            if meta.state is TxnState.PREPARE_ABORT:  # markers still being written: the client retries
                return ErrorCode.concurrent_transactions, -1, -1
        previous_id = meta.producer_id
        meta.bump_for_init(timeout_ms, self._producer_ids.next_id() if meta.epochs_exhausted else meta.producer_id)
        if meta.producer_id != previous_id:
            self._by_producer_id.pop(previous_id, None)
            self._register(meta)
        self._persist(meta)
        return ErrorCode.none, meta.producer_id, meta.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit ---------------------------------------

    def _validate(
        self, transactional_id: str, producer_id: int, producer_epoch: int, fenced: int
    ) -> tuple[TransactionMetadata | None, int]:
        owner = self.owner_error(transactional_id)
        if owner:
            return None, owner
        meta = self._txns.get(transactional_id)
        error = validate(meta, producer_id, producer_epoch, fenced)
        return (meta, error) if not error else (None, error)

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        fenced: int,
    ) -> dict[TopicPartition, int]:
        """Per partition error code. One unknown partition fails the request: 3 for it, 55
        OPERATION_NOT_ATTEMPTED for the others, as Kafka does."""
        partitions = list(partitions)
        meta, error = self._validate(transactional_id, producer_id, producer_epoch, fenced)
        if meta is None:
            return {tp: error for tp in partitions}
        unknown = {tp for tp in partitions if not self._exists(tp)}
        if unknown:
            return {
                tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                for tp in partitions
            }
        if meta.add_partitions(partitions, _now_ms()):
            self._persist(meta)
        return {tp: ErrorCode.none for tp in partitions}

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        fenced: int,
    ) -> dict[TopicPartition, int]:
        """Per partition: 0 when it is in the producer's ongoing transaction, 48 INVALID_TXN_STATE
        when not (AddPartitionsToTxn v4+ with verify_only); changes nothing."""
        partitions = list(partitions)
        meta, error = self._validate(transactional_id, producer_id, producer_epoch, fenced)
        if meta is None:
            return {tp: error for tp in partitions}
        ongoing = meta.state is TxnState.ONGOING
        return {
            tp: ErrorCode.none if ongoing and tp in meta.partitions else ErrorCode.invalid_txn_state
            for tp in partitions
        }

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, fenced: int
    ) -> int:
        """Make ``group_id``'s offsets part of the transaction (TxnOffsetCommit follows): the
        group's partition of ``__consumer_offsets`` gets a marker too."""
        meta, error = self._validate(transactional_id, producer_id, producer_epoch, fenced)
        if meta is None:
            return error
        if meta.add_group(group_id, self._offsets_partition(group_id), _now_ms()):
            self._persist(meta)
        return ErrorCode.none

    def verify_offsets(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        *,
        transaction_v2: bool = False,
    ) -> int:
        """TxnOffsetCommit, where this broker coordinates ``transactional_id`` (the group's
        coordinator stages the offsets): the producer's transaction must hold the group (48
        INVALID_TXN_STATE: AddOffsetsToTxn first); with ``transaction_v2`` (v5+) the group joins
        it. NOT_COORDINATOR when another broker coordinates the transactional id: the group's
        coordinator then trusts the producer, as Kafka's did before KIP-890."""
        meta, error = self._validate(transactional_id, producer_id, producer_epoch, ErrorCode.invalid_producer_epoch)
        if meta is None:
            return error
        error, add = offsets_check(meta, group_id, transaction_v2)
        if error:
            logger.warning(
                "TxnOffsetCommit for %r, group %r: call AddOffsetsToTxn for the group first", transactional_id, group_id
            )
            return error
        if add and meta.add_group(group_id, self._offsets_partition(group_id), _now_ms()):
            self._persist(meta)
        return ErrorCode.none

    def staged_offsets(self, group_id: str) -> set[TopicPartition]:
        """The partitions of ``group_id`` whose offsets an open transaction staged in its own record
        (a single node before issue 39; OffsetFetch's ``require_stable`` answers them
        UNSTABLE_OFFSET_COMMIT until the transaction ends)."""
        return {
            tp
            for meta in self._txns.values()
            if meta.state is not TxnState.EMPTY
            for tp in meta.pending_offsets.get(group_id, ())
        }

    def _offsets_partition(self, group_id: str) -> TopicPartition:
        info = self._replication.topics().get(OFFSETS_TOPIC) or self._replication.ensure_internal_topic(OFFSETS_TOPIC)
        count = info.partitions if info is not None else 1
        return TopicPartition(OFFSETS_TOPIC, partition_for(group_id, count))

    # -- EndTxn ----------------------------------------------------------------------------------------

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        fenced: int,
        *,
        transaction_v2: bool = False,
    ) -> tuple[int, int, int]:
        """``(error_code, producer_id, producer_epoch)``: the producer's id and epoch after the
        transaction ended (what EndTxn v5+ answers; -1, -1 on an error)."""
        owner = self.owner_error(transactional_id)
        if owner:
            return owner, -1, -1
        meta = self._txns.get(transactional_id)
        code, action = end_txn_check(meta, producer_id, producer_epoch, commit, fenced)
        if action is EndAction.REFUSE:
            if code == ErrorCode.invalid_txn_state:
                state = meta.state.value if meta is not None else "unknown"
                logger.warning(
                    "EndTxn(%s) for %r in state %s", "commit" if commit else "abort", transactional_id, state
                )
            return code, -1, -1
        assert meta is not None
        if action is EndAction.END:
            next_id = self._producer_ids.next_id() if transaction_v2 and meta.epochs_exhausted else -1
            self._end(meta, commit, transaction_v2=transaction_v2, next_producer_id=next_id)
        return ErrorCode.none, meta.producer_id, meta.producer_epoch

    def _end(
        self, meta: TransactionMetadata, commit: bool, *, transaction_v2: bool | None = None, next_producer_id: int = -1
    ) -> None:
        meta.prepare_end(commit, transaction_v2, next_producer_id)
        self._persist(meta)
        self._finish(meta, commit, only_open=False)

    def _finish(self, meta: TransactionMetadata, commit: bool, *, only_open: bool) -> None:
        """Markers, then the Complete state: at once when this broker wrote every marker and its
        in-sync replicas have them, else once the background delivery has written the others.
        ``only_open``: a transaction loaded in Prepare* marks only the partitions where its
        producer's transaction is still open (the first attempt may have marked others)."""
        if commit:
            for group_id, offsets in meta.pending_offsets.items():  # staged in its record (before issue 39)
                self._commit_staged(meta, group_id, offsets)
        marker = self._marker(meta, commit)
        delivery = self._markers.write(marker, meta.partitions, only_open=only_open, transaction=meta.transactional_id)
        self._unsynced.update(delivery.written)
        if delivery.done:
            self._complete(meta, commit)
            return
        prepared = meta.state

        def still_wanted() -> bool:
            return meta.state is prepared and self._txns.get(meta.transactional_id) is meta

        async def deliver() -> None:
            await self._markers.deliver(marker, delivery, still_wanted, meta.transactional_id)
            if still_wanted():
                self._complete(meta, commit)
                self._drain_unsynced()

        task = self._loop.create_task(deliver())
        self._completing[meta.transactional_id] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._completing.get(meta.transactional_id) is finished:
                del self._completing[meta.transactional_id]
            if not finished.cancelled() and finished.exception() is not None:
                logger.error("transaction %r: writing markers failed: %r", meta.transactional_id, finished.exception())

        task.add_done_callback(done)

    def _marker(self, meta: TransactionMetadata, commit: bool) -> Marker:
        partition = self._owned.partition_of(meta.transactional_id)
        return Marker(meta.producer_id, meta.producer_epoch, commit, self._owned.epochs.get(partition, 0))

    def _complete(self, meta: TransactionMetadata, commit: bool) -> None:
        """Every marker is written: CompleteCommit / CompleteAbort."""
        moved = meta.complete()
        if moved is not None:  # v2 exhausted the epochs: the producer moved to a new id
            self._by_producer_id.pop(moved, None)
            self._register(meta)
        self._persist(meta)
        self._notifier.notify()

    def _commit_staged(self, meta: TransactionMetadata, group_id: str, offsets: Offsets) -> None:
        try:
            self._commit_offsets(group_id, offsets)
        except StorageError as error:
            # The data commits regardless (markers follow); only the offsets are lost, so the
            # consumer would re-read this transaction's input: say so loudly.
            logger.error(
                "transaction %r: committing offsets of group %r failed: %s", meta.transactional_id, group_id, error
            )

    # -- Produce -------------------------------------------------------------------------------------

    def check_produce(
        self, transactional_id: str | None, header: BatchHeader, tp: TopicPartition, *, transaction_v2: bool = False
    ) -> int:
        """Error code for a transactional batch (0 = may be written), see ``produce_check``; with
        ``transaction_v2`` (Produce v12+) the partition may join the transaction here."""
        meta = self._by_producer_id.get(header.producer_id)
        if meta is None:
            if transactional_id is not None and self.owner_error(transactional_id):
                # The partition's leader is not the transaction's coordinator: as Kafka before
                # KIP-890, it trusts the producer's AddPartitionsToTxn, and the markers' epochs
                # fence the batches of older producer epochs.
                return ErrorCode.none
            return ErrorCode.invalid_producer_id_mapping
        code, add = produce_check(meta, transactional_id, header.producer_epoch, tp, transaction_v2)
        if add:
            meta.add_partitions([tp], _now_ms())
            self._persist(meta)
        return code

    # -- timeouts ------------------------------------------------------------------------------------

    def _schedule_abort_check(self) -> None:
        self._timer = self._loop.call_later(self.abort_check_interval_ms / 1000, self._abort_check)

    def _abort_check(self) -> None:
        try:
            self.abort_timed_out(_now_ms())
        finally:
            self._schedule_abort_check()

    def abort_timed_out(self, now_ms: int) -> list[str]:
        """Abort every ongoing transaction older than its timeout, bumping its epoch so the
        abandoned producer is fenced. Returns the transactional ids aborted."""
        expired = [meta for meta in self._txns.values() if meta.timed_out(now_ms)]
        for meta in expired:
            logger.warning(
                "aborting transaction %r of producer %d: open %d ms, longer than its timeout %d ms",
                meta.transactional_id,
                meta.producer_id,
                now_ms - meta.txn_start_ms,
                meta.timeout_ms,
            )
            meta.fence()
            self._end(meta, commit=False)
        if expired:
            self._drain_unsynced()
        return [meta.transactional_id for meta in expired]

    def _schedule_expiry(self) -> None:
        self._expiry_timer = self._loop.call_later(self.expiration_check_interval_ms / 1000, self._expiry)

    def _expiry(self) -> None:
        try:
            self.expire_transactional_ids(_now_ms())
        except StorageError as error:  # tried again at the next check
            logger.error("expiring transactional ids failed: %s", error)
        finally:
            self._schedule_expiry()

    def expire_transactional_ids(self, now_ms: int) -> list[str]:
        """Forget every transactional id idle for longer than ``transactional_id_expiration_ms``
        with no transaction open (tombstoned in ``__transaction_state``). Returns those ids."""
        idle = [meta for meta in self._txns.values() if meta.expired(now_ms, self.transactional_id_expiration_ms)]
        for meta in idle:
            log, end = self._log.append(meta.transactional_id, None, now_ms)
            self._unsynced[log] = end
            del self._txns[meta.transactional_id]
            if self._by_producer_id.get(meta.producer_id) is meta:
                del self._by_producer_id[meta.producer_id]
            logger.info(
                "transactional id %r expired: unused for %d ms", meta.transactional_id, now_ms - meta.last_update_ms
            )
        if idle:
            self._drain_unsynced()  # fsynced in the background; a failure is logged
        return [meta.transactional_id for meta in idle]

    # -- responses and durability --------------------------------------------------------------------

    def respond(self, response: dict[str, Any]) -> dict[str, Any] | Deferred:
        """``response`` now, or once the state and markers just written are durable."""
        waits = self._drain_unsynced()
        if not waits:
            return response
        return Deferred(answer_after(waits, response, "transaction state"))

    def _drain_unsynced(self) -> list[asyncio.Future[None]]:
        unsynced, self._unsynced = self._unsynced, {}
        waits = durable(unsynced, self._replication, self._durability)
        for wait in waits:
            wait.add_done_callback(functools.partial(log_failure, "writing the transaction coordinator's state"))
        return waits

    # -- helpers ---------------------------------------------------------------------------------------

    def _exists(self, tp: TopicPartition) -> bool:
        if is_internal_topic(tp.topic):  # internal topics: the broker's own, never in a transaction
            return False
        info = self._replication.topics().get(tp.topic)
        return info is not None and 0 <= tp.partition < info.partitions

    def _local_state(self, tp: TopicPartition) -> PartitionProducerState | None:
        try:
            log = self._logs.get_log(tp.topic, tp.partition)
        except StorageError:
            return None
        return self._producer_state(log)

    def close(self) -> None:
        for task in self._completing.values():
            task.cancel()
        for timer in (self._timer, self._expiry_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._expiry_timer = None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
