"""The transaction coordinator's state machine: per transactional id, its metadata and every legal
move, as pure functions of that metadata and the request (no I/O, no clock, no event loop).

Kafka's ``TransactionMetadata`` and ``TransactionState``::

    Empty / CompleteCommit / CompleteAbort
        --AddPartitionsToTxn, AddOffsetsToTxn, a v2 Produce or TxnOffsetCommit-->  Ongoing
    Ongoing --EndTxn(commit)-->  PrepareCommit  --markers written-->  CompleteCommit
    Ongoing --EndTxn(abort), timeout, InitProducerId-->  PrepareAbort  --markers-->  CompleteAbort
    CompleteCommit / CompleteAbort / Empty --InitProducerId (epoch + 1)-->  Empty

``LEGAL_TRANSITIONS`` is the table every state change is checked against; an illegal one is a
coordinator bug and raises :class:`IllegalTransition`. The checks below decide what a request gets
(an error code, or the move to make); the coordinator (transaction.py) makes the move, persists the
metadata (transaction_log.py) and writes the markers (txn_markers.py). Times are passed in (``now_ms``).

Epochs: InitProducerId on a known id bumps the epoch (fencing the previous instance); transaction
protocol v2 (KIP-890, EndTxn v5+) bumps it with every commit or abort, so the markers carry the
new epoch and fence the batches of the transaction just ended. Past ``MAX_EPOCH`` the producer
moves to a new producer id at epoch 0.

The durable record (``to_record`` / ``from_record``) is a JSON object, version 1, in
``__transaction_state``; records written before some fields existed still load (defaults).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.common.topic_partition import TopicPartition

MAX_EPOCH = 32766  # Short.MaxValue - 1: past it, a new producer id starts at epoch 0

#: staged consumer offsets: partition -> (offset, metadata, leader epoch of the last consumed record)
Offsets = Mapping[TopicPartition, tuple[int, "str | None", int]]


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


LEGAL_TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.ONGOING}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.COMPLETE_COMMIT}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.EMPTY, TxnState.ONGOING}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.EMPTY, TxnState.ONGOING}),
}
PREPARING = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})
COMPLETED = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
#: No transaction open: the id may expire (transactional.id.expiration.ms).
IDLE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


class IllegalTransition(RuntimeError):
    """A bug: the coordinator tried a transition outside LEGAL_TRANSITIONS."""


class EndAction(enum.Enum):
    """What an EndTxn does, once checked (:func:`end_txn_check`)."""

    END = "end"  # prepare the commit or abort, write the markers
    ANSWER = "answer"  # a retry of the EndTxn that ended the transaction: answer as then
    REFUSE = "refuse"  # answer the error code


class InitAction(enum.Enum):
    """What an InitProducerId of a known id does, once checked (:func:`init_check`)."""

    BUMP = "bump"  # (abort an ongoing transaction,) then the epoch goes up
    ANSWER = "answer"  # a retry of the bump just made: answer the current id and epoch
    REFUSE = "refuse"


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    last_producer_epoch: int = -1  # the epoch before the last bump: a retried InitProducerId (KIP-360)
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    # Offsets staged in the transaction itself: how a single node before issue 39 kept them (they
    # are now staged at the group's coordinator); records still holding some are honoured.
    pending_offsets: dict[str, dict[TopicPartition, tuple[int, str | None, int]]] = field(default_factory=dict)
    txn_start_ms: int = -1
    last_update_ms: int = -1
    transaction_v2: bool = False  # the last EndTxn was v5+ (KIP-890): epochs bump per transaction
    next_producer_id: int = -1  # v2 with exhausted epochs: the id the producer moves to on completion
    previous_producer_id: int = -1  # the id before such a move (recognises a retried EndTxn)

    # -- moves ---------------------------------------------------------------------------------------

    def transition(self, new: TxnState) -> None:
        if new not in LEGAL_TRANSITIONS[self.state]:
            raise IllegalTransition(f"transaction {self.transactional_id!r}: {self.state.value} -> {new.value}")
        self.state = new

    def bump_epoch(self, new_producer_id: int) -> None:
        """Next epoch; a new producer id (``new_producer_id``) once epochs are exhausted."""
        if self.producer_epoch >= MAX_EPOCH:
            self.producer_id, self.producer_epoch, self.last_producer_epoch = new_producer_id, 0, -1
        else:
            self.last_producer_epoch = self.producer_epoch
            self.producer_epoch += 1

    @property
    def epochs_exhausted(self) -> bool:
        """The next bump moves to a new producer id (the caller allocates it)."""
        return self.producer_epoch >= MAX_EPOCH

    def fence(self) -> None:
        """Bump the epoch so the markers about to be written fence the current producer, unless the
        epochs are exhausted: the markers must carry the producer id of the open transaction, and
        the next InitProducerId moves to a new producer id anyway."""
        if self.producer_epoch < MAX_EPOCH:
            self.bump_epoch(self.producer_id)

    def begin(self, now_ms: int) -> None:
        """Open a transaction (no-op when one is open)."""
        if self.state is not TxnState.ONGOING:
            self.transition(TxnState.ONGOING)
            self.txn_start_ms = now_ms
            self.partitions.clear()
            self.groups.clear()
            self.pending_offsets.clear()

    def add_partitions(self, partitions: Iterable[TopicPartition], now_ms: int) -> bool:
        """Make ``partitions`` part of the transaction, opening it; False when nothing changed."""
        partitions = set(partitions)
        if self.state is TxnState.ONGOING and self.partitions.issuperset(partitions):
            return False
        self.begin(now_ms)
        self.partitions.update(partitions)
        return True

    def add_group(self, group_id: str, offsets_partition: TopicPartition | None, now_ms: int) -> bool:
        """Make ``group_id``'s offsets part of the transaction; ``offsets_partition``, the group's
        partition of ``__consumer_offsets``, gets a marker too. False when nothing changed."""
        missing = offsets_partition is not None and offsets_partition not in self.partitions
        if self.state is TxnState.ONGOING and group_id in self.groups and not missing:
            return False
        self.begin(now_ms)
        self.groups.add(group_id)
        if offsets_partition is not None:
            self.partitions.add(offsets_partition)
        return True

    def prepare_end(self, commit: bool, transaction_v2: bool | None = None, next_producer_id: int = -1) -> None:
        """Ongoing -> PrepareCommit / PrepareAbort. ``transaction_v2``: the EndTxn's protocol (None:
        the coordinator ends it itself, a timeout or an InitProducerId, and the last EndTxn's
        protocol stays what answers a retry). With v2 (EndTxn v5+) the epoch goes up now, so the
        markers fence the epoch that wrote the transaction; with exhausted epochs
        ``next_producer_id`` is the id the producer moves to on completion."""
        if transaction_v2:
            self.transaction_v2 = True
            self.previous_producer_id = -1
            if self.epochs_exhausted:
                self.next_producer_id = next_producer_id
            self.last_producer_epoch = self.producer_epoch
            self.producer_epoch += 1
        elif transaction_v2 is not None:
            self.transaction_v2 = False
        self.transition(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)

    def complete(self) -> int | None:
        """Every marker is written: CompleteCommit / CompleteAbort. Returns the producer id the
        transaction had when v2 moved the producer to a new one (None otherwise)."""
        commit = self.state is TxnState.PREPARE_COMMIT
        self.transition(TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
        moved = None
        if self.next_producer_id >= 0:  # v2 exhausted the epochs: the producer moves to a new id
            moved = self.producer_id
            self.previous_producer_id, self.producer_id = self.producer_id, self.next_producer_id
            self.producer_epoch, self.last_producer_epoch, self.next_producer_id = 0, -1, -1
        self.partitions.clear()
        self.groups.clear()
        self.pending_offsets.clear()
        return moved

    def bump_for_init(self, timeout_ms: int, new_producer_id: int) -> None:
        """InitProducerId's own move (after any abort): the epoch up, the state Empty."""
        self.timeout_ms = timeout_ms
        self.bump_epoch(new_producer_id)
        self.transition(TxnState.EMPTY)

    # -- questions ---------------------------------------------------------------------------------

    def timed_out(self, now_ms: int) -> bool:
        """An ongoing transaction older than its timeout (the coordinator aborts it)."""
        return self.state is TxnState.ONGOING and now_ms - self.txn_start_ms > self.timeout_ms

    def expired(self, now_ms: int, expiration_ms: int) -> bool:
        """No transaction open and unused for longer than ``expiration_ms``: the id is forgotten."""
        return self.state in IDLE and now_ms - self.last_update_ms > expiration_ms

    # -- the durable record ------------------------------------------------------------------------

    def to_record(self) -> dict[str, Any]:
        return {
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "last_producer_epoch": self.last_producer_epoch,
            "timeout_ms": self.timeout_ms,
            "state": self.state.value,
            "partitions": sorted([tp.topic, tp.partition] for tp in self.partitions),
            "groups": sorted(self.groups),
            "pending_offsets": {
                group: sorted(
                    [tp.topic, tp.partition, offset, metadata, leader_epoch]
                    for tp, (offset, metadata, leader_epoch) in offsets.items()
                )
                for group, offsets in self.pending_offsets.items()
            },
            "txn_start_ms": self.txn_start_ms,
            "last_update_ms": self.last_update_ms,
            "transaction_v2": self.transaction_v2,
            "next_producer_id": self.next_producer_id,
            "previous_producer_id": self.previous_producer_id,
        }

    @classmethod
    def from_record(cls, transactional_id: str, record: Mapping[str, Any]) -> TransactionMetadata:
        return cls(
            transactional_id,
            record["producer_id"],
            record["producer_epoch"],
            record["timeout_ms"],
            TxnState(record["state"]),
            record["last_producer_epoch"],
            {TopicPartition(topic, partition) for topic, partition in record["partitions"]},
            set(record["groups"]),
            {
                group: {
                    TopicPartition(entry[0], entry[1]): (entry[2], entry[3], entry[4] if len(entry) > 4 else -1)
                    for entry in entries
                }  # records from before leader epochs were kept have 4 fields
                for group, entries in record["pending_offsets"].items()
            },
            record["txn_start_ms"],
            record["last_update_ms"],
            record.get("transaction_v2", False),
            record.get("next_producer_id", -1),
            record.get("previous_producer_id", -1),
        )


