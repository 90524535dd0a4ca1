"""Batch writes, formats, option errors and vacuum of the pylog-files sink."""

from __future__ import annotations

import base64
import os
import re
import time

import fastavro
import pytest
from pyarrow.fs import LocalFileSystem
from pyspark.sql import functions as F

from kafka_spark.files.metadata_log import MetadataLog
from kafka_spark.files.table import committed_source_offsets, vacuum


def sample(spark, n: int = 6):
    return spark.range(n).select(
        F.col("id"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("name"),
        F.encode(F.col("id").cast("string"), "utf-8").alias("payload"),
        F.to_timestamp(F.lit("2026-01-02 03:04:05")).alias("ts"),
        F.create_map(F.lit("k"), F.col("id")).alias("tags"),
    )


def part_files(root: str) -> list[str]:
    return sorted(os.path.join(d, n) for d, _, names in os.walk(root) for n in names if n.startswith("part-"))


def test_batch_append_commits_one_manifest_per_job(spark, tmp_path):
    out = str(tmp_path / "out")
    sample(spark).write.format("pylog-files").mode("append").save(out)
    sample(spark).write.format("pylog-files").mode("append").save(out)
    assert MetadataLog(LocalFileSystem(), out).batch_ids() == [0, 1]
    assert sorted(r.id for r in spark.read.parquet(out).collect()) == sorted(list(range(6)) * 2)
    assert committed_source_offsets(out) is None  # batch jobs record no source offsets


def test_overwrite_mode_is_rejected(spark, tmp_path):
    with pytest.raises(Exception, match="does not support mode\\('overwrite'\\)"):
        sample(spark).write.format("pylog-files").mode("overwrite").save(str(tmp_path / "out"))


def test_unknown_option_fails_naming_it_without_its_value(spark, tmp_path):
    with pytest.raises(Exception, match="unknown option 'kafka.sasl.password'") as info:
        (
            sample(spark)
            .write.format("pylog-files")
            .option("kafka.sasl.password", "hunter2")
            .mode("append")
            .save(str(tmp_path / "out"))
        )
    assert "hunter2" not in str(info.value)


def test_a_mistyped_option_or_value_names_what_was_meant(spark, tmp_path):
    with pytest.raises(
        Exception,
        match=re.escape(
            "unknown option 'checkpointlocaton' for format 'pylog-files'. Did you mean checkpointLocation?"
        ),
    ):
        (
            sample(spark)
            .write.format("pylog-files")
            .option("checkpointLocaton", str(tmp_path / "c"))
            .mode("append")
            .save(str(tmp_path / "out"))
        )
    with pytest.raises(
        Exception,
        match=re.escape(
            "option 'fileFormat' must be 'parquet', 'avro' or 'json', got 'parket'. Did you mean 'parquet'?"
        ),
    ):
        sample(spark).write.format("pylog-files").option("fileFormat", "parket").mode("append").save(
            str(tmp_path / "o")
        )


def test_unwritable_path_fails_naming_it(spark, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(Exception, match=f"option 'path': cannot write to {blocker}/out"):
        sample(spark).write.format("pylog-files").mode("append").save(str(blocker / "out"))


def test_directory_with_foreign_files_is_refused(spark, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "data.csv").write_text("a,b\n")
    with pytest.raises(Exception, match="already holds files the sink did not write"):
        sample(spark).write.format("pylog-files").mode("append").save(str(out))


def test_unsupported_column_fails_naming_it(spark, tmp_path):
    frame = spark.range(1).select(F.create_map(F.col("id"), F.lit("x")).alias("by_number"))
    with pytest.raises(Exception, match="column 'by_number'.*fileFormat=avro.*string keys"):
        frame.write.format("pylog-files").option("fileFormat", "avro").mode("append").save(str(tmp_path / "o"))
    interval = spark.range(1).select(F.expr("INTERVAL '1' DAY").alias("wait"))
    with pytest.raises(Exception, match="column 'wait'"):
        interval.write.format("pylog-files").mode("append").save(str(tmp_path / "p"))


def test_streaming_with_session_level_checkpoint_only_fails_at_start(spark, tmp_path):
    # Spark resolves the session default itself, but a Python writer only sees the query's options.
    spark.conf.set("spark.sql.streaming.checkpointLocation", str(tmp_path / "checkpoints"))
    query = None
    try:
        with pytest.raises(Exception, match="needs .option\\('checkpointLocation'"):
            query = (
                spark.readStream.format("rate").load().writeStream.format("pylog-files").start(str(tmp_path / "out"))
            )
            query.processAllAvailable()
    finally:
        spark.conf.unset("spark.sql.streaming.checkpointLocation")
        if query is not None:
            query.stop()
    assert not os.path.exists(tmp_path / "out" / "_spark_metadata")


def test_avro_output_is_readable_with_fastavro(spark, tmp_path):
    out = str(tmp_path / "out")
    sample(spark).write.format("pylog-files").option("fileFormat", "avro").mode("append").save(out)
    files = part_files(out)
    assert files and all(f.endswith(".avro") for f in files)
    records = []
    for path in files:
        with open(path, "rb") as stream:
            reader = fastavro.reader(stream)
            assert reader.codec == "snappy"
            records.extend(reader)
    records.sort(key=lambda r: r["id"])
    assert [r["id"] for r in records] == list(range(6))
    assert records[2]["name"] == "v2" and records[2]["payload"] == b"2" and records[2]["tags"] == {"k": 2}
    assert records[0]["ts"].isoformat() == "2026-01-02T03:04:05+00:00"


def test_json_output_is_readable_by_spark_json(spark, tmp_path):
    out = str(tmp_path / "out")
    sample(spark).write.format("pylog-files").option("fileFormat", "json").mode("append").save(out)
    rows = sorted(spark.read.json(out).collect(), key=lambda r: r.id)
    assert [r.id for r in rows] == list(range(6))
    assert rows[3].name == "v3" and base64.b64decode(rows[3].payload) == b"3"
    assert rows[3].tags.k == 3 and rows[3].ts.startswith("2026-01-02T03:04:05")


def test_partition_by_writes_hive_directories_spark_reads(spark, tmp_path):
    out = str(tmp_path / "out")
    frame = spark.range(6).select(
        F.col("id"), (F.col("id") % 2).alias("parity"), F.when(F.col("id") < 3, F.lit("a/b:c")).alias("label")
    )
    frame.write.format("pylog-files").option("partitionBy", "parity,label").mode("append").save(out)
    dirs = {os.path.relpath(os.path.dirname(p), out) for p in part_files(out)}
    assert dirs == {
        "parity=0/label=a%2Fb%3Ac",
        "parity=1/label=a%2Fb%3Ac",
        "parity=0/label=__HIVE_DEFAULT_PARTITION__",
        "parity=1/label=__HIVE_DEFAULT_PARTITION__",
    }
    rows = sorted((r.id, r.parity, r.label) for r in spark.read.parquet(out).collect())
    assert rows == [(i, i % 2, "a/b:c" if i < 3 else None) for i in range(6)]


def test_vacuum_deletes_only_old_unreferenced_files(spark, tmp_path):
    out = str(tmp_path / "out")
    sample(spark).write.format("pylog-files").mode("append").save(out)
    committed = part_files(out)
    old_orphan = os.path.join(out, "part-00007-3-orphan.parquet")
    young_orphan = os.path.join(out, "part-00008-3-orphan.parquet")
    stale_temp = os.path.join(out, "_spark_metadata", ".4.0f0f.tmp")
    for path in (old_orphan, young_orphan, stale_temp):
        with open(path, "wb") as stream:
            stream.write(b"x")
    an_hour_ago = time.time() - 3600
    for path in [old_orphan, stale_temp, *committed]:
        os.utime(path, (an_hour_ago, an_hour_ago))

    deleted = vacuum(out, older_than_seconds=600)
    assert sorted(deleted) == sorted([old_orphan, stale_temp])
    assert part_files(out) == sorted([*committed, young_orphan])
    assert spark.read.parquet(out).count() == 6


def test_vacuum_refuses_a_directory_the_sink_did_not_write(tmp_path):
    (tmp_path / "part-00000-x.parquet").write_bytes(b"x")
    with pytest.raises(Exception, match="not an output of the pylog-files sink"):
        vacuum(str(tmp_path), older_than_seconds=0)
    assert (tmp_path / "part-00000-x.parquet").exists()
