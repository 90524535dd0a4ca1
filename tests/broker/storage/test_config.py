"""LogConfig: Kafka topic config names, Kafka defaults, errors CreateTopics can return (40)."""

from __future__ import annotations

import pytest

from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.errors import InvalidConfigError


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1073741824
    assert config.segment_ms == config.retention_ms == 604800000
    assert config.retention_bytes == -1
    assert config.max_message_bytes == 1048588
    assert config.index_interval_bytes == 4096
    assert config.cleanup_policy == "delete" and config.message_timestamp_type == "CreateTime"
    assert config.flush_on_ack_all


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
    assert config.cleanup_policy == "compact,delete" and config.deletes
    assert config.message_timestamp_type == "LogAppendTime" and config.max_message_bytes == 200


def test_unknown_config_names_are_invalid_and_listed() -> None:
    with pytest.raises(InvalidConfigError, match="unknown topic config 'retention.hours'.*retention.ms") as caught:
        LogConfig.from_topic_configs({"retention.hours": "1"})
    assert caught.value.error_code == 40


@pytest.mark.parametrize(
    "name, value",
    [
        ("retention.ms", "soon"),
        ("retention.ms", "-2"),
        ("segment.bytes", "10"),
        ("segment.bytes", str(2**31)),
        ("cleanup.policy", "forget"),
        ("message.timestamp.type", "WallClock"),
        ("compression.type", "brotli"),
        ("compression.zstd.level", "99"),
        ("compression.gzip.level", "0"),
    ],
)
def test_bad_values_are_invalid_configs(name: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=name.replace(".", r"\.")):
        LogConfig.from_topic_configs({name: value})


@pytest.mark.parametrize("codec", ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_every_compression_type_of_kafka_is_a_valid_topic_config(codec: str) -> None:
    assert LogConfig.from_topic_configs({"compression.type": codec}).compression_type == codec


def test_replication_settings_are_accepted_without_effect() -> None:
    config = LogConfig.from_topic_configs({"min.insync.replicas": "2", "compression.type": "producer"})
    assert config == LogConfig()


def test_compact_topics_are_not_subject_to_retention() -> None:
    assert not LogConfig.from_topic_configs({"cleanup.policy": "compact"}).deletes


def test_round_trip_through_kafka_names() -> None:
    config = LogConfig(segment_bytes=12345, flush_on_ack_all=False)
    names = config.to_topic_configs()
    assert names["segment.bytes"] == "12345" and "flush_on_ack_all" not in names
    assert LogConfig.from_topic_configs(names, LogConfig(flush_on_ack_all=False)) == config
