"""Source options: parsed and validated once into a frozen :class:`SourceOptions`.

Option names and defaults are those of Spark's Kafka source (``format("kafka")``), so moving a job
over is a change of format name. Spark options are case-insensitive; PySpark hands a Python data
source a ``CaseInsensitiveDict`` whose keys are **lower-cased** (``startingOffsets`` arrives as
``startingoffsets``), so every lookup here is by lower-cased name and every message spells the
option the way the documentation does.

Every error is a :class:`PylogOptionError` (a ``ValueError``) naming the option and what to set
instead. :func:`parse_source_options` checks everything that does not depend on the query type and
runs in ``DataSource.schema()``, i.e. when ``load()`` defines the DataFrame;
:func:`check_batch` / :func:`check_streaming` add the batch- or streaming-only rules.

Options added by pylog (not in Spark's Kafka source)
----------------------------------------------------
``assignmentStrategy`` (``range`` | ``roundrobin``, default ``range``)
    How topic-partition ranges are grouped into Spark tasks when ``maxPartitions`` asks for fewer
    tasks than there are ranges (Kafka's Range / RoundRobin assignors, kafka_spark.assignment).
``maxPartitions`` (positive int, default: one task per partition range)
    The most Spark tasks (input partitions) a batch is planned into. Named as the upper bound
    matching Spark's ``minPartitions``: in this source, as in Spark's, "partitions" in an option
    name means Spark partitions (tasks), and JDBC's ``numPartitions`` is likewise a maximum, so
    ``maxPartitions`` says exactly what it does where ``numPartitions`` would suggest an exact
    count. It must be >= ``minPartitions``.
``commitOffsetsToGroup`` (``true`` | ``false``, default ``false``)
    After each micro-batch is committed by Spark (``commit(end)``), also commit its end offsets to
    the consumer group ``kafka.group.id`` on the broker, so that lag monitors (kafka-consumer-
    groups, Burrow, ...) see the query's progress. Informational only: Spark's checkpoint remains
    the source of truth for where a query resumes. Requires ``kafka.group.id``.
``startingOffsetsFromOutput`` (a path)
    Start a **new** query where the output of a pylog file sink at that path left off: the source
    offsets committed with that output (``kafka_spark.files.table.committed_source_offsets``) take
    precedence over all other starting options; partitions that output never saw start at
    earliest. If the output holds no committed batch yet, the other starting options apply.
``kafka.sasl.oauthbearer.token.provider`` (``package.module:function``; also the topic sink's)
    An OAUTHBEARER login whose tokens come from that Python function, imported and called where
    each client is built, driver and executors (kafka_spark.common.token_login,
    kafka_spark.client.token_provider; docs/managed-kafka.md).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kafka_spark.common.topic_partition import TopicPartition
from kafka_spark.errors import PylogOptionError
from kafka_spark.java_properties import CONSUMER, ClientConfig, KafkaConfigError, translate
from kafka_spark.offsets import (
    EARLIEST,
    LATEST,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetJsonError,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
    offset_spec_from_json,
    offsets_from_json,
    partitions_from_json,
)
from kafka_spark.option_names import DIFFERS, PYLOG_ONLY, SAME, OptionDoc, known_names, one_of, unknown_options

__all__ = [
    "SOURCE_OPTIONS",
    "Assign",
    "PylogOptionError",
    "SourceOptions",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "check_batch",
    "check_streaming",
    "parse_source_options",
]

log = logging.getLogger("kafka_spark")


# --------------------------------------------------------------------------------------------
# Subscriptions (Spark's ConsumerStrategy)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscribe:
    """``subscribe``: a fixed list of topics; every partition of each is read."""

    topics: tuple[str, ...]


@dataclass(frozen=True)
class SubscribePattern:
    """``subscribePattern``: every topic whose whole name matches (Java ``matches()``), internal
    topics (``__consumer_offsets``, ``__transaction_state``) excluded, re-evaluated each trigger."""

    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True)
class Assign:
    """``assign``: a fixed set of topic-partitions."""

    partitions: tuple[TopicPartition, ...]


Subscription = Subscribe | SubscribePattern | Assign


# --------------------------------------------------------------------------------------------
# The parsed options
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceOptions:
    """Every source option, parsed and validated. Immutable and picklable (it travels to the
    planner worker and, inside input partitions, to executors).

    ``starting`` / ``ending`` are ``None`` when the user set none of the corresponding options;
    the default then depends on the query type (:meth:`starting_for`). ``kafka_params`` are the
    ``kafka.*`` options with the prefix removed, in librdkafka's terms (Java client properties
    translated by kafka_spark.java_properties), sorted.
    """

    subscription: Subscription
    kafka_params: tuple[tuple[str, str], ...]
    starting: OffsetSpec | None = None
    ending: OffsetSpec | None = None
    starting_option: str = "startingOffsets"
    ending_option: str = "endingOffsets"
    starting_by_timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_partitions: int | None = None
    assignment_strategy: str = "range"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id_prefix: str | None = None
    poll_timeout_ms: int = 120_000
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    commit_offsets_to_group: bool = False
    starting_offsets_from_output: str | None = None
    #: kafka_spark.avro.codec.AvroColumn per Avro-decoded column (valueFormat/keyFormat=avro), key first.
    avro_columns: tuple = ()
    #: Read path of the executors: "auto", "arrow" (own Fetch client, compiled Arrow decoding)
    #: or "librdkafka" (confluent-kafka consumers); see kafka_spark.planning.resolve_fetcher.
    fetcher: str = "auto"
    #: librdkafka name -> the kafka.* option (without the prefix) it came from, for messages.
    kafka_origin: tuple[tuple[str, str], ...] = ()
    #: kafka.default.api.timeout.ms: the timeout of the driver's metadata and offset calls.
    default_api_timeout_ms: int | None = None

    @property
    def kafka_config(self) -> dict[str, str]:
        """The ``kafka.*`` options as a confluent-kafka config dict."""
        return dict(self.kafka_params)

    @property
    def group_id(self) -> str | None:
        """``kafka.group.id``, if the user forced one."""
        return self.kafka_config.get("group.id")

    def starting_for(self, streaming: bool) -> OffsetSpec:
        """The start spec, defaulting as Spark: latest for streaming, earliest for batch."""
        if self.starting is not None:
            return self.starting
        return LatestOffsets() if streaming else EarliestOffsets()

    def ending_for_batch(self) -> OffsetSpec:
        """The end spec of a batch query, defaulting to latest."""
        return self.ending if self.ending is not None else LatestOffsets()


#: Every option of the source, as the documentation's tables show it (docs/reference/source-options.md
#: and the migration guide are rendered from this tuple): the names typos are compared against
#: come from here, so an option is added here first (CONTRIBUTING.md, "Adding a source option").
SOURCE_OPTIONS: tuple[OptionDoc, ...] = (
    OptionDoc(
        "subscribe",
        DIFFERS,
        "",
        "Comma-separated topics to read; exactly one of `subscribe`, `subscribePattern` and `assign`. "
        "Partitions added later are read. A subscribed topic that does not exist yet reads as empty, "
        "where Spark's batch read fails.",
    ),
    OptionDoc(
        "subscribePattern",
        SAME,
        "",
        "A Java regular expression; topics that match later are read too. Internal topics never match.",
    ),
    OptionDoc(
        "assign",
        SAME,
        "",
        'Topic-partitions as JSON, `{"orders":[0,1]}`. Partitions that do not exist yet are read once they do.',
    ),
    OptionDoc(
        "startingOffsets",
        SAME,
        "`latest` (streaming), `earliest` (batch)",
        '`earliest`, `latest`, or offset JSON `{"orders":{"0":23,"1":-2}}` (-2 earliest, -1 latest); whole '
        'topics as in the newest Spark (SPARK-58774): `{"a":"earliest","b":{"0":23}}`. Checked against the '
        "topic's partitions, and against `endingOffsets`, before anything is read, with Spark's messages.",
    ),
    OptionDoc(
        "endingOffsets",
        SAME,
        "`latest`",
        "Batch reads only: `latest` or offset JSON. `earliest`, `latest` and timestamps are bound at every "
        "execution of the DataFrame (SPARK-30656): a reused DataFrame sees new records and partitions.",
    ),
    OptionDoc("startingTimestamp", SAME, "", "Start every partition at the first record at or after this time (ms)."),
    OptionDoc(
        "startingOffsetsByTimestamp", SAME, "", 'Per-partition start times as JSON, `{"orders":{"0":1700000000000}}`.'
    ),
    OptionDoc(
        "startingOffsetsByTimestampStrategy",
        SAME,
        "`error`",
        "`error` or `latest`: what a partition without a record after the timestamp does.",
    ),
    OptionDoc("endingTimestamp", SAME, "", "Batch reads only: end every partition at this time (ms)."),
    OptionDoc("endingOffsetsByTimestamp", SAME, "", "Batch reads only: per-partition end times as JSON."),
    OptionDoc(
        "maxOffsetsPerTrigger",
        SAME,
        "no limit",
        (
            "The most records a micro-batch reads (admission control; before PySpark 4.2 pylog applies it "
            "itself, and Trigger.AvailableNow is one batch there: docs/spark-versions.md)."
        ),
    ),
    OptionDoc("minOffsetsPerTrigger", SAME, "", "The fewest records a micro-batch waits for, up to `maxTriggerDelay`."),
    OptionDoc("maxTriggerDelay", SAME, "`15m`", "How long a micro-batch waits for `minOffsetsPerTrigger` records."),
    OptionDoc(
        "minPartitions",
        SAME,
        "tasks planned by work",
        "The fewest Spark tasks a batch is split into; large ranges are split as Spark's "
        "KafkaOffsetRangeCalculator. Setting it gives Spark's planning (a task per partition range at least); "
        "without it pylog plans tasks by work (the migration guide, *Tasks*).",
    ),
    OptionDoc(
        "maxRecordsPerPartition",
        SAME,
        "tasks planned by work",
        "The most records a Spark task reads; setting it gives Spark's planning, as `minPartitions` does.",
    ),
    OptionDoc(
        "maxPartitions",
        PYLOG_ONLY,
        "tasks planned by work",
        "The most Spark tasks a batch is planned into; partition ranges are grouped by `assignmentStrategy`. "
        "At least `minPartitions`.",
    ),
    OptionDoc(
        "assignmentStrategy",
        PYLOG_ONLY,
        "`range`",
        "`range` or `roundrobin`: Kafka's assignor that groups partition ranges into tasks when `maxPartitions` "
        "is below their count.",
    ),
    OptionDoc(
        "failOnDataLoss",
        SAME,
        "`true`",
        "Fail when records to read were deleted (retention) or a log was truncated; errors name topic, "
        "partition and offsets. `false` skips the lost range with a warning.",
    ),
    OptionDoc(
        "includeHeaders",
        SAME,
        "`false`",
        "Adds the column `headers: array<struct<key:string,value:binary>>`.",
    ),
    OptionDoc(
        "groupIdPrefix",
        SAME,
        "`spark-kafka-source` (streaming), `spark-kafka-relation` (batch)",
        "The prefix of the consumer group ids pylog makes up when `kafka.group.id` is not set.",
    ),
    OptionDoc("kafkaConsumer.pollTimeoutMs", SAME, "`120000`", "How long a task waits for a fetch to answer."),
    OptionDoc("fetchOffset.numRetries", SAME, "`3`", "Attempts of a driver's offset lookup."),
    OptionDoc("fetchOffset.retryIntervalMs", SAME, "`1000`", "Milliseconds between those attempts."),
    OptionDoc(
        "commitOffsetsToGroup",
        PYLOG_ONLY,
        "`false`",
        "Commit each batch's end offsets to `kafka.group.id`, so lag monitors (`kafka-consumer-groups "
        "--describe`, Burrow) see the query. The group trails the query by one batch; Spark's checkpoint "
        "stays where the query resumes from.",
    ),
    OptionDoc(
        "startingOffsetsFromOutput",
        PYLOG_ONLY,
        "",
        "A `pylog-files` output path: a new query starts where that output's committed batches end "
        "(partitions it never saw start at earliest); it wins over the other starting options.",
    ),
    OptionDoc(
        "fetcher",
        PYLOG_ONLY,
        "`auto`",
        "How executors read: `arrow` fetches record batches itself and decodes them into Arrow with compiled "
        "loops; `librdkafka` reads through confluent-kafka consumers; `auto` is `arrow` on plaintext "
        "connections and `librdkafka` with TLS or SASL. `kafka.fetch.max.bytes`, `kafka.max.partition.fetch.bytes` "
        "(4 MiB by default on the `arrow` path), `kafka.fetch.min.bytes`, `kafka.fetch.wait.max.ms` (Java's "
        "`fetch.max.wait.ms`) and `kafka.isolation.level` apply to both.",
    ),
    # Accepted and ignored by Spark's source too (path is set by load(path)).
    OptionDoc("path", SAME, "", "Accepted and ignored, as by Spark's source."),
)
_KNOWN_OPTIONS = known_names(SOURCE_OPTIONS)

_TIME_UNITS_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def _time_ms(name: str, text: str) -> int:
    # Spark's JavaUtils.timeStringAsMs: "15m", "10s", "500ms", or a bare number of ms.
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if not match or match.group(2) not in ("", *_TIME_UNITS_MS):
        raise PylogOptionError(
            f"{name} must be a duration such as '15m', '30s' or '500ms' (a bare number is milliseconds), got {text!r}"
        )
    unit = _TIME_UNITS_MS[match.group(2) or "ms"]
    return int(int(match.group(1)) * unit)


def _positive_int(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise PylogOptionError(f"{name} must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise PylogOptionError(f"{name} must be positive, but it was {value}")
    return value


def _non_negative_int(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise PylogOptionError(f"{name} must be an integer >= 0, got {text!r}")
    return value


def _bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise PylogOptionError(one_of(name, text, ["true", "false"]))
    return value == "true"


def _timestamp(name: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise PylogOptionError(
            f"{name} must be a timestamp in milliseconds since the epoch, e.g. 1700000000000, got {text!r}"
        ) from None


def _offsets_json(name: str, text: str) -> dict[TopicPartition, int]:
    try:
        return offsets_from_json(text)
    except OffsetJsonError as e:
        raise PylogOptionError(f"{name}: {e}") from None


def _subscription(opts: Mapping[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribePattern", "assign") if name.lower() in opts]
    if not given:
        raise PylogOptionError(
            "One of the following options must be specified for the pylog source: subscribe, "
            'subscribePattern, assign. E.g. .option("subscribe", "orders").'
        )
    if len(given) > 1:
        raise PylogOptionError(
            "Only one of the following options can be specified for the pylog source: subscribe, "
            f"subscribePattern, assign; got {', '.join(given)}. Remove all but one."
        )
    name = given[0]
    value = opts[name.lower()]
    if name == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise PylogOptionError(
                f"No topics to subscribe to as specified value for option 'subscribe' is "
                f"'{value}'; give a comma-separated list of topics."
            )
        return Subscribe(topics)
    if name == "subscribePattern":
        if not value.strip():
            raise PylogOptionError(
                f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'"
            )
        try:
            re.compile(value.strip())
        except re.error as e:
            raise PylogOptionError(f"subscribePattern {value!r} is not a valid regular expression: {e}") from None
        return SubscribePattern(value.strip())
    try:
        partitions = partitions_from_json(value)
    except OffsetJsonError as e:
        raise PylogOptionError(f"assign: {e}") from None
    if not partitions:
        raise PylogOptionError(f"assign lists no topic-partitions: {value!r}")
    return Assign(tuple(partitions))


def _kafka_params(opts: Mapping[str, str]) -> ClientConfig:
    """The ``kafka.*`` options for the source's consumers: Java client properties translated
    (kafka_spark.java_properties), Spark's rejected ones refused with its advice."""
    params = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
    try:
        return translate(params, CONSUMER)
    except KafkaConfigError as error:
        raise PylogOptionError(str(error)) from None


