"""The topic sink: ``df.writeStream.format("pylog")`` / ``df.write.format("pylog")``.

Input schema (Spark's Kafka sink, plus ``timestamp``), checked when the query starts:

=============  =========================================  ==========================================
column         type                                       meaning
=============  =========================================  ==========================================
``value``      string or binary, **required**             the record value
``key``        string or binary                           the record key (null: no key)
``topic``      string                                     target topic; the ``topic`` option wins
``partition``  int                                        target partition (null: partitioner)
``headers``    array<struct<key:string,value:binary>>     record headers
``timestamp``  timestamp                                  record CreateTime (Spark's sink lacks it)
=============  =========================================  ==========================================

Delivery (option ``deliveryGuarantee``):

``exactly-once`` (default for streaming writes)
    Each Spark task writes its rows in ONE Kafka transaction whose ``transactional.id`` is derived
    from the query id and the task's partition id (stable across batches and attempts, so a new
    attempt fences every older one: ``init_transactions`` aborts what a zombie left open). In the
    same transaction the task writes a marker record ``{queryId, batchId, partitionId, rows}`` to
    the marker topic (option ``markerTopic``, default ``pylog-sink-markers``) and commits, through
    ``send_offsets_to_transaction``, an offset whose metadata names the batch to the consumer
    group ``<transactionalIdPrefix>-<queryId>-p<partitionId>``. A replayed task (driver killed
    after the Kafka commit but before Spark's commit log, or a retried task) looks that group up
    after fencing, finds batch N already committed and writes nothing. read_committed consumers
    therefore see every row exactly once. An attempt fenced while it writes (by a speculative
    copy under ``spark.speculation``, or by a retry while it still ran) does not fail the task:
    it waits, up to ``transactionTimeoutMs``, for the newer attempt to commit the batch and then
    returns as a replay; Spark kills it as soon as the copy wins.

    What is NOT guaranteed: atomicity of a whole micro-batch across tasks. While a batch is being
    written (or replayed after a failure), read_committed consumers may already see the
    partitions whose tasks committed, not yet the others; a failed batch never shows a row twice,
    but it can show part of a batch before the rest. Replays must be deterministic: the rows a
    task gets for batch N must be the same on replay (true for the pylog source and for
    deterministic transformations without repartitioning by non-deterministic expressions).
    read_uncommitted consumers can see rows of aborted attempts.

``at-least-once``
    An idempotent producer, flushed before the task commits (Spark's own Kafka sink behaviour):
    a retried task may write its rows again.

Batch writes (``df.write``) use the same machinery with a write id generated per job: a retried
task attempt finds its partition already committed and skips it.

Keyed records go to the partition Kafka's Java clients would choose (murmur2, librdkafka's
``murmur2_random``), so data written here lands where JVM producers would put it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    WriterCommitMessage,
)

from kafka_spark.client.evictor import INTERVAL_S
from kafka_spark.client.librdkafka_log import routed
from kafka_spark.client.pool import ClientPool
from kafka_spark.errors import PylogError
from kafka_spark.topics.options import TopicSinkError, TopicSinkOptions, _security

log = logging.getLogger("kafka_spark")


class TopicSinkDeliveryError(PylogError, RuntimeError):
    """Records of a task were not delivered or its transaction did not commit; the message says
    how many and the first errors."""


# --- executor side ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicSinkCommitMessage(WriterCommitMessage):
    partition_id: int
    rows: int
    skipped: bool


#: An idle pooled producer is closed after this long (Spark's spark.kafka.producer.cache.timeout, 10m).
PRODUCER_IDLE_TIMEOUT_S = 600.0


class _ProducerPool:
    """Idempotent (at-least-once) producers kept in the Python worker across micro-batches,
    one per config: PySpark reuses Python workers, so batch N+1 finds batch N's producer
    connected. A shared :class:`~kafka_spark.client.pool.ClientPool` (borrowing, eviction of
    producers unborrowed for ``idle_timeout_s``, closing at exit, fork safety), as Spark's own
    Kafka sink keeps its producers (``InternalKafkaProducerPool``).

    Unlike Spark's pool, a producer given back by a failed task is closed rather than reused: a
    librdkafka producer with a fatal error (e.g. an idempotence sequence gap) fails every later
    produce, so every retry of the task in this worker would fail the same way. Thread-safe.
    """

    def __init__(self, idle_timeout_s: float = PRODUCER_IDLE_TIMEOUT_S, evict_interval_s: float = INTERVAL_S) -> None:
        self.pool: ClientPool[Any] = ClientPool(
            "producer", _discard, exclusive=False, idle_timeout_s=idle_timeout_s, evict_interval_s=evict_interval_s
        )

    def acquire(self, config: dict[str, Any]) -> Any:
        """A producer for ``config``: the pooled one if this worker has it, else a new one."""

        def create() -> Any:
            from confluent_kafka import Producer

            return Producer(routed(config))

        return self.pool.acquire(tuple(sorted(config.items())), create)

    def release(self, producer: Any, *, reusable: bool) -> None:
        """Give ``producer`` back; ``reusable=False`` (its task failed) takes it out of the pool,
        and its unsent records are dropped once nobody borrows it."""
        self.pool.release(producer, reusable=reusable)

    def evict_idle(self) -> int:
        """Close the producers nobody has borrowed for ``idle_timeout_s``; how many were closed."""
        return self.pool.evict_idle()

    def close_all(self) -> None:
        """Close every producer nobody borrows (the pool does it at the worker's exit)."""
        self.pool.close_idle()

    def __len__(self) -> int:
        return len(self.pool)


def _discard(producer: Any) -> None:
    """Drop what ``producer`` still holds and let it go (its threads end when the last reference
    does; ``close()`` would wait to flush records to a cluster that may be gone)."""
    producer.purge()
    producer.flush(0)


_PRODUCERS = _ProducerPool()


def _task_ids() -> tuple[str | None, int | None, int, int]:
    """(query id, batch id, partition id, attempt) of the running Spark task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return None, None, 0, 0
    query_id = context.getLocalProperty("sql.streaming.queryId")
    batch = context.getLocalProperty("streaming.sql.batchId")
    return query_id, int(batch) if batch is not None else None, context.partitionId(), context.attemptNumber()


@dataclass
class _Columns:
    """One Arrow batch's rows as Python lists, column by column (kafka_spark.topics.task._columns)."""

    count: int
    topic: str | None  # the ``topic`` option: every row's topic
    topics: list[Any] | None  # else each row's
    keys: list[Any]
    values: list[Any]
    partitions: list[Any] | None  # None: the column is absent
    headers: list[Any] | None
    timestamps: list[Any] | None  # milliseconds; None: not written (``includeTimestamp`` off)

    @property
    def simple(self) -> bool:
        """One topic, and no row names a partition, headers or a timestamp: the common shape."""
        return self.topic is not None and self.partitions is None and self.headers is None and self.timestamps is None


def _columns(options: TopicSinkOptions, batches: Iterator[Any]) -> Iterator[_Columns]:
    """Each batch's columns as Python lists (keys and values as str or bytes, which the producer
    takes alike; headers as (key, value) pairs; timestamps in milliseconds). A column that is
    absent or null in every row is None, so the rows it would name take the producer's defaults."""
    import pyarrow as pa

    encoders: dict[tuple[str, str], Any] = {}
    for batch in batches:
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
        count = batch.num_rows

        def column(name: str, names: dict[str, int] = names, count: int = count, batch: Any = batch) -> list[Any]:
            index = names.get(name)
            if index is None:
                return [None] * count
            array = batch.column(index)
            if name == "timestamp":
                array = array.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
            return array.to_pylist()

        def optional(
            name: str, names: dict[str, int] = names, batch: Any = batch, count: int = count
        ) -> list[Any] | None:
            index = names.get(name)
            if index is None or batch.column(index).null_count == count:
                return None
            return column(name)

        values = _avro_or_column(options, "value", batch, names, column, encoders)
        keys = _avro_or_column(options, "key", batch, names, column, encoders)
        topics = None
        if options.topic is None:
            topics = column("topic")
            if None in topics:
                raise TopicSinkError("a row has a null 'topic' and no 'topic' option is set")
        headers = optional("headers")
        if headers is not None:
            headers = [None if h is None else [(pair["key"], pair["value"]) for pair in h] for h in headers]
        yield _Columns(
            count,
            options.topic,
            topics,
            keys,
            values,
            optional("partition"),
            headers,
            optional("timestamp") if options.use_timestamp else None,
        )


def _avro_or_column(
    options: TopicSinkOptions,
    role: str,
    batch: Any,
    names: dict[str, int],
    column: Any,
    encoders: dict[tuple[str, str], Any],
) -> list[Any]:
    """The key or value bytes of a batch: the column as is, or its structs Avro-encoded."""
    avro = options.avro_column(role)
    if avro is None or role not in names:
        return column(role)
    topic = options.topic
    if topic is None:
        raise TopicSinkError(f"{role}Format=avro needs the 'topic' option (the registry subject is <topic>-{role})")
    encoder = encoders.get((role, topic))
    if encoder is None:
        encoder = encoders[(role, topic)] = avro.encoder(topic)
    return encoder.encode(batch.column(names[role]))


class QueueFull(PylogError, RuntimeError):
    """The producer's queue stayed full for longer than ``kafka.max.block.ms``."""


def _produce_all(
    producer: Any,
    batches: Iterator[_Columns],
    on_delivery: Callable[[Any, Any], None] | None,
    options: TopicSinkOptions,
) -> int:
    """Hand every row to ``producer`` with the delivery callback ``on_delivery`` (or none);
    returns how many.

    Per row this is one call of ``produce`` with positional arguments (a keyword dict per row cost
    about as much as the call itself); a batch of the common shape (one topic, no partition,
    headers or timestamp column) goes through a loop of nothing else. The positional order is
    confluent-kafka's own, ``(topic, value, key, partition, callback)``: its documented order leaves
    out ``callback``, the alias of ``on_delivery`` that comes first, so a sixth positional
    argument would be taken as ``on_delivery``, not as the timestamp."""
    deal = _RoundRobin(producer, options.max_block_ms) if options.round_robin else None
    produce = producer.produce
    count = 0
    for batch in batches:
        if batch.simple and deal is None:
            topic = batch.topic
            for key, value in zip(batch.keys, batch.values, strict=True):
                try:
                    produce(topic, value, key, -1, on_delivery)
                except BufferError:
                    _when_room(producer, options, (topic, value, key, -1, on_delivery), {})
        else:
            topics: list[Any] = batch.topics if batch.topics is not None else [batch.topic] * batch.count
            for row in range(batch.count):
                topic = topics[row]
                partition = None if batch.partitions is None else batch.partitions[row]
                if partition is None:
                    partition = -1 if deal is None else deal.next(topic)
                args = (topic, batch.values[row], batch.keys[row], partition, on_delivery)
                kwargs = {}
                if batch.timestamps is not None and batch.timestamps[row]:
                    kwargs["timestamp"] = batch.timestamps[row]
                if batch.headers is not None and batch.headers[row]:
                    kwargs["headers"] = batch.headers[row]
                try:
                    produce(*args, **kwargs)
                except BufferError:
                    _when_room(producer, options, args, kwargs)
        count += batch.count
        producer.poll(0)  # delivery reports of what went out meanwhile
    return count


def _when_room(producer: Any, options: TopicSinkOptions, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``produce(*args, **kwargs)`` once the producer's queue has room: as Java's ``send()``, which
    blocks up to ``max.block.ms`` for room in ``buffer.memory`` and then fails."""
    blocked_since = time.monotonic()
    while True:
        producer.poll(0.05)
        try:
            producer.produce(*args, **kwargs)
            return
        except BufferError:
            if (time.monotonic() - blocked_since) * 1000 > options.max_block_ms:
                raise QueueFull(
                    f"pylog topic sink: the producer's queue stayed full for kafka.max.block.ms="
                    f"{options.max_block_ms} ms while writing to {args[0]}: the cluster takes records slower "
                    "than the task produces them. Raise kafka.buffer.memory or kafka.max.block.ms, or check "
                    "the cluster"
                ) from None


class _RoundRobin:
    """Kafka's RoundRobinPartitioner: rows without a partition dealt to a topic's partitions in
    turn, keys ignored (per task; Java's counter is per producer)."""

    def __init__(self, producer: Any, timeout_ms: int) -> None:
        self.producer = producer
        self.timeout_s = max(timeout_ms / 1000.0, 1.0)
        self.counters: dict[str, list[int]] = {}

    def next(self, topic: str) -> int:
        state = self.counters.get(topic)
        if state is None:
            metadata = self.producer.list_topics(topic, timeout=self.timeout_s)
            partitions = len(metadata.topics[topic].partitions)
            if partitions == 0:
                raise TopicSinkError(f"topic {topic!r} has no partitions to deal rows to (does it exist?)")
            state = self.counters[topic] = [0, partitions]
        partition = state[0] % state[1]
        state[0] += 1
        return partition


def write_at_least_once(options: TopicSinkOptions, batches: Iterator[Any]) -> TopicSinkCommitMessage:
    _, _, partition_id, _ = _task_ids()
    producer = _PRODUCERS.acquire(options.producer_config())
    errors: list[Any] = []

    def on_delivery(error: Any, _message: Any) -> None:  # called for failed records only
        if error is not None:
            errors.append(error)

    delivered = False
    try:
        count = _produce_all(producer, _columns(options, batches), on_delivery, options)
        remaining = producer.flush(options.transaction_timeout_ms / 1000)
        if errors or remaining:
            raise TopicSinkDeliveryError(
                f"pylog topic sink: {len(errors) + remaining} of {count} records not delivered: {errors[:3]}"
            )
        delivered = True
    finally:
        _PRODUCERS.release(producer, reusable=delivered)
    return TopicSinkCommitMessage(partition_id, count, skipped=False)


def write_exactly_once(
    options: TopicSinkOptions, batches: Iterator[Any], write_id: str, batch_id: int
) -> TopicSinkCommitMessage:
    """Write one task's rows in one transaction, or skip them if this (write, batch, partition)
    was already committed. See the module docstring for the protocol.

    Each task uses a fresh transactional producer: ``init_transactions`` is what fences every
    other holder of the id (an older attempt, or another Python worker that ran this partition
    in an earlier batch), and only after it is the committed-batch lookup race-free. A producer
    cached across tasks could be fenced by another worker at any time, and that would only show
    at commit, after the task's rows were consumed.

    An attempt fenced while it writes (a speculative copy of the task, or its retry, took the id)
    waits for that newer attempt to commit the batch and then returns as a replay
    (:func:`_await_fencing_attempt`): Spark kills it when the copy wins, with no task failure.
    """
    from confluent_kafka import KafkaException, Producer, TopicPartition

    _, _, partition_id, _ = _task_ids()
    transactional_id = f"{options.transactional_id_prefix}-{write_id}-p{partition_id}"
    producer = Producer(routed(options.transactional_config(transactional_id)))
    block_s = options.max_block_ms / 1000.0  # Java bounds the transaction calls by max.block.ms
    # A broker connection up before init_transactions looks for the transaction coordinator:
    # finding none, it asks again only after 500 ms. librdkafka drops its bootstrap connection
    # once the first metadata names the brokers, so the first request is answered on that one and
    # the second waits for a connection to a broker it learned. Measured per task (new producer
    # to transactions ready): 20-60 ms, one in four 510 ms, before; 16-28 ms with this and
    # reconnect.backoff.ms=10, on Apache Kafka and on pylog's broker.
    for _ in range(2):
        producer.list_topics(options.marker_topic, timeout=block_s)
    producer.init_transactions(block_s)  # fences older holders, aborts what they left open
    index = _marker_index(options, transactional_id)
    try:
        last_batch = _committed_batch(committed_offset(index, _marker_partition(options), timeout=60).metadata)
        if last_batch is not None and last_batch >= batch_id:
            log.info("pylog topic sink: %s batch %d already committed; skipping its rows", transactional_id, batch_id)
            return TopicSinkCommitMessage(partition_id, 0, skipped=True)
        group_metadata = index.consumer_group_metadata()
    finally:
        index.close()
    producer.begin_transaction()
    count = 0
    marker = _MarkerDelivery()
    fenced = False
    try:
        # No delivery callback per row (a Python call per row): a row that fails puts the
        # transaction in the abortable state, which fails the marker record or the commit below.
        count = _produce_all(producer, _columns(options, batches), None, options)
        payload = json.dumps({"queryId": write_id, "batchId": batch_id, "partitionId": partition_id, "rows": count})
        # (topic, value, key, partition, callback): the rows may have left the queue full.
        marker_record = (options.marker_topic, payload.encode(), f"{write_id}/{partition_id}".encode(), 0, marker)
        try:
            producer.produce(*marker_record)
        except BufferError:
            _when_room(producer, options, marker_record, {})
        producer.flush(options.transaction_timeout_ms / 1000)
        if marker.offset is not None:
            offsets = [
                TopicPartition(options.marker_topic, 0, marker.offset + 1, metadata=json.dumps({"batchId": batch_id}))
            ]
            producer.send_offsets_to_transaction(offsets, group_metadata, block_s)
            producer.commit_transaction(block_s)
        elif _is_fencing(marker.error):
            fenced = True
        else:
            raise TopicSinkDeliveryError(
                f"pylog topic sink: the transaction of {transactional_id} ({count} records) failed: "
                f"its marker record was not delivered: {marker.error}"
            )
    except (KafkaException, SystemError) as raised:
        fenced = _fenced(producer, raised, block_s)
        error = _kafka_error(raised)
        if fenced:
            # The SystemError confluent-kafka raises from flush() when a delivery callback saw the
            # fatal error is never freed (a reference the extension keeps): without its traceback
            # it cannot keep this frame, and with it the fenced producer's threads, alive.
            raised.__traceback__ = None
        if not fenced and (error is None or not error.txn_requires_abort()):
            raise
        if not fenced:
            producer.abort_transaction(block_s)
            raise TopicSinkDeliveryError(
                f"pylog topic sink: the transaction of {transactional_id} ({count} records) failed and was "
                f"aborted: {error.str()}"
            ) from None
    except TopicSinkDeliveryError:
        producer.abort_transaction(block_s)
        raise
    if fenced:
        return _await_fencing_attempt(options, transactional_id, partition_id, batch_id)
    return TopicSinkCommitMessage(partition_id, count, skipped=False)


def _marker_index(options: TopicSinkOptions, transactional_id: str) -> Any:
    """A read_committed consumer of the group named by ``transactional_id``, whose committed offset
    on the marker topic names the last batch that task slot committed."""
    from confluent_kafka import Consumer

    return Consumer(
        routed(
            {
                "bootstrap.servers": options.bootstrap_servers,
                "group.id": transactional_id,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "reconnect.backoff.ms": 10,
                **dict(_security(options)),
            }
        )
    )


def _marker_partition(options: TopicSinkOptions) -> Any:
    from confluent_kafka import TopicPartition

    return TopicPartition(options.marker_topic, 0)


def _is_fencing(error: Any) -> bool:
    """Whether ``error`` (a KafkaError) says a newer producer took this transactional id."""
    from confluent_kafka import KafkaError

    return error is not None and error.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )


def _kafka_error(raised: BaseException) -> Any:
    """The KafkaError of a KafkaException (or of the one a SystemError was raised from), or None."""
    from confluent_kafka import KafkaException

    if isinstance(raised, SystemError):
        raised = raised.__cause__ or raised.__context__  # type: ignore[assignment]
    return raised.args[0] if isinstance(raised, KafkaException) else None


def _fenced(producer: Any, raised: BaseException, timeout_s: float) -> bool:
    """Whether the transaction failed because a newer producer took its transactional id.

    librdkafka says so with _FENCED (or the broker's PRODUCER_FENCED / INVALID_PRODUCER_EPOCH),
    but once fenced it answers ``produce`` with a bare _FATAL, and confluent-kafka raises the
    fatal error once only, from ``flush`` or ``poll``: while it calls the marker's delivery
    callback there, as a SystemError that may have lost it. In those cases the transaction is
    aborted, which a fenced producer refuses with its fatal error every time."""
    from confluent_kafka import KafkaError, KafkaException

    error = _kafka_error(raised)
    if _is_fencing(error):
        return True
    if error is not None and error.code() != KafkaError._FATAL:
        return False
    try:
        producer.abort_transaction(timeout_s)
    except KafkaException as refused:
        return _is_fencing(refused.args[0])
    return False


def _await_fencing_attempt(
    options: TopicSinkOptions, transactional_id: str, partition_id: int, batch_id: int
) -> TopicSinkCommitMessage:
    """This attempt was fenced while it wrote: a newer attempt of the same task (a speculative
    copy, or a retry while this attempt lived on) holds its transactional id and writes the
    batch. Wait for it to commit and return as a replay, which writes nothing: Spark kills this
    attempt as soon as the copy wins (or takes whichever finishes first), and no task failure is
    counted, as none would be for a straggler without transactions. Waits up to
    ``transactionTimeoutMs``, the longest the newer attempt's transaction can stay open, then fails.
    """
    log.info(
        "pylog topic sink: %s was fenced by a newer attempt of its task; waiting for it to commit batch %d",
        transactional_id,
        batch_id,
    )
    deadline = time.monotonic() + options.transaction_timeout_ms / 1000.0
    index = _marker_index(options, transactional_id)
    try:
        while True:
            remaining = deadline - time.monotonic()
            committed = committed_offset(index, _marker_partition(options), timeout=max(remaining, 1.0))
            last_batch = _committed_batch(committed.metadata)
            if last_batch is not None and last_batch >= batch_id:
                log.info("pylog topic sink: %s batch %d committed by the newer attempt", transactional_id, batch_id)
                return TopicSinkCommitMessage(partition_id, 0, skipped=True)
            if remaining <= 0:
                raise TopicSinkDeliveryError(
                    f"pylog topic sink: {transactional_id} was fenced by a newer attempt of its task, which did "
                    f"not commit batch {batch_id} within transactionTimeoutMs={options.transaction_timeout_ms}; "
                    "nothing of this attempt was committed, and Spark retries the task"
                )
            time.sleep(min(0.5, max(remaining, 0.0)))
    finally:
        index.close()


# Answers of a group coordinator that is moving or still loading its offsets (Kafka's Java
# consumer retries them; librdkafka's committed() hands them to the caller).
_COORDINATOR_BUSY = frozenset({"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE"})


def committed_offset(consumer: Any, partition: Any, timeout: float) -> Any:
    """``consumer.committed([partition])[0]``, asked again while the group coordinator is
    moving or loading (Apache Kafka answers so while it creates and loads __consumer_offsets,
    e.g. for the first groups after it starts), until ``timeout`` seconds have passed."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.committed([partition], timeout=max(deadline - time.monotonic(), 1))[0]
        except KafkaException as error:
            if error.args[0].name() not in _COORDINATOR_BUSY or time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


class _MarkerDelivery:
    """Delivery callback of the marker record: where it landed (or why not)."""

    def __init__(self) -> None:
        self.offset: int | None = None
        self.error: Any = None

    def __call__(self, error: Any, message: Any) -> None:
        if error is not None:
            self.error = error
        else:
            self.offset = message.offset()


def _committed_batch(metadata: str | None) -> int | None:
    if not metadata:
        return None
    try:
        return int(json.loads(metadata)["batchId"])
    except (ValueError, KeyError, TypeError):
        return None
