"""The source's offset lookups on a replicated cluster while a partition has no leader: a warm
librdkafka admin client answers ListOffsets for such a partition with offset -1001 and no error,
which the source must never take as a position (it once failed a query through a leader kill
with a false data-loss report)."""

from __future__ import annotations

import concurrent.futures
import logging
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_END, Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kafka_spark.broker.cluster import EmbeddedCluster
from kafka_spark.broker.metadata.image import NO_LEADER
from kafka_spark.client.offset_reader import OffsetFetchError, OffsetReader
from kafka_spark.common.topic_partition import TopicPartition
from kafka_spark.options import parse_source_options
from tests.support.waiting import wait_until


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
            deadline = time.monotonic() + 60  # one bound for both waits
            # the controller notices the missed heartbeats
            wait_until(lambda: cluster.leader("alone", 0) == NO_LEADER, "the partition to go offline")
            answers: list[int] = []
            wait_until(  # until a warm client gets the answer without an error
                lambda: answers.append(_raw_latest(witness)) or -1001 in answers,
                lambda: f"librdkafka to answer -1001: {answers}",
                deadline - time.monotonic(),
                interval=0,
            )
            with pytest.raises(OffsetFetchError, match=r"alone-0"):
                reader.latest_offsets([tp])
            cluster.restart_broker(victim)
            cluster.wait_for_isr("alone", 0, size=1)
            assert reader.latest_offsets([tp]) == {tp: 0}  # and it reads on once the leader is back
        finally:
            reader.close()


OFFSET_NOT_AVAILABLE = 78
UNKNOWN_LEADER_EPOCH = 75


def _produce_acked(cluster: EmbeddedCluster, topic: str, count: int) -> Producer:
    """``count`` records to partition 0, every one acknowledged by the ISR (acks=all)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "log_level": 0})
    for value in range(count):
        producer.produce(topic, value=str(value).encode(), partition=0)
    assert producer.flush(30) == 0
    return producer


def _wire_list_offsets(
    bootstrap: str, topic: str, timestamp: int, replica_id: int = -1, current_leader_epoch: int = -1
) -> tuple[int, int]:
    """(error code, offset) of ListOffsets v4 for partition 0, sent to ``bootstrap``."""
    from tests.support.wire import WireClient

    with WireClient(bootstrap) as client:
        response = client.call(
            2,
            4,
            {
                "replica_id": replica_id,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "current_leader_epoch": current_leader_epoch,
                                "timestamp": timestamp,
                            }
                        ],
                    }
                ],
            },
        )
    answer = response.topics[0].partitions[0]
    return int(answer.error_code), int(answer.offset)


def test_a_leader_whose_high_watermark_lags_its_epoch_start_answers_latest_offset_not_available(
    pylog_cluster: EmbeddedCluster,
) -> None:
    """KIP-207: a consumer's ListOffsets(latest) is OFFSET_NOT_AVAILABLE while the leader's HW is
    below the start offset of its leader epoch, and so is a timestamp lookup that finds nothing
    below that HW (one that does is answered); earliest and a replica's request are answered;
    the source's reader fails on it (naming the partition) and reads on once the HW caught up."""
    cluster = pylog_cluster
    cluster.create_topic("lagging", partitions=1, replication_factor=3)
    cluster.wait_for_isr("lagging", 0)
    producer = _produce_acked(cluster, "lagging", 5)
    leader = cluster.leader("lagging", 0)
    node = cluster.nodes[leader]
    replica = node.replicas.partitions[TopicPartition("lagging", 0)]
    wait_until(lambda: replica.log.high_watermark == 5, "the follower to replicate and the HW to reach 5", timeout=30)
    address = f"127.0.0.1:{node.port}"
    assert _wire_list_offsets(address, "lagging", -1) == (0, 5)
    future = int(time.time() * 1000) + 86_400_000  # after every record's timestamp
    assert _wire_list_offsets(address, "lagging", future) == (0, -1)
    epoch = cluster.partition("lagging", 0).leader_epoch
    assert _wire_list_offsets(address, "lagging", -1, current_leader_epoch=epoch) == (0, 5)
    assert _wire_list_offsets(address, "lagging", -1, current_leader_epoch=epoch + 1)[0] == UNKNOWN_LEADER_EPOCH
    # The moment after an election: this leader's epoch starts past the HW it had as a follower.
    replica.epoch_start_offset = replica.log.high_watermark + 1000
    try:
        assert _wire_list_offsets(address, "lagging", -1)[0] == OFFSET_NOT_AVAILABLE
        assert _wire_list_offsets(address, "lagging", future)[0] == OFFSET_NOT_AVAILABLE
        assert _wire_list_offsets(address, "lagging", 0) == (0, 0)  # a record below the HW is found
        assert _wire_list_offsets(address, "lagging", -2) == (0, 0)  # earliest is not affected
        follower = next(n for n in cluster.partition("lagging", 0).replicas if n != leader)
        assert _wire_list_offsets(address, "lagging", -1, replica_id=follower) == (0, 5)
        assert _wire_list_offsets(address, "lagging", future, replica_id=follower) == (0, -1)
        consumer, lines = _consumer_at_latest(cluster.bootstrap_servers, "lagging")

        def told(words: str) -> bool:
            if any(words in line for line in lines):
                return True
            assert consumer.poll(0.05) is None
            return False

        # librdkafka was told to wait
        wait_until(lambda: told("not caught up"), "the consumer to ask for the latest offset", 30, interval=0)
        options = parse_source_options({"subscribe": "lagging", "fetchOffset.numRetries": "0"})
        reader = OffsetReader(options, cluster.bootstrap_servers, timeout_s=5.0)
        try:
            with pytest.raises(OffsetFetchError, match=r"lagging-0"):
                reader.latest_offsets([TopicPartition("lagging", 0)])
        finally:
            reader.close()
    finally:
        replica.epoch_start_offset = 0
    assert _wire_list_offsets(address, "lagging", -1) == (0, 5)
    try:  # the consumer retried: it starts at the latest offset, 5, and reads what comes next
        wait_until(
            lambda: told("lagging [0] at offset 5"),
            lambda: "the consumer to ask again: " + "\n".join(lines[-20:]),
            30,
            interval=0,
        )
        producer.produce("lagging", value=b"after", partition=0)
        assert producer.flush(30) == 0
        polled: list = []  # a Message is falsy when its value is empty: judged by the list

        def read_one() -> bool:
            message = consumer.poll(0.1)
            if message is not None and not message.error():
                polled.append(message)
            return bool(polled)

        wait_until(read_one, "the consumer to start reading", 30, interval=0)
        (message,) = polled
        assert (message.offset(), message.value()) == (5, b"after")
    finally:
        consumer.close()


