"""Streaming into the pylog-files sink: restarts, replays, new queries, failed batches.

The input is a small Python streaming source shaped like Spark's Kafka source (columns topic,
partition, offset, value; offsets ``{"topic": {"partition": next}}``), so the sink's offset
bookkeeping is exercised exactly as with the pylog source, with deterministic data: partition p
holds records 0..endOffset-1, value "<topic>-<p>-<offset>". Like the pylog source, a new query's
first batch is an empty start batch (kafka_spark.read.stream), unless ``firstBatchCarriesData``;
and, like it without admission control (PySpark before 4.2), a new query's first batch there
reads data and records its start in its end offsets (kafka_spark.offsets.START_KEY).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow.fs import LocalFileSystem
from pyspark import cloudpickle
from pyspark.errors import StreamingQueryException
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from kafka_spark.files.metadata_log import MetadataLog, SinkFileStatus
from kafka_spark.files.table import committed_source_offsets, vacuum
from kafka_spark.files.writers import FileSinkCommitMessage, FileSinkOptions, FileStreamWriter
from kafka_spark.offsets import START_KEY
from kafka_spark.spark_api import ADMISSION_CONTROL
from tests.support.waiting import wait_until

# Spark ships the source class to Python workers, which cannot import this test module (nor the
# suite's helpers it calls there).
cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(sys.modules["tests.support.waiting"])

TOPIC = "orders"


class KafkaShapedReader(DataSourceStreamReader):
    def __init__(self, options: dict) -> None:
        self.partitions_n = int(options.get("partitions", "2"))
        self.end = int(options.get("endOffset", "20"))
        self.step = int(options.get("step", "10"))
        self.starting = options.get("startingOffsets", "earliest")
        self.fail_on = options.get("failOn")  # "<partition>:<offset>": raise when reading it
        self.fail_after = options.get("failAfterFileMatching")  # a glob: raise once a file matches it
        self.start_batch = options.get("firstBatchCarriesData", "false") != "true"
        self.planned = False
        self.next_start: dict | None = None  # without admission control, as pylog's reader

    def initialOffset(self) -> dict:
        if self.starting != "earliest":
            return json.loads(self.starting)
        return {TOPIC: {str(p): 0 for p in range(self.partitions_n)}}

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:  # noqa: ANN001 (ReadLimit)
        # PySpark before 4.2 passes no start: keep it, and let a new query's first batch read and
        # record where it started, as pylog's reader does (kafka_spark.read.stream).
        unaided = start is None
        new_query = unaided and self.next_start is None
        if start is None:
            start = self.next_start or self.initialOffset()
        first, self.planned = not self.planned, True
        if first and self.start_batch and start == self.initialOffset() and not unaided:
            return start
        end: dict = {TOPIC: {p: min(o + self.step, max(self.end, o)) for p, o in start[TOPIC].items()}}
        if new_query and self.start_batch:  # firstBatchCarriesData: nothing recorded
            end[START_KEY] = start
        elif end[TOPIC] == start[TOPIC]:
            end = start
        self.next_start = end
        return end

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        self.next_start = end
        if START_KEY in end and start != end:
            start = end[START_KEY]
        return [
            InputPartition((p, start[TOPIC][p], end[TOPIC][p], self.fail_on, self.fail_after))
            for p in sorted(end[TOPIC], key=int)
        ]

    def read(self, partition: InputPartition):
        p, low, high, fail_on, fail_after = partition.value
        if fail_on is not None:
            fail_p, fail_offset = fail_on.split(":")
            if fail_p == p and low <= int(fail_offset) < high:
                if fail_after is not None:  # the other task's file first, so abort() has one to delete
                    wait_until(lambda: glob.glob(fail_after), f"a file matching {fail_after}")
                raise RuntimeError(f"injected failure reading {TOPIC}-{p} at {fail_offset}")
        offsets = list(range(low, high))
        if not offsets:
            return
        yield pa.record_batch(
            {
                "topic": pa.array([TOPIC] * len(offsets)),
                "partition": pa.array([int(p)] * len(offsets), pa.int32()),
                "offset": pa.array(offsets, pa.int64()),
                "value": pa.array([f"{TOPIC}-{p}-{o}" for o in offsets]),
            }
        )


class KafkaShapedSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pylog-test-kafka-shaped"

    def schema(self) -> str:
        return "topic string, partition int, offset long, value string"

    def streamReader(self, schema):  # noqa: ANN001
        return KafkaShapedReader(self.options)


@pytest.fixture(scope="module")
def kspark(spark):
    spark.dataSource.register(KafkaShapedSource)
    return spark


def run(spark, out: str, checkpoint: str, **source_options: str) -> Exception | None:
    """Run a query over everything the source has; return its failure, if any."""
    reader = spark.readStream.format("pylog-test-kafka-shaped")
    for key, value in source_options.items():
        reader = reader.option(key, value)
    query = reader.load().writeStream.format("pylog-files").option("checkpointLocation", checkpoint).start(out)
    try:
        query.processAllAvailable()
        return None
    except StreamingQueryException as exc:
        return exc
    finally:
        query.stop()


def visible(spark, out: str) -> list[tuple[int, int]]:
    """(partition, offset) of every row stock Spark reads from the output, sorted."""
    return sorted((r.partition, r.offset) for r in spark.read.parquet(out).select("partition", "offset").collect())


def part_files(out: str) -> set[str]:
    return {n for n in os.listdir(out) if n.startswith("part-")}


def expected(end: int, partitions: int = 2) -> list[tuple[int, int]]:
    return sorted((p, o) for p in range(partitions) for o in range(end))


def test_restart_from_checkpoint_writes_each_record_once(kspark, tmp_path):
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    assert run(kspark, out, ck, endOffset="10") is None
    assert run(kspark, out, ck, endOffset="20") is None
    assert visible(kspark, out) == expected(20)
    assert committed_source_offsets(out) == {TOPIC: {"0": 20, "1": 20}}
    # Each Spark batch got one manifest (the empty start batch too), ids contiguous; the sidecar
    # names the batch it came from.
    assert manifest_ids(out) == list(range(2 + START))
    if START:
        assert MetadataLog(LocalFileSystem(), out).get(0) == []
    record = json.loads(open(os.path.join(out, "_sink", "offsets", str(1 + START))).read())
    assert record["batchId"] == 1 + START and record["offsets"] == {TOPIC: {"0": 20, "1": 20}}


def test_named_query_writes_each_record_once(kspark, tmp_path):
    """DataStreamWriter.queryName(...) reaches the sink as an option, queryName, which the sink
    takes as Spark's (an unknown option would fail the query)."""
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    query = (
        kspark.readStream.format("pylog-test-kafka-shaped")
        .option("endOffset", "10")
        .load()
        .writeStream.format("pylog-files")
        .queryName("named_file_sink")
        .option("checkpointLocation", ck)
        .start(out)
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert visible(kspark, out) == expected(10)


#: Manifests of a new query's empty start batch: one with admission control (PySpark 4.2+), none
#: without it, where the first batch reads data.
START = 1 if ADMISSION_CONTROL else 0


def manifest_ids(out: str) -> list[int]:
    return MetadataLog(LocalFileSystem(), out).batch_ids()


def test_replayed_batch_writes_nothing(kspark, tmp_path):
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    assert run(kspark, out, ck, endOffset="20") is None
    files_before = part_files(out)
    directory_mtime = os.stat(out).st_mtime_ns  # changes if any file is created or deleted in out
    last = max(int(n) for n in os.listdir(os.path.join(ck, "commits")) if n.isdigit())
    # Forget that Spark committed the last batch: on restart Spark replays it with the same offsets.
    os.remove(os.path.join(ck, "commits", str(last)))
    crc = os.path.join(ck, "commits", f".{last}.crc")
    if os.path.exists(crc):
        os.remove(crc)
    assert run(kspark, out, ck, endOffset="20") is None
    assert os.path.exists(os.path.join(ck, "commits", str(last))), "Spark did not replay the batch"
    assert part_files(out) == files_before
    assert os.stat(out).st_mtime_ns == directory_mtime, "replayed tasks wrote (then dropped) files"
    assert manifest_ids(out) == list(range(last + 1))
    assert visible(kspark, out) == expected(20)


def test_commit_of_replay_deletes_the_replays_files(kspark, tmp_path):
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    assert run(kspark, out, ck, endOffset="10") is None
    # A replay whose tasks did not take the short-cut (e.g. they started before the manifest
    # appeared): its commit must keep the committed batch and drop the new file.
    stray = os.path.join(out, "part-00000-0-replay.parquet")
    pq.write_table(
        pa.table(
            {
                "topic": [TOPIC],
                "partition": pa.array([0], pa.int32()),
                "offset": pa.array([5], pa.int64()),
                "value": ["dup"],
            }
        ),
        stray,
    )
    query_id = json.load(open(os.path.join(ck, "metadata")))["id"]
    status = SinkFileStatus(path="file://" + stray, size=os.path.getsize(stray), modification_time=0)
    writer = FileStreamWriter(
        FileSinkOptions.parse({"path": out, "checkpointLocation": ck}, streaming=True), kspark_schema()
    )
    data_batch = START  # the batch that wrote the records
    writer.commit([FileSinkCommitMessage(query_id, data_batch, 0, 1, files=[status])], data_batch)
    assert not os.path.exists(stray)
    assert manifest_ids(out) == list(range(1 + START))
    assert visible(kspark, out) == expected(10)


def kspark_schema():
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("value", StringType()),
        ]
    )


