"""The source's offset lookups on a replicated cluster while a partition has no leader: a warm
librdkafka admin client answers ListOffsets for such a partition with offset -1001 and no error,
which the source must never take as a position (it once failed a query through a leader kill
with a false data-loss report)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kafka_spark.broker.cluster import EmbeddedCluster
from kafka_spark.broker.cluster.controller import NO_LEADER
from kafka_spark.client.offset_reader import OffsetFetchError, OffsetReader
from kafka_spark.common.topic_partition import TopicPartition
from kafka_spark.options import parse_source_options


def _raw_latest(admin: AdminClient) -> int | str:
    futures = admin.list_offsets({KafkaTopicPartition("alone", 0): OffsetSpec.latest()}, request_timeout=5)
    try:
        return next(iter(futures.values())).result(10).offset
    except Exception as error:  # noqa: BLE001 - the test waits for the answer without an error
        return str(error)


def test_latest_offsets_of_a_partition_without_a_leader_fail_naming_it_instead_of_returning_minus_1001(
    tmp_path: Path,
) -> None:
    with EmbeddedCluster(brokers=2, log_dir=tmp_path, broker_session_timeout_ms=1_000) as cluster:
        cluster.create_topic("alone", partitions=1, replication_factor=1)
        options = parse_source_options({"subscribe": "alone", "fetchOffset.numRetries": "0"})
        reader = OffsetReader(options, cluster.bootstrap_servers, timeout_s=5.0)
        witness = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
        try:
            tp = TopicPartition("alone", 0)
            assert reader.latest_offsets([tp]) == {tp: 0}  # both clients warm, as in a running query
            assert _raw_latest(witness) == 0
            victim = cluster.leader("alone", 0)
            cluster.kill_broker(victim)  # its only replica: the partition is offline until it returns
            deadline = time.monotonic() + 60
            while cluster.leader("alone", 0) != NO_LEADER:  # the controller notices the missed heartbeats
                assert time.monotonic() < deadline, "the partition never went offline"
                time.sleep(0.05)
            answers = []
            while -1001 not in answers:  # until a warm client gets the answer without an error
                assert time.monotonic() < deadline, f"librdkafka never answered -1001: {answers}"
                answers.append(_raw_latest(witness))
            with pytest.raises(OffsetFetchError, match=r"alone-0"):
                reader.latest_offsets([tp])
            cluster.restart_broker(victim)
            cluster.wait_for_isr("alone", 0, size=1)
            assert reader.latest_offsets([tp]) == {tp: 0}  # and it reads on once the leader is back
        finally:
            reader.close()
