"""Where a streaming query starts, and what it does when the log changes under it.

* The start batch: a new query's first batch is empty and its end offsets, written by Spark to
  ``<checkpoint>/offsets/0``, are where the query starts (Spark keeps no start offset of a
  Python source's first batch). Checked against what Spark actually does under each trigger.
* A failed first batch replays from that recorded start (issue: a recomputed start failed the
  replay with a false data-loss error after partitions were added).
* Trigger.AvailableNow fails when a planned topic is deleted or recreated under it.
* A checkpoint reused for a query on other topics is named as such, not as data loss.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from dataclasses import dataclass

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark import cloudpickle
from pyspark.errors import StreamingQueryException
from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, WriterCommitMessage

from kafka_spark.offsets import EPOCHS_KEY, DataLossError, offsets_to_dict, positions_from_dict
from kafka_spark.options import parse_source_options
from kafka_spark.read.stream import (
    AvailableNowTopicChangedError,
    CheckpointTopicsError,
    PylogStreamReader,
)
from kafka_spark.spark_api import ADMISSION_CONTROL, ReadMaxRows
from tests.support.source_fixtures import embedded_kafka  # noqa: F401
from tests.support.waiting import wait_until

# Spark ships the test sink to Python workers, which cannot import this test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _stream(spark, cluster, **options):
    reader = spark.readStream.format("pylog").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().selectExpr("partition", "offset", "cast(value as string) v")


def _source_offsets(checkpoint, batch_id: int) -> dict:
    """The source's offsets in ``offsets/<batch_id>``, without the leader epochs recorded beside
    them (``@leaderEpochs``, tested in tests/read/test_leader_epochs.py)."""
    return offsets_to_dict(positions_from_dict(_source_positions(checkpoint, batch_id))[0])


def _source_positions(checkpoint, batch_id: int) -> dict:
    lines = open(os.path.join(checkpoint, "offsets", str(batch_id))).read().split("\n")
    return json.loads(lines[2])


def _run_to_memory(df, checkpoint, trigger):
    name = f"q_{uuid.uuid4().hex[:8]}"
    writer = df.writeStream.format("memory").queryName(name).option("checkpointLocation", checkpoint)
    if trigger is not None:
        writer = writer.trigger(**trigger)
    query = writer.start()
    if trigger is not None and ("availableNow" in trigger or "once" in trigger):
        assert query.awaitTermination(180)
    else:
        query.processAllAvailable()
        query.stop()
    assert query.exception() is None, query.exception()
    return name, query


@pytest.mark.skipif(
    not ADMISSION_CONTROL,
    reason="PySpark before 4.2 has no start batch: the first batch reads data and records its start "
    "(tests/read/test_without_admission_control.py)",
)
@pytest.mark.parametrize(
    "trigger",
    [{"availableNow": True}, {"processingTime": "200 milliseconds"}, None],
    ids=["available-now", "processing-time", "default"],
)
def test_new_query_records_where_it_starts_in_an_empty_first_batch(spark, embedded_kafka, tmp_path, trigger):
    topic = embedded_kafka.new_topic("start")
    embedded_kafka.produce_values(topic, 0, 3)
    embedded_kafka.produce_values(topic, 2, 2, start=3)
    checkpoint = str(tmp_path / "ck")
    name, query = _run_to_memory(
        _stream(spark, embedded_kafka, subscribe=topic, startingOffsets="earliest"), checkpoint, trigger
    )
    progress = [p for p in query.recentProgress if p["batchId"] == 0]
    assert progress[0]["numInputRows"] == 0  # batch 0 is the start batch
    # Spark wrote where the query starts as batch 0's end offsets, and batch 1 starts there.
    start = {topic: {"0": 0, "1": 0, "2": 0, "3": 0}}
    assert _source_positions(checkpoint, 0) == {**start, EPOCHS_KEY: {topic: {"0": 0, "1": 0, "2": 0, "3": 0}}}
    batch1 = [p for p in query.recentProgress if p["batchId"] == 1][0]["sources"][0]
    assert json.loads(batch1["startOffset"]) == _source_positions(checkpoint, 0)
    rows = sorted((r.partition, r.offset, r.v) for r in spark.table(name).collect())
    assert rows == [(0, 0, "v0"), (0, 1, "v1"), (0, 2, "v2"), (2, 0, "v3"), (2, 1, "v4")]


def test_trigger_once_reads_everything_on_a_fresh_checkpoint(spark, embedded_kafka, tmp_path):
    """Trigger.Once runs exactly one batch, so there is no start batch: it must read the data."""
    topic = embedded_kafka.new_topic("once")
    embedded_kafka.produce_values(topic, 1, 4)
    name, query = _run_to_memory(
        _stream(spark, embedded_kafka, subscribe=topic, startingOffsets="earliest"),
        str(tmp_path / "ck"),
        {"once": True},
    )
    assert [p["numInputRows"] for p in query.recentProgress] == [4]
    assert sorted(r.offset for r in spark.table(name).collect()) == [0, 1, 2, 3]


def test_default_read_limit_tells_trigger_once_apart():
    """Spark passes ReadAllAvailable for Trigger.Once whatever the default read limit is; the
    default is never ReadAllAvailable, so only Trigger.Once skips the start batch."""
    reader = PylogStreamReader(parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t"}), "h:1")
    assert reader.getDefaultReadLimit() == ReadMaxRows(2**63 - 1)


class CollectWriter(DataSourceStreamWriter):
    """Keeps each committed batch's rows in ``<path>/batch-<id>.json``; fails the commit of batch
    ``failBatch``; at the commit of batch ``recreateAtBatch`` deletes topic ``recreateTopic`` and
    creates it again with two records. (A Python sink, not foreachBatch: foreachBatch calls back
    into the driver through py4j, whose select() fails once a long test run holds 1024 fds.)"""

    def __init__(self, options: dict) -> None:
        self.options = options

    def write(self, iterator):  # noqa: ANN001, ANN201
        return _Rows([(r.partition, r.offset, r.v) for r in iterator])

    def commit(self, messages, batchId: int) -> None:  # noqa: ANN001
        if str(batchId) == self.options.get("failBatch"):
            raise RuntimeError(f"injected failure of batch {batchId}")
        rows = [row for m in messages if m is not None for row in m.rows]
        with open(os.path.join(self.options["path"], f"batch-{batchId}.json"), "w") as out:
            json.dump(rows, out)
        if str(batchId) == self.options.get("recreateAtBatch"):
            _recreate(self.options["bootstrap"], self.options["recreateTopic"])


@dataclass
class _Rows(WriterCommitMessage):
    rows: list


def _recreate(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    refusals: list[Exception] = []

    def created() -> bool:
        try:
            admin.create_topics([NewTopic(topic, num_partitions=4)])[topic].result(30)
        except Exception as refusal:  # noqa: BLE001 - the deletion may still be under way
            refusals.append(refusal)
            return False
        return True

    wait_until(created, lambda: f"{topic} created again, last refused with {refusals[-1:]}", interval=0.2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(2):
        producer.produce(topic, value=b"new-%d" % i, partition=0)
    assert producer.flush(30) == 0


class CollectSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pylog-test-collect"

    def streamWriter(self, schema, overwrite):  # noqa: ANN001
        return CollectWriter(self.options)


class _Batches:
    """What the collect sink committed, per batch id."""

    def __init__(self, directory) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    @property
    def sizes(self) -> dict[int, int]:
        return {
            int(n[6:-5]): len(json.load(open(os.path.join(self.directory, n))))
            for n in os.listdir(self.directory)
            if n.startswith("batch-")
        }

    @property
    def rows(self) -> list[tuple]:
        return [
            tuple(r)
            for n in os.listdir(self.directory)
            if n.startswith("batch-")
            for r in json.load(open(os.path.join(self.directory, n)))
        ]


def _run_collect(spark, df, checkpoint, batches: _Batches, trigger: dict, **options):
    spark.dataSource.register(CollectSink)
    writer = (
        df.writeStream.format("pylog-test-collect")
        .option("path", batches.directory)
        .option("checkpointLocation", checkpoint)
        .trigger(**trigger)
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.start()
    try:
        assert query.awaitTermination(600), "the query did not end"
    except StreamingQueryException as exc:
        return exc
    return query.exception()


def _drain_after_replay(spark, df, checkpoint, batches: _Batches) -> None:
    """A Trigger.AvailableNow run after a failed batch 0: it replays batch 0, then reads the rest.
    PySpark before 4.2 runs it as one batch (Spark's Trigger.Once fallback for a Python source),
    the replay, so a second run reads the rest there."""
    assert _run_collect(spark, df, checkpoint, batches, {"availableNow": True}) is None
    if not ADMISSION_CONTROL:
        assert set(batches.sizes) == {0}
        assert _run_collect(spark, df, checkpoint, batches, {"availableNow": True}) is None


def _add_partitions(cluster, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(10)
    cluster.producer.list_topics(topic=topic, timeout=10)  # let the producer see the new partitions


def test_failed_first_batch_replays_from_the_recorded_start_after_partitions_were_added(
    spark, embedded_kafka, tmp_path
):
    """startingOffsets=latest is recomputed on a restart, and partitions added in between made the
    replay of batch 0 fail with "... are gone". The start batch recorded the start instead."""
    topic = embedded_kafka.new_topic("replay0")
    embedded_kafka.produce_values(topic, 0, 3)  # before the query starts: never read (latest)
    checkpoint = str(tmp_path / "ck")
    df = _stream(spark, embedded_kafka, subscribe=topic)
    failure = _run_collect(
        spark, df, checkpoint, _Batches(str(tmp_path / "failed")), {"availableNow": True}, failBatch="0"
    )
    assert failure is not None and "injected failure of batch 0" in str(failure)
    recorded = _source_offsets(checkpoint, 0)
    assert recorded == {topic: {"0": 3, "1": 0, "2": 0, "3": 0}}
    assert not os.path.exists(os.path.join(checkpoint, "commits", "0"))

    embedded_kafka.produce_values(topic, 0, 2, start=3)
    _add_partitions(embedded_kafka, topic, 5)
    embedded_kafka.produce_values(topic, 4, 2, start=5)
    batches = _Batches(str(tmp_path / "rows"))
    _drain_after_replay(spark, df, checkpoint, batches)
    assert batches.sizes[0] == 0  # the replayed start batch read nothing
    assert sorted(batches.rows) == [(0, 3, "v3"), (0, 4, "v4"), (4, 0, "v5"), (4, 1, "v6")]


def test_failed_first_batch_that_read_data_replays_it_once(spark, embedded_kafka, tmp_path):
    """A first batch that carried data (Trigger.Once, or a checkpoint written before start
    batches) replays from the recomputed start where that start is below its end."""
    topic = embedded_kafka.new_topic("replay-once")
    embedded_kafka.produce_values(topic, 1, 3)
    checkpoint = str(tmp_path / "ck")
    df = _stream(spark, embedded_kafka, subscribe=topic, startingOffsets="earliest")
    failure = _run_collect(spark, df, checkpoint, _Batches(str(tmp_path / "failed")), {"once": True}, failBatch="0")
    assert failure is not None and "injected failure of batch 0" in str(failure)
    assert _source_offsets(checkpoint, 0) == {topic: {"0": 0, "1": 3, "2": 0, "3": 0}}

    _add_partitions(embedded_kafka, topic, 5)
    embedded_kafka.produce_values(topic, 4, 1, start=3)
    batches = _Batches(str(tmp_path / "rows"))
    _drain_after_replay(spark, df, checkpoint, batches)
    assert batches.sizes[0] == 3
    assert sorted(batches.rows) == [(1, 0, "v0"), (1, 1, "v1"), (1, 2, "v2"), (4, 0, "v3")]


@pytest.mark.skipif(
    not ADMISSION_CONTROL,
    reason="PySpark before 4.2 runs Trigger.AvailableNow of a Python source as one batch, without the "
    "source's SupportsTriggerAvailableNow (no planned end to verify)",
)
@pytest.mark.parametrize("fail_on_data_loss", ["true", "false"])
def test_available_now_fails_when_the_topic_is_recreated_under_it(spark, embedded_kafka, tmp_path, fail_on_data_loss):
    topic = embedded_kafka.new_topic("recreate")
    embedded_kafka.produce_values(topic, 0, 12)
    df = _stream(
        spark,
        embedded_kafka,
        subscribe=topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="4",
        failOnDataLoss=fail_on_data_loss,
    )
    batches = _Batches(str(tmp_path / "rows"))
    failure = _run_collect(
        spark,
        df,
        str(tmp_path / "ck"),
        batches,
        {"availableNow": True},
        recreateAtBatch="1",
        recreateTopic=topic,
        bootstrap=embedded_kafka.bootstrap_servers,
    )
    assert failure is not None
    assert (
        f"Trigger.AvailableNow: {topic}-0 now ends at offset 2, before the planned end 8: the topic was "
        "deleted and recreated while the query ran"
    ) in str(failure)
    assert batches.sizes == {0: 0, 1: 4}  # nothing of the recreated topic was read


def _planner(cluster, **options) -> PylogStreamReader:
    opts = parse_source_options({"kafka.bootstrap.servers": cluster.bootstrap_servers, **options})
    return PylogStreamReader(opts, cluster.bootstrap_servers)


def test_available_now_fails_when_a_planned_topic_is_deleted(embedded_kafka):
    topic = embedded_kafka.new_topic("vanish")
    embedded_kafka.produce_values(topic, 3, 6)
    reader = _planner(
        embedded_kafka, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="2", failOnDataLoss="false"
    )
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    assert reader.latestOffset(start, reader.getDefaultReadLimit()) == start
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    embedded_kafka.broker.delete_topic(topic)
    try:
        with pytest.raises(
            AvailableNowTopicChangedError,
            match=rf"planned partitions {topic}-0, {topic}-1, "
            rf"{topic}-2, {topic}-3 are gone",
        ):
            reader.partitions(start, end)
    finally:
        reader.stop()


def test_checkpoint_of_a_query_on_other_topics_is_named_as_such(spark, embedded_kafka, tmp_path):
    first, second = embedded_kafka.new_topic("first"), embedded_kafka.new_topic("second")
    embedded_kafka.produce_values(first, 0, 2)
    embedded_kafka.produce_values(second, 0, 2)
    checkpoint = str(tmp_path / "ck")
    batches = _Batches(str(tmp_path / "rows"))
    df = _stream(spark, embedded_kafka, subscribe=first, startingOffsets="earliest")
    assert _run_collect(spark, df, checkpoint, batches, {"availableNow": True}) is None
    assert len(batches.rows) == 2
    df = _stream(spark, embedded_kafka, subscribe=second, startingOffsets="earliest")
    failure = _run_collect(spark, df, checkpoint, _Batches(str(tmp_path / "rows2")), {"availableNow": True})
    assert failure is not None
    message = str(failure)
    assert (
        f"The query's checkpoint holds offsets of topic(s) {first} only, which this query does not read "
        f"(subscribe={second}): the checkpoint belongs to a query reading other topics. Give this query a "
        "new checkpointLocation"
    ) in message
    assert "are gone" not in message and "failOnDataLoss" not in message


def test_topics_dropped_from_the_subscription_are_named_with_the_way_to_go_on(embedded_kafka):
    kept, dropped = embedded_kafka.new_topic("kept"), embedded_kafka.new_topic("dropped")
    reader = _planner(embedded_kafka, subscribe=kept)
    start = {kept: {str(p): 0 for p in range(4)}, dropped: {"0": 5}}
    end = {kept: {str(p): 0 for p in range(4)}}
    try:
        with pytest.raises(
            CheckpointTopicsError,
            match=rf"holds offsets of {dropped}-0, which this query no "
            rf"longer reads \(subscribe={kept}\).*set failOnDataLoss=false",
        ):
            reader.partitions(start, end)
        lenient = _planner(embedded_kafka, subscribe=kept, failOnDataLoss="false")
        assert [p.ranges for p in lenient.partitions(start, end)] == [p.ranges for p in lenient.partitions(end, end)]
        lenient.stop()
    finally:
        reader.stop()


def test_deleted_subscribed_partitions_are_still_data_loss(embedded_kafka):
    topic = embedded_kafka.new_topic("deleted")
    reader = _planner(embedded_kafka, subscribe=topic)
    try:
        with pytest.raises(DataLossError, match=rf"{topic}-7 are gone \(topic or partitions deleted\)"):
            reader.partitions({topic: {"0": 0, "7": 3}}, {topic: {"0": 0}})
    finally:
        reader.stop()