# -- what a request gets ---------------------------------------------------------------------------


def fenced_error(api_version: int, first_fenced_version: int) -> int:
    """PRODUCER_FENCED (90) from ``first_fenced_version`` on, INVALID_PRODUCER_EPOCH (47) before,
    as Kafka downgrades for older clients."""
    return ErrorCode.producer_fenced if api_version >= first_fenced_version else ErrorCode.invalid_producer_epoch


def validate(meta: TransactionMetadata | None, producer_id: int, producer_epoch: int, fenced: int) -> int:
    """The checks AddPartitionsToTxn, AddOffsetsToTxn and TxnOffsetCommit share: the producer id
    must be the transactional id's (49), with its current epoch (``fenced``), and no transaction
    of it may be completing (51 CONCURRENT_TRANSACTIONS)."""
    if meta is None or meta.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if producer_epoch != meta.producer_epoch:
        return fenced
    if meta.state in PREPARING:
        return ErrorCode.concurrent_transactions
    return ErrorCode.none


def init_check(
    meta: TransactionMetadata, producer_id: int, producer_epoch: int, api_version: int
) -> tuple[int, InitAction]:
    """InitProducerId of a known id. v3+ may name the current producer id and epoch (KIP-360):
    they must match, or be the epoch before the last bump (a retry); else 47, or 90 from v4."""
    if meta.state in PREPARING:
        return ErrorCode.concurrent_transactions, InitAction.REFUSE  # markers still being written
    if producer_id >= 0:
        if (
            producer_id == meta.producer_id
            and producer_epoch == meta.last_producer_epoch
            and meta.state is TxnState.EMPTY
        ):
            return ErrorCode.none, InitAction.ANSWER  # retry of the bump just made
        if producer_id != meta.producer_id or producer_epoch != meta.producer_epoch:
            return fenced_error(api_version, 4), InitAction.REFUSE
    return ErrorCode.none, InitAction.BUMP


