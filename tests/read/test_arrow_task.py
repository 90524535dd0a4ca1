"""A task holding ranges of many partitions on the Arrow fetch path (kafka_spark.read.arrow
ArrowTaskReader): one Fetch names all of them, and each range still reads exactly its records,
with gaps, aborted transactions, compaction, data loss and timeouts handled per partition."""

from __future__ import annotations

import dataclasses

import pytest
from confluent_kafka import Producer

from kafka_spark.client import fetch_client as fetcher
from kafka_spark.client.config import consumer_config
from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.offsets import DataLossError, OffsetRange
from kafka_spark.options import parse_source_options
from kafka_spark.planning import KafkaInputPartition
from kafka_spark.read.partition import PylogReadTimeout, read_partition
from tests.read.test_arrow import _fresh_pools  # noqa: F401  (autouse: empty pools around each test)


@pytest.fixture
def fetches(monkeypatch):
    """The Fetch requests the session broker serves from now on: a list of
    ``[(topic, partition, fetch_offset), ...]`` per request."""
    from kafka_spark.broker.apis import HANDLERS
    from kafka_spark.broker.protocol.versions import ApiKey

    seen: list[list[tuple[str, int, int]]] = []
    served = HANDLERS[ApiKey.FETCH]

    def counting(broker, request):
        seen.append([(t.topic, p.partition, p.fetch_offset) for t in request.body.topics for p in t.partitions])
        return served(broker, request)

    monkeypatch.setitem(HANDLERS, ApiKey.FETCH, counting)
    return seen


def _task(bootstrap, ranges, *, fail_on_data_loss=True, poll_timeout_ms=10_000, **kafka):
    opts = parse_source_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": "x", **{f"kafka.{k}": v for k, v in kafka.items()}}
    )
    return KafkaInputPartition(
        ranges=tuple(ranges),
        config=consumer_config(opts, bootstrap, "task-fetch-tests"),
        fail_on_data_loss=fail_on_data_loss,
        include_headers=True,
        poll_timeout_ms=poll_timeout_ms,
        fetcher="arrow",
    )


def _read(partition):
    batches = list(read_partition(partition))
    for batch in batches:
        batch.validate(full=True)
    return batches


def _by_partition(batches):
    """{(topic, partition): [(offset, key, value), ...]} in the order read."""
    out: dict[tuple[str, int], list] = {}
    for batch in batches:
        for row in batch.to_pylist():
            out.setdefault((row["topic"], row["partition"]), []).append((row["offset"], row["key"], row["value"]))
    return out


class _Written:
    """What was produced, per partition: (offset, key, value), from the delivery reports."""

    def __init__(self):
        self.records: dict[tuple[str, int], list[tuple[int, bytes | None, bytes]]] = {}

    def callback(self, err, msg):
        assert err is None, err
        self.records.setdefault((msg.topic(), msg.partition()), []).append((msg.offset(), msg.key(), msg.value()))


def _produce(bootstrap, written, topic, partition, values, keys=None, **config):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 7, **config})
    for i, value in enumerate(values):
        producer.produce(
            topic, value=value, key=None if keys is None else keys[i], partition=partition, on_delivery=written.callback
        )
    assert producer.flush(30) == 0


