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
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from kafka_spark.client.bootstrap import resolve_bootstrap_servers
from kafka_spark.errors import PylogError
from kafka_spark.java_properties import ROUND_ROBIN
from kafka_spark.client.librdkafka_log import routed

log = logging.getLogger("kafka_spark")

EXACTLY_ONCE = "exactly-once"
#: Java's max.block.ms default: the longest a task waits for queue room or a transaction call.
DEFAULT_MAX_BLOCK_MS = 60_000
#: The source's default of kafka.default.api.timeout.ms: how long a write waits for the cluster
#: to accept a connection and answer before it fails naming the address.
DEFAULT_API_TIMEOUT_MS = 30_000
AT_LEAST_ONCE = "at-least-once"

_SINK_OPTIONS = {
    name.lower(): name for name in (
        "topic", "deliveryGuarantee", "markerTopic", "transactionalIdPrefix", "transactionTimeoutMs",
        "includeHeaders", "path", "checkpointLocation", "queryId", "batchId",
    )
}
_HEADER_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


class TopicSinkError(PylogError, ValueError):
    """A topic sink misconfiguration, raised when the query starts; names what to change."""


class TopicSinkDeliveryError(PylogError, RuntimeError):
    """Records of a task were not delivered or its transaction did not commit; the message says
    how many and the first errors."""


@dataclass(frozen=True)
class TopicSinkOptions:
    bootstrap_servers: str
    topic: str | None
    delivery: str
    marker_topic: str
    transactional_id_prefix: str
    transaction_timeout_ms: int
    kafka: tuple[tuple[str, str], ...]
    avro: tuple = ()  # kafka_spark.avro.codec.AvroColumn per encoded column
    #: kafka.max.block.ms: how long a task waits for room in the queue and for transaction calls.
    max_block_ms: int = DEFAULT_MAX_BLOCK_MS
    #: kafka.default.api.timeout.ms: how long the driver waits for the cluster to answer at all.
    default_api_timeout_ms: int = DEFAULT_API_TIMEOUT_MS
    #: kafka.partitioner.class=...RoundRobinPartitioner: keyless rows dealt to partitions in turn.
    round_robin: bool = False
    #: The input's ``timestamp`` column is a timestamp: it becomes each record's CreateTime.
    use_timestamp: bool = True
    #: queryId / batchId options (kafka_spark.update_mode): a batch write that is batch
    #: ``batch_id`` of streaming query ``query_id``, exactly once however often it is replayed.
    query_id: str | None = None
    batch_id: int | None = None

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

    def transactional_config(self, transactional_id: str) -> dict[str, Any]:
        """The producer config of one exactly-once task."""
        return {**self.producer_config(), "transactional.id": transactional_id,
                "transaction.timeout.ms": self.transaction_timeout_ms}


