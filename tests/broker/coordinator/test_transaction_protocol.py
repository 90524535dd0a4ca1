"""Transactions on the wire: InitProducerId, AddPartitionsToTxn, transactional Produce, EndTxn,
markers, the last stable offset and aborted transactions, fencing, timeouts and restarts.

Byte-level tests with a raw client (tests/support/wire.py), so every error code is seen as sent; the
real-client behaviour (confluent-kafka) is in test_transaction_clients.py.
"""

from __future__ import annotations

import struct
import time

from kafka.record import MemoryRecords

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.storage.batch import build_record_batch
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

PRODUCE, FETCH, LIST_OFFSETS, INIT_PRODUCER_ID = 0, 1, 2, 22
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


class Txn:
    """One transactional producer speaking raw protocol."""

    def __init__(self, client: WireClient, transactional_id: str, timeout_ms: int = 60_000) -> None:
        self.client = client
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.producer_id = -1
        self.epoch = -1
        self.sequences: dict[tuple[str, int], int] = {}

    def init(self, version: int = 1, producer_id: int = -1, epoch: int = -1) -> int:
        response = self.client.call(
            INIT_PRODUCER_ID,
            version,
            {
                "transactional_id": self.transactional_id,
                "transaction_timeout": self.timeout_ms,
                "producer_id": producer_id,
                "producer_epoch": epoch,
            },
        )
        if response.error_code == 0:
            self.producer_id, self.epoch = response.producer_id, response.producer_epoch
            self.sequences.clear()
        return response.error_code

    def add(self, topic: str, *partitions: int, version: int = 2) -> dict[int, int]:
        response = self.client.call(
            ADD_PARTITIONS,
            version,
            {
                "v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": list(partitions)}],
            },
        )
        return {
            p.partition_index: p.partition_error_code
            for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }

    def produce(self, topic: str, partition: int, *values: bytes, sequence: int | None = None) -> tuple[int, int]:
        """(error_code, base_offset); ``sequence`` overrides the next sequence (to replay a batch)."""
        if sequence is None:
            sequence = self.sequences.get((topic, partition), 0)
        batch = build_record_batch(
            [(None, value, (), int(time.time() * 1000)) for value in values],
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=sequence,
            is_transactional=True,
        )
        response = self.client.call(
            PRODUCE,
            7,
            {
                "transactional_id": self.transactional_id,
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
            },
        )
        result = response.responses[0].partition_responses[0]
        if result.error_code == 0:
            self.sequences[(topic, partition)] = sequence + len(values)
        return result.error_code, result.base_offset

    def end(self, commit: bool, version: int = 2) -> int:
        response = self.client.call(
            END_TXN,
            version,
            {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.epoch,
                "committed": commit,
            },
        )
        return response.error_code


def fetch(client: WireClient, topic: str, offset: int, isolation: int, partition: int = 0):
    response = client.call(
        FETCH,
        11,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": isolation,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
    )
    return response.responses[0].partitions[0]


def latest(
    client: WireClient, topic: str, isolation: int, partition: int = 0, timestamp: int = -1, replica_id: int = -1
) -> int:
    """The offset ListOffsets answers: LATEST, or the lookup of ``timestamp``."""
    response = client.call(
        LIST_OFFSETS,
        5,
        {
            "replica_id": replica_id,
            "isolation_level": isolation,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}],
                }
            ],
        },
    )
    result = response.topics[0].partitions[0]
    assert result.error_code == 0
    return result.offset


def batches(records: bytes) -> list:
    """Decoded with kafka-python, which verifies every CRC (as its consumer does by default)."""
    memory = MemoryRecords(bytes(records))
    found = []
    while (batch := memory.next_batch()) is not None:
        assert batch.validate_crc(), "batch CRC mismatch"
        found.append(batch)
    return found


def marker_type(batch) -> int:
    record = next(iter(batch))
    return struct.unpack(">hh", record.key)[1]