def _spec(opts: Mapping[str, str], kind: str) -> tuple[OffsetSpec | None, str]:
    # Precedence as Spark: xTimestamp > xOffsetsByTimestamp > xOffsets.
    ts_name, by_ts_name, offsets_name = f"{kind}Timestamp", f"{kind}OffsetsByTimestamp", f"{kind}Offsets"
    if ts_name.lower() in opts:
        return GlobalTimestamp(_timestamp(ts_name, opts[ts_name.lower()])), ts_name
    if by_ts_name.lower() in opts:
        timestamps = _offsets_json(by_ts_name, opts[by_ts_name.lower()])
        for tp, ts in timestamps.items():
            if ts < 0:
                raise PylogOptionError(
                    f"{by_ts_name} for {tp} is {ts}; timestamps are milliseconds since the epoch (>= 0)"
                )
        return SpecificTimestamps(timestamps), by_ts_name
    if offsets_name.lower() in opts:
        text = opts[offsets_name.lower()].strip()
        if text.lower() == "earliest":
            return EarliestOffsets(), offsets_name
        if text.lower() == "latest":
            return LatestOffsets(), offsets_name
        if not text.startswith("{"):
            raise PylogOptionError(
                one_of(
                    offsets_name,
                    text,
                    ["earliest", "latest"],
                    ' or offset JSON such as {"topicA":{"0":23,"1":-1},"topicB":"earliest"}',
                )
            )
        try:
            spec = offset_spec_from_json(text)
        except OffsetJsonError as e:
            raise PylogOptionError(f"{offsets_name}: {e}") from None
        for tp, offset in spec.offsets.items():
            if offset < EARLIEST:
                raise PylogOptionError(
                    f"{offsets_name} for {tp} is {offset}; use an offset >= 0, -2 (earliest) or -1 (latest)"
                )
        return spec, offsets_name
    return None, offsets_name


