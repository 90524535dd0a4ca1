"""Streaming reads: ``spark.readStream.format("pylog")`` (Spark's ``KafkaMicroBatchStream``).

Offsets are Spark's offset JSON as a dict, ``{"orders": {"0": 23, "1": 7}}``: per partition the
next offset to read. A micro-batch reads ``[start, end)`` of every partition in ``end``.

Where things run: ``initialOffset``, ``latestOffset``, ``partitions``, ``commit`` run in Spark's
long-lived Python planner worker on the driver (one reader instance per query run, so in-memory
state such as the AvailableNow target lives for the run); ``read`` runs on executors, on a copy
of the reader built by a second ``streamReader()`` call, and depends only on its partition.

Replays: ``partitions(start, end)`` is a pure function of (start, end) and the options, except
that a partition new in ``end`` starts at its earliest offset, fetched at planning (as Spark).
So a batch replayed after a failure reads the same records.

Admission control (PySpark 4.2+): ``getDefaultReadLimit`` returns ``ReadMaxRows`` from
``maxOffsetsPerTrigger``, else ``ReadMinRows`` from ``minOffsetsPerTrigger``, else
``ReadAllAvailable``. PySpark has no composite limit, so with both options set the engine passes
``ReadMaxRows`` and the source applies ``minOffsetsPerTrigger`` (with ``maxTriggerDelay``) from
its options, exactly as Spark's ``CompositeReadLimit`` would. ``ReadAllAvailable`` from the
engine overrides both. Under ``Trigger.AvailableNow`` the minimum is not applied (it could only
delay the end of the query, which must drain the snapshot and stop).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from kafka_spark.assignment import OffsetRange
from kafka_spark.client import OffsetReader, consumer_config
from kafka_spark.offsets import (
    PartitionOffsets,
    new_offset_count,
    offsets_from_dict,
    offsets_to_dict,
    rate_limit,
    report_data_loss,
)
from kafka_spark.options import SourceOptions
from kafka_spark.partition_reader import KafkaInputPartition, plan_for_options, read_partition

__all__ = ["PylogStreamReader"]

log = logging.getLogger("kafka_spark")


class PylogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader with Spark's Kafka offsets, read limits and data-loss rules."""

    def __init__(self, options: SourceOptions, bootstrap_servers: str):
        self.options = options
        self.bootstrap_servers = bootstrap_servers
        prefix = options.group_id_prefix or "spark-kafka-source"
        self.group_id = f"{prefix}-{uuid.uuid4()}"
        self._offset_reader: OffsetReader | None = None
        self._latest: PartitionOffsets | None = None
        self._available_now = False
        self._available_now_target: PartitionOffsets | None = None
        # Spark's lastTriggerMillis starts at 0, so the first trigger never waits for
        # minOffsetsPerTrigger.
        self._last_trigger_ms = 0.0

    # The planner's client is not picklable and has no use on executors.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_offset_reader"] = None
        return state

    @property
    def reader(self) -> OffsetReader:
        if self._offset_reader is None:
            self._offset_reader = OffsetReader(self.options, self.bootstrap_servers)
        return self._offset_reader

    # ---------------------------------------------------------------- offsets

    def initialOffset(self) -> dict:
        """Where a new query starts (``startingOffsetsFromOutput``, else the starting options;
        default latest). Spark checkpoints it, so it is called once per query, not per restart."""
        tps = self.reader.topic_partitions()
        return offsets_to_dict(self.reader.starting_offsets(tps, streaming=True))

    def _fetch_latest(self) -> PartitionOffsets:
        return self.reader.latest_offsets(self.reader.topic_partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next micro-batch: the latest offsets, or fewer under a read limit, or
        ``start`` itself when ``minOffsetsPerTrigger`` says to wait."""
        start_offsets = offsets_from_dict(start)
        if self._available_now:
            if self._available_now_target is None:
                # Fetched on the first call, not in prepareForTriggerAvailableNow (SPARK-53560).
                self._available_now_target = self._fetch_latest()
                log.info("pylog source: AvailableNow target %s", offsets_to_dict(self._available_now_target))
            latest = self._available_now_target
        else:
            latest = self._fetch_latest()
        self._latest = latest

        if isinstance(limit, ReadAllAvailable):
            return offsets_to_dict(latest)
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.options.min_offsets_per_trigger
        if min_rows is not None and not self._available_now and self._delay(min_rows, start_offsets, latest):
            return offsets_to_dict(start_offsets)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_offsets_per_trigger
        if max_rows is None:
            return offsets_to_dict(latest)
        new = [tp for tp in latest if tp not in start_offsets]
        earliest_of_new = self.reader.earliest_offsets(new) if new else {}
        return offsets_to_dict(rate_limit(max_rows, start_offsets, latest, earliest_of_new))

    def _delay(self, min_rows: int, start: PartitionOffsets, latest: PartitionOffsets) -> bool:
        # Spark's delayBatch: fire once maxTriggerDelay has passed since the last batch fired,
        # else only with at least minOffsetsPerTrigger new offsets.
        now_ms = time.time() * 1000.0
        if now_ms - self._last_trigger_ms >= self.options.max_trigger_delay_ms:
            self._last_trigger_ms = now_ms
            return False
        if new_offset_count(start, latest) < min_rows:
            return True
        self._last_trigger_ms = now_ms
        return False

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger is not None:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else offsets_to_dict(self._latest)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    # ---------------------------------------------------------------- planning and reading

    def offset_ranges(self, start: dict, end: dict) -> list[OffsetRange]:
        """The ranges ``[start, end)`` per partition, after Spark's data-loss checks: partitions
        gone since ``start``, new partitions that do not start at 0, offsets that went
        backwards (all skipped with a warning when failOnDataLoss=false)."""
        start_offsets = offsets_from_dict(start)
        end_offsets = offsets_from_dict(end)
        fail = self.options.fail_on_data_loss
        new = sorted(tp for tp in end_offsets if tp not in start_offsets)
        if new:
            earliest = self.reader.earliest_offsets(new)
            for tp in new:
                if earliest[tp] != 0:
                    report_data_loss(
                        f"Added partition {tp} starts from {earliest[tp]} instead of 0", fail, log
                    )
                start_offsets[tp] = earliest[tp]
            log.info("pylog source: new partitions %s start at earliest", ", ".join(map(str, new)))
        gone = sorted(tp for tp in start_offsets if tp not in end_offsets)
        if gone:
            report_data_loss(
                f"{', '.join(map(str, gone))} are gone (topic or partitions deleted)"
                + self._group_id_hint(),
                fail,
                log,
            )
        ranges = []
        for tp in sorted(end_offsets):
            from_offset, until_offset = start_offsets[tp], end_offsets[tp]
            if until_offset < from_offset:
                report_data_loss(
                    f"Partition {tp}'s offset was changed from {from_offset} to {until_offset}: "
                    f"offsets [{until_offset}, {from_offset}) may have been lost",
                    fail,
                    log,
                )
                continue
            ranges.append(OffsetRange(tp, from_offset, until_offset))
        return ranges

    def _group_id_hint(self) -> str:
        if self.options.group_id is None:
            return ""
        return (
            f". kafka.group.id is set to {self.options.group_id!r}: another query reading with "
            f"the same group id could be the cause"
        )

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        opts = self.options
        return plan_for_options(
            self.offset_ranges(start, end), opts, consumer_config(opts, self.bootstrap_servers, f"{self.group_id}-executor")
        )

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition), partition
        return read_partition(partition)

    # ---------------------------------------------------------------- lifecycle

    def commit(self, end: dict) -> None:
        """Spark finished every batch up to ``end``. With commitOffsetsToGroup=true, publish
        ``end`` to ``kafka.group.id`` for lag monitors (best effort: a failure is logged, the
        checkpoint stays the source of truth)."""
        if not self.options.commit_offsets_to_group:
            return
        from confluent_kafka import KafkaException

        offsets = {tp: off for tp, off in offsets_from_dict(end).items() if off >= 0}
        try:
            self.reader.commit_group_offsets(self.options.group_id, offsets)
        except KafkaException as e:
            log.warning(
                "pylog source: committing offsets to group %r failed (the query goes on; lag "
                "monitors will lag): %s", self.options.group_id, e,
            )

    def stop(self) -> None:
        if self._offset_reader is not None:
            self._offset_reader.close()
            self._offset_reader = None
