"""Batch reads: ``spark.read.format("pylog")`` (Spark's ``KafkaRelation`` / ``KafkaBatch``).

Planning (``partitions()``) runs once, in Spark's planner worker on the driver: it lists the
subscribed topic-partitions, resolves ``startingOffsets`` / ``endingOffsets`` (and the timestamp
variants) to concrete offsets — -2/-1 become the log start / end *now* — and plans the ranges into
input partitions. The reader object is then pickled to executors, where ``read()`` reads each
partition's ranges.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader

from kafka_spark.assignment import OffsetRange
from kafka_spark.client import OffsetReader, consumer_config
from kafka_spark.options import PylogOptionError, SourceOptions
from kafka_spark.partition_reader import KafkaInputPartition, plan_for_options, read_partition

__all__ = ["PylogBatchReader"]

log = logging.getLogger("kafka_spark")


class PylogBatchReader(DataSourceReader):
    """Reads ``[start, end)`` of every subscribed partition once."""

    def __init__(self, options: SourceOptions, bootstrap_servers: str):
        self.options = options
        self.bootstrap_servers = bootstrap_servers
        prefix = options.group_id_prefix or "spark-kafka-relation"
        self.group_id = f"{prefix}-{uuid.uuid4()}"

    def plan(self, reader: OffsetReader) -> list[KafkaInputPartition]:
        """The input partitions of this read (resolving offsets with ``reader``)."""
        opts = self.options
        tps = reader.topic_partitions()
        if not tps:
            log.warning("pylog source: %s matches no topic-partitions; the batch is empty", opts.subscription)
            return []
        start = reader.starting_offsets(tps, streaming=False)
        end = reader.resolve(opts.ending_for_batch(), tps, option=opts.ending_option, is_start=False)
        ranges = []
        for tp in sorted(tps):
            if end[tp] < start[tp]:
                raise PylogOptionError(
                    f"Beginning offset {start[tp]} is after the ending offset {end[tp]} for topic "
                    f"{tp.topic} partition {tp.partition} ({opts.starting_option} / "
                    f"{opts.ending_option}). You either provided an invalid starting offset, or "
                    f"the topic has been damaged."
                )
            ranges.append(OffsetRange(tp, start[tp], end[tp]))
        log.info("pylog source: batch reads %s", ", ".join(map(str, ranges)))
        return plan_for_options(
            ranges, opts, consumer_config(opts, self.bootstrap_servers, f"{self.group_id}-executor")
        )

    def partitions(self) -> list[KafkaInputPartition]:
        reader = OffsetReader(self.options, self.bootstrap_servers)
        try:
            planned = self.plan(reader)
        finally:
            reader.close()
        # Spark turns an empty plan into one InputPartition(None); say "nothing" explicitly.
        return planned or [
            KafkaInputPartition(
                ranges=(), config=(), fail_on_data_loss=True, include_headers=False, poll_timeout_ms=0
            )
        ]

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition), partition
        return read_partition(partition)
