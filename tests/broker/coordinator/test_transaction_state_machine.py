"""The transaction coordinator's state machine (coordinator/transaction_state.py) and its durable
record, as pure units: every check a request goes through and every move, without a broker."""

from __future__ import annotations

import pytest

from kafka_spark.broker.coordinator.transaction_state import (
    LEGAL_TRANSITIONS,
    MAX_EPOCH,
    EndAction,
    IllegalTransition,
    InitAction,
    TransactionMetadata,
    TxnState,
    end_txn_check,
    fenced_error,
    init_check,
    offsets_check,
    produce_check,
    validate,
)
from kafka_spark.broker.storage.batch import build_control_batch, build_record_batch
from kafka_spark.broker.storage.txn_index import control_type, last_offset_of
from kafka_spark.common.topic_partition import TopicPartition


@pytest.mark.parametrize("source", list(TxnState))
@pytest.mark.parametrize("target", list(TxnState))
def test_only_the_transitions_in_the_table_are_allowed(source, target):
    meta = TransactionMetadata("app", 1, 0, 60_000, state=source)
    if target in LEGAL_TRANSITIONS[source]:
        meta.transition(target)
        assert meta.state is target
    else:
        with pytest.raises(IllegalTransition):
            meta.transition(target)


def test_a_transaction_cannot_complete_without_preparing():
    meta = TransactionMetadata("app", 1, 0, 60_000, state=TxnState.ONGOING)
    with pytest.raises(IllegalTransition):
        meta.transition(TxnState.COMPLETE_COMMIT)


def test_epoch_bump_remembers_the_previous_epoch_and_rolls_to_a_new_producer_id_when_exhausted():
    meta = TransactionMetadata("app", 7, 3, 60_000)
    meta.bump_epoch(new_producer_id=99)
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_epoch) == (7, 4, 3)
    meta.producer_epoch = 32766
    meta.bump_epoch(new_producer_id=99)
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_epoch) == (99, 0, -1)


def test_metadata_record_round_trips():
    meta = TransactionMetadata(
        "app",
        7,
        3,
        60_000,
        TxnState.ONGOING,
        2,
        {TopicPartition("t", 0), TopicPartition("u", 2)},
        {"g"},
        {"g": {TopicPartition("t", 0): (42, "meta", 3), TopicPartition("t", 1): (5, None, -1)}},
        1000,
        2000,
        transaction_v2=True,
        next_producer_id=9,
        previous_producer_id=6,
    )
    assert TransactionMetadata.from_record("app", meta.to_record()) == meta


def test_metadata_records_written_before_v2_and_leader_epochs_still_load():
    record = TransactionMetadata("app", 7, 3, 60_000, TxnState.ONGOING, 2, set(), {"g"}, {}, 1000, 2000).to_record()
    for key in ("transaction_v2", "next_producer_id", "previous_producer_id"):
        del record[key]
    record["pending_offsets"] = {"g": [["t", 0, 42, "meta"]]}  # four fields, as written before
    loaded = TransactionMetadata.from_record("app", record)
    assert loaded.pending_offsets == {"g": {TopicPartition("t", 0): (42, "meta", -1)}}
    assert (loaded.transaction_v2, loaded.next_producer_id, loaded.previous_producer_id) == (False, -1, -1)


def test_fenced_error_is_downgraded_for_old_versions():
    assert fenced_error(2, 2) == 90
    assert fenced_error(1, 2) == 47
    assert fenced_error(3, 4) == 47


def test_control_type_and_last_offset_are_read_from_stored_bytes():
    commit = build_control_batch(5, 1000, 0, True, 0, 1_700_000_000_000)
    abort = build_control_batch(6, 1000, 0, False, 0, 1_700_000_000_000)
    assert (control_type(commit), control_type(abort)) == (1, 0)
    data = build_record_batch([(None, b"a", (), 0), (None, b"b", (), 0)], base_offset=7)
    assert last_offset_of(commit + abort + data) == 8


INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE = 49, 47, 48
CONCURRENT_TRANSACTIONS, PRODUCER_FENCED = 51, 90
T0 = TopicPartition("t", 0)


