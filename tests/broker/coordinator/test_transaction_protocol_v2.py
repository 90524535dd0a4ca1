"""Transaction protocol v2 (KIP-890 part 2) on the wire, as Kafka 4's Java producer speaks it
when the broker finalizes ``transaction.version`` 2: no AddPartitionsToTxn or AddOffsetsToTxn
(Produce v12+ and TxnOffsetCommit v5+ add to the transaction themselves), and an epoch bump with
every EndTxn v5+, whose answer carries the producer's new epoch. The Java client itself runs
against the broker in the interop tests.
"""

from __future__ import annotations

import asyncio
import time

from kafka_spark.broker.storage.batch import build_record_batch
from kafka_spark.common.topic_partition import TopicPartition
from tests.broker.coordinator.test_transaction_protocol import (
    END_TXN,
    INIT_PRODUCER_ID,
    PRODUCE,
    READ_COMMITTED,
    TXN_OFFSET_COMMIT,
    batches,
    fetch,
)
from tests.support.wire import WireClient

API_VERSIONS = 18
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED = 47, 48, 90


class TxnV2:
    """A transactional producer speaking transaction protocol v2."""

    def __init__(self, client: WireClient, transactional_id: str) -> None:
        self.client = client
        self.transactional_id = transactional_id
        response = client.call(
            INIT_PRODUCER_ID, 5, {"transactional_id": transactional_id, "transaction_timeout": 60_000}
        )
        assert response.error_code == 0
        self.producer_id, self.epoch = response.producer_id, response.producer_epoch
        self.sequence = 0

    def produce(self, topic: str, value: bytes, *, version: int = 12, epoch: int | None = None) -> int:
        epoch = self.epoch if epoch is None else epoch
        batch = build_record_batch(
            [(None, value, (), int(time.time() * 1000))],
            producer_id=self.producer_id,
            producer_epoch=epoch,
            base_sequence=self.sequence,
            is_transactional=True,
        )
        response = self.client.call(
            PRODUCE,
            version,
            {
                "transactional_id": self.transactional_id,
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
        error = response.responses[0].partition_responses[0].error_code
        if error == 0:
            self.sequence += 1
        return error

    def end(self, commit: bool, *, epoch: int | None = None) -> tuple[int, int, int]:
        response = self.client.call(
            END_TXN,
            5,
            {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch if epoch is None else epoch,
                "committed": commit,
            },
        )
        return response.error_code, response.producer_id, response.producer_epoch

    def bumped(self, producer_id: int, epoch: int) -> None:
        """What the producer does with EndTxn v5's answer: the new epoch, sequences from 0."""
        self.producer_id, self.epoch, self.sequence = producer_id, epoch, 0


def test_the_broker_finalizes_transaction_version_2(pylog_broker):
    with WireClient(pylog_broker.bootstrap_servers) as client:
        response = client.call(API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"})
    finalized = {feature.name: feature.max_version_level for feature in response.finalized_features}
    assert finalized == {"transaction.version": 2} and response.finalized_features_epoch >= 0
    supported = {feature.name: (feature.min_version, feature.max_version) for feature in response.supported_features}
    assert supported == {"transaction.version": (0, 2)}


def test_produce_v12_adds_its_partition_and_end_txn_v5_bumps_the_epoch(pylog_broker, pylog_topic):
    topic = pylog_topic()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        txn = TxnV2(client, f"{topic}-txn")
        first_epoch = txn.epoch
        assert txn.produce(topic, b"one") == 0  # no AddPartitionsToTxn: v12 adds the partition itself
        assert txn.produce(topic, b"v11", version=11) == 0  # already in the transaction
        error, producer_id, epoch = txn.end(commit=True)
        assert (error, producer_id, epoch) == (0, txn.producer_id, first_epoch + 1)
        # A retry of that EndTxn (the answer was lost) carries the old epoch and gets the same answer.
        assert txn.end(commit=True, epoch=first_epoch) == (0, producer_id, first_epoch + 1)
        # The marker carries the new epoch: the old one is fenced on the partition.
        assert txn.produce(topic, b"zombie", epoch=first_epoch) == INVALID_PRODUCER_EPOCH
        txn.bumped(producer_id, epoch)
        assert txn.produce(topic, b"two") == 0  # the next transaction begins with the batch
        assert txn.end(commit=False)[:1] == (0,)
        fetched = fetch(client, topic, 0, READ_COMMITTED)
    data = [batch for batch in batches(fetched.records) if not batch.is_control_batch]
    markers = [batch for batch in batches(fetched.records) if batch.is_control_batch]
    assert [record.value for batch in data for record in batch] == [b"one", b"v11", b"two"]
    assert [batch.producer_epoch for batch in markers] == [first_epoch + 1, first_epoch + 2]
    assert [aborted.producer_id for aborted in fetched.aborted_transactions] == [producer_id]


def test_produce_v11_still_needs_add_partitions_to_txn(pylog_broker, pylog_topic):
    topic = pylog_topic()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        txn = TxnV2(client, f"{topic}-txn")
        assert txn.produce(topic, b"v1", version=11) == INVALID_TXN_STATE


def test_txn_offset_commit_v5_adds_the_group_without_add_offsets_to_txn(pylog_broker, pylog_topic):
    topic = pylog_topic()
    group = f"{topic}-group"
    with WireClient(pylog_broker.bootstrap_servers) as client:
        txn = TxnV2(client, f"{topic}-txn")
        committed = client.call(
            TXN_OFFSET_COMMIT,
            5,
            {
                "transactional_id": txn.transactional_id,
                "group_id": group,
                "producer_id": txn.producer_id,
                "producer_epoch": txn.epoch,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [{"partition_index": 0, "committed_offset": 42, "committed_metadata": None}],
                    }
                ],
            },
        )
        assert committed.topics[0].partitions[0].error_code == 0
        assert txn.end(commit=True)[0] == 0
    assert pylog_broker._broker.groups.committed(group)[TopicPartition(topic, 0)].offset == 42


def test_end_txn_v5_moves_to_a_new_producer_id_when_the_epochs_run_out(pylog_broker, pylog_topic):
    topic = pylog_topic()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        txn = TxnV2(client, f"{topic}-txn")
        coordinator = pylog_broker._broker.transactions
        last_epoch = 32766  # Short.MAX_VALUE - 1: the last epoch a producer may use

        async def exhaust() -> None:  # on the broker's loop, as every coordinator change happens
            coordinator.get(txn.transactional_id).producer_epoch = last_epoch

        asyncio.run_coroutine_threadsafe(exhaust(), pylog_broker._broker.loop).result(10)
        txn.epoch = last_epoch
        assert txn.produce(topic, b"last") == 0
        error, producer_id, epoch = txn.end(commit=True)
        assert error == 0 and producer_id != txn.producer_id and epoch == 0
        assert txn.end(commit=True, epoch=last_epoch) == (0, producer_id, 0)  # the retry is recognised
        old_id = txn.producer_id
        txn.bumped(producer_id, epoch)
        assert txn.produce(topic, b"first of the new id") == 0
        assert txn.end(commit=True)[:1] == (0,)
        fetched = fetch(client, topic, 0, READ_COMMITTED)
    markers = [batch for batch in batches(fetched.records) if batch.is_control_batch]
    assert [(batch.producer_id, batch.producer_epoch) for batch in markers] == [(old_id, 32767), (producer_id, 1)]
