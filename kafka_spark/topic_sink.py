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
    therefore see every row exactly once.

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
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType, TimestampType

from kafka_spark.bootstrap import resolve_bootstrap_servers

log = logging.getLogger("kafka_spark")

EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"

_SINK_OPTIONS = {
    "topic", "deliveryguarantee", "markertopic", "transactionalidprefix", "transactiontimeoutms",
    "includeheaders", "path", "checkpointlocation",
    # Avro (kafka_spark.avro): the value / key column is a struct encoded with the schema
    "valueformat", "keyformat", "avroschema", "keyavroschema", "avrowireformat", "keyavrowireformat",
    "schemaregistryurl", "avromode",
}
_REJECTED_KAFKA = {
    "key.serializer": "the sink writes the key column's bytes as they are",
    "value.serializer": "the sink writes the value column's bytes as they are",
    "transactional.id": "exactly-once mode derives one per query and task; use transactionalIdPrefix",
    "enable.idempotence": "the sink always uses an idempotent producer",
}
_HEADER_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


class TopicSinkError(ValueError):
    """A topic sink misconfiguration, raised when the query starts; names what to change."""


@dataclass(frozen=True)
class TopicSinkOptions:
    bootstrap_servers: str
    topic: str | None
    delivery: str
    marker_topic: str
    transactional_id_prefix: str
    transaction_timeout_ms: int
    kafka: tuple[tuple[str, str], ...]
    avro: tuple = ()  # kafka_spark.avro.AvroColumn per encoded column

    def avro_column(self, role: str) -> Any:
        return next((column for column in self.avro if column.role == role), None)

    def producer_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
        }
        config.update(dict(self.kafka))
        return config


def parse_sink_options(options: Mapping[str, str], schema: StructType) -> TopicSinkOptions:
    """Validate options and the input schema; raise TopicSinkError naming what is wrong."""
    lowered = {key.lower(): (key, value) for key, value in options.items()}
    kafka: dict[str, str] = {}
    for low, (key, value) in lowered.items():
        if low.startswith("kafka."):
            name = key[len("kafka."):]
            if name in _REJECTED_KAFKA:
                raise TopicSinkError(f"option kafka.{name} is not supported: {_REJECTED_KAFKA[name]}")
            if name != "bootstrap.servers":
                kafka[name] = value
        elif low not in _SINK_OPTIONS and not low.startswith("schemaregistry."):
            raise TopicSinkError(
                f"unknown option {key!r} for the pylog topic sink; known options: topic, deliveryGuarantee, "
                "markerTopic, transactionalIdPrefix, transactionTimeoutMs, kafka.* (producer settings)"
            )
    delivery = lowered.get("deliveryguarantee", ("", EXACTLY_ONCE))[1].strip().lower()
    if delivery not in (EXACTLY_ONCE, AT_LEAST_ONCE):
        raise TopicSinkError(f"deliveryGuarantee must be {EXACTLY_ONCE!r} or {AT_LEAST_ONCE!r}, got {delivery!r}")
    timeout_text = lowered.get("transactiontimeoutms", ("", "600000"))[1]
    try:
        timeout_ms = int(timeout_text)
    except ValueError:
        raise TopicSinkError(f"transactionTimeoutMs must be a number of milliseconds, got {timeout_text!r}") from None
    if not 1000 <= timeout_ms <= 900_000:
        raise TopicSinkError("transactionTimeoutMs must be between 1000 and 900000 (the broker's maximum)")
    topic = lowered.get("topic", ("", None))[1]
    from kafka_spark.avro import parse_avro_options

    avro = parse_avro_options({low: value for low, (_, value) in lowered.items()})
    validate_schema(schema, topic, avro_roles=set(avro))
    bootstrap = resolve_bootstrap_servers(lowered.get("kafka.bootstrap.servers", ("", None))[1])
    from kafka_spark.jaas import JaasConfigError, librdkafka_config

    try:  # Spark's Java-only settings (kafka.sasl.jaas.config, ...) in librdkafka's terms
        kafka = librdkafka_config(kafka)
    except JaasConfigError as error:
        raise TopicSinkError(str(error)) from None
    return TopicSinkOptions(
        bootstrap_servers=bootstrap,
        topic=topic,
        delivery=delivery,
        marker_topic=lowered.get("markertopic", ("", "pylog-sink-markers"))[1],
        transactional_id_prefix=lowered.get("transactionalidprefix", ("", "pylog-sink"))[1],
        transaction_timeout_ms=timeout_ms,
        kafka=tuple(sorted(kafka.items())),
        avro=tuple(avro[role] for role in ("key", "value") if role in avro),
    )