def parse_sink_options(options: Mapping[str, str], schema: StructType, *, define: bool = True) -> TopicSinkOptions:
    """Validate options and the input schema; raise TopicSinkError naming what is wrong.

    Unknown options are ignored as Spark's Kafka sink ignores them (one warning each), unless one
    is close to a known option: a probable typo, refused with "did you mean". ``kafka.*`` options
    are Java producer properties or librdkafka's (kafka_spark.java_properties). Where the write is
    defined (``define``), ignored settings are logged and the producer is created once, without
    connecting, so a refused setting fails the query now, naming the option.
    """
    warn = define
    from kafka_spark.avro.codec import AVRO_OPTIONS, parse_avro_options
    from kafka_spark.java_properties import PRODUCER, KafkaConfigError, translate, warn_ignored
    from kafka_spark.option_names import one_of, unknown_options

    lowered = {key.lower(): (key, value) for key, value in options.items()}
    known = {**_SINK_OPTIONS, **{name.lower(): name for name in AVRO_OPTIONS}}
    unknown_options([key for key, _ in lowered.values()], known, what="the pylog topic sink", error=TopicSinkError,
                    warn=warn, ignore=("kafka.", "schemaregistry."))
    java = {low[len("kafka."):]: value for low, (_, value) in lowered.items()
            if low.startswith("kafka.") and low != "kafka.bootstrap.servers"}
    try:
        client = translate(java, PRODUCER)
    except KafkaConfigError as error:
        raise TopicSinkError(str(error)) from None
    if warn:
        warn_ignored(client, "pylog topic sink")

    def value(name: str, default: str | None = None) -> str | None:
        return lowered.get(name.lower(), ("", default))[1]

    delivery = value("deliveryGuarantee", EXACTLY_ONCE).strip().lower()
    if delivery not in (EXACTLY_ONCE, AT_LEAST_ONCE):
        raise TopicSinkError(one_of("deliveryGuarantee", delivery, [EXACTLY_ONCE, AT_LEAST_ONCE]))
    timeout_ms = _ms("transactionTimeoutMs", value("transactionTimeoutMs", client.honoured.get(
        "transaction.timeout.ms", "600000")))
    if not 1000 <= timeout_ms <= 900_000:
        raise TopicSinkError("transactionTimeoutMs must be between 1000 and 900000 (the broker's maximum)")
    idempotence = client.honoured.get("enable.idempotence", "true").strip().lower()
    if idempotence not in ("true", "false"):
        raise TopicSinkError(one_of("kafka.enable.idempotence", idempotence, ["true", "false"]))
    if idempotence == "false":
        if delivery == EXACTLY_ONCE:
            raise TopicSinkError("kafka.enable.idempotence=false cannot be exactly once (transactions need an "
                                 "idempotent producer): remove it, or set deliveryGuarantee=at-least-once")
        client.librdkafka["enable.idempotence"] = "false"
    topic = value("topic")
    avro = parse_avro_options({low: v for low, (_, v) in lowered.items()})
    use_timestamp = validate_schema(schema, topic, avro_roles=set(avro), warn=warn)
    query_id, batch_id = value("queryId"), value("batchId")
    if (query_id is None) != (batch_id is None):
        raise TopicSinkError("set queryId and batchId together (kafka_spark.topic_writer sets both)")
    sink = TopicSinkOptions(
        bootstrap_servers=resolve_bootstrap_servers(value("kafka.bootstrap.servers")),
        topic=topic,
        delivery=delivery,
        marker_topic=value("markerTopic", "pylog-sink-markers"),
        transactional_id_prefix=value("transactionalIdPrefix", "pylog-sink"),
        transaction_timeout_ms=timeout_ms,
        kafka=tuple(sorted(client.librdkafka.items())),
        avro=tuple(avro[role] for role in ("key", "value") if role in avro),
        max_block_ms=_ms("kafka.max.block.ms", client.honoured.get("max.block.ms", str(DEFAULT_MAX_BLOCK_MS))),
        default_api_timeout_ms=_ms("kafka.default.api.timeout.ms", client.honoured.get(
            "default.api.timeout.ms", str(DEFAULT_API_TIMEOUT_MS))),
        round_robin=client.honoured.get("partitioner.class") == ROUND_ROBIN,
        use_timestamp=use_timestamp,
        query_id=query_id,
        batch_id=_batch_id(batch_id),
    )
    if define:
        _check_producer(sink, client.origin)
    return sink


def _ms(name: str, text: str) -> int:
    try:
        ms = int(str(text).strip())
    except ValueError:
        raise TopicSinkError(f"{name} must be a number of milliseconds, got {text!r}") from None
    if ms < 0:
        raise TopicSinkError(f"{name} must be >= 0, got {ms}")
    return ms


