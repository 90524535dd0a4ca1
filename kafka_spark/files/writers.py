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

import dataclasses
import time
import uuid
from collections.abc import Iterator
from typing import Optional

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from kafka_spark.files import formats as sink_formats
from kafka_spark.files.metadata_log import METADATA_DIR, MetadataLog
from kafka_spark.files.commit import (
    ConcurrentWriterError,
    FileSinkCommitError,
    StreamCommit,
    abort_files,
    commit_batch_job,
)
from kafka_spark.files.continuity import OutputCoverage
from kafka_spark.files.fs import FileSinkError, create_if_absent, list_names, resolve_output
from kafka_spark.files.sidecar import SINK_DIR, Checkpoint, OffsetContinuityError, SinkState
from kafka_spark.files.options import SINK_NAME, FileSinkOptionError, FileSinkOptions
from kafka_spark.files.task import FileSinkCommitMessage, TaskWrite, delete_quietly, task_context

__all__ = [
    "ConcurrentWriterError",
    "FileSinkCommitError",
    "FileSinkCommitMessage",
    "FileSinkDataSource",
    "FileSinkError",
    "FileSinkOptionError",
    "FileSinkOptions",
    "OffsetContinuityError",
    "SINK_NAME",
    "committed_source_offsets",
    "vacuum",
]


