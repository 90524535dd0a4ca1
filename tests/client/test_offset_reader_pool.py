"""The OffsetReader a Python worker keeps across batch plans and tasks
(kafka_spark.client.offset_reader.pooled_offset_reader): reused while the cluster answers, and
failing fast, naming the address, once it does not."""

from __future__ import annotations

import pytest

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.client import offset_reader
from kafka_spark.client.offset_reader import OffsetFetchError, pooled_offset_reader
from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.options import parse_source_options


@pytest.fixture(autouse=True)
def _no_reader_left_pooled():
    """The pool keeps readers for the process's life: each test's go when it ends."""
    yield
    offset_reader._POOL.close_idle()


def _options(bootstrap: str, topic: str = "pooled", **extra: str):
    return parse_source_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": topic,
            "kafka.default.api.timeout.ms": "60000",
            "fetchOffset.numRetries": "1",
            "fetchOffset.retryIntervalMs": "10",
            **extra,
        }
    )


def test_one_reader_per_cluster_and_client_settings_reused_and_given_each_uses_options(pylog_broker, pylog_topic):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=3)
    first = pooled_offset_reader(_options(bootstrap, topic), bootstrap)
    assert first.topic_partitions() == {TP(topic, p) for p in range(3)}
    client = first._admin
    assert client is not None
    again = _options(bootstrap, topic, **{"fetchOffset.numRetries": "5"})
    second = pooled_offset_reader(again, bootstrap)
    assert second is first and second.options is again  # the same client, this use's options
    assert second.latest_offsets([TP(topic, 0)]) == {TP(topic, 0): 0}
    assert second._admin is client
    other = pooled_offset_reader(_options(bootstrap, topic, **{"kafka.client.id": "another"}), bootstrap)
    assert other is not first  # other client settings: a client of their own


def test_a_pooled_reader_checks_the_cluster_again_at_each_use(tmp_path):
    broker = EmbeddedBroker(log_dir=str(tmp_path / "b")).start()
    try:
        broker.create_topic("pooled", partitions=1)
        bootstrap = broker.bootstrap_servers
        reader = pooled_offset_reader(_options(bootstrap), bootstrap)
        assert reader.topic_partitions() == {TP("pooled", 0)}
    finally:
        broker.close()
    # One attempt, this use's short API timeout: a pooled client that skipped the check would fail with
    # the request's own timeout ("failed after 1 attempts"); the check names the silent address.
    options = _options(bootstrap, **{"kafka.default.api.timeout.ms": "2000", "fetchOffset.numRetries": "0"})
    reader = pooled_offset_reader(options, bootstrap)
    with pytest.raises(OffsetFetchError, match=r"listing topics failed: .*Check that the broker runs") as failed:
        reader.topic_partitions()
    assert bootstrap in str(failed.value)


def test_a_reader_not_handed_out_for_the_idle_timeout_is_closed_by_the_evictor(pylog_broker, pylog_topic, monkeypatch):
    bootstrap, topic = pylog_broker.bootstrap_servers, pylog_topic(partitions=1)
    reader = pooled_offset_reader(_options(bootstrap, topic), bootstrap)
    assert reader.latest_offsets([TP(topic, 0)]) == {TP(topic, 0): 0}
    assert offset_reader._EVICTOR.running()
    pooled = offset_reader.pooled_offset_reader_count()
    assert offset_reader.evict_idle_offset_readers() == 0  # just handed out: kept
    monkeypatch.setattr(offset_reader, "READER_IDLE_TIMEOUT_S", 0.0)
    assert offset_reader.evict_idle_offset_readers() == pooled  # every pooled reader is idle now
    assert reader._admin is None and offset_reader.pooled_offset_reader_count() == 0
    fresh = pooled_offset_reader(_options(bootstrap, topic), bootstrap)
    assert fresh is not reader and fresh.latest_offsets([TP(topic, 0)]) == {TP(topic, 0): 0}
