"""Per-topic log settings: Apache Kafka 4.3's topic configs, snake-cased, with Kafka's defaults.

``TOPIC_CONFIGS`` is Kafka 4.3's set of topic configs (``LogConfig.configKeys()``), each with its
type, default and validator as Kafka declares them (config_def.py parses and checks a value as
Kafka's ConfigDef does). ``LogConfig.from_topic_configs({"retention.ms": "60000"}, defaults)``
turns the string map of a CreateTopics or AlterConfigs request into a config, raising
``InvalidConfigError`` (40 INVALID_CONFIG) with Kafka's message for an unknown name or a value
Kafka refuses; :func:`normalize_topic_configs` gives the strings Kafka stores and describes.

Every config Kafka 4.3 accepts is accepted with Kafka's meaning:

- honoured by the log: ``segment.*`` (with ``segment.jitter.ms`` and a roll when an index holds
  ``segment.index.bytes``), ``retention.*``, ``cleanup.policy`` (the empty policy keeps everything
  and compacts nothing, as Kafka 4.2+ reads it), compaction's settings (``max.compaction.lag.ms``
  rolls and cleans a compacted log whose oldest dirty record waited that long), ``flush.*``,
  ``compression.*``, ``message.timestamp.*``, ``max.message.bytes``, ``index.interval.bytes``,
  ``file.delete.delay.ms`` (segment files left by retention wait that long before removal),
  ``preallocate`` (a new segment reserves ``segment.bytes`` of disk blocks), and Kafka's internal
  ``internal.segment.bytes`` (a segment size below ``segment.bytes``'s 1 MiB minimum);
- honoured by the controller and the replica manager: ``min.insync.replicas`` and
  ``unclean.leader.election.enable`` (not LogConfig fields: their broker-wide defaults are the
  cluster's);
- stored and described, with the effect Kafka gives them on a broker configured as pylog is:
  ``leader/follower.replication.throttled.replicas`` (throttled at the broker's replication
  throttle rate, which is unlimited: pylog has no dynamic broker configs) and the tiered-storage
  settings ``local.retention.*`` and ``remote.log.*`` (meaningful only with
  ``remote.storage.enable=true``, which is refused, as Kafka refuses it while tiered storage is
  off).

Configs Kafka 4 removed (``message.downconversion.enable``, ``message.timestamp.difference.max.ms``)
are unknown names, as they are to Kafka 4.3. Topic metadata written by an older pylog is read
leniently (:meth:`LogConfig.from_stored_configs`): such names are dropped with a warning and values
are not held to ranges tightened since (``segment.bytes`` below 1 MiB keeps working).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_spark.broker.storage.config_def import (
    LONG_MAX,
    ConfigKey,
    ConfigType,
    ConfigValueError,
    at_least,
    between,
    list_of,
    one_of,
    parse,
    throttled_replicas,
    to_string,
)
from kafka_spark.broker.storage.errors import InvalidConfigError

logger = logging.getLogger("kafka_spark.broker.storage")

INT_MAX = 2**31 - 1

#: compression.type values, and the batch codec each one means (None: the producer's).
COMPRESSION_CODECS: dict[str, int | None] = {
    "producer": None,
    "uncompressed": 0,
    "gzip": 1,
    "snappy": 2,
    "lz4": 3,
    "zstd": 4,
}


@dataclass(frozen=True)
class LogConfig:
    """Settings of one partition log (Kafka's topic configs, snake-cased; see the module docstring).

    Retention deletes whole segments: by age (``retention_ms`` against the newest record timestamp
    of a segment, or its file mtime when records carry none; -1 keeps forever) and by size
    (``retention_bytes`` per partition; -1 unlimited). ``cleanup_policy`` "compact" disables both
    and lets the log cleaner (cleaner.py) keep the newest record per key; "compact,delete" does
    both; "" neither. Compaction settings: tombstones stay ``delete_retention_ms`` after their
    batch was first cleaned; segments whose newest timestamp is younger than
    ``min_compaction_lag_ms`` are not cleaned yet; a log is cleaned once its uncleaned ("dirty")
    bytes reach ``min_cleanable_dirty_ratio`` of its cleanable bytes, or once a dirty segment is
    older than ``max_compaction_lag_ms``.

    Compression: ``compression_type`` "producer" stores batches as the producer compressed them;
    "uncompressed", "gzip", "snappy", "lz4" or "zstd" makes the broker recompress every batch
    that arrives in another codec (with the codec's ``compression_*_level``), as Kafka does.
    Timestamps (CreateTime topics): a record more than ``message_timestamp_before_max_ms`` older or
    ``message_timestamp_after_max_ms`` newer than the broker's clock is refused (INVALID_TIMESTAMP).

    Durability: ``flush_on_ack_all`` fsyncs the log before acknowledging an acks=all produce (a
    one-node broker has no replica to lean on); ``flush_messages`` / ``flush_interval_ms`` force an
    fsync after that many unflushed records / milliseconds, checked on append (Kafka's
    ``flush.messages`` / ``flush.ms``, which default to never).

    Built directly (``LogConfig(segment_bytes=1000)``) a config is not range-checked: that is for
    tests and for the broker's own settings; Kafka-named configs go through
    :meth:`from_topic_configs`.
    """

    segment_bytes: int = 1024**3
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    index_interval_bytes: int = 4096
    flush_on_ack_all: bool = True
    flush_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    file_delete_delay_ms: int = 60_000
    message_timestamp_type: str = "CreateTime"
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    preallocate: bool = False
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    internal_segment_bytes: int | None = None

    @functools.cached_property  # asked on every produce; the instance is frozen
    def deletes(self) -> bool:
        """Whether time/size retention applies (cleanup.policy contains "delete")."""
        return "delete" in self.cleanup_policy.split(",")

    @functools.cached_property
    def compacts(self) -> bool:
        """Whether the log cleaner compacts this log (cleanup.policy contains "compact")."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def segment_size(self) -> int:
        """Returns the size in bytes at which a segment rolls (``internal.segment.bytes`` when set, as in Kafka)."""
        return self.internal_segment_bytes if self.internal_segment_bytes is not None else self.segment_bytes

    @property
    def max_segment_ms(self) -> int:
        """How old a segment may grow before it rolls (Kafka's ``maxSegmentMs``); ``segment.ms``, or
        ``max.compaction.lag.ms`` when sooner on a compacted log."""
        if self.compacts and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str | None], defaults: LogConfig | None = None) -> LogConfig:
        """``defaults`` overridden by Kafka-named topic configs (values as strings; None = the
        default), each checked as Kafka 4.3 checks it (InvalidConfigError with Kafka's message)."""
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for name, raw in configs.items():
            if raw is None:
                continue
            key = _key(name)
            try:
                value = key.parse(raw)
            except ConfigValueError as error:
                raise InvalidConfigError(str(error)) from None
            if name == "remote.storage.enable" and value:
                raise InvalidConfigError(
                    "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
                    "with remote log storage."
                )
            if key.name in _FIELDS:
                changes[_FIELDS[key.name]] = _field_value(key, value)
        config = dataclasses.replace(base, **changes)
        if config.min_compaction_lag_ms > config.max_compaction_lag_ms:
            raise InvalidConfigError(
                "conflict topic config setting min.compaction.lag.ms "
                f"({config.min_compaction_lag_ms}) > max.compaction.lag.ms ({config.max_compaction_lag_ms})"
            )
        return config

    @classmethod
    def from_stored_configs(cls, configs: Mapping[str, str], defaults: LogConfig | None = None) -> LogConfig:
        """The config of a topic as its metadata on disk holds it: parsed by type only (an older
        pylog checked the values by its own rules); names Kafka 4.3 does not know are dropped with
        a warning."""
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for name, raw in configs.items():
            key = TOPIC_CONFIGS.get(name)
            if key is None:
                logger.warning("topic config %s=%r is not a Kafka 4.3 topic config; it is ignored", name, raw)
                continue
            if name in _FIELDS:
                try:
                    changes[_FIELDS[name]] = _field_value(key, parse(name, key.type, raw))
                except ConfigValueError as error:
                    raise InvalidConfigError(f"stored topic config {name}={raw!r} cannot be read: {error}") from None
        return dataclasses.replace(base, **changes)

    def to_topic_configs(self) -> dict[str, str]:
        """Kafka-named string values of every log setting (DescribeConfigs lists them), as Kafka
        writes them; ``internal.segment.bytes`` only when set."""
        out = {}
        for name, field_name in _FIELDS.items():
            value = getattr(self, field_name)
            if value is None:
                continue
            out[name] = _field_string(TOPIC_CONFIGS[name], value)
        return out


