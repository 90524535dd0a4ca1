"""The transaction coordinator's state machine and its durable record, as pure units."""

from __future__ import annotations

import pytest

from kafka_spark.broker.coordinator.transaction import (
    LEGAL_TRANSITIONS,
    IllegalTransition,
    TransactionMetadata,
    TxnState,
    fenced_error,
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