def test_new_query_overlapping_the_output_fails_and_names_starting_offsets(kspark, tmp_path):
    out = str(tmp_path / "out")
    assert run(kspark, out, str(tmp_path / "ck1"), endOffset="20") is None
    failure = run(kspark, out, str(tmp_path / "ck2"), endOffset="30")  # starts from earliest again
    assert failure is not None
    assert (
        "orders-0: the output holds offsets up to 19; this query starts at 0: offsets 0..19 "
        "(20 records) would be written twice"
    ) in str(failure)
    assert """.option("startingOffsets", '{"orders":{"0":20,"1":20}}')""" in str(failure)
    assert visible(kspark, out) == expected(20)
    assert manifest_ids(out) == list(range(2 + START))  # the refused query committed nothing (not even a start batch)


def test_new_query_whose_first_batch_read_data_from_an_unrecorded_start_is_refused(kspark, tmp_path):
    out = str(tmp_path / "out")
    assert run(kspark, out, str(tmp_path / "ck1"), endOffset="10") is None
    # A source without a start batch (as pylog under Trigger.Once): batch 0 carries rows, and
    # nothing says where it started, even though it starts exactly where the output left off.
    failure = run(
        kspark,
        out,
        str(tmp_path / "ck2"),
        endOffset="20",
        firstBatchCarriesData="true",
        startingOffsets=json.dumps(committed_source_offsets(out)),
    )
    assert failure is not None
    assert "wrote rows of topic(s) orders, but where it started reading them is recorded nowhere" in str(failure)
    assert """startingOffsets", '{"orders":{"0":10,"1":10}}')""" in str(failure)
    assert visible(kspark, out) == expected(10)


