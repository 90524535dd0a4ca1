"""Fetch sessions (KIP-227) on the wire: a session opened by epoch 0, incremental fetches that
answer only the partitions with something new, forgotten partitions, the epoch and id errors,
closing by epoch -1, a full cache, and partitions served moving to the end of the session.
Kafka's Java consumer fetching through sessions is in tests/interop/test_java_clients.py."""

from __future__ import annotations

import itertools
import uuid

import pytest
from confluent_kafka import Producer

from kafka_spark.broker import EmbeddedBroker
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

FETCH = 1
FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH = 70, 71
_topics = itertools.count()


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker(register=False) as running:
        yield running


@pytest.fixture
def topic(broker) -> str:
    name = f"sessions-{next(_topics)}"
    broker.create_topic(name, partitions=2)
    return name


def produce(bootstrap: str, topic: str, partition: int, count: int, size: int = 100) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(count):
        producer.produce(topic, value=b"%06d" % i + b"." * size, partition=partition)
        producer.flush(10)  # one record per batch
    assert producer.flush(10) == 0


def fetch(
    client: WireClient,
    topic: str | uuid.UUID,
    partitions: dict[int, int],
    *,
    session_id: int,
    epoch: int,
    forgotten: tuple[int, ...] = (),
    max_bytes: int = 1 << 20,
    version: int = 12,
):
    """A Fetch listing ``partitions`` ({partition: fetch offset}) of one topic (by name before
    v13, by id from v13), forgetting ``forgotten``."""
    named = {"topic_id": topic} if version >= 13 else {"topic": topic}
    return client.call(
        FETCH,
        version,
        {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": session_id,
            "session_epoch": epoch,
            "topics": [
                {
                    **named,
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": max_bytes,
                        }
                        for partition, offset in partitions.items()
                    ],
                }
            ]
            if partitions
            else [],
            "forgotten_topics_data": [{**named, "partitions": list(forgotten)}] if forgotten else [],
            "rack_id": "",
        },
    )


def answered(response) -> dict[int, tuple[int, int]]:
    """{partition: (high watermark, bytes of records)} of a response's partitions."""
    return {
        p.partition_index: (p.high_watermark, len(p.records or b""))
        for topic in response.responses
        for p in topic.partitions
    }


def test_a_session_answers_only_what_changed_and_forgets_what_it_is_told(broker, topic):
    produce(broker.bootstrap_servers, topic, 0, 3)
    with WireClient(broker.bootstrap_servers) as client:
        full = fetch(client, topic, {0: 0, 1: 0}, session_id=0, epoch=0)
        assert full.error_code == 0 and full.session_id != 0
        session = full.session_id
        first = answered(full)
        assert first[1] == (0, 0) and first[0][0] == 3 and first[0][1] > 0  # every partition, in full

        # The consumer moved partition 0 to the end; nothing new anywhere: no partitions at all.
        nothing = fetch(client, topic, {0: 3}, session_id=session, epoch=1)
        assert nothing.error_code == 0 and nothing.session_id == session
        assert answered(nothing) == {}

        # Records arrive in partition 1, which the request does not list: the session fetches it
        # at its cached position (0) and answers it alone.
        produce(broker.bootstrap_servers, topic, 1, 2)
        news = answered(fetch(client, topic, {}, session_id=session, epoch=2))
        assert list(news) == [1] and news[1][0] == 2 and news[1][1] > 0

        # A moved high watermark alone is news too (partition 0, position 3, gets 1 more record).
        produce(broker.bootstrap_servers, topic, 0, 1)
        moved = answered(fetch(client, topic, {1: 2}, session_id=session, epoch=3))
        assert list(moved) == [0] and moved[0][0] == 4

        # Forgotten: partition 1 leaves the session, so its new records are not answered.
        assert answered(fetch(client, topic, {0: 4}, session_id=session, epoch=4, forgotten=(1,))) == {}
        produce(broker.bootstrap_servers, topic, 1, 1)
        assert answered(fetch(client, topic, {}, session_id=session, epoch=5)) == {}
        # Listed again, it is back (added at its new position).
        back = answered(fetch(client, topic, {1: 2}, session_id=session, epoch=6))
        assert list(back) == [1] and back[1] == (3, back[1][1]) and back[1][1] > 0