def _batch_id(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise TopicSinkError(f"batchId must be a micro-batch id (an integer), got {text!r}") from None


def _check_producer(options: TopicSinkOptions, origin: Mapping[str, str]) -> None:
    from kafka_spark.java_properties import KafkaConfigError, check_client_config

    config = (options.transactional_config("pylog-config-check") if options.delivery == EXACTLY_ONCE
              else options.producer_config())
    origin = {**origin, "transaction.timeout.ms": "transaction.timeout.ms (or the transactionTimeoutMs option)"}
    try:
        check_client_config(config, "producer", origin, "pylog topic sink")
    except KafkaConfigError as error:
        raise TopicSinkError(str(error)) from None


def validate_schema(schema: StructType, topic_option: str | None, avro_roles: set[str] = frozenset(),
                    warn: bool = False) -> bool:
    """Spark's KafkaWriter.validateQuery; an Avro-encoded key or value (keyFormat/valueFormat=avro)
    is a struct column. Returns whether the rows' ``timestamp`` column is a timestamp, which pylog
    (unlike Spark, which ignores the column) writes as each record's CreateTime; a ``timestamp``
    column of another type is ignored, as Spark ignores it, with a warning when ``warn``."""
    fields = {field.name.lower(): field for field in schema.fields}
    allowed = {
        "value": (StringType(), BinaryType()),
        "key": (StringType(), BinaryType()),
        "topic": (StringType(),),
        "partition": (IntegerType(),),
        "headers": (_HEADER_TYPE,),
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
    stamp = fields.get("timestamp")
    if stamp is None:
        return False
    if isinstance(stamp.dataType, (TimestampType, TimestampNTZType)):
        return True
    if warn:
        from kafka_spark.option_names import warn_once

        warn_once(f"pylog topic sink: column '{stamp.name}' has type {stamp.dataType.simpleString()}, not a "
                  "timestamp: ignored (as Spark's Kafka sink ignores it); records get the time they are produced. "
                  "Cast it to timestamp to set their CreateTime.")
    return False


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
            producer = Producer(routed(config))
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
        timestamps = column("timestamp") if options.use_timestamp else [None] * count
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


class QueueFull(PylogError, RuntimeError):
    """The producer's queue stayed full for longer than ``kafka.max.block.ms``."""


def _produce_all(producer: Any, rows: Iterator[tuple[str, Any, Any, int | None, Any, int]], errors: list[Any],
                 options: TopicSinkOptions) -> int:
    def on_delivery(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    deal = _RoundRobin(producer, options.max_block_ms) if options.round_robin else None
    count = 0
    for topic, key, value, partition, headers, timestamp in rows:
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
        if partition is None and deal is not None:
            partition = deal.next(topic)
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        if timestamp:
            kwargs["timestamp"] = timestamp
        blocked_since = None
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                # Java's send() blocks up to max.block.ms for room in buffer.memory, then fails.
                now = time.monotonic()
                blocked_since = blocked_since or now
                if (now - blocked_since) * 1000 > options.max_block_ms:
                    raise QueueFull(
                        f"pylog topic sink: the producer's queue stayed full for kafka.max.block.ms="
                        f"{options.max_block_ms} ms while writing to {topic}: the cluster takes records slower "
                        "than the task produces them. Raise kafka.buffer.memory or kafka.max.block.ms, or check "
                        "the cluster") from None
                producer.poll(0.05)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    return count


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
    producer, _ = _PRODUCERS.get(options.producer_config())
    errors: list[Any] = []
    count = _produce_all(producer, _records(options, batches), errors, options)
    remaining = producer.flush(options.transaction_timeout_ms / 1000)
    if errors or remaining:
        raise TopicSinkDeliveryError(f"pylog topic sink: {len(errors) + remaining} of {count} records not delivered: {errors[:3]}")
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
    producer = Producer(routed(options.transactional_config(transactional_id)))
    block_s = options.max_block_ms / 1000.0  # Java bounds the transaction calls by max.block.ms
    producer.init_transactions(block_s)  # fences older holders, aborts what they left open
    index = Consumer(routed({"bootstrap.servers": options.bootstrap_servers, "group.id": transactional_id,
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             **dict(_security(options))}))
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
    count = _produce_all(producer, _records(options, batches), errors, options)
    marker = _MarkerDelivery()
    payload = json.dumps({"queryId": write_id, "batchId": batch_id, "partitionId": partition_id, "rows": count})
    producer.produce(options.marker_topic, key=f"{write_id}/{partition_id}".encode(), value=payload.encode(),
                     partition=0, on_delivery=marker)
    producer.flush(options.transaction_timeout_ms / 1000)
    if errors or marker.offset is None:
        producer.abort_transaction(block_s)
        raise TopicSinkDeliveryError(f"pylog topic sink: {len(errors)} of {count} records failed in {transactional_id}: "
                           f"{(errors or [marker.error])[:3]}")
    offsets = [TopicPartition(options.marker_topic, 0, marker.offset + 1, metadata=json.dumps({"batchId": batch_id}))]
    producer.send_offsets_to_transaction(offsets, group_metadata, block_s)
    producer.commit_transaction(block_s)
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
    rather than tasks after librdkafka's message timeout. A cluster that accepts no connection or
    does not answer (kafka_spark.client.reachability) is waited for up to
    kafka.default.api.timeout.ms, as the source waits, before the admin client is created."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from kafka_spark.client.reachability import ClusterUnreachable, wait_reachable
    from kafka_spark.client.refusal import CredentialsRefused, RefusalWatch, list_topics_watching

    try:
        wait_reachable(options.bootstrap_servers, options.default_api_timeout_ms / 1000.0, require_answer=True)
    except ClusterUnreachable as error:
        raise TopicSinkError(
            f"pylog topic sink: {error}. Check that the broker runs and that kafka.bootstrap.servers names it; "
            f"set kafka.default.api.timeout.ms (now {options.default_api_timeout_ms}) to wait longer."
        ) from None
    refusal = RefusalWatch()
    admin = AdminClient(routed({"bootstrap.servers": options.bootstrap_servers, **dict(_security(options)),
                                "error_cb": refusal}))
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
    def __init__(self, options: TopicSinkOptions, define: bool = True) -> None:
        self.options = options
        if not define:
            return
        if options.delivery == EXACTLY_ONCE:
            ensure_marker_topic(options)
        else:
            connect_admin(options)  # fails the query now if the cluster is unreachable or refuses us

    def write(self, iterator: Iterator[Any]) -> TopicSinkCommitMessage:
        if self.options.delivery == AT_LEAST_ONCE:
            return write_at_least_once(self.options, iterator)
        query_id, batch_id, _, _ = _task_ids()
        if query_id is None or batch_id is None:
            raise TopicSinkError("pylog topic sink: no streaming query id / batch id in the task context")
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
        # One write id per job, shared by every task attempt; a micro-batch written through
        # foreachBatch (kafka_spark.update_mode) is its query's batch, skipped when replayed.
        self.write_id = options.query_id or f"batch-{uuid.uuid4()}"
        self.batch_id = options.batch_id if options.batch_id is not None else 0
        if options.delivery == EXACTLY_ONCE:
            ensure_marker_topic(options)
        else:
            connect_admin(options)  # fails the query now if the cluster is unreachable or refuses us

    def write(self, iterator: Iterator[Any]) -> TopicSinkCommitMessage:
        if self.options.delivery == AT_LEAST_ONCE:
            return write_at_least_once(self.options, iterator)
        return write_exactly_once(self.options, iterator, self.write_id, self.batch_id)

    def commit(self, messages: list[Any]) -> None:
        log.info("pylog topic sink: batch write %s committed (%d rows)", self.write_id,
                 sum(m.rows for m in messages if m is not None))

    def abort(self, messages: list[Any]) -> None:
        log.warning("pylog topic sink: batch write %s aborted", self.write_id)