def end_txn_check(
    meta: TransactionMetadata | None, producer_id: int, producer_epoch: int, commit: bool, fenced: int
) -> tuple[int, EndAction]:
    """EndTxn. Transaction protocol v2 bumped the epoch when the transaction ended: a retry of
    that EndTxn carries the epoch before (or, after a move to a new producer id, the last one),
    and is answered as the first was."""
    if meta is None:
        return ErrorCode.invalid_producer_id_mapping, EndAction.REFUSE
    bumped_retry = meta.transaction_v2 and meta.producer_id == producer_id and meta.producer_epoch == producer_epoch + 1
    moved_retry = (
        meta.transaction_v2
        and meta.previous_producer_id == producer_id
        and producer_epoch == MAX_EPOCH
        and meta.producer_epoch == 0
    )
    state = meta.state
    if meta.producer_id != producer_id and not moved_retry:
        return ErrorCode.invalid_producer_id_mapping, EndAction.REFUSE
    if state in PREPARING | COMPLETED and (bumped_retry or moved_retry):
        valid_epoch = True
    else:
        valid_epoch = producer_epoch == meta.producer_epoch
    if not valid_epoch:
        return fenced, EndAction.REFUSE
    if state is TxnState.ONGOING:
        return ErrorCode.none, EndAction.END
    if state in PREPARING:
        return ErrorCode.concurrent_transactions, EndAction.REFUSE
    if state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
        return ErrorCode.none, EndAction.ANSWER  # a retry of the EndTxn that completed it
    return ErrorCode.invalid_txn_state, EndAction.REFUSE


