"""Exactly-once file sink ``pylog-files``: Parquet / Avro / JSON files that stock Spark reads.

Usage::

    (df.writeStream.format("pylog-files")
       .option("checkpointLocation", "/chk/orders")      # required for streams
       .option("fileFormat", "parquet")                 # parquet (default) | avro | json
       .start("/data/orders"))
    spark.read.parquet("/data/orders")                  # sees committed files only
    df.write.format("pylog-files").mode("append").save("/data/orders")   # batch append

Options: ``path``, ``checkpointLocation``, ``fileFormat``, ``compression`` (see files/formats.py),
``partitionBy`` (comma-separated columns → Hive-style ``col=value`` directories, which stock
Spark readers turn back into columns), ``failOnDataLoss`` (default true; see below). Any other
option is rejected when the query starts. Use the *option* ``partitionBy``: Spark does not pass
``DataStreamWriter.partitionBy(...)`` to Python sinks (it is silently ignored) and rejects
``DataFrameWriter.partitionBy(...)`` for them. Batch writes need ``mode("append")`` (Spark
refuses its default ErrorIfExists for Python sinks).

Layout of the output directory (the table)::

    <out>/_spark_metadata/{0,1,...,9.compact,...}   commit log, Spark's FileStreamSink format
    <out>/_sink/offsets/<manifestId>               query id, Spark batch id, source end offsets
    <out>/_sink/queries/<queryId>                  one per query that wrote here
    <out>/[col=val/]part-<partition %05d>-<batchId>-<uuid>.<ext>   data files, never overwritten

Protocol, per micro-batch N of query q (q = the id in ``<checkpoint>/metadata``):

0. Spark creates the writer for batch N on the driver (a Python worker); it notes the last batch
   q committed here (from ``_sink``), which travels to the tasks with the writer.
1. Tasks (executors) read N and q from the TaskContext local properties. If the writer says q
   has already committed a batch >= N (replay after a restart), they return at once and write
   nothing; tasks never read ``_sink`` themselves. Otherwise they write part files under fresh
   names and return their path, size, mtime and row count. A failing task deletes what it wrote.
2. The driver's ``commit(messages, N)`` (a separate Python worker) checks that the newest
   ``_spark_metadata`` file parses (the sink never builds on a log stock readers cannot read),
   takes the next manifest id M = latest + 1 (the sink's own counter, so a new query with batch
   ids from 0 appends after an old one instead of colliding), checks that batch N continues what
   the output holds (kafka_spark.files.continuity), writes ``_sink/offsets/M`` (end offsets copied
   from ``<checkpoint>/offsets/N``, and what the output holds once M is committed), then
   publishes ``_spark_metadata/M`` with create-if-absent. **That publish is the commit point.**
   A replayed N is recognised from the sidecars (query id + batch id), and the replay's files,
   if any, are deleted.

Kill safety (a SIGKILL of any process at any instant):

* while tasks write: half-written part files are in no manifest, so no Spark reader sees them;
  Spark retries the task or replays the batch under new file names.
* before the manifest is published: nothing of batch N is visible to Spark readers; the part
  files and a sidecar ``_sink/offsets/M`` are garbage. Spark has not written ``commits/N``, so it
  replays N with the same offsets; the replay writes new files and commits manifest M (the old
  sidecar is replaced). Orphan part files are removed by :func:`vacuum`.
* after the publish, before Spark's ``commits/N``: the batch is visible exactly once. Spark
  replays N; tasks see q committed N and skip, commit sees the same and only deletes the replay's
  files. No duplicate.
* during the publish: the manifest is written to a hidden temp file and linked into place
  (local), renamed without overwrite (HDFS) or PUT with If-None-Match (S3) — it appears whole or
  not at all; a leftover temp file is ignored by Spark and removed by :func:`vacuum`.
* Manifests are never overwritten; a second writer racing for M fails loudly
  (:class:`ConcurrentWriterError`). Like Spark's own file sink, one query at a time per path:
  the sidecar is written before the manifest and may be replaced, so a racing loser may already
  have replaced the winner's ``_sink/offsets/M`` when it fails.
* a killed query restarted with a *new* checkpoint: :func:`committed_source_offsets` reads the
  newest *published* manifest's record, so it resumes right after the last visible batch.

A new query (new or lost checkpoint) pointed at an existing output, whatever the output's
columns: it is committed only if it provably continues where the output left off, decided from
the sink's records and Spark's checkpoint (kafka_spark.files.continuity); otherwise nothing is
committed and the error names the ``startingOffsets`` JSON to use. With the pylog source the
check happens on the query's empty first batch, before anything is read.
:func:`committed_source_offsets` returns those offsets for the pylog source's
``startingOffsetsFromOutput``.

Batch writes: ``mode("append")`` commits one manifest per job (query id null); ``overwrite``
is rejected (committed files are immutable; delete the directory or write elsewhere).

Credentials: options are never written anywhere; only offsets and ids reach ``_sink``.

Modules of kafka_spark.files: this one (data source, writers, :func:`committed_source_offsets`,
:func:`vacuum`); options (option parsing), task (executor side), commit (driver side),
metadata_log (``_spark_metadata``), sidecar (``_sink`` sidecar, checkpoint), continuity (does a
batch continue the output), formats (Parquet/Avro/JSON), fs (pyarrow.fs, create-if-absent).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from kafka_spark.files.commit import (
    ConcurrentWriterError,
    FileSinkCommitError,
    StreamCommit,
    abort_files,
    commit_batch_job,
)
from kafka_spark.files.fs import FileSinkError
from kafka_spark.files.options import SINK_NAME, FileSinkOptionError, FileSinkOptions
from kafka_spark.files.sidecar import OffsetContinuityError
from kafka_spark.files.task import FileSinkCommitMessage, TaskWrite, task_context
from kafka_spark.spark_api import StreamArrowWriter

__all__ = [
    "ConcurrentWriterError",
    "FileBatchWriter",
    "FileSinkCommitError",
    "FileSinkCommitMessage",
    "FileSinkError",
    "FileSinkOptionError",
    "FileSinkOptions",
    "FileStreamWriter",
    "OffsetContinuityError",
    "SINK_NAME",
]


class FileStreamWriter(StreamArrowWriter):
    """Streaming writer: tasks write part files; ``commit`` publishes the manifest.

    Holds the parsed options, the schema and the last batch the checkpoint's query committed
    here when Spark created it (it is pickled to executors and to the commit worker, and rebuilt
    by Spark for every micro-batch); all other state lives in the output directory.
    """

    def __init__(
        self, options: FileSinkOptions, schema: StructType, last_commit: tuple[str, int] | None = None
    ) -> None:
        self.options = options
        self.schema = schema
        self.last_commit = last_commit

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FileSinkCommitMessage:
        partition_id, attempt, context = task_context()
        if context is None:
            raise FileSinkError("FileStreamWriter.write must run inside a Spark task")
        raw_batch_id = context.getLocalProperty("streaming.sql.batchId")  # type: ignore[attr-defined]
        query_id = context.getLocalProperty("sql.streaming.queryId")  # type: ignore[attr-defined]
        if raw_batch_id is None or query_id is None:
            raise FileSinkError(
                f"format {SINK_NAME!r}: Spark did not set the batch id / query id of this task "
                "(micro-batch triggers only; continuous processing is not supported)"
            )
        batch_id = int(raw_batch_id)
        if self.last_commit is not None and self.last_commit[0] == query_id and self.last_commit[1] >= batch_id:
            # Replay of a committed batch: the input iterator is left unread on purpose.
            return FileSinkCommitMessage(query_id, batch_id, partition_id, attempt, skipped=True)
        task = TaskWrite(self.options, str(batch_id))
        task.run(iterator)
        return FileSinkCommitMessage(query_id, batch_id, partition_id, attempt, files=task.files, rows=task.rows)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        StreamCommit(self.options, messages, batchId).run()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        abort_files(self.options, messages)


class FileBatchWriter(DataSourceArrowWriter):
    """Batch writer (``df.write``): one manifest per job, appended after the newest."""

    def __init__(self, options: FileSinkOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FileSinkCommitMessage:
        partition_id, attempt, _ = task_context()
        task = TaskWrite(self.options, "batch")
        task.run(iterator)
        return FileSinkCommitMessage(None, None, partition_id, attempt, files=task.files, rows=task.rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_batch_job(self.options, messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_files(self.options, messages)