def test_session_errors_and_closing(broker, topic):
    with WireClient(broker.bootstrap_servers) as client:
        session = fetch(client, topic, {0: 0}, session_id=0, epoch=0).session_id
        assert session != 0
        repeated = fetch(client, topic, {}, session_id=session, epoch=1)
        assert repeated.error_code == 0
        stale = fetch(client, topic, {}, session_id=session, epoch=1)  # epoch 1 again: not the next one
        assert (stale.error_code, stale.session_id, answered(stale)) == (INVALID_FETCH_SESSION_EPOCH, 0, {})
        assert fetch(client, topic, {}, session_id=session, epoch=2).error_code == 0  # still usable

        unknown = fetch(client, topic, {}, session_id=session ^ 0x5A5A5A, epoch=1)
        assert (unknown.error_code, unknown.session_id) == (FETCH_SESSION_ID_NOT_FOUND, 0)

        # Epoch -1 with the id closes the session and is answered in full, sessionless.
        final = fetch(client, topic, {0: 0, 1: 0}, session_id=session, epoch=-1)
        assert (final.error_code, final.session_id, sorted(answered(final))) == (0, 0, [0, 1])
        assert fetch(client, topic, {}, session_id=session, epoch=3).error_code == FETCH_SESSION_ID_NOT_FOUND

        # Epoch 0 with an id closes it and opens another.
        old = fetch(client, topic, {0: 0}, session_id=0, epoch=0).session_id
        new = fetch(client, topic, {0: 0}, session_id=old, epoch=0).session_id
        assert new not in (0, old)
        assert fetch(client, topic, {}, session_id=old, epoch=1).error_code == FETCH_SESSION_ID_NOT_FOUND
        assert fetch(client, topic, {}, session_id=new, epoch=1).error_code == 0


def test_a_full_cache_answers_in_full_without_a_session(tmp_path):
    with EmbeddedBroker(log_dir=tmp_path, register=False, max_incremental_fetch_session_cache_slots=1) as small:
        small.create_topic("full-cache", partitions=2)
        with WireClient(small.bootstrap_servers) as client:
            first = fetch(client, "full-cache", {0: 0, 1: 0}, session_id=0, epoch=0)
            assert first.session_id != 0
            # The one slot is taken by a session used just now (Kafka evicts only sessions idle
            # for min.incremental.fetch.session.eviction.ms): full answer, session id 0.
            second = fetch(client, "full-cache", {0: 0, 1: 0}, session_id=0, epoch=0)
            assert (second.error_code, second.session_id, sorted(answered(second))) == (0, 0, [0, 1])
            fetch(client, "full-cache", {}, session_id=first.session_id, epoch=-1)  # frees the slot
            assert fetch(client, "full-cache", {0: 0}, session_id=0, epoch=0).session_id != 0


def test_partitions_served_go_last_so_a_byte_limit_serves_the_others_next(broker, topic):
    produce(broker.bootstrap_servers, topic, 0, 4)
    produce(broker.bootstrap_servers, topic, 1, 4)
    with WireClient(broker.bootstrap_servers) as client:
        # max_bytes 1: only the first partition in the session's order gets data (one batch,
        # KIP-74); the other is answered without records.
        full = fetch(client, topic, {0: 0, 1: 0}, session_id=0, epoch=0, max_bytes=1)
        sizes = answered(full)
        assert sizes[0][1] > 0 and sizes[1][1] == 0
        session = full.session_id
        # The session keeps the request's order (Kafka's): partition 0 first again. Served in an
        # incremental fetch, it moves behind partition 1.
        second = answered(fetch(client, topic, {0: 1}, session_id=session, epoch=1, max_bytes=1))
        assert second[0][1] > 0 and (1 not in second or second[1][1] == 0)
        third = answered(fetch(client, topic, {0: 2}, session_id=session, epoch=2, max_bytes=1))
        assert third[1][1] > 0 and (0 not in third or third[0][1] == 0)
        fourth = answered(fetch(client, topic, {1: 1}, session_id=session, epoch=3, max_bytes=1))
        assert fourth[0][1] > 0 and (1 not in fourth or fourth[1][1] == 0)


