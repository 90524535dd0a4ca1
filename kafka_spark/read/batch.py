"""Batch reads: ``spark.read.format("pylog")`` (Spark's ``KafkaRelation`` / ``KafkaBatch``).

Planning (``partitions()``) runs in Spark's planner worker on the driver: it lists the subscribed
topic-partitions, resolves ``startingOffsets`` / ``endingOffsets`` (and the timestamp variants) to
concrete offsets — -2/-1 become the log start / end *now* — checks them as Spark does, and plans
the ranges into input partitions. PySpark keeps that plan for every execution of the DataFrame,
so each task resolves the moving bounds again when it runs (kafka_spark.read.late_binding): a reused
DataFrame sees the records produced since, as in Spark. The reader object is pickled to executors,
where ``read()`` reads each partition's ranges.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader

from kafka_spark.client.config import consumer_config
from kafka_spark.client.offset_reader import OffsetReader, pooled_offset_reader
from kafka_spark.offsets import OffsetRange, SpecificOffsets, SpecificTimestamps
from kafka_spark.options import SourceOptions
from kafka_spark.planning import KafkaInputPartition, plan_for_options, resolve_fetcher
from kafka_spark.read.late_binding import ResolvedStartAfterEnd, late_bound_partitions
from kafka_spark.read.partition import read_partition
from kafka_spark.read.start import starting_offsets

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
        explicit = isinstance(opts.starting, (SpecificOffsets, SpecificTimestamps)) or isinstance(
            opts.ending, (SpecificOffsets, SpecificTimestamps)
        )
        if not tps and not explicit:
            log.warning("pylog source: %s matches no topic-partitions yet; the batch is empty", opts.subscription)
        # Explicit positions are checked against the partitions even when there are none (a
        # topic that does not exist), as Spark checks them before reading.
        start = starting_offsets(reader, tps, streaming=False)
        end = reader.resolve(opts.ending_for_batch(), tps, option=opts.ending_option, is_start=False)
        ranges = []
        for tp in sorted(tps):
            if end[tp] < start[tp]:
                raise ResolvedStartAfterEnd(tp, start[tp], end[tp], opts)
            ranges.append(OffsetRange(tp, start[tp], end[tp]))
        log.info("pylog source: batch reads %s", ", ".join(map(str, ranges)) or "nothing yet")
        config = consumer_config(opts, self.bootstrap_servers, f"{self.group_id}-executor")
        planned = plan_for_options(ranges, opts, config)
        if not planned:  # one task all the same: it finds what appears before the DataFrame runs again
            planned = [
                KafkaInputPartition(
                    ranges=(),
                    config=config,
                    fail_on_data_loss=opts.fail_on_data_loss,
                    include_headers=opts.include_headers,
                    poll_timeout_ms=opts.poll_timeout_ms,
                    avro=opts.avro_columns,
                    fetcher=resolve_fetcher(opts.fetcher, dict(config)),
                )
            ]
        return late_bound_partitions(planned, opts, self.bootstrap_servers, start, end)

    def partitions(self) -> list[KafkaInputPartition]:
        return self.plan(pooled_offset_reader(self.options, self.bootstrap_servers))

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition), partition
        return read_partition(partition)