def _meta(state=TxnState.EMPTY, epoch=3, **fields):
    return TransactionMetadata("app", 7, epoch, 60_000, state, **fields)


def test_requests_of_the_wrong_producer_id_epoch_or_during_markers_are_refused():
    ongoing = _meta(TxnState.ONGOING)
    assert validate(None, 7, 3, PRODUCER_FENCED) == INVALID_PRODUCER_ID_MAPPING
    assert validate(ongoing, 8, 3, PRODUCER_FENCED) == INVALID_PRODUCER_ID_MAPPING
    assert validate(ongoing, 7, 2, PRODUCER_FENCED) == PRODUCER_FENCED
    assert validate(_meta(TxnState.PREPARE_COMMIT), 7, 3, PRODUCER_FENCED) == CONCURRENT_TRANSACTIONS
    assert validate(ongoing, 7, 3, PRODUCER_FENCED) == 0


def test_init_producer_id_bumps_answers_a_retry_of_its_bump_and_fences_other_epochs():
    assert init_check(_meta(), -1, -1, 4) == (0, InitAction.BUMP)
    assert init_check(_meta(TxnState.ONGOING), 7, 3, 4) == (0, InitAction.BUMP)  # aborts it first
    assert init_check(_meta(last_producer_epoch=2), 7, 2, 4) == (0, InitAction.ANSWER)  # KIP-360 retry
    assert init_check(_meta(), 7, 1, 4) == (PRODUCER_FENCED, InitAction.REFUSE)
    assert init_check(_meta(), 7, 1, 3) == (INVALID_PRODUCER_EPOCH, InitAction.REFUSE)
    assert init_check(_meta(TxnState.PREPARE_ABORT), -1, -1, 4) == (CONCURRENT_TRANSACTIONS, InitAction.REFUSE)
    meta = _meta()
    meta.bump_for_init(30_000, new_producer_id=99)
    assert (meta.producer_id, meta.producer_epoch, meta.last_producer_epoch, meta.timeout_ms) == (7, 4, 3, 30_000)


@pytest.mark.parametrize(
    ("state", "commit", "epoch", "expected"),
    [
        (TxnState.ONGOING, True, 3, (0, EndAction.END)),
        (TxnState.ONGOING, False, 2, (PRODUCER_FENCED, EndAction.REFUSE)),
        (TxnState.PREPARE_COMMIT, True, 3, (CONCURRENT_TRANSACTIONS, EndAction.REFUSE)),
        (TxnState.COMPLETE_COMMIT, True, 3, (0, EndAction.ANSWER)),  # a retry of the EndTxn that ended it
        (TxnState.COMPLETE_COMMIT, False, 3, (INVALID_TXN_STATE, EndAction.REFUSE)),
        (TxnState.EMPTY, True, 3, (INVALID_TXN_STATE, EndAction.REFUSE)),
    ],
)
def test_end_txn_ends_an_ongoing_transaction_and_answers_retries_of_the_end(state, commit, epoch, expected):
    assert end_txn_check(_meta(state), 7, epoch, commit, PRODUCER_FENCED) == expected


def test_end_txn_of_an_unknown_id_or_another_producer_is_refused():
    assert end_txn_check(None, 7, 3, True, PRODUCER_FENCED) == (INVALID_PRODUCER_ID_MAPPING, EndAction.REFUSE)
    assert end_txn_check(_meta(TxnState.ONGOING), 8, 3, True, PRODUCER_FENCED) == (
        INVALID_PRODUCER_ID_MAPPING,
        EndAction.REFUSE,
    )


def test_v2_end_bumps_the_epoch_and_a_retry_with_the_old_epoch_is_answered_as_the_first():
    meta = _meta(TxnState.ONGOING)
    meta.prepare_end(commit=True, transaction_v2=True)
    assert (meta.state, meta.producer_epoch, meta.last_producer_epoch) == (TxnState.PREPARE_COMMIT, 4, 3)
    assert meta.complete() is None
    assert meta.state is TxnState.COMPLETE_COMMIT and not meta.partitions
    assert end_txn_check(meta, 7, 3, True, PRODUCER_FENCED) == (0, EndAction.ANSWER)
    assert end_txn_check(meta, 7, 2, True, PRODUCER_FENCED) == (PRODUCER_FENCED, EndAction.REFUSE)