def produce_check(
    meta: TransactionMetadata,
    transactional_id: str | None,
    producer_epoch: int,
    tp: TopicPartition,
    transaction_v2: bool,
) -> tuple[int, bool]:
    """A transactional batch of ``meta``'s producer for ``tp``: ``(error code, add)``. Its
    transactional id must be ``meta``'s (49), its epoch the current one (47), and ``tp`` in the
    ongoing transaction (48 INVALID_TXN_STATE: AddPartitionsToTxn first). With ``transaction_v2``
    (Produce v12+, KIP-890) ``add`` says the partition joins the transaction instead (beginning it
    if need be); 51 while the previous transaction's markers are being written."""
    if transactional_id is not None and transactional_id != meta.transactional_id:
        return ErrorCode.invalid_producer_id_mapping, False
    if producer_epoch != meta.producer_epoch:
        return ErrorCode.invalid_producer_epoch, False
    if meta.state is TxnState.ONGOING and tp in meta.partitions:
        return ErrorCode.none, False
    if transaction_v2:
        if meta.state in PREPARING:
            return ErrorCode.concurrent_transactions, False
        return ErrorCode.none, True
    return ErrorCode.invalid_txn_state, False


def offsets_check(meta: TransactionMetadata, group_id: str, transaction_v2: bool) -> tuple[int, bool]:
    """TxnOffsetCommit for ``group_id`` (after :func:`validate`): ``(error code, add)``. The group
    must be in the ongoing transaction (48: AddOffsetsToTxn first); with ``transaction_v2``
    (TxnOffsetCommit v5+) ``add`` says it joins it instead."""
    if meta.state is TxnState.ONGOING and group_id in meta.groups:
        return ErrorCode.none, False
    if transaction_v2:
        return ErrorCode.none, True
    return ErrorCode.invalid_txn_state, False