def validate_schema(schema: StructType, topic_option: str | None, avro_roles: set[str] = frozenset()) -> None:
    """Spark's KafkaWriter.validateQuery, plus the timestamp column; an Avro-encoded key or value
    (keyFormat/valueFormat=avro) is a struct column."""
    fields = {field.name.lower(): field for field in schema.fields}
    allowed = {
        "value": (StringType(), BinaryType()),
        "key": (StringType(), BinaryType()),
        "topic": (StringType(),),
        "partition": (IntegerType(),),
        "headers": (_HEADER_TYPE,),
        "timestamp": (TimestampType(),),
    }
    if "value" not in fields:
        raise TopicSinkError(
            "the pylog topic sink needs a 'value' column (string or binary); columns were: "
            + ", ".join(schema.fieldNames())
        )
    if topic_option is None and "topic" not in fields:
        raise TopicSinkError("no topic: set the 'topic' option or give the rows a string 'topic' column")
    for name, types in allowed.items():
        field = fields.get(name)
        if field is None:
            continue
        if name in avro_roles:
            if not isinstance(field.dataType, StructType):
                raise TopicSinkError(f"column '{field.name}' has type {field.dataType.simpleString()}; with "
                                     f"{name}Format=avro it must be a struct matching the Avro schema")
            continue
        if not any(_same_type(field.dataType, expected) for expected in types):
            wanted = " or ".join(t.simpleString() for t in types)
            raise TopicSinkError(
                f"column '{field.name}' has type {field.dataType.simpleString()}, the pylog topic sink needs {wanted}"
            )


def _same_type(actual: Any, expected: Any) -> bool:
    if isinstance(expected, ArrayType):
        if not isinstance(actual, ArrayType) or not isinstance(actual.elementType, StructType):
            return False
        names = [(f.name.lower(), type(f.dataType)) for f in actual.elementType.fields]
        return names == [("key", StringType), ("value", BinaryType)]
    return type(actual) is type(expected)


# --- executor side ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TopicSinkCommitMessage(WriterCommitMessage):
    partition_id: int
    rows: int
    skipped: bool


