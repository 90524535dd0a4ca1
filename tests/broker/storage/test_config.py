"""LogConfig: Apache Kafka 4.3's topic configs, their defaults, and the values Kafka refuses
(INVALID_CONFIG, 40, with Kafka's message). The same cases against both brokers are in
tests/interop/test_topic_configs.py."""

from __future__ import annotations

import pytest

from kafka_spark.broker.storage.config import TOPIC_CONFIGS, LogConfig, normalize_topic_configs
from kafka_spark.broker.storage.config_def import java_double_string
from kafka_spark.broker.storage.errors import InvalidConfigError


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == config.segment_size == 1073741824
    assert config.segment_ms == config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.max_message_bytes == 1048588
    assert config.index_interval_bytes == 4096
    assert config.cleanup_policy == "delete" and config.message_timestamp_type == "CreateTime"
    assert config.file_delete_delay_ms == 60000 and config.segment_index_bytes == 10485760
    assert config.flush_on_ack_all


def test_kafka_4_3_topic_configs_are_all_known() -> None:
    # LogConfig.configKeys() of Kafka 4.3.1, internal.segment.bytes among them
    assert len(TOPIC_CONFIGS) == 34 and TOPIC_CONFIGS["internal.segment.bytes"].internal
    described = LogConfig().to_topic_configs()
    assert set(described) == set(TOPIC_CONFIGS) - {"internal.segment.bytes", "min.insync.replicas"} - {
        "unclean.leader.election.enable"
    }


def test_topic_configs_override_the_defaults() -> None:
    defaults = LogConfig(retention_ms=1000)
    config = LogConfig.from_topic_configs(
        {
            "segment.bytes": "1048576",
            "retention.bytes": "5000",
            "cleanup.policy": "delete,compact",
            "message.timestamp.type": "LogAppendTime",
            "max.message.bytes": "200",
        },
        defaults,
    )
    assert config.segment_bytes == 1048576 and config.retention_bytes == 5000
    assert config.retention_ms == 1000  # untouched default
    assert config.cleanup_policy == "delete,compact" and config.deletes and config.compacts
    assert config.message_timestamp_type == "LogAppendTime" and config.max_message_bytes == 200


def test_unknown_config_names_are_invalid() -> None:
    with pytest.raises(InvalidConfigError, match="^Unknown topic config name: retention.hours$") as caught:
        LogConfig.from_topic_configs({"retention.hours": "1"})
    assert caught.value.error_code == 40