def normalize_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """``configs`` as Kafka stores and describes them (``retention.ms= +5`` -> ``5``); raises
    InvalidConfigError as :meth:`LogConfig.from_topic_configs` does."""
    normalized = {}
    for name, raw in configs.items():
        try:
            normalized[name] = _key(name).normalize(raw)
        except ConfigValueError as error:
            raise InvalidConfigError(str(error)) from None
    return normalized


def config_type(name: str) -> ConfigType | None:
    """The type of topic config ``name`` (None for a name Kafka does not know)."""
    key = TOPIC_CONFIGS.get(name)
    return key.type if key is not None else None


def _key(name: str) -> ConfigKey:
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise InvalidConfigError(f"Unknown topic config name: {name}")
    return key


def _field_value(key: ConfigKey, value: Any) -> Any:
    """A parsed value as its LogConfig field holds it (cleanup.policy a string, other lists tuples)."""
    if key.type is ConfigType.LIST:
        return ",".join(value) if key.name == "cleanup.policy" else tuple(value)
    return value


def _field_string(key: ConfigKey, value: Any) -> str:
    """A LogConfig field's value as Kafka writes the config."""
    if isinstance(value, str) and key.type is ConfigType.LIST:
        value = value.split(",") if value else []
    return to_string(key.type, list(value) if isinstance(value, tuple) else value)


