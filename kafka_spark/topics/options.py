"""Options and the input schema of the topic sink (``format("pylog")`` writes), parsed and checked
once when a query or job starts; the columns and delivery guarantees are documented in
kafka_spark.topics.task.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any, overload

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
from kafka_spark.option_names import PYLOG_ONLY, SAME, OptionDoc, known_names

log = logging.getLogger("kafka_spark")

EXACTLY_ONCE = "exactly-once"


#: Java's max.block.ms default: the longest a task waits for queue room or a transaction call.
DEFAULT_MAX_BLOCK_MS = 60_000
#: The source's default of kafka.default.api.timeout.ms: how long a write waits for the cluster
#: to accept a connection and answer before it fails naming the address.
DEFAULT_API_TIMEOUT_MS = 30_000


AT_LEAST_ONCE = "at-least-once"


#: The topic sink's options as the documentation lists them, compared with Spark's Kafka sink.
TOPIC_SINK_OPTIONS: tuple[OptionDoc, ...] = (
    OptionDoc(
        "topic",
        SAME,
        "",
        "The topic of rows without a `topic` column (a `topic` column wins over it, as in Spark).",
    ),
    OptionDoc(
        "deliveryGuarantee",
        PYLOG_ONLY,
        "`exactly-once`",
        "`exactly-once`: each task writes its rows in one Kafka transaction with a marker record; "
        "`at-least-once`: Spark's own behaviour, with an idempotent producer.",
    ),
    OptionDoc(
        "markerTopic",
        PYLOG_ONLY,
        "`pylog-sink-markers`",
        "The compacted topic of the (query, batch, partition) markers that make a replayed task skip.",
    ),
    OptionDoc(
        "transactionalIdPrefix",
        PYLOG_ONLY,
        "`pylog-sink`",
        "The prefix of each task's `transactional.id` (grant it in ACLs); the rest is derived from the "
        "query id and the task's partition, which fences older attempts.",
    ),
    OptionDoc(
        "transactionTimeoutMs",
        PYLOG_ONLY,
        "`kafka.transaction.timeout.ms`, else `600000`",
        "The transaction timeout of each task, 1000 to 900000 (the broker's maximum).",
    ),
    OptionDoc(
        "includeHeaders",
        SAME,
        "",
        "Accepted and ignored: a `headers` column is written whenever the input has one, as by Spark's sink.",
    ),
    OptionDoc("path", SAME, "", "Accepted and ignored."),
    OptionDoc("checkpointLocation", SAME, "", "Spark's checkpoint, as for any streaming sink."),
    OptionDoc(
        "queryId",
        PYLOG_ONLY,
        "",
        "With `batchId`: a batch write that is that batch of that streaming query, written exactly once "
        "however often it runs (`kafka_spark.topic_writer` sets both).",
    ),
    OptionDoc("batchId", PYLOG_ONLY, "", "See `queryId`."),
    # Set by Spark, not by the user: DataStreamWriter.queryName(...) reaches the sink as an option.
    OptionDoc(
        "queryName", SAME, "", "Set by Spark, not by you: a query's `.queryName(...)` reaches the sink as this option."
    ),
)
_SINK_OPTIONS = known_names(TOPIC_SINK_OPTIONS)


_HEADER_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


class TopicSinkError(PylogError, ValueError):
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

    def _common_config(self) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
        }

    def producer_config(self) -> dict[str, Any]:
        """The config of the at-least-once producers. Only a failed record gets a delivery report:
        a report per delivered record is a Python call per row (about a quarter of a task's CPU),
        and a failure is all the task looks for."""
        return {**self._common_config(), "delivery.report.only.error": True, **dict(self.kafka)}

    def transactional_config(self, transactional_id: str) -> dict[str, Any]:
        """The producer config of one exactly-once task. Its rows need no delivery report (a failed
        row makes the transaction's commit fail), but the marker record's report gives its offset."""
        return {
            **self._common_config(),
            # librdkafka drops its bootstrap connection once it knows the brokers and connects to
            # them after reconnect.backoff.ms (100 ms by default); a task's setup pays it twice.
            "reconnect.backoff.ms": 10,
            **dict(self.kafka),
            "transactional.id": transactional_id,
            "transaction.timeout.ms": self.transaction_timeout_ms,
            "delivery.report.only.error": False,
        }


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
    unknown_options(
        [key for key, _ in lowered.values()],
        known,
        what="the pylog topic sink",
        error=TopicSinkError,
        warn=warn,
        ignore=("kafka.", "schemaregistry."),
    )
    java = {
        low[len("kafka.") :]: value
        for low, (_, value) in lowered.items()
        if low.startswith("kafka.") and low != "kafka.bootstrap.servers"
    }
    try:
        client = translate(java, PRODUCER)
    except KafkaConfigError as error:
        raise TopicSinkError(str(error)) from None
    if warn:
        warn_ignored(client, "pylog topic sink")

    @overload
    def value(name: str, default: str) -> str: ...
    @overload
    def value(name: str, default: None = None) -> str | None: ...
    def value(name: str, default: str | None = None) -> str | None:
        return lowered.get(name.lower(), ("", default))[1]

    delivery = value("deliveryGuarantee", EXACTLY_ONCE).strip().lower()
    if delivery not in (EXACTLY_ONCE, AT_LEAST_ONCE):
        raise TopicSinkError(one_of("deliveryGuarantee", delivery, [EXACTLY_ONCE, AT_LEAST_ONCE]))
    timeout_ms = _ms(
        "transactionTimeoutMs", value("transactionTimeoutMs", client.honoured.get("transaction.timeout.ms", "600000"))
    )
    if not 1000 <= timeout_ms <= 900_000:
        raise TopicSinkError("transactionTimeoutMs must be between 1000 and 900000 (the broker's maximum)")
    idempotence = client.honoured.get("enable.idempotence", "true").strip().lower()
    if idempotence not in ("true", "false"):
        raise TopicSinkError(one_of("kafka.enable.idempotence", idempotence, ["true", "false"]))
    if idempotence == "false":
        if delivery == EXACTLY_ONCE:
            raise TopicSinkError(
                "kafka.enable.idempotence=false cannot be exactly once (transactions need an "
                "idempotent producer): remove it, or set deliveryGuarantee=at-least-once"
            )
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
        default_api_timeout_ms=_ms(
            "kafka.default.api.timeout.ms", client.honoured.get("default.api.timeout.ms", str(DEFAULT_API_TIMEOUT_MS))
        ),
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

    config = (
        options.transactional_config("pylog-config-check")
        if options.delivery == EXACTLY_ONCE
        else options.producer_config()
    )
    origin = {**origin, "transaction.timeout.ms": "transaction.timeout.ms (or the transactionTimeoutMs option)"}
    try:
        check_client_config(config, "producer", origin, "pylog topic sink")
    except KafkaConfigError as error:
        raise TopicSinkError(str(error)) from None


def validate_schema(
    schema: StructType, topic_option: str | None, avro_roles: Set[str] = frozenset(), warn: bool = False
) -> bool:
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
                raise TopicSinkError(
                    f"column '{field.name}' has type {field.dataType.simpleString()}; with "
                    f"{name}Format=avro it must be a struct matching the Avro schema"
                )
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

        warn_once(
            f"pylog topic sink: column '{stamp.name}' has type {stamp.dataType.simpleString()}, not a "
            "timestamp: ignored (as Spark's Kafka sink ignores it); records get the time they are produced. "
            "Cast it to timestamp to set their CreateTime."
        )
    return False


def _same_type(actual: Any, expected: Any) -> bool:
    if isinstance(expected, ArrayType):
        if not isinstance(actual, ArrayType) or not isinstance(actual.elementType, StructType):
            return False
        names = [(f.name.lower(), type(f.dataType)) for f in actual.elementType.fields]
        return names == [("key", StringType), ("value", BinaryType)]
    return type(actual) is type(expected)


def _security(options: TopicSinkOptions) -> list[tuple[str, str]]:
    """The connection and login settings, for the sink's admin and index clients (librdkafka's
    unsecured OAUTHBEARER switch and the OIDC endpoint's CA are named outside ``sasl.*``)."""
    return [
        (k, v)
        for k, v in options.kafka
        if k.startswith(("security.", "sasl.", "ssl.", "https."))
        or k in ("enable.sasl.oauthbearer.unsecure.jwt", "enable.ssl.certificate.verification")
    ]