def test_transactional_produce_needs_the_partition_in_the_transaction(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=2)
    with WireClient(pylog_broker.bootstrap_servers) as client:
        txn = Txn(client, f"{topic}-txn")
        assert txn.init() == 0
        assert txn.produce(topic, 0, b"early")[0] == 48  # INVALID_TXN_STATE: no AddPartitionsToTxn yet
        assert txn.add(topic, 0) == {0: 0}
        assert txn.produce(topic, 0, b"ok")[0] == 0
        assert txn.produce(topic, 1, b"not added")[0] == 48
        assert txn.end(commit=True) == 0
        assert txn.produce(topic, 0, b"after commit")[0] == 48
        assert latest(client, topic, READ_UNCOMMITTED, partition=1) == 0


def test_open_transaction_holds_the_last_stable_offset_until_commit(pylog_broker, pylog_topic):
    topic = pylog_topic()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        plain = Txn(client, "unused")
        txn = Txn(client, f"{topic}-txn")
        assert txn.init() == 0
        assert txn.add(topic, 0) == {0: 0}
        assert txn.produce(topic, 0, b"a", b"b") == (0, 0)
        # A non-transactional write after the open transaction: above the LSO, so hidden too.
        batch = build_record_batch([(None, b"plain", (), 0)])
        client.call(
            PRODUCE,
            7,
            {
                "transactional_id": None,
                "acks": 1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
        del plain
        assert latest(client, topic, READ_UNCOMMITTED) == 3
        assert latest(client, topic, READ_COMMITTED) == 0
        # A timestamp lookup answers only records the isolation level may read (as Kafka filters it).
        assert latest(client, topic, READ_UNCOMMITTED, timestamp=0) == 0
        assert latest(client, topic, READ_COMMITTED, timestamp=0) == -1
        # A replica's request (its broker id) sees the whole log, whatever the isolation level.
        assert latest(client, topic, READ_COMMITTED, replica_id=0) == 3
        assert latest(client, topic, READ_COMMITTED, timestamp=0, replica_id=0) == 0
        committed = fetch(client, topic, 0, READ_COMMITTED)
        assert (committed.high_watermark, committed.last_stable_offset, bytes(committed.records)) == (3, 0, b"")
        assert len(batches(fetch(client, topic, 0, READ_UNCOMMITTED).records)) == 2

        assert txn.end(commit=True) == 0
        assert latest(client, topic, READ_COMMITTED) == latest(client, topic, READ_UNCOMMITTED) == 4
        assert latest(client, topic, READ_COMMITTED, timestamp=0) == 0
        result = fetch(client, topic, 0, READ_COMMITTED)
        assert result.last_stable_offset == 4 and result.aborted_transactions == ()
        stored = batches(result.records)
        marker = stored[-1]
        assert (marker.is_control_batch, marker.is_transactional, marker.base_offset) == (True, True, 3)
        assert (marker.producer_id, marker.producer_epoch, marker_type(marker)) == (txn.producer_id, txn.epoch, 1)


def test_aborted_transaction_is_reported_to_read_committed_fetches(pylog_broker, pylog_topic):
    topic = pylog_topic()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        txn = Txn(client, f"{topic}-txn")
        assert txn.init() == 0
        assert txn.add(topic, 0) == {0: 0}
        assert txn.produce(topic, 0, b"doomed-1") == (0, 0)
        assert txn.produce(topic, 0, b"doomed-2") == (0, 1)
        assert txn.end(commit=False) == 0  # ABORT marker at 2
        assert txn.add(topic, 0) == {0: 0}
        assert txn.produce(topic, 0, b"kept") == (0, 3)
        assert txn.end(commit=True) == 0  # COMMIT marker at 4

        result = fetch(client, topic, 0, READ_COMMITTED)
        assert [(a.producer_id, a.first_offset) for a in result.aborted_transactions] == [(txn.producer_id, 0)]
        assert [marker_type(b) for b in batches(result.records) if b.is_control_batch] == [0, 1]
        # From past the abort marker, the aborted transaction is not relevant any more.
        assert fetch(client, topic, 3, READ_COMMITTED).aborted_transactions == ()
        assert fetch(client, topic, 0, READ_UNCOMMITTED).aborted_transactions == ()


def test_new_instance_aborts_the_open_transaction_and_fences_the_old_epoch(pylog_broker, pylog_topic):
    topic = pylog_topic()
    with (
        WireClient(pylog_broker.bootstrap_servers) as old_client,
        WireClient(pylog_broker.bootstrap_servers) as new_client,
    ):
        zombie = Txn(old_client, f"{topic}-txn")
        assert zombie.init() == 0
        assert zombie.add(topic, 0) == {0: 0}
        assert zombie.produce(topic, 0, b"zombie") == (0, 0)
        assert latest(new_client, topic, READ_COMMITTED) == 0

        fresh = Txn(new_client, f"{topic}-txn")
        assert fresh.init() == 0
        # Fenced (epoch + 1, the abort marker's), then bumped for the new instance, as Kafka does.
        assert (fresh.producer_id, fresh.epoch) == (zombie.producer_id, zombie.epoch + 2)
        # The zombie's transaction was aborted with a newer epoch: the LSO moved past its marker.
        assert latest(new_client, topic, READ_COMMITTED) == 2
        result = fetch(new_client, topic, 0, READ_COMMITTED)
        assert [(a.producer_id, a.first_offset) for a in result.aborted_transactions] == [(zombie.producer_id, 0)]

        assert zombie.produce(topic, 0, b"late")[0] == 47  # INVALID_PRODUCER_EPOCH
        assert zombie.add(topic, 0, version=2) == {0: 90}  # PRODUCER_FENCED
        assert zombie.add(topic, 0, version=1) == {0: 47}  # older clients get INVALID_PRODUCER_EPOCH
        assert zombie.end(commit=True, version=2) == 90
        assert zombie.end(commit=True, version=0) == 47
        assert fresh.add(topic, 0) == {0: 0}
        assert fresh.produce(topic, 0, b"fresh") == (0, 2)
        assert fresh.end(commit=True) == 0


def test_end_txn_retry_with_the_same_outcome_succeeds_and_the_opposite_is_refused(pylog_broker, pylog_topic):
    topic = pylog_topic()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        txn = Txn(client, f"{topic}-txn")
        assert txn.init() == 0
        assert txn.end(commit=True) == 48  # nothing to end
        assert txn.add(topic, 0) == {0: 0}
        assert txn.produce(topic, 0, b"x") == (0, 0)
        assert txn.end(commit=True) == 0
        assert txn.end(commit=True) == 0
        assert txn.end(commit=False) == 48
        assert latest(client, topic, READ_UNCOMMITTED) == 2  # one marker, not two


def test_init_producer_id_validates_timeout_and_kip360_bumps(pylog_broker, pylog_topic):
    topic = pylog_topic()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        assert Txn(client, f"{topic}-a", timeout_ms=900_001).init() == 50
        assert Txn(client, f"{topic}-a", timeout_ms=0).init() == 50
        txn = Txn(client, f"{topic}-a")
        assert txn.init(version=4) == 0
        pid, epoch = txn.producer_id, txn.epoch
        assert txn.init(version=4, producer_id=pid, epoch=epoch) == 0
        assert (txn.producer_id, txn.epoch) == (pid, epoch + 1)
        # A retry of that bump (its response was lost) gets the same answer, no second bump.
        assert txn.init(version=4, producer_id=pid, epoch=epoch) == 0
        assert (txn.producer_id, txn.epoch) == (pid, epoch + 1)
        assert Txn(client, f"{topic}-a").init(version=4, producer_id=pid, epoch=epoch + 5) == 90
        assert Txn(client, f"{topic}-a").init(version=3, producer_id=pid, epoch=epoch + 5) == 47
        assert Txn(client, f"{topic}-a").init(version=4, producer_id=pid + 1000, epoch=0) == 90


def test_unknown_partition_fails_the_whole_add_partitions_request(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=1)
    with WireClient(pylog_broker.bootstrap_servers) as client:
        txn = Txn(client, f"{topic}-txn")
        assert txn.init() == 0
        assert txn.add(topic, 0, 7) == {0: 55, 7: 3}
        assert txn.produce(topic, 0, b"x")[0] == 48
        wrong = Txn(client, f"{topic}-txn")
        wrong.producer_id, wrong.epoch = txn.producer_id + 1, 0
        assert wrong.add(topic, 0) == {0: 49}  # INVALID_PRODUCER_ID_MAPPING


def test_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(pylog_broker, pylog_topic):
    topic = pylog_topic()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        txn = Txn(client, f"{topic}-txn", timeout_ms=300)
        assert txn.init() == 0
        assert txn.add(topic, 0) == {0: 0}
        assert txn.produce(topic, 0, b"abandoned") == (0, 0)
        assert latest(client, topic, READ_COMMITTED) == 0
        wait_until(lambda: latest(client, topic, READ_COMMITTED) != 0, "the LSO to move", 5)
        assert latest(client, topic, READ_COMMITTED) == 2  # aborted by the coordinator: LSO moved
        result = fetch(client, topic, 0, READ_COMMITTED)
        assert [(a.producer_id, a.first_offset) for a in result.aborted_transactions] == [(txn.producer_id, 0)]
        marker = batches(result.records)[-1]
        assert (marker_type(marker), marker.producer_epoch) == (0, txn.epoch + 1)
        assert txn.end(commit=True) == 90
        assert txn.produce(topic, 0, b"late")[0] == 47


def test_parked_read_committed_fetch_wakes_when_the_transaction_commits(pylog_broker, pylog_topic):
    topic = pylog_topic()
    with WireClient(pylog_broker.bootstrap_servers) as client, WireClient(pylog_broker.bootstrap_servers) as reader:
        txn = Txn(client, f"{topic}-txn")
        assert txn.init() == 0
        assert txn.add(topic, 0) == {0: 0}
        assert txn.produce(topic, 0, b"x") == (0, 0)
        reader.send(
            FETCH,
            11,
            {
                "replica_id": -1,
                "max_wait": 10_000,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "isolation_level": READ_COMMITTED,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": 0,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
                "rack_id": "",
            },
        )
        # The Fetch must be parked (waiting up to max_wait) when the commit comes; the wire shows
        # nothing of a parked request to wait for, so this pause only gives it the time to arrive.
        time.sleep(0.2)
        started = time.monotonic()
        assert txn.end(commit=True) == 0
        result = reader.receive(FETCH, 11).responses[0].partitions[0]
        assert time.monotonic() - started < 5
        assert result.last_stable_offset == 2 and len(batches(result.records)) == 2


def test_coordinator_state_and_open_transactions_survive_a_restart(tmp_path):
    topic = "restarted"
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        broker.create_topic(topic, partitions=2)
        with WireClient(broker.bootstrap_servers) as client:
            done = Txn(client, "done")
            assert done.init() == 0
            assert done.add(topic, 1) == {1: 0}
            assert done.produce(topic, 1, b"aborted") == (0, 0)
            assert done.end(commit=False) == 0
            txn = Txn(client, "open")
            assert txn.init() == 0
            assert txn.add(topic, 0) == {0: 0}
            assert txn.produce(topic, 0, b"a") == (0, 0)
            pid, epoch, sequences = txn.producer_id, txn.epoch, dict(txn.sequences)

    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        with WireClient(broker.bootstrap_servers) as client:
            assert latest(client, topic, READ_COMMITTED) == 0  # still open after the restart
            result = fetch(client, topic, 0, READ_COMMITTED, partition=1)
            assert [(a.producer_id, a.first_offset) for a in result.aborted_transactions] == [(done.producer_id, 0)]
            txn = Txn(client, "open")
            txn.producer_id, txn.epoch, txn.sequences = pid, epoch, sequences
            # The producer state survived too: a retry of the pre-restart batch is recognised (its
            # original offset, nothing written), a gap is refused, the sequence continues.
            assert txn.produce(topic, 0, b"a", sequence=0) == (0, 0)
            assert txn.produce(topic, 0, b"gap", sequence=5)[0] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
            assert txn.produce(topic, 0, b"b") == (0, 1)
            assert txn.end(commit=True) == 0
            assert latest(client, topic, READ_COMMITTED) == 3
            again = Txn(client, "open")
            assert again.init() == 0
            assert (again.producer_id, again.epoch) == (pid, epoch + 1)
            assert Txn(client, "done").init() == 0


def test_commit_interrupted_after_prepare_commit_is_finished_on_restart(tmp_path):
    from kafka_spark.broker.coordinator.transaction_log import TransactionLog
    from kafka_spark.broker.coordinator.transaction_state import TxnState
    from kafka_spark.broker.storage.log_manager import LogManager

    topic = "interrupted"
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        broker.create_topic(topic, partitions=2)
        with WireClient(broker.bootstrap_servers) as client:
            txn = Txn(client, "app")
            assert txn.init() == 0
            assert txn.add(topic, 0, 1) == {0: 0, 1: 0}
            assert txn.produce(topic, 0, b"a", b"b") == (0, 0)  # partition 1 gets no data
    # The broker died right after logging PrepareCommit, before any marker: write that record.
    logs = LogManager(tmp_path)
    try:
        state_log = TransactionLog(logs)
        record = state_log.replay()["app"]
        assert record.pop("version") == 1 and record["state"] == "Ongoing"
        state_log.append("app", {**record, "state": "PrepareCommit"}, int(time.time() * 1000))
    finally:
        logs.close()

    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        with WireClient(broker.bootstrap_servers) as client:
            assert latest(client, topic, READ_COMMITTED) == 3  # finished before the first request
            marker = batches(fetch(client, topic, 0, READ_COMMITTED).records)[-1]
            assert (marker.is_control_batch, marker_type(marker), marker.base_offset) == (True, 1, 2)
            # Only partitions where the transaction was still open get a marker on recovery.
            assert latest(client, topic, READ_UNCOMMITTED, partition=1) == 0
            assert broker.broker.transactions.get("app").state is TxnState.COMPLETE_COMMIT
            retry = Txn(client, "app")
            retry.producer_id, retry.epoch = txn.producer_id, txn.epoch
            assert retry.end(commit=True) == 0  # the client's retried EndTxn succeeds


def test_clients_cannot_write_to_the_transaction_state_topic(pylog_broker, pylog_topic):
    topic = pylog_topic()
    with WireClient(pylog_broker.bootstrap_servers) as client:
        txn = Txn(client, f"{topic}-txn")
        assert txn.init() == 0  # creates __transaction_state
        batch = build_record_batch([(b"evil", b"{}", (), 0)])
        response = client.call(
            PRODUCE,
            7,
            {
                "transactional_id": None,
                "acks": 1,
                "timeout": 5000,
                "topic_data": [{"name": "__transaction_state", "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
        assert response.responses[0].partition_responses[0].error_code == 17  # INVALID_TOPIC_EXCEPTION
        assert txn.add("__transaction_state", 0) == {0: 3}


def test_marker_write_failure_is_retried_and_the_producer_waits_meanwhile(pylog_broker, pylog_topic):
    """Fault injection: the disk refuses the marker append once (a real disk error cannot be
    provoked on demand here); the coordinator keeps the transaction in PrepareCommit, answers
    51 CONCURRENT_TRANSACTIONS, and writes the marker on its retry."""
    from kafka_spark.broker.storage.errors import KafkaStorageError

    topic = pylog_topic(partitions=2)
    log = pylog_broker.broker.logs.get_log(topic, 1)
    real_append = log.append
    failures = []

    def failing_append(records, **kwargs):
        if not failures:
            failures.append(True)
            raise KafkaStorageError(f"injected: no space left on the device of {log.name}")
        return real_append(records, **kwargs)

    with WireClient(pylog_broker.bootstrap_servers) as client:
        txn = Txn(client, f"{topic}-txn")
        assert txn.init() == 0
        assert txn.add(topic, 0, 1) == {0: 0, 1: 0}
        assert txn.produce(topic, 0, b"a") == (0, 0)
        assert txn.produce(topic, 1, b"b") == (0, 0)
        log.append = failing_append
        try:
            assert txn.end(commit=True) == 0  # PrepareCommit is durable: the outcome is decided
            assert latest(client, topic, READ_COMMITTED, partition=0) == 2
            assert latest(client, topic, READ_COMMITTED, partition=1) == 0  # its marker is missing
            assert txn.add(topic, 0) == {0: 51}
            wait_until(lambda: latest(client, topic, READ_COMMITTED, partition=1) != 0, "the marker's retry", 5)
            assert latest(client, topic, READ_COMMITTED, partition=1) == 2
            assert txn.add(topic, 0) == {0: 0}
        finally:
            del log.append
        assert failures == [True]


def test_exhausted_epochs_move_to_a_new_producer_id_after_aborting_with_the_old_one(pylog_broker, pylog_topic):
    topic = pylog_topic()
    transactional_id = f"{topic}-txn"

    async def exhaust() -> None:  # on the broker's loop: reaching epoch 32766 by 32766 inits is slow
        pylog_broker.broker.transactions.get(transactional_id).producer_epoch = 32766

    with WireClient(pylog_broker.bootstrap_servers) as client:
        old = Txn(client, transactional_id)
        assert old.init() == 0
        pylog_broker._call(exhaust())
        old.epoch = 32766
        assert old.add(topic, 0) == {0: 0}
        assert old.produce(topic, 0, b"x") == (0, 0)
        new = Txn(client, transactional_id)
        assert new.init() == 0
        assert new.producer_id != old.producer_id and new.epoch == 0
        result = fetch(client, topic, 0, READ_COMMITTED)
        assert result.last_stable_offset == 2
        assert [(a.producer_id, a.first_offset) for a in result.aborted_transactions] == [(old.producer_id, 0)]
        marker = batches(result.records)[-1]
        assert (marker.producer_id, marker.producer_epoch, marker_type(marker)) == (old.producer_id, 32766, 0)
        assert old.produce(topic, 0, b"zombie")[0] == 49  # its producer id is no longer mapped
        assert new.add(topic, 0) == {0: 0}
        assert new.produce(topic, 0, b"y") == (0, 2)
        assert new.end(commit=True) == 0


def test_compacted_transaction_state_replays_to_the_same_coordinator_state(tmp_path):
    from kafka_spark.broker.coordinator.transaction_log import TRANSACTION_STATE_TOPIC, TransactionLog
    from kafka_spark.broker.storage.log_manager import LogManager

    topic = "compacted-state"
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        broker.create_topic(topic)
        with WireClient(broker.bootstrap_servers) as client:
            for name in ("a", "b"):
                txn = Txn(client, name)
                assert txn.init() == 0
                for _ in range(10):
                    assert txn.add(topic, 0) == {0: 0}
                    assert txn.produce(topic, 0, b"x")[0] == 0
                    assert txn.end(commit=True) == 0
            last = (txn.producer_id, txn.epoch)
    logs = LogManager(tmp_path, enable_cleaner=False)
    try:
        before = TransactionLog(logs).replay()
        for partition in range(logs.topics()[TRANSACTION_STATE_TOPIC].partitions):
            logs.get_log(TRANSACTION_STATE_TOPIC, partition).roll()
        assert logs.cleaner.clean_now(force=True).records_removed > 30  # 4 records per transaction
        assert TransactionLog(logs).replay() == before
    finally:
        logs.close()
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        with WireClient(broker.bootstrap_servers) as client:
            again = Txn(client, "b")
            assert again.init() == 0
            assert (again.producer_id, again.epoch) == (last[0], last[1] + 1)
