"""``_spark_metadata`` written by pylog is Spark's format: byte-compatible and honoured by stock readers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow.fs import LocalFileSystem

from kafka_spark.files.metadata_log import MetadataLog, SinkFileStatus, deserialize, serialize
from tests.support.paths import GOLDEN

SPARK_METADATA = GOLDEN / "spark_metadata"
KEYS = ["path", "size", "isDir", "modificationTime", "blockReplication", "blockSize", "action"]


def test_manifest_round_trips_spark_written_bytes_exactly():
    # Written by Spark 4.3's FileStreamSink (writeStream.format("parquet")) on this machine.
    golden = (SPARK_METADATA / "spark-4.3-written-1").read_bytes()
    entries = deserialize(golden.decode("utf-8"), "golden")
    assert [e.size for e in entries] == [1288, 1282]
    assert serialize(entries) == golden


def test_compact_file_golden(tmp_path):
    log = MetadataLog(LocalFileSystem(), str(tmp_path))
    for batch in range(10):
        assert log.add(
            batch, [SinkFileStatus(f"file:///out/part-{batch}.parquet", 100 + batch, 1_700_000_000_000 + batch)]
        )
    assert sorted(os.listdir(tmp_path / "_spark_metadata")) == [str(i) for i in range(9)] + ["9.compact"]
    assert (tmp_path / "_spark_metadata" / "9.compact").read_bytes() == (SPARK_METADATA / "9.compact").read_bytes()


def test_existing_manifest_is_never_replaced(tmp_path):
    log = MetadataLog(LocalFileSystem(), str(tmp_path))
    first = [SinkFileStatus("file:///out/a.parquet", 1, 1)]
    assert log.add(0, first)
    assert not log.add(0, [SinkFileStatus("file:///out/b.parquet", 1, 1)])
    assert log.get(0) == first
    assert [n for n in os.listdir(tmp_path / "_spark_metadata") if n.endswith(".tmp")] == []


def _write_batch_file(out: Path, batch: int) -> SinkFileStatus:
    path = out / f"part-00000-{batch}-fixed.parquet"
    pq.write_table(pa.table({"batch": pa.array([batch, batch], pa.int64())}), path)
    stat = path.stat()
    return SinkFileStatus("file://" + str(path), stat.st_size, stat.st_mtime_ns // 1_000_000)


def test_stock_spark_reads_exactly_the_logged_files_past_compaction(spark, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    log = MetadataLog(LocalFileSystem(), str(out))
    for batch in range(12):
        assert log.add(batch, [_write_batch_file(out, batch)])
    _write_batch_file(out, 99)  # an orphan: on disk, never logged
    assert (out / "_spark_metadata" / "9.compact").exists()

    batches = sorted(r.batch for r in spark.read.parquet(str(out)).collect())
    assert batches == sorted(list(range(12)) * 2)

    query = (
        spark.readStream.schema("batch long")
        .format("parquet")
        .load(str(out))
        .writeStream.format("memory")
        .queryName("pylog_log_stream")
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    streamed = sorted(r.batch for r in spark.sql("select batch from pylog_log_stream").collect())
    assert streamed == batches


def test_spark_written_log_has_the_structure_pylog_writes(spark, tmp_path):
    src, out, ck = tmp_path / "in", tmp_path / "spark_out", tmp_path / "ck"
    src.mkdir()
    (src / "a.json").write_text('{"n": 1}\n{"n": 2}\n')
    query = (
        spark.readStream.schema("n long")
        .json(str(src))
        .writeStream.format("parquet")
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start(str(out))
    )
    query.awaitTermination(120)
    spark_text = (out / "_spark_metadata" / "0").read_text()
    ours = MetadataLog(LocalFileSystem(), str(tmp_path / "ours"))
    ours.add(0, [_write_batch_file(tmp_path, 0)])
    our_text = (tmp_path / "ours" / "_spark_metadata" / "0").read_text()

    for text in (spark_text, our_text):
        lines = text.split("\n")
        assert lines[0] == "v1" and not text.endswith("\n")
        for line in lines[1:]:
            raw = json.loads(line)
            assert list(raw) == KEYS
            assert raw["path"].startswith("file:///") and raw["isDir"] is False and raw["action"] == "add"
            assert (raw["blockReplication"], raw["blockSize"]) == (1, 33554432)
            assert isinstance(raw["size"], int) and isinstance(raw["modificationTime"], int)
    spark_entries = deserialize(spark_text, "spark")
    assert [os.path.getsize(e.path[len("file://") :]) for e in spark_entries] == [e.size for e in spark_entries]
