"""LogManager: topics of a log directory, persisted across restarts, with Kafka's error codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_spark.broker.storage.batch import build_record_batch
from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from kafka_spark.broker.storage.log_manager import LogManager, check_new_topic, is_valid_topic_name

TS = 1_700_000_000_000


def batch(value: bytes = b"v") -> bytes:
    return build_record_batch([(None, value, (), TS)])


@pytest.fixture
def manager(tmp_path: Path):
    logs = LogManager(tmp_path, LogConfig())
    yield logs
    logs.close()


def test_topics_and_data_survive_a_restart(tmp_path: Path) -> None:
    logs = LogManager(tmp_path, LogConfig())
    created = logs.create_topic("orders", 3, {"retention.ms": "60000"})
    logs.get_log("orders", 2).append(batch(b"kept"))
    logs.close()

    logs = LogManager(tmp_path, LogConfig())
    info = logs.topics()["orders"]
    assert (info.partitions, dict(info.configs), info.topic_id) == (3, {"retention.ms": "60000"}, created.topic_id)
    log = logs.get_log("orders", 2)
    assert log.config.retention_ms == 60000 and log.log_end_offset == 1
    assert b"kept" in bytes(log.read(0, 1000))
    logs.close()


def test_deleted_topics_stay_deleted_after_a_restart(tmp_path: Path) -> None:
    logs = LogManager(tmp_path, LogConfig())
    logs.create_topic("a", 2)
    logs.create_topic("b", 1)
    logs.get_log("a", 0).append(batch())
    logs.delete_topic("a")
    assert set(logs.topics()) == {"b"}
    assert not (tmp_path / "a-0").exists() and not (tmp_path / "a-1").exists()
    logs.close()
    logs = LogManager(tmp_path, LogConfig())
    assert set(logs.topics()) == {"b"}
    logs.close()


def test_a_deletion_cut_short_by_a_crash_is_finished_on_start(tmp_path: Path) -> None:
    logs = LogManager(tmp_path, LogConfig())
    logs.create_topic("gone", 1)
    logs.close()
    (metadata,) = (tmp_path / ".topics").glob("*.json")
    document = json.loads(metadata.read_text())
    metadata.write_text(json.dumps({**document, "deleted": True}))  # the commit point was written
    logs = LogManager(tmp_path, LogConfig())
    assert logs.topics() == {}
    assert not (tmp_path / "gone-0").exists() and not metadata.exists()
    logs.close()


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "with space", "ünïcode", "x" * 250, "semi;colon"])
def test_illegal_topic_names_are_refused(manager: LogManager, name: str) -> None:
    assert not is_valid_topic_name(name)
    with pytest.raises(InvalidTopicError, match="illegal") as caught:
        manager.create_topic(name, 1)
    assert caught.value.error_code == 17


def test_legal_topic_names_are_accepted(manager: LogManager) -> None:
    for name in ["x" * 249, "a.b_c-D9", "__internal", "..."]:
        manager.create_topic(name, 1)
    assert len(manager.topics()) == 4


def test_names_differing_only_by_dot_and_underscore_collide(manager: LogManager) -> None:
    manager.create_topic("metrics.cpu", 1)
    with pytest.raises(InvalidTopicError, match="collides"):
        manager.create_topic("metrics_cpu", 1)


def test_creating_an_existing_topic_is_refused(manager: LogManager) -> None:
    manager.create_topic("orders", 1)
    with pytest.raises(TopicExistsError) as caught:
        manager.create_topic("orders", 2)
    assert caught.value.error_code == 36


def test_partition_count_must_be_positive(manager: LogManager) -> None:
    with pytest.raises(InvalidPartitionsError) as caught:
        manager.create_topic("orders", 0)
    assert caught.value.error_code == 37


def test_bad_config_creates_nothing(manager: LogManager, tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError):
        manager.create_topic("orders", 1, {"retention.ms": "forever"})
    assert manager.topics() == {}
    assert not (tmp_path / "orders-0").exists()


def test_check_new_topic_checks_without_creating(manager: LogManager, tmp_path: Path) -> None:
    config = check_new_topic("orders", 2, {"internal.segment.bytes": "1000"}, manager.topics(), LogConfig())
    assert config.segment_size == 1000 and config.segment_bytes == 1073741824
    with pytest.raises(InvalidConfigError, match="Value must be at least 1048576"):
        check_new_topic("orders", 2, {"segment.bytes": "1000"}, manager.topics(), LogConfig())
    assert manager.topics() == {} and not (tmp_path / "orders-0").exists()


def test_unknown_topics_and_partitions_are_error_3_with_a_teaching_message(manager: LogManager) -> None:
    manager.create_topic("orders", 2)
    with pytest.raises(UnknownTopicOrPartitionError, match="does not exist") as caught:
        manager.get_log("payments", 0)
    assert caught.value.error_code == 3
    with pytest.raises(UnknownTopicOrPartitionError, match="numbered 0-1; there is no partition 2"):
        manager.get_log("orders", 2)
    with pytest.raises(UnknownTopicOrPartitionError):
        manager.delete_topic("payments")


def test_add_partitions_grows_a_topic(tmp_path: Path) -> None:
    logs = LogManager(tmp_path, LogConfig())
    logs.create_topic("orders", 1)
    with pytest.raises(InvalidPartitionsError):
        logs.add_partitions("orders", 1)
    assert logs.add_partitions("orders", 3).partitions == 3
    logs.get_log("orders", 2).append(batch())
    logs.close()
    logs = LogManager(tmp_path, LogConfig())
    assert logs.topics()["orders"].partitions == 3 and logs.get_log("orders", 2).log_end_offset == 1
    logs.close()


def test_a_second_manager_on_the_same_directory_is_refused(manager: LogManager, tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError, match="in use by another broker"):
        LogManager(tmp_path, LogConfig())


def test_run_retention_applies_each_topics_config(tmp_path: Path) -> None:
    logs = LogManager(tmp_path, LogConfig(), time_ms=lambda: TS)
    logs.create_topic("short", 1, {"retention.ms": "1000"})
    logs.create_topic("forever", 1, {"retention.ms": "-1"})
    for topic in ("short", "forever"):
        logs.get_log(topic, 0).append(batch())
    assert logs.run_retention(now_ms=TS + 5_000) == 1
    assert logs.get_log("short", 0).log_start_offset == 1
    assert logs.get_log("forever", 0).log_start_offset == 0
    logs.close()
