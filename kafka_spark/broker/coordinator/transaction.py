"""Transaction coordinator: transactional ids, producer epochs, and the transaction state machine.

Kafka's ``TransactionCoordinator``, for the single node and (see the end) for a cluster. Per transactional id it keeps a
:class:`TransactionMetadata` (producer id and epoch, timeout, state, the partitions and consumer
groups of the ongoing transaction, the offsets staged by TxnOffsetCommit) and moves it through an
explicit state machine (``LEGAL_TRANSITIONS``)::

    Empty / CompleteCommit / CompleteAbort
        --AddPartitionsToTxn, AddOffsetsToTxn-->  Ongoing
    Ongoing --EndTxn(commit)-->  PrepareCommit  --markers written-->  CompleteCommit
    Ongoing --EndTxn(abort), timeout, InitProducerId-->  PrepareAbort  --markers-->  CompleteAbort
    CompleteCommit / CompleteAbort / Empty --InitProducerId (epoch + 1)-->  Empty

Ending a transaction writes a COMMIT or ABORT control batch (valid CRC) to every partition of the
transaction, tells each partition's transaction index (storage/txn_index.py), which moves the last stable
offset and records aborted transactions, materialises staged offsets through the group
coordinator on commit (``broker.groups.commit_offsets``), and wakes parked fetches. Markers are
written synchronously on the event loop, so a Prepare state normally lasts one call; it is
persisted first all the same, so a broker that dies in between finishes the transaction on
restart (markers then go only where the producer's transaction is still open), and a marker
append that fails keeps the transaction in Prepare (requests get 51 CONCURRENT_TRANSACTIONS)
until a retry every MARKER_RETRY_MS succeeds.

Transaction protocol v2 (KIP-890 part 2; ``transaction.version`` 2, which ApiVersions finalizes,
as Kafka 4 does for new clusters): a producer that knows it sends Produce v12+ and TxnOffsetCommit
v5+ without AddPartitionsToTxn / AddOffsetsToTxn, and the coordinator adds the partitions and the
group to the transaction (beginning it) when they arrive. EndTxn v5+ bumps the epoch with every
commit or abort: the markers carry the new epoch, fencing the batches of the transaction just
ended, and the answer tells the producer its new epoch (a new producer id once the epochs are
exhausted). A retry of that EndTxn, still carrying the old epoch, is answered like the first.

Fencing: InitProducerId on a known id bumps the epoch (aborting an ongoing transaction first);
a transaction older than its timeout is aborted by a periodic check that also bumps the epoch, so
the abandoned producer ("zombie") gets INVALID_PRODUCER_EPOCH (47) or PRODUCER_FENCED (90) on its
next request, and its produce is refused by the partitions' producer state (the marker carries
the new epoch).

Expiry: a transactional id not used for ``transactional_id_expiration_ms`` (Kafka's
``transactional.id.expiration.ms``, 7 days) while no transaction of it is open is forgotten, with
a tombstone in ``__transaction_state``, checked every hour as Kafka does; otherwise every query of
the topic sink (which names its ids after the query) would leave ids behind for good. Its next
InitProducerId starts afresh with a new producer id.

Durability: every state change is appended to ``__transaction_state`` (coordinator/transaction_log.py) and
replayed at start. Responses that changed state wait (``respond``) for the fsync of that log and
of the marker-carrying partitions when their ``flush_on_ack_all`` is on, like acks=all produces.

On a cluster (``broker.cluster`` set) the same state machine runs per partition of the
replicated ``__transaction_state``: this broker coordinates the transactional ids of the
partitions it leads (``partition_moved`` loads and drops them, ``owner_error`` answers the others
NOT_COORDINATOR), state writes wait for the in-sync replicas, and markers are written at each
partition's leader (WriteTxnMarkers to other brokers) by a background task that keeps the
transaction in Prepare* until all are written; a new coordinator finishes what it loads in
Prepare*. Consumer offsets of a transaction are staged at the group's coordinator instead
(apis/txn_offset_commit.py), and the group's ``__consumer_offsets`` partition is one of the
transaction's partitions. See docs/architecture.md, "Coordinators".

Thread-safety: event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.coordinator.group_offsets import (
    DEFAULT_OFFSETS_PARTITIONS,
    OFFSETS_TOPIC,
    offsets_partition_for,
)
from kafka_spark.broker.coordinator.transaction_log import (
    TRANSACTION_STATE_TOPIC,
    ClusterTransactionLog,
    TransactionLog,
    replay_log,
    transactional_id_partition,
)
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
from kafka_spark.broker.deferred import Deferred
from kafka_spark.broker.protocol.versions import ApiKey
from kafka_spark.broker.storage.batch import BatchHeader, build_control_batch
from kafka_spark.broker.storage.errors import StorageError
from kafka_spark.broker.storage.log import Log
from kafka_spark.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from kafka_spark.broker.broker import Broker

logger = logging.getLogger("kafka_spark.broker.coordinator.transaction")

MAX_TRANSACTION_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms default
ABORT_CHECK_INTERVAL_MS = 1_000  # Kafka checks every 10 s; a laptop broker can afford 1 s
TRANSACTIONAL_ID_EXPIRATION_MS = 7 * 24 * 3_600_000  # Kafka's transactional.id.expiration.ms default
EXPIRATION_CHECK_INTERVAL_MS = 3_600_000  # Kafka's transaction.remove.expired.transaction.cleanup.interval.ms
COORDINATOR_EPOCH = 0  # one coordinator, never moved
MARKER_RETRY_MS = 1_000
STATE_REPLICATION_TIMEOUT_MS = 10_000  # a cluster: how long a state change may wait for the ISR


class TransactionCoordinator:
    """Owns every transactional id of this node. See the module docstring."""

    def __init__(
        self,
        broker: Broker,
        *,
        abort_check_interval_ms: int = ABORT_CHECK_INTERVAL_MS,
        transactional_id_expiration_ms: int = TRANSACTIONAL_ID_EXPIRATION_MS,
        expiration_check_interval_ms: int = EXPIRATION_CHECK_INTERVAL_MS,
    ) -> None:
        self._broker = broker
        self.abort_check_interval_ms = abort_check_interval_ms
        self.transactional_id_expiration_ms = transactional_id_expiration_ms
        self.expiration_check_interval_ms = expiration_check_interval_ms
        # On a cluster: the replicated topic, of which this broker coordinates the partitions it
        # leads (``_owned``: partition -> its leader epoch, the coordinator epoch of the markers).
        self._log = ClusterTransactionLog(broker.logs) if broker.cluster is not None else TransactionLog(broker.logs)
        self._owned: dict[int, int] = {}
        self._txns: dict[str, TransactionMetadata] = {}
        self._by_producer_id: dict[int, TransactionMetadata] = {}
        self._unsynced: dict[Log, int] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._completing: dict[str, asyncio.Task[None]] = {}  # cluster: transactions writing markers
        if broker.cluster is None:
            self._load()
        self._schedule_abort_check()
        self._schedule_expiry()

    # -- state -------------------------------------------------------------------------------------

    def _load(self) -> None:
        for transactional_id, record in self._log.replay().items():
            self._register(TransactionMetadata.from_record(transactional_id, record))
        interrupted = []
        for meta in self._txns.values():
            if meta.state in PREPARING:
                interrupted.append(meta)
            if meta.state is not TxnState.EMPTY:
                for tp in meta.partitions:  # loads the partition's index, so its LSO holds at once
                    self._partition(tp)
        if interrupted:
            # On the loop's first turn, before any request: the other coordinators (groups, for
            # the offsets of a commit) are built after this one in Broker.__init__.
            self._broker.loop.call_soon(self._finish_interrupted, interrupted)

    def _finish_interrupted(self, interrupted: list[TransactionMetadata]) -> None:
        for meta in interrupted:
            logger.info(
                "finishing transaction %r (%s) interrupted by a restart", meta.transactional_id, meta.state.value
            )
            self._finish(meta, meta.state is TxnState.PREPARE_COMMIT, only_open=True)
        self._drain_unsynced()

    # -- on a cluster: coordinating the partitions of __transaction_state this broker leads ------------

    def owner_error(self, transactional_id: str) -> int:
        """0 when this broker coordinates ``transactional_id``; on a cluster NOT_COORDINATOR when
        another broker leads its partition of ``__transaction_state`` (the client finds it again),
        COORDINATOR_LOAD_IN_PROGRESS while this one is loading it."""
        cluster = self._broker.cluster
        if cluster is None:
            return ErrorCode.none
        partition = self._partition_of(transactional_id)
        if partition in self._owned:
            return ErrorCode.none
        if cluster.leads(TRANSACTION_STATE_TOPIC, partition):
            return ErrorCode.coordinator_load_in_progress
        return ErrorCode.not_coordinator

    def _partition_of(self, transactional_id: str) -> int:
        assert isinstance(self._log, ClusterTransactionLog)
        return transactional_id_partition(transactional_id, self._log.partitions())

    def partition_moved(self, partition: int, leader_epoch: int | None) -> None:
        """This broker leads ``partition`` of ``__transaction_state`` from ``leader_epoch`` on
        (load its transactional ids from the log, finish the transactions it left in Prepare*), or
        no longer leads it (None: forget them; the new leader carries on)."""
        if leader_epoch is None:
            if self._owned.pop(partition, None) is None:
                return
            gone = [meta for meta in self._txns.values() if self._partition_of(meta.transactional_id) == partition]
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
        if partition in self._owned:
            self._owned[partition] = leader_epoch
            return
        assert isinstance(self._log, ClusterTransactionLog)
        interrupted = []
        for transactional_id, record in replay_log(self._log.partition_log(partition)).items():
            meta = TransactionMetadata.from_record(transactional_id, record)
            self._register(meta)
            if meta.state in PREPARING:
                interrupted.append(meta)
        self._owned[partition] = leader_epoch
        for meta in interrupted:
            logger.info(
                "finishing transaction %r (%s) left by the previous coordinator",
                meta.transactional_id,
                meta.state.value,
            )
            self._start_completion(meta, meta.state is TxnState.PREPARE_COMMIT)

    def _register(self, meta: TransactionMetadata) -> None:
        self._txns[meta.transactional_id] = meta
        self._by_producer_id[meta.producer_id] = meta

    def _persist(self, meta: TransactionMetadata) -> None:
        now = _now_ms()
        meta.last_update_ms = now
        log, end = self._log.append(meta.transactional_id, meta.to_record(), now)
        self._unsynced[log] = end
        if self._broker.cluster is not None:
            self._broker.cluster.appended(log)

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
        aborted and its epoch bumped, fencing the previous instance. v3+ may name the current
        producer id and epoch (KIP-360): they must match (or be the epoch before the last bump,
        a retry) else 47, or 90 from v4.
        """
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
            meta = TransactionMetadata(transactional_id, self._broker.producer_ids.next_id(), 0, timeout_ms)
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
            if meta.state is TxnState.PREPARE_ABORT:  # markers pending a retry: the client retries too
                return ErrorCode.concurrent_transactions, -1, -1
        previous_id = meta.producer_id
        meta.bump_for_init(timeout_ms, self._next_id_if_exhausted(meta))
        if meta.producer_id != previous_id:
            self._by_producer_id.pop(previous_id, None)
            self._register(meta)
        self._persist(meta)
        return ErrorCode.none, meta.producer_id, meta.producer_epoch

    def _next_id_if_exhausted(self, meta: TransactionMetadata) -> int:
        return self._broker.producer_ids.next_id() if meta.epochs_exhausted else meta.producer_id

    # -- checks shared by the transaction APIs -------------------------------------------------------

    def _validate(
        self, transactional_id: str, producer_id: int, producer_epoch: int, fenced: int
    ) -> tuple[TransactionMetadata | None, int]:
        owner = self.owner_error(transactional_id)
        if owner:
            return None, owner
        meta = self._txns.get(transactional_id)
        error = validate(meta, producer_id, producer_epoch, fenced)
        return (meta, error) if not error else (None, error)

    # -- AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit ---------------------------------------

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
        """Make ``group_id``'s offsets part of the transaction (TxnOffsetCommit follows)."""
        meta, error = self._validate(transactional_id, producer_id, producer_epoch, fenced)
        if meta is None:
            return error
        cluster = self._broker.cluster
        offsets_tp = None
        if cluster is not None:  # the group's partition of __consumer_offsets gets a marker too
            info = cluster.topics().get(OFFSETS_TOPIC)
            count = info.partitions if info is not None else DEFAULT_OFFSETS_PARTITIONS
            offsets_tp = TopicPartition(OFFSETS_TOPIC, offsets_partition_for(group_id, count))
        if meta.add_group(group_id, offsets_tp, _now_ms()):
            self._persist(meta)
        return ErrorCode.none

    def txn_offset_commit(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Offsets,
        *,
        transaction_v2: bool = False,
    ) -> int:
        """Stage consumer offsets in the ongoing transaction; OffsetFetch sees them after commit.
        ``transaction_v2`` (TxnOffsetCommit v5+): the group joins the transaction implicitly."""
        meta, error = self._validate(transactional_id, producer_id, producer_epoch, ErrorCode.invalid_producer_epoch)
        if meta is None:
            return error
        error, add = offsets_check(meta, group_id, transaction_v2)
        if error:
            logger.warning(
                "TxnOffsetCommit for %r, group %r: call AddOffsetsToTxn for the group first", transactional_id, group_id
            )
            return error
        if add:
            meta.add_group(group_id, None, _now_ms())
        meta.pending_offsets.setdefault(group_id, {}).update(offsets)
        self._persist(meta)
        return ErrorCode.none

    def staged_offsets(self, group_id: str) -> set[TopicPartition]:
        """The partitions of ``group_id`` whose offsets an open transaction has staged (OffsetFetch's
        ``require_stable`` answers them UNSTABLE_OFFSET_COMMIT until the transaction ends)."""
        return {
            tp
            for meta in self._txns.values()
            if meta.state is not TxnState.EMPTY
            for tp in meta.pending_offsets.get(group_id, ())
        }

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
            next_id = self._broker.producer_ids.next_id() if transaction_v2 and meta.epochs_exhausted else -1
            self._end(meta, commit, transaction_v2=transaction_v2, next_producer_id=next_id)
        return ErrorCode.none, meta.producer_id, meta.producer_epoch

    def _end(
        self, meta: TransactionMetadata, commit: bool, *, transaction_v2: bool | None = None, next_producer_id: int = -1
    ) -> None:
        meta.prepare_end(commit, transaction_v2, next_producer_id)
        self._persist(meta)
        self._finish(meta, commit, only_open=False)

    def _finish(self, meta: TransactionMetadata, commit: bool, *, only_open: bool) -> None:
        """Markers, offsets, Complete state. ``only_open``: recovery — mark only partitions where
        the producer's transaction is still open (the first attempt may have marked others)."""
        if self._broker.cluster is not None:  # markers go to each partition's leader, asynchronously
            self._start_completion(meta, commit)
            return
        if commit:
            for group_id, offsets in meta.pending_offsets.items():
                self._commit_offsets(meta, group_id, offsets)
        now = _now_ms()
        failed = [tp for tp in sorted(meta.partitions) if not self._write_marker(meta, tp, commit, now, only_open)]
        if failed:
            # Stay in Prepare*: the producer gets 51 CONCURRENT_TRANSACTIONS (and retries) until a
            # later attempt marks the remaining partitions, as Kafka retries marker writes.
            logger.error(
                "transaction %r: markers missing on %s; retrying in %d ms",
                meta.transactional_id,
                ", ".join(map(str, failed)),
                MARKER_RETRY_MS,
            )
            self._broker.loop.call_later(MARKER_RETRY_MS / 1000, self._retry_finish, meta, commit)
            return
        self._complete(meta, commit)

    def _complete(self, meta: TransactionMetadata, commit: bool) -> None:
        """Every marker is written: CompleteCommit / CompleteAbort."""
        moved = meta.complete()
        if moved is not None:  # v2 exhausted the epochs: the producer moved to a new id
            self._by_producer_id.pop(moved, None)
            self._register(meta)
        self._persist(meta)
        self._broker.notifier.notify()

    def _retry_finish(self, meta: TransactionMetadata, commit: bool) -> None:
        if meta.state is (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
            self._finish(meta, commit, only_open=True)
            self._drain_unsynced()

    def _write_marker(
        self, meta: TransactionMetadata, tp: TopicPartition, commit: bool, now: int, only_open: bool
    ) -> bool:
        """Append the marker to ``tp``; False when the append failed (to be retried)."""
        found = self._partition(tp)
        if found is None:
            logger.warning("transaction %r: %s was deleted; no marker written there", meta.transactional_id, tp)
            return True
        log, state = found
        index = state.txn_index
        if only_open and (index is None or meta.producer_id not in index.ongoing):
            return True
        batch = build_control_batch(0, meta.producer_id, meta.producer_epoch, commit, COORDINATOR_EPOCH, now)
        try:
            result = log.append(batch, acks=1)
        except StorageError as error:
            logger.error(
                "transaction %r: writing the %s marker to %s failed: %s",
                meta.transactional_id,
                "COMMIT" if commit else "ABORT",
                tp,
                error,
            )
            return False
        header: BatchHeader = result.headers[0]
        state.record(header)  # the marker's epoch fences older epochs on this partition
        if index is not None:
            index.on_marker(meta.producer_id, header.base_offset, commit)
        self._unsynced[log] = result.last_offset + 1
        return True

    def write_marker(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> tuple[int, Log | None]:
        """Append a COMMIT/ABORT marker of ``producer_id`` to ``tp``, which this broker must lead
        on a cluster (WriteTxnMarkers, and this coordinator's own partitions there). Returns the
        error code and the log written (None when nothing was)."""
        cluster = self._broker.cluster
        if cluster is not None:
            code = cluster.check_produce(tp.topic, tp.partition, 1)
            if code:
                return code, None
        found = self._partition(tp)
        if found is None:
            return ErrorCode.unknown_topic_or_partition, None
        log, state = found
        known = state.producers.get(producer_id)
        if known is not None and known.epoch > producer_epoch:
            # A newer epoch of the producer wrote here since: this marker's transaction is over (a
            # retry arriving late). Kafka refuses it; the coordinator need not write it anywhere.
            return ErrorCode.none, None
        batch = build_control_batch(0, producer_id, producer_epoch, commit, coordinator_epoch, _now_ms())
        try:
            result = log.append(batch, acks=1)
        except StorageError as error:
            logger.error("writing the %s marker to %s failed: %s", "COMMIT" if commit else "ABORT", tp, error)
            return error.error_code, None
        header: BatchHeader = result.headers[0]
        state.record(header)  # the marker's epoch fences older epochs on this partition
        if state.txn_index is not None:
            state.txn_index.on_marker(producer_id, header.base_offset, commit)
        if cluster is not None:
            cluster.appended(log)
            if tp.topic == OFFSETS_TOPIC:  # the transaction's consumer offsets apply (or not) now
                self._broker.groups.txn_marker(tp.partition, producer_id, commit)
        self._broker.notifier.notify()
        return ErrorCode.none, log

    # -- on a cluster: markers through the partitions' leaders -----------------------------------------

    def _start_completion(self, meta: TransactionMetadata, commit: bool) -> None:
        """Write the markers of ``meta``'s transaction in the background, then complete it (one
        task per transactional id; the transaction stays in Prepare* meanwhile, as in Kafka)."""
        if meta.transactional_id in self._completing:
            return
        task = self._broker.loop.create_task(self._complete_on_cluster(meta, commit))
        self._completing[meta.transactional_id] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._completing.get(meta.transactional_id) is finished:
                del self._completing[meta.transactional_id]
            if not finished.cancelled() and finished.exception() is not None:
                logger.error("transaction %r: completing failed: %r", meta.transactional_id, finished.exception())

        task.add_done_callback(done)

    async def _complete_on_cluster(self, meta: TransactionMetadata, commit: bool) -> None:
        prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        # (Consumer offsets of the transaction are staged at their group's coordinator, and the
        # marker written to the group's partition of __consumer_offsets applies or drops them.)
        remaining = set(meta.partitions)
        delay = 0.05
        while True:
            if meta.state is not prepared or self._txns.get(meta.transactional_id) is not meta:
                return  # this broker stopped coordinating it (the new coordinator finishes it)
            remaining = await self._send_markers(meta, commit, remaining)
            if not remaining:
                break
            logger.info(
                "transaction %r: markers missing on %s; retrying in %d ms",
                meta.transactional_id,
                ", ".join(map(str, sorted(remaining))),
                delay * 1000,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, MARKER_RETRY_MS / 1000)
        if meta.state is prepared and self._txns.get(meta.transactional_id) is meta:
            self._complete(meta, commit)
            self._drain_unsynced()

    async def _send_markers(
        self, meta: TransactionMetadata, commit: bool, partitions: set[TopicPartition]
    ) -> set[TopicPartition]:
        """Write the markers of ``partitions`` at their leaders; returns those still missing."""
        cluster = self._broker.cluster
        assert cluster is not None and cluster.image is not None
        image = cluster.image
        by_leader: dict[int, list[TopicPartition]] = {}
        missing: set[TopicPartition] = set()
        for tp in partitions:
            state = image.partitions.get(tp)
            if state is None:
                logger.warning("transaction %r: %s was deleted; no marker written there", meta.transactional_id, tp)
                continue
            if state.leader < 0:
                missing.add(tp)
            else:
                by_leader.setdefault(state.leader, []).append(tp)
        here = by_leader.pop(cluster.node_id, [])
        sends = [self._send_to(leader, meta, commit, tps) for leader, tps in by_leader.items()]
        local = [self._write_here(meta, commit, tp) for tp in here]
        for failed in await asyncio.gather(*sends, *local):
            missing.update(failed)
        return missing

    async def _write_here(self, meta: TransactionMetadata, commit: bool, tp: TopicPartition) -> list[TopicPartition]:
        code, log = self.write_marker(tp, meta.producer_id, meta.producer_epoch, commit, self._coordinator_epoch(meta))
        if code == ErrorCode.unknown_topic_or_partition or (not code and log is None):
            return []  # deleted, or a newer epoch of the producer wrote there since
        if code or log is None:
            return [tp]
        cluster = self._broker.cluster
        assert cluster is not None
        outcome: dict[str, Any] = {"error_code": ErrorCode.none}
        await cluster.wait_replicated(log, outcome, log.log_end_offset, MARKER_RETRY_MS * 10)
        return [tp] if outcome["error_code"] else []

    async def _send_to(
        self, leader: int, meta: TransactionMetadata, commit: bool, partitions: list[TopicPartition]
    ) -> list[TopicPartition]:
        cluster = self._broker.cluster
        assert cluster is not None
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "markers": [
                {
                    "producer_id": meta.producer_id,
                    "producer_epoch": meta.producer_epoch,
                    "transaction_result": commit,
                    "topics": [{"name": name, "partition_indexes": indexes} for name, indexes in topics.items()],
                    "coordinator_epoch": self._coordinator_epoch(meta),
                }
            ]
        }
        try:
            response = await cluster.request(leader, ApiKey.WRITE_TXN_MARKERS, 1, body)
        except (TimeoutError, OSError, EOFError, asyncio.IncompleteReadError, ValueError) as error:
            logger.info("transaction %r: WriteTxnMarkers to broker %d failed: %r", meta.transactional_id, leader, error)
            return partitions
        failed = []
        for marker in response.markers:
            for topic in marker.topics:
                for result in topic.partitions:
                    if result.error_code not in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
                        failed.append(TopicPartition(topic.name, result.partition_index))
        return failed

    def _coordinator_epoch(self, meta: TransactionMetadata) -> int:
        if self._broker.cluster is None:
            return COORDINATOR_EPOCH
        return self._owned.get(self._partition_of(meta.transactional_id), COORDINATOR_EPOCH)

    def _commit_offsets(self, meta: TransactionMetadata, group_id: str, offsets: Offsets) -> None:
        groups = getattr(self._broker, "groups", None)
        if groups is None:
            logger.error(
                "transaction %r committed offsets for group %r but this broker has no group "
                "coordinator; the offsets are lost",
                meta.transactional_id,
                group_id,
            )
            return
        try:
            groups.commit_offsets(group_id, dict(offsets))
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
        """Error code for a transactional batch (0 = may be written): its producer id must belong
        to a transactional id (49), with the current epoch (47), whose ongoing transaction has
        ``tp`` (48 INVALID_TXN_STATE: AddPartitionsToTxn first). With ``transaction_v2`` (Produce
        v12+, KIP-890) the partition joins the transaction instead, beginning it if need be; 51
        while the previous transaction's markers are being written."""
        meta = self._by_producer_id.get(header.producer_id)
        if meta is None and self._broker.cluster is not None:
            # On a cluster the partition's leader is seldom the transaction's coordinator: as Kafka
            # before KIP-890, it trusts the producer's AddPartitionsToTxn (transaction protocol v2,
            # which would need the leader to add the partition, is not finalized on a cluster) and
            # the markers' epochs fence the batches of older producer epochs.
            return ErrorCode.none
        if meta is None:
            return ErrorCode.invalid_producer_id_mapping
        code, add = produce_check(meta, transactional_id, header.producer_epoch, tp, transaction_v2)
        if add:
            meta.add_partitions([tp], _now_ms())
            self._persist(meta)
        return code

    # -- timeouts ------------------------------------------------------------------------------------

    def _schedule_abort_check(self) -> None:
        self._timer = self._broker.loop.call_later(self.abort_check_interval_ms / 1000, self._abort_check)

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
        self._expiry_timer = self._broker.loop.call_later(self.expiration_check_interval_ms / 1000, self._expiry)

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
        return Deferred(_after(waits, response))

    def _drain_unsynced(self) -> list[asyncio.Future[None]]:
        unsynced, self._unsynced = self._unsynced, {}
        waits = [
            self._broker.group_commit.wait_durable(log, end)
            for log, end in unsynced.items()
            if log.config.flush_on_ack_all
        ]
        cluster = self._broker.cluster
        if cluster is not None:  # and, as acks=all, until the in-sync replicas have the records
            for log, end in unsynced.items():
                outcome: dict[str, Any] = {"error_code": ErrorCode.none}
                replicated = cluster.wait_replicated(log, outcome, end, STATE_REPLICATION_TIMEOUT_MS)
                waits.append(asyncio.ensure_future(_replicated(replicated, outcome)))
        for wait in waits:
            wait.add_done_callback(_log_failure)
        return waits

    # -- helpers ---------------------------------------------------------------------------------------

    def _exists(self, tp: TopicPartition) -> bool:
        if tp.topic.startswith("__"):  # internal topics: the broker's own, never in a transaction
            return False
        cluster = self._broker.cluster
        info = (cluster.topics() if cluster is not None else self._broker.logs.topics()).get(tp.topic)
        return info is not None and 0 <= tp.partition < info.partitions

    def _partition(self, tp: TopicPartition) -> tuple[Log, Any] | None:
        try:
            log = self._broker.logs.get_log(tp.topic, tp.partition)
        except StorageError:
            return None
        return log, self._broker.producer_state(log)

    def close(self) -> None:
        for task in self._completing.values():
            task.cancel()
        for timer in (self._timer, self._expiry_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._expiry_timer = None


class NotReplicatedError(Exception):
    """A state record the in-sync replicas did not all get (the leadership moved, the ISR shrank
    below min.insync.replicas, or the wait timed out): the client finds the coordinator again."""


async def _replicated(wait: asyncio.Future[None], outcome: dict[str, Any]) -> None:
    await wait
    if outcome["error_code"]:
        raise NotReplicatedError(f"error {outcome['error_code']} replicating {TRANSACTION_STATE_TOPIC}")


async def _after(waits: list[asyncio.Future[None]], response: dict[str, Any]) -> dict[str, Any]:
    for wait in waits:
        try:
            await wait
        except StorageError as error:  # the state is applied in memory; report the disk failure
            logger.error("transaction state not durable: %s", error)
            response["error_code"] = ErrorCode.kafka_storage_error
        except NotReplicatedError as error:
            logger.warning("transaction state not replicated: %s", error)
            response["error_code"] = ErrorCode.not_coordinator
    return response


def _log_failure(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        error = future.exception()
        level = logging.WARNING if isinstance(error, NotReplicatedError) else logging.ERROR  # a failover
        logger.log(level, "writing the transaction coordinator's state failed: %s", error)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
