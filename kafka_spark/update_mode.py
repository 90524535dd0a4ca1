"""Update output mode into a topic, exactly once per micro-batch, through ``foreachBatch``.

PySpark's Python sinks cannot take Update mode: Spark runs a streaming write in Update mode only
when the sink's ``WriteBuilder`` implements ``SupportsStreamingUpdateAsAppend`` (Spark's own Kafka
sink does), and PySpark's ``PythonWriteBuilder`` does not (4.3), so
``writeStream.format("pylog").outputMode("update")`` fails with "pylog does not support Update
mode" before pylog sees the query. Append and Complete mode work.

The workaround is the one Spark documents for sinks without a mode: ``foreachBatch``. A plain
``df.write`` inside it would write a replayed micro-batch twice; :func:`topic_writer` writes each
micro-batch through the topic sink's exactly-once batch write, keyed by the query id and the
batch id (the ``queryId`` / ``batchId`` sink options), so a replay finds the batch committed and
writes nothing::

    (counts.writeStream.outputMode("update")
        .foreachBatch(kafka_spark.topic_writer(topic="counts", **{"kafka.bootstrap.servers": servers}))
        .option("checkpointLocation", checkpoint).start())

Under Spark Connect the function runs in a Python process of the Connect server, on a session
without a SparkContext and outside the query's thread, so it cannot look the query up: give it
the query's checkpoint, ``topic_writer(checkpoint_location=checkpoint, topic=...)``, and it reads
the query id from the checkpoint's ``metadata`` (where Spark keeps it across restarts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka_spark.errors import PylogError

__all__ = ["topic_writer"]


class TopicWriterError(PylogError, ValueError):
    """``topic_writer`` given options it sets itself, or run where no streaming query is named."""


class _TopicWriter:
    """A ``foreachBatch`` function writing each micro-batch to a topic exactly once."""

    def __init__(self, options: dict[str, str], query_id: str | None, checkpoint_location: str | None) -> None:
        lowered = {k.lower() for k in options}
        for reserved in ("queryid", "batchid"):
            if reserved in lowered:
                raise TopicWriterError(f"topic_writer sets {reserved[:-2]}Id itself; remove it from the options")
        self.options = options
        self.query_id = query_id
        self.checkpoint_location = checkpoint_location

    def __call__(self, df: Any, batch_id: int) -> None:
        (
            df.write.format("pylog")
            .options(**self.options)
            .option("queryId", self._query_id(df))
            .option("batchId", str(batch_id))
            .mode("append")
            .save()
        )

    def _query_id(self, df: Any) -> str:
        if self.query_id:
            return self.query_id
        running = _running_query_id(df)
        if self.checkpoint_location:
            from kafka_spark.files.fs import resolve_output
            from kafka_spark.files.sidecar import Checkpoint

            location = resolve_output(self.checkpoint_location, option="checkpoint_location")
            stored = Checkpoint(location.fs, location.root, self.checkpoint_location).query_id()
            if running and running != stored:
                raise TopicWriterError(
                    f"checkpoint_location {self.checkpoint_location} holds query {stored}, but this "
                    f"micro-batch is of query {running}: give topic_writer the checkpointLocation of "
                    "the query it writes for"
                )
            return stored
        if running:
            return running
        raise TopicWriterError(
            "topic_writer cannot tell which streaming query this micro-batch is of: under Spark Connect "
            "foreachBatch runs in the server's Python, outside the query. Pass "
            "checkpoint_location=<the query's checkpointLocation> (or query_id=...) to topic_writer"
        )


def _running_query_id(df: Any) -> str | None:
    """The streaming query's id from the thread's Spark properties, which a classic session's
    ``foreachBatch`` runs in; None under Spark Connect, whose sessions have no SparkContext."""
    from pyspark.sql.utils import is_remote

    if is_remote():
        return None
    return df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId") or None


def topic_writer(
    *, query_id: str | None = None, checkpoint_location: str | None = None, **options: Any
) -> Callable[[Any, int], None]:
    """A function for ``writeStream.foreachBatch`` that writes each micro-batch to a topic with
    the topic sink's options (``topic``, ``kafka.*``, ...), exactly once per micro-batch for
    ``read_committed`` consumers: a micro-batch Spark replays after a failure is found already
    committed and skipped. The micro-batches are keyed by the streaming query's id, stable across
    restarts from the same checkpoint: ``query_id``, else the id stored in
    ``checkpoint_location`` (the query's ``checkpointLocation``; needed under Spark Connect, and
    checked against the running query's id where that is known), else the running query's."""
    return _TopicWriter({str(k): str(v) for k, v in options.items()}, query_id, checkpoint_location)
