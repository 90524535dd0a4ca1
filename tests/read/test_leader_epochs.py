"""The source validates the positions it resumes from against leader epochs (KIP-320).

The single-node broker starts a new leader epoch at every start, at the recovered log end offset
(kafka_spark.broker.storage.epochs). A crash that loses an unflushed tail, simulated here as
tests/broker/test_durability.py does (the stopped broker's active segment cut short, which
recovery truncates to the last whole batch), makes the log reuse offsets the query had planned;
the checkpointed leader epoch tells the new records from the lost ones, so a resumed query
reports data loss (failOnDataLoss=true) or reads every new record (false), and an unchanged log
validates without a report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.common.topic_partition import TopicPartition
from kafka_spark.errors import DataLossError
from kafka_spark.offsets import EPOCHS_KEY, positions_from_dict
from kafka_spark.options import parse_source_options
from kafka_spark.read.stream import PylogStreamReader
from kafka_spark.spark_api import ReadAllAvailable

TOPIC = "epochs"
RECORD = 100  # value bytes: every batch has the same size, so batch boundaries are computable


def _produce(bootstrap: str, values: list[str]) -> None:
    """One batch per record, acks=all."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    for value in values:
        producer.produce(TOPIC, value=value.encode().ljust(RECORD, b"."), partition=0)
        assert producer.flush(30) == 0