def test_v2_end_with_exhausted_epochs_moves_the_producer_to_a_new_id_on_completion():
    meta = _meta(TxnState.ONGOING, epoch=MAX_EPOCH)
    assert meta.epochs_exhausted
    meta.prepare_end(commit=False, transaction_v2=True, next_producer_id=99)
    assert meta.complete() == 7  # the id the transaction had
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (99, 0, 7)
    # The EndTxn's retry still carries the old id and the last epoch.
    assert end_txn_check(meta, 7, MAX_EPOCH, False, PRODUCER_FENCED) == (0, EndAction.ANSWER)


def test_an_end_the_coordinator_makes_itself_keeps_the_last_end_txn_protocol():
    meta = _meta(TxnState.ONGOING, transaction_v2=True)
    meta.fence()
    meta.prepare_end(commit=False)  # a timeout or an InitProducerId aborts it
    assert (meta.transaction_v2, meta.producer_epoch) == (True, 4)
    v1 = _meta(TxnState.ONGOING, transaction_v2=True)
    v1.prepare_end(commit=True, transaction_v2=False)
    assert (v1.transaction_v2, v1.producer_epoch) == (False, 3)


def test_fencing_leaves_an_exhausted_producer_id_alone():
    meta = _meta(epoch=MAX_EPOCH)
    meta.fence()
    assert (meta.producer_id, meta.producer_epoch) == (7, MAX_EPOCH)


def test_a_transactional_batch_needs_its_partition_in_the_ongoing_transaction_unless_v2_adds_it():
    meta = _meta(TxnState.ONGOING, partitions={T0})
    assert produce_check(meta, "app", 3, T0, False) == (0, False)
    assert produce_check(meta, "other", 3, T0, False) == (INVALID_PRODUCER_ID_MAPPING, False)
    assert produce_check(meta, None, 2, T0, False) == (INVALID_PRODUCER_EPOCH, False)
    t1 = TopicPartition("t", 1)
    assert produce_check(meta, "app", 3, t1, False) == (INVALID_TXN_STATE, False)
    assert produce_check(meta, "app", 3, t1, True) == (0, True)
    assert produce_check(_meta(TxnState.PREPARE_ABORT), "app", 3, t1, True) == (CONCURRENT_TRANSACTIONS, False)
    assert meta.add_partitions([t1], now_ms=5) and meta.partitions == {T0, t1}
    assert not meta.add_partitions([t1], now_ms=6)  # nothing new: nothing to persist


def test_offsets_of_a_group_need_the_group_in_the_transaction_unless_v2_adds_it():
    meta = _meta(TxnState.ONGOING)
    assert offsets_check(meta, "g", False) == (INVALID_TXN_STATE, False)
    assert offsets_check(meta, "g", True) == (0, True)
    offsets = TopicPartition("__consumer_offsets", 2)
    assert meta.add_group("g", offsets, now_ms=5)
    assert (meta.groups, meta.partitions) == ({"g"}, {offsets})
    assert offsets_check(meta, "g", False) == (0, False)
    assert not meta.add_group("g", offsets, now_ms=6)


def test_beginning_clears_what_the_previous_transaction_held():
    meta = _meta(TxnState.COMPLETE_COMMIT, partitions={T0}, groups={"g"})
    meta.begin(now_ms=1234)
    assert (meta.state, meta.partitions, meta.groups, meta.txn_start_ms) == (TxnState.ONGOING, set(), set(), 1234)


def test_timeouts_and_expiry_are_decided_from_the_times_given():
    ongoing = _meta(TxnState.ONGOING, txn_start_ms=1_000)
    assert not ongoing.timed_out(61_000) and ongoing.timed_out(61_001)
    idle = _meta(TxnState.COMPLETE_ABORT, last_update_ms=1_000)
    assert not idle.expired(2_000, 1_000) and idle.expired(2_001, 1_000)
    assert not _meta(TxnState.ONGOING, last_update_ms=0).expired(10**9, 1_000)  # open: never expires