class _ProducerPool:
    """Idempotent (at-least-once) producers kept in the Python worker across micro-batches,
    keyed by their config: PySpark reuses Python workers, so batch N+1 finds batch N's producer
    connected, as Spark's own Kafka sink caches its producers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._producers: dict[tuple[tuple[str, Any], ...], Any] = {}

    def get(self, config: dict[str, Any]) -> tuple[Any, bool]:
        """(producer, is_new)."""
        from confluent_kafka import Producer

        key = tuple(sorted(config.items()))
        with self._lock:
            producer = self._producers.get(key)
            if producer is not None:
                return producer, False
            producer = Producer(config)
            self._producers[key] = producer
            return producer, True


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


def _records(options: TopicSinkOptions, batches: Iterator[Any]) -> Iterator[tuple[str, Any, Any, int | None, Any, int]]:
    """(topic, key, value, partition, headers, timestamp_ms) per row, column by column per batch."""
    import pyarrow as pa

    encoders: dict[tuple[str, str], Any] = {}
    for batch in batches:
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}
        count = batch.num_rows

        def column(name: str) -> list[Any]:
            index = names.get(name)
            if index is None:
                return [None] * count
            array = batch.column(index)
            if name == "timestamp":
                array = array.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
            return array.to_pylist()

        values = _avro_or_column(options, "value", batch, names, column, encoders)
        keys = _avro_or_column(options, "key", batch, names, column, encoders)
        topics = [options.topic] * count if options.topic is not None else column("topic")
        partitions = column("partition")
        headers = column("headers")
        timestamps = column("timestamp")
        for row in range(count):
            topic = topics[row]
            if topic is None:
                raise TopicSinkError("a row has a null 'topic' and no 'topic' option is set")
            value = values[row]
            if isinstance(value, str):
                value = value.encode()
            key = keys[row]
            if isinstance(key, str):
                key = key.encode()
            row_headers = headers[row]
            if row_headers is not None:
                row_headers = [(h["key"], h["value"]) for h in row_headers]
            yield topic, key, value, partitions[row], row_headers, timestamps[row] or 0


def _avro_or_column(options: TopicSinkOptions, role: str, batch: Any, names: dict[str, int], column: Any,
                    encoders: dict[tuple[str, str], Any]) -> list[Any]:
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


def _produce_all(producer: Any, rows: Iterator[tuple[str, Any, Any, int | None, Any, int]], errors: list[Any]) -> int:
    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    count = 0
    for topic, key, value, partition, headers, timestamp in rows:
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        if timestamp:
            kwargs["timestamp"] = timestamp
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    return count


def write_at_least_once(options: TopicSinkOptions, batches: Iterator[Any]) -> TopicSinkCommitMessage:
    _, _, partition_id, _ = _task_ids()
    producer, _ = _PRODUCERS.get(options.producer_config())
    errors: list[Any] = []
    count = _produce_all(producer, _records(options, batches), errors)
    remaining = producer.flush(options.transaction_timeout_ms / 1000)
    if errors or remaining:
        raise RuntimeError(f"pylog topic sink: {len(errors) + remaining} of {count} records not delivered: {errors[:3]}")
    return TopicSinkCommitMessage(partition_id, count, skipped=False)


def write_exactly_once(options: TopicSinkOptions, batches: Iterator[Any], write_id: str,
                       batch_id: int) -> TopicSinkCommitMessage:
    """Write one task's rows in one transaction, or skip them if this (write, batch, partition)
    was already committed. See the module docstring for the protocol.

    Each task uses a fresh transactional producer: ``init_transactions`` is what fences every
    other holder of the id (an older attempt, or another Python worker that ran this partition
    in an earlier batch), and only after it is the committed-batch lookup race-free. A producer
    cached across tasks could be fenced by another worker at any time, and that would only show
    at commit, after the task's rows were consumed.
    """
    from confluent_kafka import Consumer, Producer, TopicPartition

    _, _, partition_id, _ = _task_ids()
    transactional_id = f"{options.transactional_id_prefix}-{write_id}-p{partition_id}"
    config = options.producer_config()
    config.update({"transactional.id": transactional_id, "transaction.timeout.ms": options.transaction_timeout_ms})
    producer = Producer(config)
    producer.init_transactions(60)  # fences older holders, aborts what they left open
    index = Consumer({"bootstrap.servers": options.bootstrap_servers, "group.id": transactional_id,
                      "enable.auto.commit": False, "isolation.level": "read_committed",
                      **dict(_security(options))})
    try:
        marker_partition = TopicPartition(options.marker_topic, 0)
        committed = committed_offset(index, marker_partition, timeout=60)
        last_batch = _committed_batch(committed.metadata)
        if last_batch is not None and last_batch >= batch_id:
            log.info("pylog topic sink: %s batch %d already committed; skipping its rows", transactional_id, batch_id)
            return TopicSinkCommitMessage(partition_id, 0, skipped=True)
        group_metadata = index.consumer_group_metadata()
    finally:
        index.close()
    producer.begin_transaction()
    errors: list[Any] = []
    count = _produce_all(producer, _records(options, batches), errors)
    marker = _MarkerDelivery()
    payload = json.dumps({"queryId": write_id, "batchId": batch_id, "partitionId": partition_id, "rows": count})
    producer.produce(options.marker_topic, key=f"{write_id}/{partition_id}".encode(), value=payload.encode(),
                     partition=0, on_delivery=marker)
    producer.flush(options.transaction_timeout_ms / 1000)
    if errors or marker.offset is None:
        producer.abort_transaction(60)
        raise RuntimeError(f"pylog topic sink: {len(errors)} of {count} records failed in {transactional_id}: "
                           f"{(errors or [marker.error])[:3]}")
    offsets = [TopicPartition(options.marker_topic, 0, marker.offset + 1, metadata=json.dumps({"batchId": batch_id}))]
    producer.send_offsets_to_transaction(offsets, group_metadata, 60)
    producer.commit_transaction(60)
    return TopicSinkCommitMessage(partition_id, count, skipped=False)


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


def _security(options: TopicSinkOptions) -> list[tuple[str, str]]:
    return [(k, v) for k, v in options.kafka if k.startswith(("security.", "sasl.", "ssl."))]


def _committed_batch(metadata: str | None) -> int | None:
    if not metadata:
        return None
    try:
        return int(json.loads(metadata)["batchId"])
    except (ValueError, KeyError, TypeError):
        return None


def connect_admin(options: TopicSinkOptions) -> tuple[Any, Any]:
    """An admin client of the sink's cluster and the cluster's metadata. Called when a query is
    defined, so that an unreachable cluster or refused credentials fail it then, with the reason,
    rather than tasks after librdkafka's message timeout."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from kafka_spark.jaas import CredentialsRefused, RefusalWatch, list_topics_watching

    refusal = RefusalWatch()
    admin = AdminClient({"bootstrap.servers": options.bootstrap_servers, **dict(_security(options)),
                         "error_cb": refusal})
    try:
        return admin, list_topics_watching(admin, refusal, options.bootstrap_servers, 15)
    except CredentialsRefused as error:
        raise TopicSinkError(str(error)) from None
    except KafkaException as error:
        raise TopicSinkError(
            f"cannot reach Kafka at {options.bootstrap_servers} ({error.args[0].str()}); "
            "check kafka.bootstrap.servers"
        ) from None