_LONG, _INT, _BOOL, _STRING, _DOUBLE, _LIST = (
    ConfigType.LONG,
    ConfigType.INT,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
_DEFAULTS = LogConfig()


def _config(name: str, kind: ConfigType, validator: Any = None, *, default: str | None = None) -> ConfigKey:
    key = ConfigKey(name, kind, default or "", validator, internal=name.startswith("internal."))
    if default is None:
        value = getattr(_DEFAULTS, name.replace(".", "_").replace("flush_ms", "flush_interval_ms"))
        key = dataclasses.replace(key, default=_field_string(key, value) if value is not None else "")
    return key


#: Kafka 4.3's topic configs: type, default and validator as ``LogConfig`` defines them.
TOPIC_CONFIGS: dict[str, ConfigKey] = {
    key.name: key
    for key in (
        _config("cleanup.policy", _LIST, list_of("compact", "delete")),
        _config("compression.gzip.level", _INT, between(1, 9, or_equal=-1)),
        _config("compression.lz4.level", _INT, between(1, 17)),
        _config("compression.type", _STRING, one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        _config("compression.zstd.level", _INT, between(-131072, 22)),
        _config("delete.retention.ms", _LONG, at_least(0)),
        _config("file.delete.delay.ms", _LONG, at_least(0)),
        _config("flush.messages", _LONG, at_least(1)),
        _config("flush.ms", _LONG, at_least(0)),
        _config("follower.replication.throttled.replicas", _LIST, throttled_replicas),
        _config("index.interval.bytes", _INT, at_least(0)),
        _config("internal.segment.bytes", _INT),
        _config("leader.replication.throttled.replicas", _LIST, throttled_replicas),
        _config("local.retention.bytes", _LONG, at_least(-2)),
        _config("local.retention.ms", _LONG, at_least(-2)),
        _config("max.compaction.lag.ms", _LONG, at_least(1)),
        _config("max.message.bytes", _INT, at_least(0)),
        _config("message.timestamp.after.max.ms", _LONG, at_least(0)),
        _config("message.timestamp.before.max.ms", _LONG, at_least(0)),
        _config("message.timestamp.type", _STRING, one_of("CreateTime", "LogAppendTime")),
        _config("min.cleanable.dirty.ratio", _DOUBLE, between(0, 1)),
        _config("min.compaction.lag.ms", _LONG, at_least(0)),
        _config("min.insync.replicas", _INT, at_least(1), default="1"),
        _config("preallocate", _BOOL),
        _config("remote.log.copy.disable", _BOOL),
        _config("remote.log.delete.on.disable", _BOOL),
        _config("remote.storage.enable", _BOOL),
        _config("retention.bytes", _LONG),
        _config("retention.ms", _LONG, at_least(-1)),
        _config("segment.bytes", _INT, at_least(1024 * 1024)),
        _config("segment.index.bytes", _INT, at_least(4)),
        _config("segment.jitter.ms", _LONG, at_least(0)),
        _config("segment.ms", _LONG, at_least(1)),
        _config("unclean.leader.election.enable", _BOOL, default="false"),
    )
}

#: The topic configs that act on the partitions' leaders, not on the log: the controller's metadata
#: holds them and the cluster's settings are their broker-wide defaults.
REPLICATION_CONFIGS = frozenset({"min.insync.replicas", "unclean.leader.election.enable"})

# Kafka name -> LogConfig field, for every config the log holds.
_FIELDS = {
    name: name.replace(".", "_").replace("flush_ms", "flush_interval_ms")
    for name in TOPIC_CONFIGS
    if name not in REPLICATION_CONFIGS
}
