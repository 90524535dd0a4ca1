"""Compaction seen by a real client: confluent-kafka (librdkafka) producing to and consuming from a
compacted topic of an EmbeddedBroker while its log cleaner rewrites segments."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka.record.memory_records import MemoryRecords

from tests.support.partition_reads import read_to_end
from tests.support.waiting import wait_until

Newest = dict[bytes, tuple[int, "bytes | None"]]


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes | None]], **config) -> Newest:
    """Produce in order; returns key -> (offset, value) of each key's newest record, per the
    delivery reports."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, **config})
    newest: Newest = {}
    errors = []

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err:
            errors.append(err)
        elif msg.key() not in newest or newest[msg.key()][0] < msg.offset():
            newest[msg.key()] = (msg.offset(), msg.value())

    for key, value in records:
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return newest


def consume_all(bootstrap: str, topic: str, timeout_s: float = 60) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record from the beginning to the end of partition 0."""
    messages = read_to_end(bootstrap, topic, 0, timeout_s, **{"group.id": "compaction-reader"})
    return [(message.offset(), message.key(), message.value()) for message in messages]


def storage_read(log) -> list[tuple[int, bytes, bytes | None]]:  # type: ignore[no-untyped-def]
    records = MemoryRecords(bytes(log.read(log.log_start_offset, 1 << 26)))
    out = []
    while records.has_next():
        stored = records.next_batch()
        if not stored.is_control_batch:
            out.extend((r.offset, r.key, r.value) for r in stored)
    return out


@pytest.mark.parametrize("codec", ["none", "zstd", "snappy"])
def test_consumer_reads_newest_value_per_key_at_original_offsets_then_no_deleted_keys(
    pylog_broker, pylog_topic, codec: str
) -> None:
    # The session broker's background cleaner may also run during this test: the tombstone
    # horizon must outlast the first checks, or a background pass removes tombstones early.
    topic = pylog_topic(
        config={"cleanup.policy": "compact", "internal.segment.bytes": "4096", "delete.retention.ms": "5000"}
    )
    records: list[tuple[bytes, bytes | None]] = []
    for n in range(3000):
        key = b"key-%03d" % (n * 7919 % 150)
        records.append((key, None if n % 11 == 0 else b"value-%05d-" % n + b"x" * 40))
    newest = produce(
        pylog_broker.bootstrap_servers, topic, records, **{"compression.type": codec, "batch.num.messages": 50}
    )
    log = pylog_broker.broker.logs.get_log(topic, 0)
    log.roll()  # make every record cleanable (the active segment never is)
    assert len(log.segment_base_offsets) > 5
    pylog_broker.broker.logs.run_cleaner()
    # The background cleaner may already have cleaned rolled segments while we produced, so
    # count what is left rather than what this one pass removed.
    assert len(records) - len(storage_read(log)) > 2000

    after_first = consume_all(pylog_broker.bootstrap_servers, topic)
    assert {key: (offset, value) for offset, key, value in after_first} == newest
    assert len(after_first) == len(newest)  # one record per key, tombstones included
    assert storage_read(log) == after_first

    live = {key: entry for key, entry in newest.items() if entry[1] is not None}
    assert len(live) < len(newest)

    def cleaned_past_the_horizon() -> bool:  # delete.retention.ms (5 s) after the first cleaning
        pylog_broker.broker.logs.run_cleaner()
        return len(storage_read(log)) == len(live)

    wait_until(cleaned_past_the_horizon, "the tombstones removed past their horizon", interval=0.2)
    after_horizon = consume_all(pylog_broker.bootstrap_servers, topic)
    assert {key: (offset, value) for offset, key, value in after_horizon} == live
    assert storage_read(log) == after_horizon


def test_consumer_reaches_the_end_when_compaction_removed_the_last_records(pylog_broker, pylog_topic) -> None:
    topic = pylog_topic(config={"cleanup.policy": "compact", "delete.retention.ms": "0"})
    produce(pylog_broker.bootstrap_servers, topic, [(b"a", b"1"), (b"b", b"2")], **{"enable.idempotence": False})
    produce(pylog_broker.bootstrap_servers, topic, [(b"b", None)], **{"enable.idempotence": False})
    log = pylog_broker.broker.logs.get_log(topic, 0)
    log.roll()  # the active segment is empty: nothing after the compacted-away tail

    def tail_emptied() -> bool:  # the tombstone goes once its horizon (delete.retention.ms 0) has passed
        pylog_broker.broker.logs.run_cleaner()
        return [h.records_count for h in log.batch_headers()][-1] == 0

    wait_until(tail_emptied, "the compacted tail to be an empty batch", interval=0.01)
    # librdkafka steps over the empty batch to offset 3 = the high watermark, and reports the end
    assert consume_all(pylog_broker.bootstrap_servers, topic, timeout_s=10) == [(0, b"a", b"1")]


def test_cleaning_while_a_producer_writes_and_a_consumer_reads_loses_no_newest_value(pylog_broker, pylog_topic) -> None:
    topic = pylog_topic(
        config={"cleanup.policy": "compact", "internal.segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.1"}
    )
    bootstrap = pylog_broker.bootstrap_servers
    logs = pylog_broker.broker.logs
    done = threading.Event()
    newest: Newest = {}
    seen: dict[bytes, tuple[int, bytes | None]] = {}
    problems: list[str] = []
    swapped = []

    def write() -> None:
        try:
            batch = [(b"key-%02d" % (n % 40), b"v%06d" % n) for n in range(6000)]
            for start in range(0, len(batch), 500):
                newest.update(produce(bootstrap, topic, batch[start : start + 500]))
        except BaseException as error:  # noqa: BLE001 reported by the main thread
            problems.append(f"producer: {error!r}")
        finally:
            done.set()

    def read() -> None:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "compaction-live", "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        last = -1
        try:
            while not (done.is_set() and last + 1 >= logs.get_log(topic, 0).log_end_offset):
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error():
                    problems.append(f"consumer: {message.error()}")
                    continue
                if message.offset() <= last:
                    problems.append(f"consumer went back from {last} to {message.offset()}")
                last = message.offset()
                seen[message.key()] = (message.offset(), message.value())
        finally:
            consumer.close()

    def clean() -> None:
        while not done.is_set():
            swapped.append(logs.run_cleaner().groups_swapped)
            time.sleep(0.05)

    threads = [threading.Thread(target=target) for target in (write, read, clean)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not problems, problems[:5]
    assert sum(swapped) > 0, "the cleaner never swapped a segment while the producer was writing"
    assert seen == newest  # the live reader ended on every key's newest value
    logs.get_log(topic, 0).roll()
    logs.run_cleaner(force=True)
    final = consume_all(bootstrap, topic)
    assert {key: (offset, value) for offset, key, value in final} == newest
    assert len(final) == len(newest) == 40
