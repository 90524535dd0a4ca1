"""Offset commits of a consumer that never joins its group, on pylog's broker and on Apache
Kafka 4.3.1: with the classic protocol and with KIP-848's, whose consumer commits with generation
-1 and a member id it made itself (confluent-kafka-python's test_consumer_topicpartition_metadata
and test_incremental_assign do this). Kafka takes such a commit while the group has no members."""

from __future__ import annotations

import itertools

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.interop.harness import Cluster

_groups = itertools.count()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_consumer_outside_its_group_commits_and_reads_back(cluster: Cluster, protocol: str):
    topic = cluster.topic()
    group = f"standalone-{protocol}-{cluster.name}-{next(_groups)}-{topic}"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "group.protocol": protocol})
    try:
        for offset, metadata in [(1, None), (2, "hello world"), (3, "नमस्ते दुनिया"), (4, "")]:
            position = (
                TopicPartition(topic, 0, offset) if metadata is None else TopicPartition(topic, 0, offset, metadata)
            )
            consumer.commit(offsets=[position], asynchronous=False)
            (committed,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
            assert (committed.offset, committed.metadata) == (offset, metadata), (protocol, offset)
    finally:
        consumer.close()
