"""Helpers that drive the pylog-files sink's driver-side commit directly, without a Spark query:
a checkpoint directory laid out as Spark writes it (``metadata``, ``offsets/<N>``, optionally a
Kafka source's ``sources/<i>/0``) and real Parquet part files in the output.

Used where a test needs a precise state (several queries, old records, corrupt files) that a
real query would take long to reach; the commit code under test is the one Spark calls.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import LongType, StructField, StructType

from kafka_spark.files.metadata_log import SinkFileStatus
from kafka_spark.files.writers import FileBatchWriter, FileSinkCommitMessage, FileSinkOptions, FileStreamWriter

SCHEMA = StructType([StructField("id", LongType())])


class FakeCheckpoint:
    """A checkpoint directory in Spark's layout for query ``query_id``."""

    def __init__(self, root: Path, query_id: str | None = None) -> None:
        self.root = root
        self.query_id = query_id or str(uuid.uuid4())
        (root / "offsets").mkdir(parents=True, exist_ok=True)
        (root / "metadata").write_text(json.dumps({"id": self.query_id}) + "\n")

    def offsets(self, batch_id: int, *sources: dict | str | None) -> None:
        """``offsets/<batch_id>`` with one line per source (a dict is Kafka-style offset JSON)."""
        lines = ["v1", json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}})]
        for source in sources:
            lines.append("-" if source is None else source if isinstance(source, str) else json.dumps(source))
        (self.root / "offsets" / str(batch_id)).write_text("\n".join(lines))

    def kafka_initial_offsets(self, source_index: int, data: bytes) -> None:
        directory = self.root / "sources" / str(source_index)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "0").write_bytes(data)


def part_file(out: Path, ids: list[int]) -> SinkFileStatus:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"part-00000-{uuid.uuid4()}.parquet"
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)
    stat = path.stat()
    return SinkFileStatus("file://" + str(path), stat.st_size, stat.st_mtime_ns // 1_000_000)


def commit_stream_batch(out: Path, checkpoint: FakeCheckpoint, batch_id: int, ids: list[int]) -> SinkFileStatus | None:
    """Commit batch ``batch_id`` of the checkpoint's query, with one part file of ``ids`` (none
    if empty), as Spark's commit worker does; returns the part file."""
    options = FileSinkOptions.parse({"path": str(out), "checkpointLocation": str(checkpoint.root)}, streaming=True)
    files = [part_file(out, ids)] if ids else []
    message = FileSinkCommitMessage(checkpoint.query_id, batch_id, 0, 0, files=files, rows=len(ids))
    FileStreamWriter(options, SCHEMA).commit([message], batch_id)
    return files[0] if files else None


def commit_batch_job(out: Path, ids: list[int]) -> SinkFileStatus:
    """Commit a ``df.write`` append job of one part file."""
    options = FileSinkOptions.parse({"path": str(out)}, streaming=False)
    status = part_file(out, ids)
    FileBatchWriter(options, SCHEMA).commit([FileSinkCommitMessage(None, None, 0, 0, files=[status], rows=len(ids))])
    return status


def exists(status: SinkFileStatus) -> bool:
    return os.path.exists(status.path[len("file://") :])
