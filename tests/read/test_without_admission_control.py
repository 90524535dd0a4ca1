"""The stream reader without admission control: PySpark before 4.2 calls ``latestOffset()`` with
no arguments, and pylog keeps the batch start and applies the read limits itself
(kafka_spark.read.stream, "Without admission control").

The planner tests drive the reader as those PySparks do (the call sequences were recorded from
PySpark 4.0.5 and 4.1.4), so they run on every PySpark; the Spark tests run the installed
PySpark, which takes the path its API has.
"""

from __future__ import annotations

import uuid

import pytest

from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.files.continuity import batch_start
from kafka_spark.offsets import START_KEY, positions_from_dict
from kafka_spark.options import parse_source_options
from kafka_spark.read.stream import PylogStreamReader
from kafka_spark.spark_api import ADMISSION_CONTROL
from tests.support.source_fixtures import embedded_kafka, kafka_cluster, mock_kafka  # noqa: F401


def _planner(cluster, **options) -> PylogStreamReader:
    opts = parse_source_options({"kafka.bootstrap.servers": cluster.bootstrap_servers, **options})
    return PylogStreamReader(opts, cluster.bootstrap_servers)


def _ranges(partitions):
    return sorted((r.topic_partition.partition, r.from_offset, r.until_offset) for p in partitions for r in p.ranges)


def test_new_query_reads_in_its_first_batch_and_records_where_it_started(kafka_cluster):
    topic = kafka_cluster.new_topic("first")
    kafka_cluster.produce_values(topic, 0, 10)
    kafka_cluster.produce_values(topic, 1, 10)
    reader = _planner(kafka_cluster, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="5")
    try:
        # PySpark 4.0/4.1 on a new query: latestOffset() first, then initialOffset() and partitions.
        end = reader.latestOffset()
        assert end[START_KEY] == reader.initialOffset()
        # 5 spread over backlogs 10 and 10: 2 + 2, as Spark's rateLimit.
        assert positions_from_dict(end)[0] == {
            TP(topic, 0): 2,
            TP(topic, 1): 2,
            TP(topic, 2): 0,
            TP(topic, 3): 0,
        }
        assert _ranges(reader.partitions(reader.initialOffset(), end)) == [(0, 0, 2), (1, 0, 2)]
        # The next trigger continues from what Spark was handed, capped again.
        second = reader.latestOffset()
        assert START_KEY not in second
        assert positions_from_dict(second)[0][TP(topic, 0)] == 4
        assert _ranges(reader.partitions(end, second))[:2] == [(0, 2, 4), (1, 2, 4)]
    finally:
        reader.stop()


def test_no_new_data_returns_the_start_unchanged_so_spark_plans_no_batch(kafka_cluster):
    topic = kafka_cluster.new_topic("idle")
    kafka_cluster.produce_values(topic, 0, 3)
    reader = _planner(kafka_cluster, subscribe=topic, startingOffsets="earliest")
    try:
        end = reader.latestOffset()
        reader.partitions(reader.initialOffset(), end)
        # Spark compares offset JSON: the same dict (START_KEY included) means no new batch.
        assert reader.latestOffset() == end
        kafka_cluster.produce_values(topic, 0, 1, start=3)
        assert positions_from_dict(reader.latestOffset())[0][TP(topic, 0)] == 4
    finally:
        reader.stop()


def test_restart_continues_from_the_offsets_spark_hands_back_and_keeps_the_limit(kafka_cluster):
    topic = kafka_cluster.new_topic("restart")
    kafka_cluster.produce_values(topic, 0, 20)
    first_run = _planner(kafka_cluster, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="6")
    end = first_run.latestOffset()
    first_run.partitions(first_run.initialOffset(), end)
    checkpointed = first_run.latestOffset()  # batch 1, written to offsets/1 by Spark
    first_run.stop()
    assert positions_from_dict(checkpointed)[0][TP(topic, 0)] == 12
    # A restart: Spark calls partitions(end, end) of the newest checkpointed batch first
    # (setLatestSeenOffset), replays it if uncommitted, then asks latestOffset().
    restarted = _planner(kafka_cluster, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="6")
    try:
        restarted.partitions(checkpointed, checkpointed)
        assert _ranges(restarted.partitions(end, checkpointed))[0] == (0, 6, 12)
        nxt = restarted.latestOffset()
        assert positions_from_dict(nxt)[0][TP(topic, 0)] == 18  # from 12, not from the initial 0
    finally:
        restarted.stop()


