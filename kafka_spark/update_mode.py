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

    def __init__(self, options: dict[str, str], query_id: str | None) -> None:
        lowered = {k.lower() for k in options}
        for reserved in ("queryid", "batchid"):
            if reserved in lowered:
                raise TopicWriterError(f"topic_writer sets {reserved[:-2]}Id itself; remove it from the options")
        self.options = options
        self.query_id = query_id

    def __call__(self, df: Any, batch_id: int) -> None:
        query_id = self.query_id or df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
        if not query_id:
            raise TopicWriterError(
                "topic_writer runs inside foreachBatch of a streaming query, which names the query in the "
                "thread's Spark properties; none was found here: pass query_id=... to topic_writer"
            )
        (
            df.write.format("pylog")
            .options(**self.options)
            .option("queryId", query_id)
            .option("batchId", str(batch_id))
            .mode("append")
            .save()
        )


def topic_writer(*, query_id: str | None = None, **options: Any) -> Callable[[Any, int], None]:
    """A function for ``writeStream.foreachBatch`` that writes each micro-batch to a topic with
    the topic sink's options (``topic``, ``kafka.*``, ...), exactly once per micro-batch for
    ``read_committed`` consumers: a micro-batch Spark replays after a failure is found already
    committed and skipped. ``query_id`` defaults to the streaming query's id, stable across
    restarts from the same checkpoint."""
    return _TopicWriter({str(k): str(v) for k, v in options.items()}, query_id)