def test_a_task_of_many_partitions_reads_each_range_exactly(pylog_broker, pylog_topic, fetches):
    """64 partitions of uneven sizes (some empty), ranges starting and ending mid-log, two ranges
    of one partition, an aborted transaction (read_committed) and a compacted partition, plus a
    second topic: every range yields exactly its visible records, in offset order."""
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=64, config={"cleanup.policy": "compact", "internal.segment.bytes": "2048"})
    other = pylog_topic(partitions=2)
    written = _Written()
    counts = {p: 0 if p % 9 == 0 else 3 + (p * 37) % 60 for p in range(64)}
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 7})
    for p, count in counts.items():
        for i in range(count):  # unique keys: compaction keeps every one of these
            plain.produce(
                topic, key=f"k{p}-{i}".encode(), value=f"v{p}-{i}".encode(), partition=p, on_delivery=written.callback
            )
    for p in range(2):
        for i in range(40):
            plain.produce(other, key=b"o", value=f"o{p}-{i}".encode(), partition=p, on_delivery=written.callback)
    assert plain.flush(30) == 0

    # Partition 5: many values of few keys, compacted down to the newest per key.
    compacted = (topic, 5)
    history = [(f"key-{n % 6}".encode(), f"c{n}-".encode() + b"x" * 60) for n in range(120)]
    _produce(bootstrap, written, topic, 5, [v for _, v in history], keys=[k for k, _ in history])
    log = pylog_broker.broker.logs.get_log(topic, 5)
    log.roll()  # the active segment is never cleaned
    pylog_broker.broker.logs.run_cleaner(force=True)

    # Partition 7: a committed and an aborted transaction, then plain records.
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn"})
    txn.init_transactions(10)
    for name, commit in (("committed", True), ("aborted", False)):
        txn.begin_transaction()
        for i in range(4):
            txn.produce(
                topic,
                key=f"t{name}{i}".encode(),
                value=f"{name}-{i}".encode(),
                partition=7,
                on_delivery=written.callback,
            )
        txn.flush(10)
        (txn.commit_transaction if commit else txn.abort_transaction)(10)
    _produce(
        bootstrap,
        written,
        topic,
        7,
        [f"after-{i}".encode() for i in range(5)],
        keys=[f"a{i}".encode() for i in range(5)],
    )

    client = fetcher.client_for(bootstrap, "probe", 10.0)
    ends = {p: client.list_offsets(topic, p)[1] for p in range(64)}
    ranges = []
    for p in range(64):
        start, until = p % 3, ends[p] - p % 4
        if p == 10:  # two ranges of one partition, with a hole between them
            ranges += [OffsetRange(TP(topic, p), 0, 3), OffsetRange(TP(topic, p), 6, ends[p])]
        elif p in (5, 7):
            ranges.append(OffsetRange(TP(topic, p), 0, ends[p]))
        else:
            ranges.append(OffsetRange(TP(topic, p), min(start, ends[p]), max(min(start, ends[p]), until)))
    ranges += [OffsetRange(TP(other, 0), 10, 30), OffsetRange(TP(other, 1), 0, 40)]

    got = _by_partition(_read(_task(bootstrap, ranges, **{"isolation.level": "read_committed"})))

    newest = {}
    for offset, key, value in written.records[compacted]:
        newest[key] = (offset, key, value)
    aborted = {
        value
        for (t, p), recs in written.records.items()
        for _, _, value in recs
        if (t, p) == (topic, 7) and value.startswith(b"aborted")
    }
    expected: dict[tuple[str, int], list] = {}
    for r in ranges:
        key = (r.topic_partition.topic, r.topic_partition.partition)
        if key == compacted:
            visible = sorted(newest.values())
        else:
            visible = sorted(rec for rec in written.records.get(key, []) if rec[2] not in aborted)
        rows = [rec for rec in visible if r.from_offset <= rec[0] < r.until_offset]
        if rows:
            expected.setdefault(key, []).extend(rows)
    assert got == expected
    # The cases the test is about really occurred.
    assert len(got[compacted]) == counts[5] + 6 and got[compacted][-1][0] > 100  # compaction's gaps
    assert [v for _, _, v in got[(topic, 7)] if not v.startswith(b"v")] == [
        f"committed-{i}".encode() for i in range(4)
    ] + [f"after-{i}".encode() for i in range(5)]
    assert len(aborted) == 4
    assert sum(1 for p in range(64) if (topic, p) not in got) >= 8  # empty partitions and ranges
    assert [offset for offset, _, _ in got[(topic, 10)]] == [0, 1, 2] + list(range(6, ends[10]))
    # Far fewer Fetch requests than ranges: partitions share them.
    ours = [request for request in fetches if any(t == topic for t, _, _ in request)]
    assert len(ours) < 10 and max(len(request) for request in ours) >= 50, [len(r) for r in ours]


