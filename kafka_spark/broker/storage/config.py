"""Per-topic log settings: Kafka's topic configs, snake-cased, with Kafka's defaults.

``LogConfig.from_topic_configs({"retention.ms": "60000"}, defaults)`` turns the string map of a
CreateTopics request into a config, raising ``InvalidConfigError`` (40 INVALID_CONFIG) for unknown
names and bad values, as Kafka does. A few Kafka topic configs that mean nothing on a one-node
broker (``min.insync.replicas``, ...) are accepted and ignored, so tools that always send them work.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_spark.broker.storage.errors import InvalidConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class LogConfig:
    """Settings of one partition log.

    Retention deletes whole segments: by age (``retention_ms`` against the newest record timestamp
    of a segment, or its file mtime when records carry none; -1 keeps forever) and by size
    (``retention_bytes`` per partition; -1 unlimited). ``cleanup_policy`` "compact" disables both
    and lets the log cleaner (cleaner.py) keep the newest record per key; "compact,delete" does
    both. Compaction settings: tombstones stay ``delete_retention_ms`` after their batch was first
    cleaned; segments whose newest timestamp is younger than ``min_compaction_lag_ms`` are not
    cleaned yet; a log is cleaned once its uncleaned ("dirty") bytes reach
    ``min_cleanable_dirty_ratio`` of its cleanable bytes.

    Compression: ``compression_type`` "producer" stores batches as the producer compressed them;
    "uncompressed", "gzip", "snappy", "lz4" or "zstd" makes the broker recompress every batch
    that arrives in another codec (with the codec's ``compression_*_level``), as Kafka does.
    Timestamps (CreateTime topics): a record more than ``message_timestamp_before_max_ms`` older or
    ``message_timestamp_after_max_ms`` newer than the broker's clock is refused (INVALID_TIMESTAMP).

    Durability: ``flush_on_ack_all`` fsyncs the log before acknowledging an acks=all produce (a
    one-node broker has no replica to lean on); ``flush_messages`` / ``flush_interval_ms`` force an
    fsync after that many unflushed records / milliseconds, checked on append (Kafka's
    ``flush.messages`` / ``flush.ms``, which default to never).
    """

    segment_bytes: int = 1024**3
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    index_interval_bytes: int = 4096
    flush_on_ack_all: bool = True
    flush_messages: int = LONG_MAX
    flush_interval_ms: int = LONG_MAX
    cleanup_policy: str = "delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    message_timestamp_type: str = "CreateTime"
    min_compaction_lag_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.5
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3_600_000

    def __post_init__(self) -> None:
        for name, (kafka_name, _parse, minimum) in _FIELD_RULES.items():
            value = getattr(self, name)
            if isinstance(value, int) and minimum is not None and value < minimum:
                raise InvalidConfigError(f"{kafka_name}={value} is invalid: the minimum is {minimum}")
        _cleanup_policy(self.cleanup_policy)
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise InvalidConfigError(
                f"min.cleanable.dirty.ratio={self.min_cleanable_dirty_ratio} is invalid: use a value in [0, 1]"
            )
        _timestamp_type(self.message_timestamp_type)
        _compression_type(self.compression_type)
        for name, low, high in (
            ("compression.gzip.level", 1, 9),
            ("compression.lz4.level", 1, 17),
            ("compression.zstd.level", -131072, 22),
        ):
            level = getattr(self, name.replace(".", "_"))
            if not (low <= level <= high or (name == "compression.gzip.level" and level == -1)):
                raise InvalidConfigError(
                    f"{name}={level} is invalid: use {low} to {high}"
                    + (" (or -1, the codec's default)" if name == "compression.gzip.level" else "")
                )

    @functools.cached_property  # asked on every produce; the instance is frozen
    def deletes(self) -> bool:
        """Whether time/size retention applies (cleanup.policy contains "delete")."""
        return "delete" in self.cleanup_policy.split(",")

    @functools.cached_property
    def compacts(self) -> bool:
        """Whether the log cleaner compacts this log (cleanup.policy contains "compact")."""
        return "compact" in self.cleanup_policy.split(",")

    @classmethod
    def from_topic_configs(cls, configs: Mapping[str, str | None], defaults: LogConfig | None = None) -> LogConfig:
        """``defaults`` overridden by Kafka-named topic configs (values as strings; None = default)."""
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for kafka_name, raw in configs.items():
            if raw is None:
                continue
            field_name = _BY_KAFKA_NAME.get(kafka_name)
            if field_name is None:
                if kafka_name in _ACCEPTED_AND_IGNORED:
                    continue
                raise InvalidConfigError(
                    f"unknown topic config {kafka_name!r}; this broker knows "
                    f"{', '.join(sorted(_BY_KAFKA_NAME))} (and accepts, without effect, "
                    f"{', '.join(sorted(_ACCEPTED_AND_IGNORED))})"
                )
            _, parse, _ = _FIELD_RULES[field_name]
            try:
                changes[field_name] = parse(raw.strip())
            except ValueError as error:
                raise InvalidConfigError(f"invalid value {raw!r} for topic config {kafka_name}: {error}") from None
        return dataclasses.replace(base, **changes)  # __post_init__ checks the ranges

    def to_topic_configs(self) -> dict[str, str]:
        """Kafka-named string values of every topic-level setting (for DescribeConfigs)."""
        out = {}
        for name, (kafka_name, _, _) in _FIELD_RULES.items():
            value = getattr(self, name)
            out[kafka_name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out


def _long(raw: str) -> int:
    value = int(raw)
    if not -(2**63) <= value <= LONG_MAX:
        raise ValueError("out of the range of a 64-bit long")
    return value


def _int(raw: str) -> int:
    value = int(raw)
    if not -(2**31) <= value <= INT_MAX:
        raise ValueError("out of the range of a 32-bit int")
    return value


def _cleanup_policy(raw: str) -> str:
    parts = [part.strip() for part in raw.split(",") if part.strip()]
    if not parts or any(part not in ("delete", "compact") for part in parts):
        raise InvalidConfigError(f"cleanup.policy={raw!r} is invalid: use delete, compact or compact,delete")
    return ",".join(sorted(set(parts)))


def _ratio(raw: str) -> float:
    value = float(raw)
    if not 0.0 <= value <= 1.0:
        raise ValueError("a ratio must lie between 0 and 1")
    return value


#: compression.type values, and the batch codec each one means (None: the producer's).
COMPRESSION_CODECS: dict[str, int | None] = {
    "producer": None,
    "uncompressed": 0,
    "gzip": 1,
    "snappy": 2,
    "lz4": 3,
    "zstd": 4,
}


def _compression_type(raw: str) -> str:
    if raw not in COMPRESSION_CODECS:
        raise InvalidConfigError(f"compression.type={raw!r} is invalid: use {', '.join(COMPRESSION_CODECS)}")
    return raw


def _timestamp_type(raw: str) -> str:
    if raw not in ("CreateTime", "LogAppendTime"):
        raise InvalidConfigError(f"message.timestamp.type={raw!r} is invalid: use CreateTime or LogAppendTime")
    return raw


# field name -> (Kafka topic config name, parser of its string value, minimum for numbers)
_FIELD_RULES: dict[str, tuple[str, Callable[[str], object], int | None]] = {
    "segment_bytes": ("segment.bytes", _int, 14),
    "segment_ms": ("segment.ms", _long, 1),
    "retention_ms": ("retention.ms", _long, -1),
    "retention_bytes": ("retention.bytes", _long, None),
    "max_message_bytes": ("max.message.bytes", _int, 0),
    "index_interval_bytes": ("index.interval.bytes", _int, 0),
    "flush_messages": ("flush.messages", _long, 1),
    "flush_interval_ms": ("flush.ms", _long, 0),
    "cleanup_policy": ("cleanup.policy", _cleanup_policy, None),
    "delete_retention_ms": ("delete.retention.ms", _long, 0),
    "message_timestamp_type": ("message.timestamp.type", _timestamp_type, None),
    "min_compaction_lag_ms": ("min.compaction.lag.ms", _long, 0),
    "min_cleanable_dirty_ratio": ("min.cleanable.dirty.ratio", _ratio, None),
    "compression_type": ("compression.type", _compression_type, None),
    "compression_gzip_level": ("compression.gzip.level", _int, -1),
    "compression_lz4_level": ("compression.lz4.level", _int, 1),
    "compression_zstd_level": ("compression.zstd.level", _int, -131072),
    "message_timestamp_before_max_ms": ("message.timestamp.before.max.ms", _long, 0),
    "message_timestamp_after_max_ms": ("message.timestamp.after.max.ms", _long, 0),
}
_BY_KAFKA_NAME = {kafka_name: name for name, (kafka_name, _, _) in _FIELD_RULES.items()}

# Kafka topic configs about replication, compaction tuning, tiered storage or tuning knobs this
# broker does not have; clients and tools send some of them routinely.
_ACCEPTED_AND_IGNORED = frozenset(
    {
        "file.delete.delay.ms",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        "message.downconversion.enable",
        "message.timestamp.difference.max.ms",
        "min.insync.replicas",
        "preallocate",
        "remote.storage.enable",
        "segment.index.bytes",
        "segment.jitter.ms",
        "unclean.leader.election.enable",
    }
)