class FileSinkDataSource(DataSource):
    """``df.writeStream.format("pylog-files")`` / ``df.write.format("pylog-files")``."""

    @classmethod
    def name(cls) -> str:
        return SINK_NAME

    def writer(self, schema: StructType, overwrite: bool) -> "FileBatchWriter":
        if overwrite:
            raise FileSinkOptionError(
                f"format {SINK_NAME!r} does not support mode('overwrite'): committed files are never "
                "replaced. Use mode('append'), or delete the output directory first."
            )
        options = FileSinkOptions.parse(self.options, streaming=False)
        return FileBatchWriter(_prepare(options, schema), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> "FileStreamWriter":
        if overwrite:
            raise FileSinkOptionError(
                f"format {SINK_NAME!r} supports outputMode('append') only: files are never rewritten"
            )
        options = _prepare(FileSinkOptions.parse(self.options, streaming=True), schema)
        return FileStreamWriter(options, schema, _last_commit(options))


def _last_commit(options: FileSinkOptions) -> tuple[str, int] | None:
    """(query id, last batch it committed here) for the query of ``checkpointLocation``, or None.

    Read on the driver when Spark creates the writer of a micro-batch, so that tasks of a
    replayed batch skip without reading ``_sink`` (a garbled sidecar fails here once, naming the
    file, not in every task attempt). A lower bound is always safe: a task that does not skip
    writes files that the commit of a replay deletes.
    """
    assert options.checkpoint_location is not None
    ck = resolve_output(options.checkpoint_location, option="checkpointLocation")
    query_id = Checkpoint(ck.fs, ck.root, options.checkpoint_location).query_id_if_started()
    if query_id is None:
        return None
    loc = resolve_output(options.path)
    latest = MetadataLog(loc.fs, loc.root).latest_id()
    prior = SinkState(loc.fs, loc.root).last_commit_of(query_id, latest)
    if prior is None or prior.batch_id is None:
        return None
    return query_id, prior.batch_id


def _prepare(options: FileSinkOptions, schema: StructType) -> FileSinkOptions:
    """Fail at query start, naming the option/path/column, rather than in a task.

    Returns the options with local paths made absolute here, on the driver: executors of a
    cluster have other working directories.
    """
    for column in options.partition_by:
        if column not in schema.fieldNames():
            raise FileSinkOptionError(
                f"option 'partitionBy' names column {column!r}, which is not in the output columns "
                f"{schema.fieldNames()}"
            )
    if options.partition_by and len(options.partition_by) == len(schema.fields):
        raise FileSinkOptionError("option 'partitionBy' cannot use every column: no data columns would remain")
    data_schema = StructType([f for f in schema.fields if f.name not in options.partition_by])
    sink_formats.check_schema(data_schema, options.file_format)
    loc = resolve_output(options.path)
    checkpoint = options.checkpoint_location
    if checkpoint:
        checkpoint_loc = resolve_output(checkpoint, option="checkpointLocation")
        if isinstance(checkpoint_loc.fs, pafs.LocalFileSystem):
            checkpoint = checkpoint_loc.root
    try:
        loc.fs.create_dir(loc.root, recursive=True)
        names = list_names(loc.fs, loc.root)
        if names and SINK_DIR not in names:
            foreign = [n for n in names if not n.startswith((".", "_"))] or names
            raise FileSinkOptionError(
                f"option 'path': {options.path} already holds files the sink did not write "
                f"(e.g. {foreign[0]!r}); its _spark_metadata log would hide them. Use an empty "
                "or new directory."
            )
        # _spark_metadata exists from the start, so Spark readers never list in-flight files.
        loc.fs.create_dir(loc.join(METADATA_DIR), recursive=True)
        loc.fs.create_dir(loc.join(SINK_DIR), recursive=True)
        probe = loc.join(SINK_DIR, f".probe-{uuid.uuid4()}")
        create_if_absent(loc.fs, probe, b"")
        loc.fs.delete_file(probe)
    except OSError as exc:
        raise FileSinkError(f"option 'path': cannot write to {options.path}: {exc}") from exc
    path = loc.root if isinstance(loc.fs, pafs.LocalFileSystem) else options.path
    return dataclasses.replace(options, path=path, checkpoint_location=checkpoint)


class FileStreamWriter(DataSourceStreamArrowWriter):
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

    def commit(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
        StreamCommit(self.options, messages, batchId).run()

    def abort(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
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

    def commit(self, messages: list[Optional[WriterCommitMessage]]) -> None:
        commit_batch_job(self.options, messages)

    def abort(self, messages: list[Optional[WriterCommitMessage]]) -> None:
        abort_files(self.options, messages)


def committed_source_offsets(path: str) -> dict[str, dict[str, int]] | None:
    """Where the output at ``path`` continues (``{topic: {partition: next_offset}}``): per
    topic-partition, the end offset of the newest committed batch that read it, over every query
    that wrote there; None if no committed batch read Kafka-style offsets.

    This is where a new query must start to continue the output with no duplicate and no gap
    (the pylog source's ``startingOffsetsFromOutput``). Reads only committed state, so it is
    safe while a query writes.
    """
    loc = resolve_output(path)
    latest = MetadataLog(loc.fs, loc.root).check_newest()
    offsets = OutputCoverage.at(SinkState(loc.fs, loc.root), latest).offsets
    return offsets or None


def vacuum(path: str, older_than_seconds: float) -> list[str]:
    """Delete part files (and leftover temp files) that no committed manifest references and
    that are older than ``older_than_seconds``; return the deleted paths.

    Committed files are never touched. The grace period must exceed the longest time a batch
    takes from writing its first file to its commit (Spark's own cleanupDelay is 10 minutes),
    otherwise the files of an in-flight batch could be deleted before its manifest lands.
    """
    if older_than_seconds < 0:
        raise FileSinkOptionError(f"older_than_seconds must be >= 0, got {older_than_seconds}")
    loc = resolve_output(path)
    if SINK_DIR not in list_names(loc.fs, loc.root):
        raise FileSinkError(f"{path} is not an output of the {SINK_NAME} sink (no {SINK_DIR}/); refusing to vacuum")
    log = MetadataLog(loc.fs, loc.root)
    # Read the log before listing: a batch committed in between has young files the grace protects.
    referenced = {loc.from_uri(f.path) for f in log.all_files()}
    cutoff_ns = time.time_ns() - int(older_than_seconds * 1e9)
    doomed = []
    for info in loc.fs.get_file_info(pafs.FileSelector(loc.root, recursive=True)):
        if info.type != pafs.FileType.File or info.mtime_ns is None or info.mtime_ns > cutoff_ns:
            continue
        relative = info.path[len(loc.root):].lstrip("/")
        name = info.base_name
        in_log_dirs = relative.startswith((METADATA_DIR + "/", SINK_DIR + "/"))
        if in_log_dirs:
            if name.startswith(".") and name.endswith(".tmp"):
                doomed.append(info.path)
        elif name.startswith("part-") and info.path not in referenced:
            doomed.append(info.path)
    return delete_quietly(loc.fs, doomed)