def secured_connection(config: Mapping[str, str]) -> bool:
    """Whether a client config asks for TLS or SASL."""
    protocol = config.get("security.protocol", "plaintext").strip().lower()
    return protocol != "plaintext" or any(k.startswith(("sasl.", "ssl.")) for k in config)


def parse_source_options(options: Mapping[str, str], *, warn: bool = False) -> SourceOptions:
    """Parse and validate the options of ``spark.read(Stream).format("pylog")``.

    ``options`` may be PySpark's case-insensitive dict (lower-cased keys) or any mapping; keys are
    compared case-insensitively. Raises :class:`PylogOptionError`. An unknown option close to a
    known one (``startingOffset``) is a probable typo and raises "did you mean"; other unknown
    options and ignored ``kafka.*`` properties are logged, once each, when ``warn`` is set (the
    source sets it where the query is defined, not on every re-parse on executors).
    """
    from kafka_spark.avro.codec import AVRO_OPTIONS
    from kafka_spark.java_properties import warn_ignored

    opts = {str(k).lower(): str(v) for k, v in options.items()}
    known = {**_KNOWN_OPTIONS, **{name.lower(): name for name in AVRO_OPTIONS}}
    unknown_options(
        opts, known, what="the pylog source", error=PylogOptionError, warn=warn, ignore=("kafka.", "schemaregistry.")
    )

    subscription = _subscription(opts)
    client = _kafka_params(opts)
    if warn:
        warn_ignored(client, "pylog source")
    kafka_params = tuple(sorted(client.librdkafka.items()))
    starting, starting_option = _spec(opts, "starting")
    ending, ending_option = _spec(opts, "ending")

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise PylogOptionError(one_of("startingOffsetsByTimestampStrategy", strategy, ["error", "latest"]))

    def opt_int(name: str) -> int | None:
        return _positive_int(name, opts[name.lower()]) if name.lower() in opts else None

    max_per_trigger = opt_int("maxOffsetsPerTrigger")
    min_per_trigger = opt_int("minOffsetsPerTrigger")
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise PylogOptionError(
            f"The value of minOffsetsPerTrigger ({min_per_trigger}) is higher than "
            f"maxOffsetsPerTrigger ({max_per_trigger}); lower minOffsetsPerTrigger or raise "
            f"maxOffsetsPerTrigger."
        )
    min_partitions = opt_int("minPartitions")
    max_partitions = opt_int("maxPartitions")
    if min_partitions is not None and max_partitions is not None and min_partitions > max_partitions:
        raise PylogOptionError(
            f"minPartitions ({min_partitions}) is higher than maxPartitions ({max_partitions}); "
            f"a batch cannot have at least {min_partitions} and at most {max_partitions} tasks."
        )

    assignment_strategy = opts.get("assignmentstrategy", "range").strip().lower()
    if assignment_strategy not in ("range", "roundrobin"):
        raise PylogOptionError(one_of("assignmentStrategy", assignment_strategy, ["range", "roundrobin"]))

    commit_to_group = _bool("commitOffsetsToGroup", opts.get("commitoffsetstogroup", "false"))
    if commit_to_group and "group.id" not in dict(kafka_params):
        raise PylogOptionError(
            "commitOffsetsToGroup=true needs the consumer group to commit to: set kafka.group.id "
            "to the group your lag monitor watches."
        )

    fetcher = opts.get("fetcher", "auto").strip().lower()
    if fetcher not in ("auto", "arrow", "librdkafka"):
        raise PylogOptionError(one_of("fetcher", fetcher, ["auto", "arrow", "librdkafka"]))
    if fetcher == "arrow" and secured_connection(dict(kafka_params)):
        raise PylogOptionError(
            "fetcher=arrow reads over plaintext connections only, and this source sets "
            "kafka.security.protocol / kafka.sasl.* / kafka.ssl.*: drop the fetcher option (auto "
            "reads secured clusters through confluent-kafka) or set fetcher=librdkafka."
        )

    from_output = opts.get("startingoffsetsfromoutput")
    if from_output is not None and not from_output.strip():
        raise PylogOptionError("startingOffsetsFromOutput is empty; give the file sink's output path")

    return SourceOptions(
        subscription=subscription,
        kafka_params=kafka_params,
        starting=starting,
        ending=ending,
        starting_option=starting_option,
        ending_option=ending_option,
        starting_by_timestamp_strategy=strategy,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_time_ms("maxTriggerDelay", opts.get("maxtriggerdelay", "15m")),
        min_partitions=min_partitions,
        max_records_per_partition=opt_int("maxRecordsPerPartition"),
        max_partitions=max_partitions,
        assignment_strategy=assignment_strategy,
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        include_headers=_bool("includeHeaders", opts.get("includeheaders", "false")),
        group_id_prefix=opts.get("groupidprefix"),
        poll_timeout_ms=opt_int("kafkaConsumer.pollTimeoutMs") or 120_000,
        fetch_offset_num_retries=_non_negative_int("fetchOffset.numRetries", opts.get("fetchoffset.numretries", "3")),
        fetch_offset_retry_interval_ms=opt_int("fetchOffset.retryIntervalMs") or 1000,
        commit_offsets_to_group=commit_to_group,
        starting_offsets_from_output=from_output.strip() if from_output else None,
        avro_columns=_avro_columns(opts),
        fetcher=fetcher,
        kafka_origin=tuple(sorted(client.origin.items())),
        default_api_timeout_ms=_honoured_ms(client, "default.api.timeout.ms"),
    )