def ensure_marker_topic(options: TopicSinkOptions) -> None:
    """Create the marker topic if missing; fails fast (at query start) if the broker is unreachable."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    admin, metadata = connect_admin(options)
    if options.marker_topic in metadata.topics:
        return
    futures = admin.create_topics([NewTopic(options.marker_topic, num_partitions=1,
                                            config={"cleanup.policy": "compact"})])
    try:
        futures[options.marker_topic].result(timeout=30)
    except KafkaException as error:
        if "TOPIC_ALREADY_EXISTS" not in str(error):
            raise TopicSinkError(f"cannot create the marker topic {options.marker_topic!r}: {error}") from None


# --- driver side -----------------------------------------------------------------------------


class TopicStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: TopicSinkOptions) -> None:
        self.options = options
        if options.delivery == EXACTLY_ONCE:
            ensure_marker_topic(options)
        else:
            connect_admin(options)  # fails the query now if the cluster is unreachable or refuses us

    def write(self, iterator: Iterator[Any]) -> TopicSinkCommitMessage:
        if self.options.delivery == AT_LEAST_ONCE:
            return write_at_least_once(self.options, iterator)
        query_id, batch_id, _, _ = _task_ids()
        if query_id is None or batch_id is None:
            raise RuntimeError("pylog topic sink: no streaming query id / batch id in the task context")
        return write_exactly_once(self.options, iterator, query_id, batch_id)

    def commit(self, messages: list[Any], batchId: int) -> None:
        rows = sum(m.rows for m in messages if m is not None)
        skipped = sum(1 for m in messages if m is not None and m.skipped)
        log.info("pylog topic sink: batch %d committed (%d rows, %d task(s) skipped as already committed)",
                 batchId, rows, skipped)

    def abort(self, messages: list[Any], batchId: int) -> None:
        # Nothing to undo: an uncommitted transaction is aborted by the next attempt's
        # init_transactions or by the transaction timeout, and stays invisible to read_committed.
        log.warning("pylog topic sink: batch %d aborted", batchId)


class TopicBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: TopicSinkOptions) -> None:
        self.options = options
        self.write_id = f"batch-{uuid.uuid4()}"  # one per job, shared by every task attempt
        if options.delivery == EXACTLY_ONCE:
            ensure_marker_topic(options)
        else:
            connect_admin(options)  # fails the query now if the cluster is unreachable or refuses us

    def write(self, iterator: Iterator[Any]) -> TopicSinkCommitMessage:
        if self.options.delivery == AT_LEAST_ONCE:
            return write_at_least_once(self.options, iterator)
        return write_exactly_once(self.options, iterator, self.write_id, 0)

    def commit(self, messages: list[Any]) -> None:
        log.info("pylog topic sink: batch write %s committed (%d rows)", self.write_id,
                 sum(m.rows for m in messages if m is not None))

    def abort(self, messages: list[Any]) -> None:
        log.warning("pylog topic sink: batch write %s aborted", self.write_id)


def stream_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> TopicStreamWriter:
    return TopicStreamWriter(parse_sink_options(options, schema))


def batch_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> TopicBatchWriter:
    if overwrite:
        raise TopicSinkError("the pylog topic sink only appends: use mode('append') (topics cannot be overwritten)")
    return TopicBatchWriter(parse_sink_options(options, schema))