@pytest.mark.parametrize("name", ["message.downconversion.enable", "message.timestamp.difference.max.ms"])
def test_configs_kafka_4_removed_are_unknown(name: str) -> None:
    with pytest.raises(InvalidConfigError, match="Unknown topic config name"):
        LogConfig.from_topic_configs({name: "1"})


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("retention.ms", "soon", "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
        ("retention.ms", "1_000", "Not a number of type LONG"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("segment.bytes", "1048575", "Value must be at least 1048576"),
        ("segment.bytes", str(2**31), "Not a number of type INT"),
        ("cleanup.policy", "forget", "Invalid value forget for configuration cleanup.policy: String must be one of"),
        ("cleanup.policy", "Delete", "String must be one of: compact, delete"),
        ("cleanup.policy", "delete,", "Configuration 'cleanup.policy' values must not be empty."),
        ("message.timestamp.type", "WallClock", "String must be one of: CreateTime, LogAppendTime"),
        ("compression.type", "GZIP", "String must be one of"),
        ("compression.zstd.level", "99", "Value must be no more than 22"),
        ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
        ("min.cleanable.dirty.ratio", "nan", "Not a number of type DOUBLE"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("leader.replication.throttled.replicas", "*,1:2", "must be the literal '*' or a list of replicas"),
        ("remote.storage.enable", "true", "Tiered Storage functionality is disabled in the broker"),
    ],
)
def test_values_kafka_refuses_are_invalid_configs_with_kafkas_message(name: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message.replace(".", r"\.").replace("*", r"\*")):
        LogConfig.from_topic_configs({name: value})


def test_min_compaction_lag_above_the_max_is_a_conflict() -> None:
    with pytest.raises(InvalidConfigError, match=r"conflict topic config setting min.compaction.lag.ms \(200\)"):
        LogConfig.from_topic_configs({"max.compaction.lag.ms": "100", "min.compaction.lag.ms": "200"})
    assert LogConfig.from_topic_configs({"max.compaction.lag.ms": "200", "min.compaction.lag.ms": "200"})


@pytest.mark.parametrize(
    "configs, written",
    [
        ({"retention.ms": " +5 "}, "5"),
        ({"retention.ms": "010"}, "10"),
        ({"preallocate": "TRUE"}, "true"),
        ({"compression.type": " gzip "}, "gzip"),
        ({"cleanup.policy": " compact , delete ,compact"}, "compact,delete"),
        ({"cleanup.policy": " "}, ""),
        ({"min.cleanable.dirty.ratio": "0.5d"}, "0.5"),
        ({"min.cleanable.dirty.ratio": "0x1p-2"}, "0.25"),
        ({"min.cleanable.dirty.ratio": "1"}, "1.0"),
        ({"min.cleanable.dirty.ratio": "0.0001"}, "1.0E-4"),
        ({"min.cleanable.dirty.ratio": "NaN"}, "NaN"),
        ({"leader.replication.throttled.replicas": "100:0,"}, "100:0,"),
        ({"leader.replication.throttled.replicas": "* "}, "*"),
    ],
)
def test_values_are_written_back_as_kafka_writes_them(configs: dict[str, str], written: str) -> None:
    (name,) = configs
    assert normalize_topic_configs(configs) == {name: written}
    assert LogConfig.from_topic_configs(configs).to_topic_configs()[name] == written


def test_java_double_notation() -> None:
    assert [java_double_string(x) for x in (0.5, 1.0, 1e-3, 1e-4, 1234567.0, 1e7, 0.12345678901234568)] == [
        "0.5",
        "1.0",
        "0.001",
        "1.0E-4",
        "1234567.0",
        "1.0E7",
        "0.12345678901234568",
    ]


def test_the_empty_cleanup_policy_neither_deletes_nor_compacts() -> None:
    config = LogConfig.from_topic_configs({"cleanup.policy": ""})
    assert config.cleanup_policy == "" and not config.deletes and not config.compacts


@pytest.mark.parametrize("codec", ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_every_compression_type_of_kafka_is_a_valid_topic_config(codec: str) -> None:
    assert LogConfig.from_topic_configs({"compression.type": codec}).compression_type == codec


def test_internal_segment_bytes_sets_the_segment_size_below_the_minimum() -> None:
    config = LogConfig.from_topic_configs({"internal.segment.bytes": "1024"})
    assert config.segment_size == 1024 and config.segment_bytes == 1073741824
    assert config.to_topic_configs()["internal.segment.bytes"] == "1024"


def test_max_compaction_lag_bounds_a_compacted_segment_s_age() -> None:
    compacted = LogConfig.from_topic_configs({"cleanup.policy": "compact", "max.compaction.lag.ms": "5000"})
    assert compacted.max_segment_ms == 5000
    assert LogConfig.from_topic_configs({"max.compaction.lag.ms": "5000"}).max_segment_ms == 604800000


def test_stored_configs_of_an_older_pylog_still_load() -> None:
    config = LogConfig.from_stored_configs({"segment.bytes": "1024", "message.downconversion.enable": "true"})
    assert config.segment_size == 1024


def test_round_trip_through_kafka_names() -> None:
    config = LogConfig(segment_bytes=12345678, flush_on_ack_all=False, leader_replication_throttled_replicas=("0:1",))
    names = config.to_topic_configs()
    assert names["segment.bytes"] == "12345678" and "flush_on_ack_all" not in names
    assert LogConfig.from_topic_configs(names, LogConfig(flush_on_ack_all=False)) == config