def test_new_query_continuing_from_committed_offsets_has_no_gap_or_duplicate(kspark, tmp_path):
    out = str(tmp_path / "out")
    assert run(kspark, out, str(tmp_path / "ck1"), endOffset="20") is None
    shutil.rmtree(tmp_path / "ck1")  # checkpoint lost
    starting = json.dumps(committed_source_offsets(out))
    assert run(kspark, out, str(tmp_path / "ck2"), endOffset="30", startingOffsets=starting) is None
    assert visible(kspark, out) == expected(30)
    assert committed_source_offsets(out) == {TOPIC: {"0": 30, "1": 30}}
    # The new query's batch ids restart at 0, its manifests continue after the old ones.
    assert manifest_ids(out) == list(range(3 + 2 * START))


def test_new_query_leaving_a_gap_fails(kspark, tmp_path):
    out = str(tmp_path / "out")
    assert run(kspark, out, str(tmp_path / "ck1"), endOffset="10") is None
    failure = run(
        kspark, out, str(tmp_path / "ck2"), endOffset="20", startingOffsets=json.dumps({TOPIC: {"0": 10, "1": 13}})
    )
    assert failure is not None
    assert (
        "orders-1: the output continues at offset 10; this query starts at 13: offsets 10..12 (3) would be skipped"
    ) in str(failure)
    assert """.option("startingOffsets", '{"orders":{"0":10,"1":10}}')""" in str(failure)
    assert visible(kspark, out) == expected(10)


def test_failed_batch_leaves_nothing_visible(kspark, tmp_path):
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    assert run(kspark, out, ck, endOffset="10") is None
    committed_files = part_files(out)
    # The failing task waits for the healthy task's part file of that batch, so that abort() has it to delete.
    failure = run(kspark, out, ck, endOffset="20", failOn="1:12", failAfterFileMatching=f"{out}/part-00000-1-*")
    assert failure is not None and "injected failure" in str(failure)
    assert visible(kspark, out) == expected(10)
    # abort() removed the file the healthy task (partition 0) wrote for the failed batch.
    assert not any(n.startswith("part-00000-1-") for n in part_files(out) - committed_files)
    vacuum(out, older_than_seconds=0)
    assert part_files(out) == committed_files
    # The query recovers from its checkpoint once the input is readable.
    assert run(kspark, out, ck, endOffset="20") is None
    assert visible(kspark, out) == expected(20)


def test_rate_source_restart_from_checkpoint_has_no_duplicates_or_gaps(spark, tmp_path):
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")

    def run_batches(count: int) -> None:
        query = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", 50)
            .option("numPartitions", 2)
            .load()
            .writeStream.format("pylog-files")
            .option("checkpointLocation", ck)
            .trigger(processingTime="100 milliseconds")
            .start(out)
        )
        wait_until(lambda: len(query.recentProgress) >= count, f"{count} batches of the query", interval=0.2)
        query.stop()  # may interrupt a running batch: it must leave nothing visible

    run_batches(2)
    run_batches(2)
    values = sorted(r.value for r in spark.read.parquet(out).select("value").collect())
    assert len(values) >= 150
    assert values == list(range(len(values)))


def test_old_query_resuming_after_another_query_wrote_fails(kspark, tmp_path):
    out, old_checkpoint = str(tmp_path / "out"), str(tmp_path / "ck_old")
    assert run(kspark, out, old_checkpoint, endOffset="10") is None
    # A second query continues the output correctly...
    assert (
        run(
            kspark,
            out,
            str(tmp_path / "ck_new"),
            endOffset="20",
            startingOffsets=json.dumps(committed_source_offsets(out)),
        )
        is None
    )
    # ...then the old one comes back: its next batch starts at 10, the output is at 20.
    failure = run(kspark, out, old_checkpoint, endOffset="30")
    assert failure is not None
    assert "orders-0: the output holds offsets up to 19; this query starts at 10" in str(failure)
    assert visible(kspark, out) == expected(20)