def test_replayed_first_batch_reads_its_recorded_range_not_a_recomputed_start(kafka_cluster):
    topic = kafka_cluster.new_topic("replay0")
    kafka_cluster.produce_values(topic, 0, 12)
    others = {"1": 0, "2": 0, "3": 0}
    # Batch 0 as a first run checkpointed it: [2, 6) of partition 0, its start recorded.
    end0 = {topic: {"0": 6, **others}, START_KEY: {topic: {"0": 2, **others}}}
    restarted = _planner(kafka_cluster, subscribe=topic)  # startingOffsets=latest: 12 now
    try:
        restarted.partitions(end0, end0)  # setLatestSeenOffset
        recomputed = restarted.initialOffset()
        assert positions_from_dict(recomputed)[0][TP(topic, 0)] == 12
        assert _ranges(restarted.partitions(recomputed, end0))[0] == (0, 2, 6)
        # and the next batch continues from batch 0's end
        assert positions_from_dict(restarted.latestOffset())[0][TP(topic, 0)] == 12
        assert _ranges(restarted.partitions(end0, restarted.latestOffset()))[0] == (0, 6, 12)
    finally:
        restarted.stop()


def test_min_offsets_per_trigger_waits_from_the_kept_start(kafka_cluster):
    topic = kafka_cluster.new_topic("min")
    reader = _planner(kafka_cluster, subscribe=topic, minOffsetsPerTrigger="5", maxTriggerDelay="1h")
    try:
        end = reader.latestOffset()  # Spark's first trigger never waits
        reader.partitions(reader.initialOffset(), end)
        kafka_cluster.produce_values(topic, 0, 3)
        assert reader.latestOffset() == end  # 3 < 5: wait, same JSON
        kafka_cluster.produce_values(topic, 2, 2)
        fired = positions_from_dict(reader.latestOffset())[0]
        assert fired[TP(topic, 0)] == 3 and fired[TP(topic, 2)] == 2
    finally:
        reader.stop()


def test_file_sink_takes_a_recorded_first_batch_start_as_exact(tmp_path):
    import pyarrow.fs as pafs

    from kafka_spark.files.sidecar import Checkpoint

    raw = '{"t":{"0":9},"@firstBatchStart":{"t":{"0":4}}}'
    start = batch_start(Checkpoint(pafs.LocalFileSystem(), str(tmp_path), str(tmp_path)), 0, [raw], wrote_rows=True)
    assert start.offsets == {"t": {"0": 4}} and not start.unknown_topics


def _stream_to_memory(spark, cluster, tmp_path, trigger=None, **options):
    reader = spark.readStream.format("pylog").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
    for k, v in options.items():
        reader = reader.option(k, v)
    name = f"q_{uuid.uuid4().hex[:8]}"
    writer = reader.load().writeStream.format("memory").queryName(name)
    writer = writer.option("checkpointLocation", str(tmp_path / name))
    if trigger is not None:
        writer = writer.trigger(**trigger)
    return name, writer.start()


def test_max_offsets_per_trigger_bounds_every_batch_on_this_pyspark(spark, kafka_cluster, tmp_path):
    topic = kafka_cluster.new_topic("bounded")
    kafka_cluster.produce_values(topic, 0, 10)
    kafka_cluster.produce_values(topic, 1, 10)
    name, query = _stream_to_memory(
        spark, kafka_cluster, tmp_path, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="5"
    )
    try:
        query.processAllAvailable()
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
        assert sizes == [4, 4, 4, 4, 4]
        assert spark.table(name).count() == 20
    finally:
        query.stop()


def test_available_now_of_a_new_query_reads_what_is_there(spark, kafka_cluster, tmp_path):
    """With admission control an empty start batch comes first; without it (a single batch) the
    first batch reads: either way the run reads everything present."""
    topic = kafka_cluster.new_topic("now")
    kafka_cluster.produce_values(topic, 0, 7)
    kafka_cluster.produce_values(topic, 3, 2)
    name, query = _stream_to_memory(
        spark, kafka_cluster, tmp_path, trigger={"availableNow": True}, subscribe=topic, startingOffsets="earliest"
    )
    query.awaitTermination(180)
    assert query.exception() is None
    assert spark.table(name).count() == 9


@pytest.mark.skipif(ADMISSION_CONTROL, reason="this PySpark has admission control: Spark passes the read limit")
def test_unaided_limit_is_announced_with_the_version_and_the_alternative(kafka_cluster, caplog):
    topic = kafka_cluster.new_topic("warn")
    reader = _planner(kafka_cluster, subscribe=topic, maxOffsetsPerTrigger="5")
    try:
        with caplog.at_level("WARNING", logger="kafka_spark"):
            reader.latestOffset()
        text = caplog.text
        assert "maxOffsetsPerTrigger=5" in text and "PySpark 4.2" in text and "Trigger.AvailableNow" in text
    finally:
        reader.stop()
