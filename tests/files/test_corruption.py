"""Corrupt files in a pylog-files output are detected and named, never built upon.

* ``_spark_metadata/<n>`` (Spark's log, which stock readers need): the sink parses the newest
  file before it appends, and a compaction parses its inputs; garbled bytes, truncated JSON or a
  wrong version line fail the commit naming the file, the line and what to do.
* ``_sink/offsets/<n>`` (the sink's record of each manifest): a garbled one fails the query
  once, on the driver, naming the file, instead of a bare UnicodeDecodeError in every task.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from pyarrow.fs import LocalFileSystem
from pyspark.errors import StreamingQueryException

from kafka_spark.files.metadata_log import MalformedMetadataLogError, MetadataLog
from kafka_spark.files.sidecar import SinkStateError
from kafka_spark.files.table import committed_source_offsets
from tests.support.sink_commits import FakeCheckpoint, commit_batch_job, commit_stream_batch, exists
from tests.support.source_fixtures import embedded_kafka  # noqa: F401

GARBLED = bytes(range(0x80, 0xA0))


def manifests(out: Path) -> list[int]:
    return MetadataLog(LocalFileSystem(), str(out)).batch_ids()


def appended(out: Path, jobs: int) -> None:
    for job in range(jobs):
        commit_batch_job(out, [job])


@pytest.mark.parametrize(
    "content,what",
    [
        (GARBLED, "not UTF-8 text (byte 0x80 at position 0)"),
        (
            b'v1\n{"path":"file:///out/part-00000.parquet","size":12',
            "line 2 is not JSON (Expecting ',' delimiter at column 51)",
        ),
        (b'v2\n{"path":"file:///out/part-00000.parquet"}', "line 1 must be the version 'v1', found 'v2'"),
        (b"", "line 1 must be the version 'v1', found nothing (the file is empty)"),
        (
            b'v1\n{"path":"file:///out/p.parquet","size":"12","isDir":false,"modificationTime":1,"blockReplication":1,'
            b'"blockSize":1,"action":"add"}',
            "line 2 is field 'size' is str, not int",
        ),
    ],
    ids=["garbled-bytes", "truncated-json", "wrong-version", "empty", "wrong-type"],
)
def test_commit_on_a_corrupt_newest_manifest_fails_naming_it(tmp_path, content, what):
    out = tmp_path / "out"
    appended(out, 3)
    (out / "_spark_metadata" / "2").write_bytes(content)
    with pytest.raises(MalformedMetadataLogError) as failure:
        commit_batch_job(out, [99])
    message = str(failure.value)
    assert message.startswith(f"{out}/_spark_metadata/2: {what}")
    assert "stock Spark readers of the output fail on it too" in message
    assert f"Restore {out}/_spark_metadata/2 from a backup or a copy of the output" in message
    assert manifests(out) == [0, 1, 2]  # nothing committed on top of it
    assert len([p for p in out.iterdir() if p.name.startswith("part-")]) == 3  # the job's file is gone


def test_streaming_batch_on_a_corrupt_newest_manifest_is_not_committed(tmp_path):
    out = tmp_path / "out"
    checkpoint = FakeCheckpoint(tmp_path / "ck")
    checkpoint.offsets(0, {"orders": {"0": 0}})
    checkpoint.offsets(1, {"orders": {"0": 3}})
    commit_stream_batch(out, checkpoint, 0, [])
    (out / "_spark_metadata" / "0").write_bytes(b"v1\n{tru")
    with pytest.raises(MalformedMetadataLogError, match=r"_spark_metadata/0: line 2 is not JSON"):
        commit_stream_batch(out, checkpoint, 1, [1, 2, 3])
    assert manifests(out) == [0]
    assert not [p for p in out.iterdir() if p.name.startswith("part-")]


def test_compaction_over_a_corrupt_older_manifest_fails_naming_it(tmp_path):
    out = tmp_path / "out"
    appended(out, 9)  # manifests 0..8; the next one is the compaction 9.compact
    (out / "_spark_metadata" / "3").write_bytes(GARBLED)
    with pytest.raises(MalformedMetadataLogError) as failure:
        commit_batch_job(out, [99])
    assert str(failure.value).startswith(f"{out}/_spark_metadata/3: not UTF-8 text")
    assert "it lists the files of batch 3" in str(failure.value)
    assert manifests(out) == list(range(9))
    assert not (out / "_spark_metadata" / "9.compact").exists()


def test_corrupt_compact_file_is_named_when_appended_to_and_when_compacted_again(tmp_path):
    out = tmp_path / "out"
    appended(out, 10)  # 0..8 and 9.compact, the newest file
    compact = out / "_spark_metadata" / "9.compact"
    intact = compact.read_bytes()
    compact.write_bytes(b"v1\n" + GARBLED)
    with pytest.raises(MalformedMetadataLogError, match=r"9.compact: not UTF-8 text"):
        commit_batch_job(out, [1])

    compact.write_bytes(intact)
    appended(out, 2)  # 10, 11
    compact.write_bytes(intact[: len(intact) // 2])  # truncated, no longer the newest file
    appended(out, 7)  # 12..18 are plain files and do not read it
    with pytest.raises(MalformedMetadataLogError) as failure:
        commit_batch_job(out, [2])  # 19.compact holds everything: it reads 9.compact
    assert str(failure.value).startswith(f"{out}/_spark_metadata/9.compact: line ")
    assert "it lists every file committed up to batch 9" in str(failure.value)
    assert manifests(out)[-1] == 18


def test_garbled_sink_record_fails_the_query_once_naming_the_file(spark, embedded_kafka, tmp_path):
    topic = embedded_kafka.new_topic("garbled-sidecar")
    embedded_kafka.produce_values(topic, 0, 3)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "ck")

    def run():
        query = (
            spark.readStream.format("pylog")
            .option("kafka.bootstrap.servers", embedded_kafka.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("cast(value as string) v")
            .writeStream.format("pylog-files")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start(out)
        )
        try:
            query.awaitTermination(180)
        except StreamingQueryException as exc:
            return exc
        return query.exception()

    assert run() is None
    latest = manifests(Path(out))[-1]
    record = Path(out) / "_sink" / "offsets" / str(latest)
    record.write_bytes(GARBLED)
    # A replay of the last batch (Spark's commits/<n> lost) and a next batch both need the record.
    os.remove(os.path.join(checkpoint, "commits", str(latest)))
    embedded_kafka.produce_values(topic, 0, 2, start=3)
    failure = run()
    assert failure is not None
    message = str(failure)
    assert f"{record} cannot be read (" in message and "not UTF-8 text" in message
    assert "Restore the file from a backup or a copy of the output, then restart the query" in message
    assert "UnicodeDecodeError" not in message
    assert len(re.findall(re.escape(f"{record} cannot be read"), message)) == 1
    assert manifests(Path(out))[-1] == latest
    with pytest.raises(SinkStateError, match=re.escape(f"{record} cannot be read")):
        committed_source_offsets(out)  # startingOffsetsFromOutput names it too


def test_missing_sink_record_is_named(tmp_path):
    out = tmp_path / "out"
    first = commit_batch_job(out, [1])
    (out / "_sink" / "offsets" / "0").unlink()
    with pytest.raises(SinkStateError, match=r"_sink/offsets/0 is missing although manifest 0 is committed"):
        commit_batch_job(out, [2])
    assert exists(first)


def test_stock_readers_fail_on_the_manifest_the_sink_refuses_to_build_on(spark, tmp_path):
    """Why the sink stops: Spark's own readers of the output cannot read past that file either."""
    out = tmp_path / "out"
    appended(out, 2)
    assert spark.read.parquet(str(out)).count() == 2
    (out / "_spark_metadata" / "1").write_bytes(b"v1\n{tru")
    with pytest.raises(Exception):  # noqa: B017 Spark's own error, whatever its class
        spark.read.parquet(str(out)).count()