def _consumer_at_latest(bootstrap: str, topic: str) -> tuple[Consumer, list[str]]:
    """A confluent-kafka consumer assigned at the end of partition 0, and its debug log lines."""
    lines: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(f"test-rdkafka-{topic}")
    logger.addHandler(Capture())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "debug": "fetch,topic", "logger": logger}
    )
    consumer.assign([KafkaTopicPartition(topic, 0, OFFSET_END)])
    return consumer, lines


def _on_loop(node, action):
    """Run ``action`` on a broker's event loop thread and wait for it."""
    done = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(action())
        except BaseException as error:  # noqa: BLE001 - handed to the waiting test
            done.set_exception(error)

    node.replicas.loop.call_soon_threadsafe(run)
    return done.result(30)


_read_on_loop = _on_loop


def test_latest_offsets_the_source_observes_never_go_backwards_through_a_leader_kill(
    pylog_cluster: EmbeddedCluster,
) -> None:
    """A new leader keeps the HW it had as a follower until its followers fetch from it: here
    the follower B that takes over has every record but has not heard the last HW yet (its
    fetcher is stopped right there), and the third replica hears of the new leader only late
    (its metadata is held back), so B's HW stays below the start of its epoch. The latest offset
    the source observes, polled through the leader kill, never goes below one it saw before
    (it would report false data loss): B answers OFFSET_NOT_AVAILABLE, which the source retries."""
    cluster = pylog_cluster
    cluster.create_topic("monotonic", partitions=1, replication_factor=3)
    cluster.wait_for_isr("monotonic", 0)
    count = 20
    _produce_acked(cluster, "monotonic", count)
    tp = TopicPartition("monotonic", 0)
    state = cluster.partition("monotonic", 0)
    a = state.leader
    b, c = [node for node in state.replicas if node != a]  # b: the next leader (first in replica order)
    for node in state.replicas:
        log = cluster.nodes[node].replicas.partitions[tp].log
        wait_until(lambda log=log: log.high_watermark == count, f"the high watermark to reach {count}", timeout=30)
    replica_b = cluster.nodes[b].replicas.partitions[tp]

    def lose_the_last_high_watermark() -> None:
        cluster.nodes[b].replicas.fetchers[a].stop()
        replica_b.log.replicated_high_watermark = count - 5

    _on_loop(cluster.nodes[b], lose_the_last_high_watermark)
    manager_c = cluster.nodes[c].replicas
    manager_c.apply = lambda image: None  # metadata reaches C late: it keeps following the dead leader
    fast = parse_source_options({"subscribe": "monotonic", "fetchOffset.numRetries": "0"})
    patient = parse_source_options(
        {"subscribe": "monotonic", "fetchOffset.numRetries": "300", "fetchOffset.retryIntervalMs": "20"}
    )
    # the fast reader's errors are tolerated below, so its attempts may be short
    reader, retrying = (
        OffsetReader(fast, cluster.bootstrap_servers, 1.0),
        OffsetReader(patient, cluster.bootstrap_servers, 5.0),
    )
    try:
        seen = retrying.latest_offsets([tp])[tp]
        assert seen == count
        cluster.kill_broker(a)
        cluster.wait_for_leader("monotonic", 0, not_on=a, timeout=60)
        assert cluster.leader("monotonic", 0) == b
        wait_until(
            lambda: _read_on_loop(cluster.nodes[b], lambda: replica_b.followers != {}),
            "the leader to see its follower",
            timeout=30,
        )
        high_watermark, epoch_start = _read_on_loop(
            cluster.nodes[b], lambda: (replica_b.log.high_watermark, replica_b.epoch_start_offset)
        )
        assert (high_watermark, epoch_start) == (count - 5, count)  # the KIP-207 moment
        deadline = time.monotonic() + 60  # one bound for both waits

        def refused() -> bool:  # until the new leader itself refused to answer
            nonlocal seen
            try:
                latest = reader.latest_offsets([tp])[tp]
            except OffsetFetchError as error:
                return "OFFSET_NOT_AVAILABLE" in str(error)
            assert latest >= seen, f"the latest offset went from {seen} back to {latest}"
            seen = latest
            return False

        wait_until(refused, "the new leader to refuse with OFFSET_NOT_AVAILABLE", interval=0)
        del manager_c.apply  # C hears of the new leader, fetches from it, and B's HW moves on
        _on_loop(cluster.nodes[c], lambda: manager_c.apply(cluster.controller.image))

        def back_to_count() -> bool:
            nonlocal seen
            if seen >= count and replica_b.log.high_watermark >= count:
                return True
            latest = retrying.latest_offsets([tp])[tp]
            assert latest >= seen, f"the latest offset went from {seen} back to {latest}"
            seen = latest
            return False

        wait_until(back_to_count, f"the latest offset back at {count}", deadline - time.monotonic(), interval=0)
        assert retrying.latest_offsets([tp])[tp] == count
    finally:
        reader.close()
        retrying.close()