def test_sessions_by_topic_id(broker, topic):
    """Fetch v13: topics and forgotten topics named by id (KIP-516)."""
    produce(broker.bootstrap_servers, topic, 1, 2)
    topic_id = broker._broker.logs.topic_info(topic).topic_id
    with WireClient(broker.bootstrap_servers) as client:
        full = fetch(client, topic_id, {0: 0, 1: 0}, session_id=0, epoch=0, version=13)
        assert full.session_id != 0 and full.responses[0].topic_id == topic_id
        assert answered(full)[1][0] == 2
        session = full.session_id
        assert answered(fetch(client, topic_id, {1: 2}, session_id=session, epoch=1, version=13)) == {}
        produce(broker.bootstrap_servers, topic, 0, 1)
        assert list(answered(fetch(client, topic_id, {}, session_id=session, epoch=2, version=13))) == [0]
        # Listed and forgotten in one request: updated, then removed (Kafka's order).
        fetch(client, topic_id, {0: 1}, session_id=session, epoch=3, forgotten=(0,), version=13)
        produce(broker.bootstrap_servers, topic, 0, 1)
        assert answered(fetch(client, topic_id, {}, session_id=session, epoch=4, version=13)) == {}


def test_kafka_python_consumer_reads_through_a_session_while_records_arrive(broker, topic):
    """kafka-python (enable_incremental_fetch_sessions, its default) reads two partitions through
    one session while a producer keeps writing to one of them: every record once, in order."""
    from kafka import KafkaConsumer, TopicPartition

    sessions = broker._broker.fetch_sessions
    created, incremental = sessions.created, sessions.incremental_fetches
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False, fetch_max_wait_ms=50)
    partitions = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    seen: dict[int, list[int]] = {0: [], 1: []}
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    try:
        for round_index in range(20):  # partition 0 gets records between polls; partition 1 once
            for i in range(25):
                producer.produce(topic, value=b"%d-%d" % (round_index, i), partition=0)
            if round_index == 10:
                producer.produce(topic, value=b"once", partition=1)
            producer.flush(10)
            for batch in consumer.poll(timeout_ms=200).values():
                for record in batch:
                    seen[record.partition].append(record.offset)

        def seen_all() -> bool:
            if len(seen[0]) >= 500 and len(seen[1]) >= 1:
                return True
            for batch in consumer.poll(timeout_ms=100).values():
                for record in batch:
                    seen[record.partition].append(record.offset)
            return False

        wait_until(seen_all, lambda: f"500 + 1 records, seen {len(seen[0])} + {len(seen[1])}", 20, interval=0)
    finally:
        consumer.close()
    assert seen == {0: list(range(500)), 1: [0]}
    assert sessions.created > created and sessions.incremental_fetches > incremental


def test_a_consumer_reads_on_after_a_broker_restart_forgets_its_session(tmp_path):
    """Sessions live in the broker's memory, as in Kafka: after a restart the consumer's next
    incremental fetch is answered FETCH_SESSION_ID_NOT_FOUND, and kafka-python opens a new session
    and reads on, every record once (the same port and log directory)."""
    from kafka import KafkaConsumer, TopicPartition

    first = EmbeddedBroker(log_dir=tmp_path, register=False).start()
    port = first.port
    first.create_topic("restarted", partitions=2)
    produce(first.bootstrap_servers, "restarted", 0, 50)
    consumer = KafkaConsumer(bootstrap_servers=first.bootstrap_servers, enable_auto_commit=False, fetch_max_wait_ms=50)
    partitions = [TopicPartition("restarted", 0), TopicPartition("restarted", 1)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    seen: list[tuple[int, int]] = []

    def read_until(count: int) -> None:
        for _ in range(600):
            if len(seen) >= count:
                return
            for batch in consumer.poll(timeout_ms=100).values():
                seen.extend((record.partition, record.offset) for record in batch)

    try:
        read_until(50)
        old_session_ids = {session_id for session_id in first._broker.fetch_sessions._sessions}
        assert old_session_ids, "kafka-python opened no session before the restart"
        first.close()
        with EmbeddedBroker(log_dir=tmp_path, port=port, register=False) as second:
            with WireClient(second.bootstrap_servers) as client:  # the old session is gone
                for old in old_session_ids:
                    gone = fetch(client, "restarted", {}, session_id=old, epoch=5)
                    assert gone.error_code == FETCH_SESSION_ID_NOT_FOUND
            produce(second.bootstrap_servers, "restarted", 0, 30)
            produce(second.bootstrap_servers, "restarted", 1, 20)
            read_until(100)
            assert second._broker.fetch_sessions.created >= 1
    finally:
        consumer.close()
    assert sorted(seen) == [(0, offset) for offset in range(80)] + [(1, offset) for offset in range(20)]