def _honoured_ms(client: ClientConfig, name: str) -> int | None:
    """A Java timeout pylog applies itself (kafka.default.api.timeout.ms, ...), in ms."""
    if name not in client.honoured:
        return None
    return _positive_int(f"kafka.{name}", client.honoured[name])


def _avro_columns(opts: Mapping[str, str]) -> tuple:
    """valueFormat/keyFormat=avro and their schema options (kafka_spark.avro.codec documents them)."""
    from kafka_spark.avro.codec import parse_avro_options

    columns = parse_avro_options(opts)
    return tuple(columns[role] for role in ("key", "value") if role in columns)


def check_batch(options: SourceOptions, *, warn: bool = True) -> None:
    """The batch-only rules (``spark.read``): no latest start, no earliest end (also per
    partition or topic in JSON); start and end JSON must name the same topic-partitions and
    no start may lie past its end (Spark's ``checkOffsetLimitValidity``). Rate-limit options do
    not apply and are logged as ignored when ``warn``."""
    if isinstance(options.starting, LatestOffsets):
        raise PylogOptionError(
            "starting offset can't be latest for batch queries; set startingOffsets to "
            "'earliest' or to per-partition JSON offsets"
        )
    if isinstance(options.starting, SpecificOffsets):
        for where, offset in _json_positions(options.starting):
            if offset == LATEST:
                raise PylogOptionError(
                    f"startingOffsets for {where} can't be latest (-1) for batch queries; use -2 "
                    f"(earliest) or a concrete offset"
                )
    if isinstance(options.ending, EarliestOffsets):
        raise PylogOptionError(
            "ending offset can't be earliest for batch queries; set endingOffsets to 'latest' or "
            "to per-partition JSON offsets"
        )
    if isinstance(options.ending, SpecificOffsets):
        for where, offset in _json_positions(options.ending):
            if offset == EARLIEST:
                raise PylogOptionError(
                    f"endingOffsets for {where} can't be earliest (-2) for batch queries; use -1 "
                    f"(latest) or a concrete offset"
                )
    _check_start_not_after_end(options.starting, options.ending)
    for name, value in (
        ("maxOffsetsPerTrigger", options.max_offsets_per_trigger),
        ("minOffsetsPerTrigger", options.min_offsets_per_trigger),
    ):
        if value is not None and warn:
            log.warning("%s option ignored in batch queries", name)


