"""The pylog sinks: format ``pylog-files`` (exactly-once files) and the topic writers of ``pylog``.

``df.writeStream.format("pylog-files")`` / ``df.write.format("pylog-files")`` is
:class:`FileSinkDataSource` here, with its machinery in kafka_spark.files;
``df.writeStream.format("pylog")`` / ``df.write.format("pylog")`` is the pylog data source
(kafka_spark.source), whose writers are made by :func:`topic_stream_writer` /
:func:`topic_batch_writer` here, with their machinery in kafka_spark.topics.

The two commit protocols side by side (a micro-batch N of query q; details, kill safety and what
each does not promise in kafka_spark.files.writers and kafka_spark.topics.task):

=====================  ===============================================  ==============================================
                       ``pylog-files``                                   ``pylog`` (topics, ``exactly-once``)
=====================  ===============================================  ==============================================
unit of commit         the whole micro-batch: one manifest              each Spark task: one Kafka transaction
tasks write            part files under fresh names (invisible)         rows + a marker record in the transaction
commit point           the driver publishes ``_spark_metadata/M``       each task commits its transaction
                       with create-if-absent (after ``_sink/offsets``)  (with its batch id in a consumer group's offset)
who decides            the driver's ``commit(messages, N)``             each task, before Spark's driver commit
replay of N            tasks skip (q committed N per ``_sink``);        a task finds N in its group's offset metadata
                       commit deletes the replay's files                after fencing older attempts, and writes nothing
readers see            all of N or nothing (stock Spark, via the log)   read_committed: each task's rows once; the
                                                                        tasks of one batch may appear one by one
a new query continues  checked against the output's records             (no output to check: offsets are the source's)
                       (files.continuity); ``startingOffsetsFromOutput``
=====================  ===============================================  ==============================================

``at-least-once`` topic writes (option ``deliveryGuarantee``) flush an idempotent producer
before the task commits, as Spark's own Kafka sink does.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

import kafka_spark.spark_env  # noqa: F401  (first: names a missing or doubled PySpark, and the fix)

# isort: split
from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from kafka_spark.files import formats as sink_formats
from kafka_spark.files.fs import FileSinkError, create_if_absent, list_names, resolve_output
from kafka_spark.files.metadata_log import METADATA_DIR, MetadataLog
from kafka_spark.files.options import SINK_NAME, FileSinkOptionError, FileSinkOptions
from kafka_spark.files.sidecar import SINK_DIR, Checkpoint, SinkState
from kafka_spark.files.writers import FileBatchWriter, FileStreamWriter

if TYPE_CHECKING:  # pragma: no cover
    from kafka_spark.topics.writers import TopicBatchWriter, TopicStreamWriter

__all__ = ["FileSinkDataSource", "topic_batch_writer", "topic_stream_writer"]


class FileSinkDataSource(DataSource):
    """``df.writeStream.format("pylog-files")`` / ``df.write.format("pylog-files")``."""

    @classmethod
    def name(cls) -> str:
        return SINK_NAME

    def writer(self, schema: StructType, overwrite: bool) -> FileBatchWriter:
        if overwrite:
            raise FileSinkOptionError(
                f"format {SINK_NAME!r} does not support mode('overwrite'): committed files are never "
                "replaced. Use mode('append'), or delete the output directory first."
            )
        options = FileSinkOptions.parse(self.options, streaming=False)
        return FileBatchWriter(_prepare(options, schema), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> FileStreamWriter:
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


# The topic writers of format "pylog" (kafka_spark.source delegates here); kafka_spark.topics
# is imported when a query writes to a topic, not when Spark looks the formats up.


def topic_stream_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> TopicStreamWriter:
    """The streaming writer. PySpark creates it again for every micro-batch: to plan the batch's
    write (where it is checked, and its warnings logged once per process) and to commit it, in
    its streaming sink runner, where only ``commit`` / ``abort`` run and nothing is checked."""
    from kafka_spark.topics.options import parse_sink_options
    from kafka_spark.topics.writers import TopicStreamWriter

    define = not _in_commit_runner()
    return TopicStreamWriter(parse_sink_options(options, schema, define=define), define=define)


def _in_commit_runner() -> bool:
    # The runner module is loaded only in the Python workers PySpark starts to commit a streaming
    # write (pyspark/sql/worker/python_streaming_sink_runner.py).
    import sys

    runner = "pyspark.sql.worker.python_streaming_sink_runner"
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return runner in sys.modules or getattr(main_spec, "name", None) == runner


def topic_batch_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> TopicBatchWriter:
    """The batch writer of ``df.write.format("pylog")``; appends only."""
    from kafka_spark.topics.options import TopicSinkError, parse_sink_options
    from kafka_spark.topics.writers import TopicBatchWriter

    if overwrite:
        raise TopicSinkError("the pylog topic sink only appends: use mode('append') (topics cannot be overwritten)")
    return TopicBatchWriter(parse_sink_options(options, schema))