def test_one_fetch_request_serves_every_partition_of_the_task(pylog_broker, pylog_topic, fetches):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=64)
    written = _Written()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(64):
        for i in range(10):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p, on_delivery=written.callback)
    assert producer.flush(30) == 0
    ranges = [OffsetRange(TP(topic, p), 0, 10) for p in range(64)]
    batches = _read(_task(bootstrap, ranges))
    assert _by_partition(batches) == {key: records for key, records in written.records.items()}
    ours = [request for request in fetches if any(t == topic for t, _, _ in request)]
    assert ours == [[(topic, p, 0) for p in range(64)]]  # one request named all 64 partitions
    assert len(batches) == 1  # and its answer is one Arrow batch


def test_partitions_left_out_by_the_fetch_byte_limit_lead_the_next_request(pylog_broker, pylog_topic, fetches):
    """With fetch.max.bytes smaller than the data, each answer fills only its first partitions
    (KIP-74); the partitions left out lead the next request, so every range is read."""
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=12)
    written = _Written()
    for p in range(12):
        _produce(bootstrap, written, topic, p, [b"%d-%d-" % (p, i) + b"y" * 200 for i in range(30)])
    ranges = [OffsetRange(TP(topic, p), 0, 30) for p in range(12)]
    got = _by_partition(
        _read(_task(bootstrap, ranges, **{"fetch.max.bytes": "3000", "max.partition.fetch.bytes": "2000"}))
    )
    assert got == written.records
    ours = [request for request in fetches if any(t == topic for t, _, _ in request)]
    assert len(ours) > 12
    # No partition waits behind the others until they end: each answer serves at least the
    # partition named first, a partition not served yet is named first, so all 12 have records
    # within 12 answers (in a fixed order the last would wait for most of the others' data).
    first_progress = {
        p: next(i for i, request in enumerate(ours) if any(q == p and offset > 0 for _, q, offset in request))
        for p in range(12)
    }
    assert max(first_progress.values()) <= 12, first_progress


def test_data_loss_in_one_partition_is_named_or_skipped_without_losing_the_others(pylog_broker, pylog_topic):
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=6)
    written = _Written()
    for p in range(6):
        _produce(bootstrap, written, topic, p, [f"{p}-{i}".encode() for i in range(20)])
    ranges = [OffsetRange(TP(topic, p), 0, 20) for p in range(6)]
    ranges[2] = OffsetRange(TP(topic, 2), 10, 26)  # past the log end: [20, 26) was never written
    ranges[4] = OffsetRange(TP(topic, 4), 23, 28)  # starts past the end: OFFSET_OUT_OF_RANGE
    with pytest.raises(DataLossError, match=rf"{topic}-[24]: offsets \[2[03], 2[68]\)"):
        _read(_task(bootstrap, ranges))
    got = _by_partition(_read(_task(bootstrap, ranges, fail_on_data_loss=False)))
    expected = {
        key: [rec for rec in records if key[1] != 2 or rec[0] >= 10]
        for key, records in written.records.items()
        if key[1] != 4
    }
    assert got == expected