def _json_positions(spec: SpecificOffsets) -> list[tuple[str, int]]:
    return [(str(tp), o) for tp, o in sorted(spec.offsets.items())] + [
        (f"topic {topic}", o) for topic, o in sorted(spec.topics.items())
    ]


def _check_start_not_after_end(start: OffsetSpec | None, end: OffsetSpec | None) -> None:
    """Spark's checks of explicit start and end positions before anything is read: the same
    topic-partitions on both sides, and no start offset (timestamp) after its end."""
    pairs = [(SpecificOffsets, "offsets", "offset"), (SpecificTimestamps, "timestamps", "timestamp")]
    for kind, attr, word in pairs:
        if not (isinstance(start, kind) and isinstance(end, kind)):
            continue
        starts, ends = getattr(start, attr), getattr(end, attr)
        start_topics = getattr(start, "topics", {})
        end_topics = getattr(end, "topics", {})
        if set(starts) != set(ends) or set(start_topics) != set(end_topics):

            def names(parts: Mapping[TopicPartition, int], topics: Mapping[str, int]) -> str:
                return ", ".join([*map(str, sorted(parts)), *(f"{t} (whole topic)" for t in sorted(topics))])

            raise PylogOptionError(
                "The specified start offset and end offset should have the same topic-partitions. "
                f"Topic-partitions for start offset: {names(starts, start_topics)}, topic-partitions "
                f"for end offset: {names(ends, end_topics)}."
            )
        for tp in sorted(starts):
            if starts[tp] > ends[tp] and starts[tp] >= 0 and ends[tp] >= 0:
                raise PylogOptionError(
                    f"The specified start {word} {starts[tp]} is greater than the end {word} {ends[tp]} "
                    f"for topic {tp.topic} partition {tp.partition}."
                )


def check_streaming(options: SourceOptions) -> None:
    """The streaming-only rules (``spark.readStream``): no ending options."""
    if options.ending is not None:
        raise PylogOptionError(
            f"ending offset not valid in streaming queries: remove {options.ending_option} (a "
            f"streaming query reads until it is stopped; use Trigger.AvailableNow to stop at the "
            f"offsets present when it starts)"
        )
