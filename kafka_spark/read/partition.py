"""Executor side: read the offset ranges of one input partition into Arrow record batches.

Contract of :func:`read_partition`: for each ``OffsetRange [from, until)`` of the partition, in
order, it yields exactly the records of that topic-partition whose offsets lie in
``[from, until)`` and are visible (under ``read_committed``, committed), as ``pyarrow.RecordBatch``
objects with the source schema. A replay of the same partition reads the same records: the
ranges are fixed at planning, and the read stops at ``until`` however far the log has grown.

Gaps are normal: offsets taken by transaction markers, aborted records (``read_committed``) or
removed by compaction are simply absent. A read is finished when the consumer's *position*
reaches ``until`` (a record at or past ``until``, or the end of the partition at or past it), not
when a record with offset ``until - 1`` arrives, so gaps are never mistaken for loss. Offsets that
are gone (below the log start, above the log end, a deleted partition) are data loss: an error
with ``failOnDataLoss=true``, a warning and a skip otherwise.

With the Arrow fetch path (kafka_spark.read.arrow), a partition whose ranges span several
topic-partitions reads them together, one Fetch per broker naming all of them: each
topic-partition's records still come in offset order and exactly as above, but batches of
different topic-partitions interleave instead of following the order of the ranges.

Consumers come from the worker's pool (kafka_spark.client.consumer_pool): ``assign`` + offset, never
``subscribe``. Records are taken from librdkafka in bulk (one ``poll`` that waits, then a
non-blocking ``consume`` of everything already fetched) and turned into columns with list
comprehensions, with no per-record Python objects besides the client's ``Message``.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from bisect import bisect_left
from collections.abc import Iterator

import pyarrow as pa

from kafka_spark.client.consumer_pool import PooledConsumer, acquire_consumer, release_consumer
from kafka_spark.client.refusal import explain_refusal
from kafka_spark.errors import KafkaReadError, PylogReadTimeout
from kafka_spark.offsets import OffsetRange, out_of_range_position, report_data_loss
from kafka_spark.planning import KafkaInputPartition
from kafka_spark.read.arrow_columns import HEADERS, SCHEMAS, TIMESTAMP_US, constant_string

__all__ = ["PylogReadTimeout", "read_partition", "records_to_batch"]

log = logging.getLogger("kafka_spark")

#: Records taken from librdkafka per consume call (and so, at most, per Arrow batch).
CONSUME_BATCH = 10_000


def records_to_batch(
    messages: list, offsets: list[int], topic: str, partition: int, include_headers: bool
) -> pa.RecordBatch:
    """Columns of Spark's Kafka schema from confluent-kafka ``Message`` objects (all records of
    one topic-partition, no error events). ``offsets`` are the messages' offsets, already taken.

    timestampType follows Spark (Kafka's TimestampType id): librdkafka's NOT_AVAILABLE /
    CREATE_TIME / LOG_APPEND_TIME (0/1/2) become -1/0/1. Headers: a list of (key, value) structs,
    null for a record without headers.
    """
    import pyarrow.compute as pc  # here, not at import: Spark's planner worker imports this module

    n = len(messages)
    timestamps = [m.timestamp() for m in messages]
    columns = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        constant_string(topic, n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pc.multiply(pa.array([t[1] for t in timestamps], pa.int64()), 1000).cast(TIMESTAMP_US),
        pc.subtract(pa.array([t[0] for t in timestamps], pa.int32()), 1),
    ]
    if include_headers:
        columns.append(pa.array([m.headers() for m in messages], HEADERS))
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMAS[include_headers])


def read_partition(partition: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    """Yield the records of every range of ``partition`` (see the module docstring); a batch
    read's moving bounds are resolved first (kafka_spark.read.late_binding)."""
    try:
        yield from _read_ranges(partition)
    finally:
        settle_worker_heap()


#: ``len(sys.modules)`` when this worker's heap was last frozen (None: never).
_frozen_at: int | None = None


def settle_worker_heap() -> None:
    """In a Spark Python worker, move what the reads left alive (modules, the decoder's compiled
    functions, pools) out of the garbage collector's reach, once and again only after new imports.

    Spark's daemon runs a full ``gc.collect()`` after every task of a reused worker; with numba,
    pyarrow and confluent-kafka loaded that walks ~130,000 objects, ~0.05 s of CPU per task
    however few records the task read (an eighth of reading 125,000 rows). After ``gc.freeze()``
    the collection walks only what later tasks create. Frozen objects are still freed when their
    last reference goes; only reference cycles among them would stay, and these are long-lived
    by nature. Outside a Spark task (the driver, tests calling the reader directly) nothing is
    done.
    """
    global _frozen_at
    if _frozen_at == len(sys.modules):
        return
    from pyspark import TaskContext

    if TaskContext.get() is None:
        return
    gc.collect()  # garbage is freed, not frozen
    gc.freeze()
    _frozen_at = len(sys.modules)


def _read_ranges(partition: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    ranges = partition.ranges
    if partition.late is not None:
        from kafka_spark.read.late_binding import current_ranges

        ranges = tuple(current_ranges(ranges, partition.late))
    if partition.fetcher == "arrow" and len({r.topic_partition for r in ranges if r.size > 0}) > 1:
        yield from _arrow_task_batches(partition, ranges)
        return
    for offset_range in ranges:
        if offset_range.size <= 0:
            continue
        if partition.fetcher == "arrow":
            batches = _arrow_batches(partition, offset_range)
            if partition.avro:
                batches = _with_avro(batches, partition.avro, offset_range.topic_partition)
            yield from batches
            continue
        pooled = acquire_consumer(partition.config, offset_range.topic_partition)
        reusable = False
        try:
            batches = _RangeReader(pooled, offset_range, partition).batches()
            if partition.avro:
                batches = _with_avro(batches, partition.avro, offset_range.topic_partition)
            yield from batches
            reusable = True
        finally:
            release_consumer(pooled, reusable=reusable)


def _fetch_client(partition: KafkaInputPartition):  # noqa: ANN202
    from kafka_spark.client.consumer_pool import attempt_number
    from kafka_spark.client.fetch_client import client_for

    config = dict(partition.config)
    return config, client_for(
        config["bootstrap.servers"],
        config.get("client.id", "pylog"),
        partition.poll_timeout_ms / 1000.0,
        fresh=attempt_number() > 0,
    )


def _arrow_batches(partition: KafkaInputPartition, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    from kafka_spark.read.arrow import ArrowRangeReader, fetch_settings

    config, client = _fetch_client(partition)
    reader = ArrowRangeReader(
        client,
        offset_range,
        partition,
        SCHEMAS[partition.include_headers],
        fetch_settings(config),
        lambda message: report_data_loss(message, partition.fail_on_data_loss, log),
    )
    return reader.batches()


def _arrow_task_batches(partition: KafkaInputPartition, ranges: tuple[OffsetRange, ...]) -> Iterator[pa.RecordBatch]:
    """The ranges of many partitions read together (kafka_spark.read.arrow.ArrowTaskReader):
    one Arrow batch per Fetch response, holding every partition's part of it."""
    from kafka_spark.read.arrow import ArrowTaskReader, fetch_settings

    config, client = _fetch_client(partition)
    reader = ArrowTaskReader(
        client,
        ranges,
        partition,
        SCHEMAS[partition.include_headers],
        fetch_settings(config),
        lambda message: report_data_loss(message, partition.fail_on_data_loss, log),
    )
    for parts in reader.parts():
        if partition.avro:
            batches = [batch for tp, part in parts for batch in _with_avro(iter([part]), partition.avro, tp)]
        else:
            batches = [batch for _, batch in parts]
        yield batches[0] if len(batches) == 1 else _concat(batches)


def _concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """One record batch of ``batches`` (same schema), their rows in order."""
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]


_DECODERS: dict = {}  # AvroColumn -> AvroDecoder, per Python worker (registry lookups cached)


def _with_avro(batches: Iterator[pa.RecordBatch], columns: tuple, tp) -> Iterator[pa.RecordBatch]:
    """Append ``keyAvro`` / ``valueAvro``: the key / value column decoded batch by batch."""
    for batch in batches:
        arrays, names = list(batch.columns), list(batch.schema.names)
        offsets = batch.column("offset")
        for column in columns:
            decoder = _DECODERS.get(column)
            if decoder is None:
                decoder = _DECODERS[column] = column.decoder()
            arrays.append(decoder.decode(batch.column(column.role), offsets, tp.topic, tp.partition))
            names.append(f"{column.role}Avro")
        yield pa.RecordBatch.from_arrays(arrays, names=names)


class _RangeReader:
    """Reads one ``[from, until)`` range with one pooled consumer."""

    def __init__(self, pooled: PooledConsumer, r: OffsetRange, p: KafkaInputPartition):
        self.pooled = pooled
        self.range = r
        self.tp = r.topic_partition
        self.until = r.until_offset
        self.position = r.from_offset
        self.partition = p
        self.timeout_s = p.poll_timeout_ms / 1000.0
        self.out_of_range_retries = 0
        self.refused: str | None = None  # why the cluster refused the login, if it did

    def batches(self) -> Iterator[pa.RecordBatch]:
        from confluent_kafka import KafkaError

        self.pooled.seek(self.position)
        while self.position < self.until:
            messages = self._next_messages()
            i = 0
            while i < len(messages) and self.position < self.until:
                error_at = next(
                    (j for j in range(i, len(messages)) if messages[j].error() is not None),
                    len(messages),
                )
                if error_at > i:
                    i = yield from self._records(messages, i, error_at)
                    continue
                event = messages[i]
                i += 1
                code = event.error().code()
                if code == KafkaError._PARTITION_EOF:
                    self._end_of_partition(event.offset())
                elif code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    self._out_of_range(str(event.error()))
                    messages = []  # re-assigned: anything after the event is stale
                elif code in (
                    KafkaError.UNKNOWN_TOPIC_OR_PART,
                    KafkaError._UNKNOWN_PARTITION,
                    KafkaError._UNKNOWN_TOPIC,
                ):
                    self._lose(
                        f"{self.tp} no longer exists ({event.error()}): offsets "
                        f"[{self.position}, {self.until}) cannot be read"
                    )
                    self.position = self.until
                    self.pooled.next_offset = None
                elif event.error().fatal():
                    raise KafkaReadError(f"reading {self.tp} at offset {self.position}: {event.error()}")
                else:
                    # Transport errors and the like: librdkafka retries them on its own.
                    log.warning("pylog source: reading %s: %s", self.tp, event.error())
                    if code == KafkaError._AUTHENTICATION:  # kept for the timeout's message
                        self.refused = explain_refusal(event.error().str(), "the cluster")
            if self.position >= self.until and i < len(messages):
                # Fetched past the range: keep for a read that continues at `until`.
                self.pooled.buffered = messages[i:] + self.pooled.buffered
        if self.pooled.next_offset is not None:
            self.pooled.next_offset = self.until

    def _next_messages(self) -> list:
        if self.pooled.buffered:
            messages, self.pooled.buffered = self.pooled.buffered, []
            return messages
        consumer = self.pooled.consumer
        started = time.monotonic()
        first = consumer.poll(self.timeout_s)
        if first is None:
            if self._consumer_position() >= self.until:
                # An empty poll whose position moved past `until`: the rest of the range is
                # invisible (Spark's rule for gaps the client skipped without an event).
                self.position = self.until
                return []
            if self.refused is not None:
                raise KafkaReadError(f"reading {self.tp} at offset {self.position}: {self.refused}")
            raise PylogReadTimeout(
                f"Cannot fetch record for offset {self.position} of {self.tp} in "
                f"{int((time.monotonic() - started) * 1000)} milliseconds (the range to read is "
                f"[{self.range.from_offset}, {self.until})). Check that the broker is reachable "
                f"from executors; kafkaConsumer.pollTimeoutMs sets how long to wait."
            )
        return [first, *consumer.consume(CONSUME_BATCH, 0)]

    def _records(self, messages: list, start: int, end: int):
        """Yield the records of ``messages[start:end]`` below ``until``; return the index of the
        first message not consumed."""
        segment = messages[start:end]
        offsets = [m.offset() for m in segment]
        if offsets[0] < self.position:
            raise KafkaReadError(
                f"got offset {offsets[0]} of {self.tp} while reading from {self.position}: the "
                f"broker returned records out of order"
            )
        cut = bisect_left(offsets, self.until)
        if cut:
            yield records_to_batch(
                segment[:cut] if cut < len(segment) else segment,
                offsets[:cut] if cut < len(offsets) else offsets,
                self.tp.topic,
                self.tp.partition,
                self.partition.include_headers,
            )
            self.position = offsets[cut - 1] + 1
        if cut < len(segment):
            # A record at or past `until`: the range is complete (any offsets in between are
            # invisible: transaction markers, aborted or compacted records).
            self.position = self.until
        return start + cut

    def _consumer_position(self) -> int:
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        (tp,) = self.pooled.consumer.position([KafkaTopicPartition(self.tp.topic, self.tp.partition)])
        return tp.offset

    def _watermarks(self) -> tuple[int, int]:
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        return self.pooled.consumer.get_watermark_offsets(
            KafkaTopicPartition(self.tp.topic, self.tp.partition), timeout=self.timeout_s, cached=False
        )

    def _end_of_partition(self, end: int) -> None:
        if end >= self.until:
            # The log end is at or past `until`: whatever lies in [position, until) is invisible.
            self.position = self.until
            return
        if end > self.position:
            # Offsets up to the end are invisible (they would have arrived before the event).
            self.position = end
        # The event may be stale (emitted before more records were appended): ask the broker.
        low, high = self._watermarks()
        if high >= self.until:
            return
        self._lose(
            f"{self.tp}: offsets [{max(end, self.position)}, {self.until}) are not in the log any "
            f"more (its end offset is {high}; it was truncated or the topic recreated)"
        )
        self.position = self.until
        self.pooled.next_offset = None

    def _out_of_range(self, error: str) -> None:
        low, high = self._watermarks()
        self.pooled.next_offset = None  # the consumer must be re-assigned before reading on
        new_position = out_of_range_position(
            self.tp, self.position, self.until, low, high, error, self._lose, self.out_of_range_retries
        )
        if new_position is None:
            self.out_of_range_retries += 1
        else:
            self.position = new_position
        if self.position < self.until:
            self.pooled.seek(self.position)

    def _lose(self, message: str) -> None:
        report_data_loss(message, self.partition.fail_on_data_loss, log)