def test_a_partition_that_never_delivers_times_out_naming_it(pylog_broker, pylog_topic):
    """Under read_committed, an open transaction holds partition 1 back: the task reads the
    others, then fails after kafkaConsumer.pollTimeoutMs naming partition 1 and its offset."""
    bootstrap = pylog_broker.bootstrap_servers
    topic = pylog_topic(partitions=3)
    written = _Written()
    for p in range(3):
        _produce(bootstrap, written, topic, p, [f"{p}-{i}".encode() for i in range(5)])
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-open"})
    txn.init_transactions(10)
    txn.begin_transaction()
    txn.produce(topic, value=b"open", partition=1)
    txn.flush(10)
    try:
        end = fetcher.client_for(bootstrap, "probe", 10.0).list_offsets(topic, 1)[1]
        ranges = [OffsetRange(TP(topic, p), 0, 5) for p in (0, 2)] + [OffsetRange(TP(topic, 1), 0, end)]
        partition = dataclasses.replace(
            _task(bootstrap, ranges, **{"isolation.level": "read_committed"}), poll_timeout_ms=1500
        )
        read: list = []
        with pytest.raises(
            PylogReadTimeout,
            match=rf"Cannot fetch record for offset 5 of {topic}-1 in "
            rf"1500 milliseconds .*range to read is \[0, {end}\)",
        ):
            for batch in read_partition(partition):
                read.append(batch)
        got = _by_partition(read)
        assert got[(topic, 0)] == written.records[(topic, 0)] and got[(topic, 2)] == written.records[(topic, 2)]
    finally:
        txn.abort_transaction(10)


def test_an_unreachable_broker_times_out_naming_a_partition_and_the_poll_timeout_option():
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    ranges = [OffsetRange(TP("x", p), 3, 9) for p in range(4)]
    with pytest.raises(
        PylogReadTimeout,
        match=r"Cannot fetch record for offset 3 of x-0 in \d+ milliseconds "
        r"\(the broker connection failed: .*kafkaConsumer.pollTimeoutMs",
    ):
        _read(_task(dead, ranges, poll_timeout_ms=500))


def test_parts_read_whole_are_decoded_together_with_their_own_topic_and_partition(
    pylog_broker, pylog_topic, monkeypatch
):
    """Partitions read from the middle of their ranges are decoded by one call into one batch;
    each row keeps its topic, partition, key (null too) and headers, and a range cut inside a
    record batch (its start and end) is decoded on its own beside them, exactly."""
    from kafka_spark.read import arrow

    together = []
    decode_together = arrow.ArrowTaskReader._decode_together

    def spy(self, whole):
        together.append(sorted((reader.tp.topic, reader.tp.partition) for reader, *_ in whole))
        return decode_together(self, whole)

    monkeypatch.setattr(arrow.ArrowTaskReader, "_decode_together", spy)
    bootstrap = pylog_broker.bootstrap_servers
    first, second = pylog_topic(partitions=3), pylog_topic(partitions=2)
    written = _Written()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 4})
    for topic, partitions in ((first, 3), (second, 2)):
        for p in range(partitions):
            for i in range(12):
                producer.produce(
                    topic,
                    key=None if i % 3 == 0 else f"k{p}{i}".encode(),
                    value=f"{topic}-{p}-{i}".encode(),
                    headers=[("h", f"{i}".encode())] if i % 2 else None,
                    partition=p,
                    on_delivery=written.callback,
                )
    assert producer.flush(30) == 0
    ranges = [OffsetRange(TP(first, p), 0, 12) for p in range(3)] + [
        OffsetRange(TP(second, 0), 0, 12),
        OffsetRange(TP(second, 1), 3, 9),  # cut inside batches at both ends
    ]
    batches = _read(_task(bootstrap, ranges))
    expected = {key: records for key, records in written.records.items()}
    expected[(second, 1)] = [r for r in expected[(second, 1)] if 3 <= r[0] < 9]
    assert _by_partition(batches) == expected
    assert together and together[0] == sorted([(first, 0), (first, 1), (first, 2), (second, 0)])
    rows = [row for b in batches for row in b.to_pylist()]
    headers = {(row["topic"], row["partition"], row["offset"]): row["headers"] for row in rows}
    assert headers[(first, 1, 1)] == [{"key": "h", "value": b"1"}] and headers[(second, 0, 2)] is None