def _lose_tail(log_dir: Path, keep: int, total: int) -> None:
    """A stopped broker's partition keeps its first ``keep`` of ``total`` equal batches, as after
    a crash that lost the unflushed rest (plus half a batch, which recovery cuts off)."""
    segment = sorted((log_dir / f"{TOPIC}-0").glob("*.log"))[-1]
    size = segment.stat().st_size
    assert size % total == 0
    with open(segment, "r+b") as handle:
        handle.truncate(keep * (size // total) + size // total // 2)


def _run(spark, bootstrap: str, checkpoint: Path, **options: str):
    """One Trigger.AvailableNow run of the query, appending to a Parquet output; (every row the
    output holds, the run's failure or None)."""
    reader = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    output = checkpoint.parent / "output"
    query = (
        reader.load()
        .selectExpr("offset", "substring_index(cast(value as string), '.', 1) as v")
        .writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    failure = None
    try:
        query.awaitTermination(120)
    except Exception as error:  # noqa: BLE001 - the test asserts on the failure
        failure = str(error)
    finally:
        query.stop()
    return sorted((r.offset, r.v) for r in spark.read.parquet(str(output)).collect()), failure


def _last_offsets(checkpoint: Path) -> dict:
    batches = sorted((checkpoint / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    return json.loads(batches[-1].read_text().splitlines()[-1])


@pytest.fixture
def broker_dir(tmp_path: Path) -> Path:
    return tmp_path / "broker"


@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_a_resumed_query_reports_a_lost_tail_whose_offsets_were_reused(
    spark, broker_dir: Path, tmp_path: Path, fail_on_data_loss: str
) -> None:
    checkpoint = tmp_path / "checkpoint"
    with EmbeddedBroker(log_dir=broker_dir) as broker:
        _produce(broker.bootstrap_servers, [f"old{i}" for i in range(10)])
        rows, failure = _run(spark, broker.bootstrap_servers, checkpoint, failOnDataLoss=fail_on_data_loss)
        assert failure is None and rows == [(i, f"old{i}") for i in range(10)]
    recorded = _last_offsets(checkpoint)
    assert recorded == {TOPIC: {"0": 10}, EPOCHS_KEY: {TOPIC: {"0": 0}}}
    _lose_tail(broker_dir, keep=6, total=10)
    with EmbeddedBroker(log_dir=broker_dir) as broker:  # recovers offsets 0-5, leads in epoch 1
        _produce(broker.bootstrap_servers, [f"new{i}" for i in range(6, 12)])  # offsets 6-11 again
        rows, failure = _run(spark, broker.bootstrap_servers, checkpoint, failOnDataLoss=fail_on_data_loss)
    if fail_on_data_loss == "true":
        assert failure is not None
        assert f"Partition {TOPIC}-0's log was truncated below the position 10" in failure
        assert "now ends that epoch at offset 6" in failure
        assert rows == [(i, f"old{i}") for i in range(10)]  # nothing of the new run
    else:
        assert failure is None
        new = [(i, f"new{i}") for i in range(6, 12)]  # the new records, none skipped
        assert rows == sorted([(i, f"old{i}") for i in range(10)] + new)
        assert _last_offsets(checkpoint) == {TOPIC: {"0": 12}, EPOCHS_KEY: {TOPIC: {"0": 1}}}


def test_an_unchanged_log_validates_across_a_broker_restart_without_a_report(
    spark, broker_dir: Path, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "checkpoint"
    with EmbeddedBroker(log_dir=broker_dir) as broker:
        _produce(broker.bootstrap_servers, [f"a{i}" for i in range(5)])
        rows, failure = _run(spark, broker.bootstrap_servers, checkpoint)
        assert failure is None and len(rows) == 5
    assert _last_offsets(checkpoint)[EPOCHS_KEY] == {TOPIC: {"0": 0}}
    for restart in range(2):  # twice: epochs 1 and 2, the recorded one older each time
        with EmbeddedBroker(log_dir=broker_dir) as broker:
            _produce(broker.bootstrap_servers, [f"b{restart}{i}" for i in range(3)])
            rows, failure = _run(spark, broker.bootstrap_servers, checkpoint)
        assert failure is None
        assert [offset for offset, _ in rows] == list(range(8 + 3 * restart))
        assert _last_offsets(checkpoint)[EPOCHS_KEY] == {TOPIC: {"0": restart + 1}}


def _planner(bootstrap: str, **options: str) -> PylogStreamReader:
    opts = parse_source_options({"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC, **options})
    return PylogStreamReader(opts, bootstrap)


def test_the_planner_validates_a_position_once_per_process_and_after_an_epoch_change(broker_dir: Path) -> None:
    """Planner level: a position from another epoch is checked, a checked one is not asked again,
    a position without an epoch (a checkpoint of Spark's or an older pylog) is not checked."""
    tp = TopicPartition(TOPIC, 0)
    with EmbeddedBroker(log_dir=broker_dir) as broker:
        _produce(broker.bootstrap_servers, [f"a{i}" for i in range(4)])
    _lose_tail(broker_dir, keep=2, total=4)
    with EmbeddedBroker(log_dir=broker_dir) as broker:  # epoch 1 from offset 2
        _produce(broker.bootstrap_servers, [f"b{i}" for i in range(2, 6)])
        reader = _planner(broker.bootstrap_servers)
        try:
            end = reader.latestOffset({TOPIC: {"0": 0}}, ReadAllAvailable())
            assert positions_from_dict(end) == ({tp: 6}, {tp: 1})
            lost = {TOPIC: {"0": 4}, EPOCHS_KEY: {TOPIC: {"0": 0}}}  # planned in epoch 0, lost since
            with pytest.raises(DataLossError, match=rf"{TOPIC}-0's log was truncated below the position 4"):
                reader.partitions(lost, end)
            assert reader.partitions({TOPIC: {"0": 4}}, end)  # no epoch: nothing to validate
            kept = {TOPIC: {"0": 2}, EPOCHS_KEY: {TOPIC: {"0": 0}}}  # epoch 0 still ends at 2
            assert reader.partitions(kept, end)
            lenient = _planner(broker.bootstrap_servers, failOnDataLoss="false")
            ranges = lenient.offset_ranges(lost, end)
            assert [(r.from_offset, r.until_offset) for r in ranges] == [(2, 6)]  # read from the truncation
        finally:
            reader.stop()