def test_leader_epoch_validation_waits_out_a_leader_kill(pylog_cluster: EmbeddedCluster) -> None:
    """The source's OffsetForLeaderEpoch client, warm on the leader, asks again through its kill
    (closed connection, no leader for a moment) and gets the new leader's answer: the epoch the
    records were written in ends where they end, so nothing was truncated."""
    from kafka_spark.client.fetch_client import FetchClient
    from kafka_spark.client.leader_epochs import EpochEnd, end_offsets_for, find_truncations

    cluster = pylog_cluster
    cluster.create_topic("validated", partitions=1, replication_factor=3)
    cluster.wait_for_isr("validated", 0)
    _produce_acked(cluster, "validated", 7)
    tp = TopicPartition("validated", 0)
    client = FetchClient(cluster.bootstrap_servers, "validation-test", 5.0)
    try:
        assert end_offsets_for(client, {tp: (0, 0)}, 30) == {tp: EpochEnd(0, 7)}
        victim = cluster.leader("validated", 0)
        cluster.kill_broker(victim)
        answers = end_offsets_for(client, {tp: (0, 0)}, 60)
        assert cluster.leader("validated", 0) != victim
        assert answers == {tp: EpochEnd(0, 7)}  # epoch 1 began at 7 on the new leader
        assert find_truncations({tp: (7, 0)}, answers) == []
        assert find_truncations({tp: (9, 0)}, answers) == [(tp, 9, 0, 7)]
    finally:
        client.close()
