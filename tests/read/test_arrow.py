"""The Arrow fetch path (kafka_spark.client.fetch_client + read.record_decoder + read.arrow) against the
embedded broker: the same rows as confluent-kafka's path for every record shape, codec and
isolation level, the pooled connection, and malformed input failing clearly."""

from __future__ import annotations

import random
import struct

import crc32c
import numpy as np
import pyarrow as pa
import pytest
from confluent_kafka import Producer

from kafka_spark.client import fetch_client as fetcher
from kafka_spark.client.config import consumer_config
from kafka_spark.client.consumer_pool import close_pooled_consumers
from kafka_spark.common.topic_partition import TopicPartition as TP
from kafka_spark.offsets import OffsetRange
from kafka_spark.options import parse_source_options
from kafka_spark.planning import KafkaInputPartition
from kafka_spark.read import record_decoder as rd
from kafka_spark.read.partition import read_partition


@pytest.fixture(autouse=True)
def _fresh_pools():
    close_pooled_consumers()
    fetcher.close_fetch_clients()
    yield
    close_pooled_consumers()
    fetcher.close_fetch_clients()


def _partition(bootstrap, *ranges, fetcher_name, include_headers=True, **kafka):
    opts = parse_source_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": "x", **{f"kafka.{k}": v for k, v in kafka.items()}}
    )
    return KafkaInputPartition(
        ranges=tuple(ranges),
        config=consumer_config(opts, bootstrap, "arrow-tests"),
        fail_on_data_loss=True,
        include_headers=include_headers,
        poll_timeout_ms=10_000,
        fetcher=fetcher_name,
    )


def _rows(bootstrap, *ranges, fetcher_name, **kwargs):
    batches = list(read_partition(_partition(bootstrap, *ranges, fetcher_name=fetcher_name, **kwargs)))
    for batch in batches:
        batch.validate(full=True)
    return [row for b in batches for row in b.to_pylist()]


def _both(bootstrap, *ranges, **kwargs):
    arrow = _rows(bootstrap, *ranges, fetcher_name="arrow", **kwargs)
    librdkafka = _rows(bootstrap, *ranges, fetcher_name="librdkafka", **kwargs)
    assert arrow == librdkafka
    return arrow


def _varied_records(seed: int, count: int):
    rng = random.Random(seed)
    for i in range(count):
        key = rng.choice([None, b"", f"k{i}".encode(), rng.randbytes(300)])
        value = rng.choice([None, b"", f"v{i}".encode(), rng.randbytes(rng.randrange(1, 5000))])
        headers = rng.choice([None, [("h", b"1")], [("é-ключ", None), ("b", rng.randbytes(200)), ("b", b"")]])
        yield key, value, headers, 1_700_000_000_000 + rng.randrange(-10_000, 10_000)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_record_shape_and_codec_reads_as_confluent_kafka_reads_it(pylog_broker, pylog_topic, codec):
    # The records carry fixed 2023 timestamps, older than the default retention.ms (7 days): the
    # shared broker's retention check (every 5 minutes) may delete them mid-test, as Kafka would.
    topic = pylog_topic(partitions=2, config={"retention.ms": "-1"})
    bootstrap = pylog_broker.bootstrap_servers
    producer = Producer(
        {"bootstrap.servers": bootstrap, "compression.codec": codec, "linger.ms": 20, "batch.num.messages": 37}
    )
    expected = list(_varied_records(hash(codec) & 0xFFFF, 400))
    for key, value, headers, ts in expected:
        producer.produce(topic, key=key, value=value, headers=headers, timestamp=ts, partition=1)
    assert producer.flush(30) == 0
    rows = _both(bootstrap, OffsetRange(TP(topic, 1), 0, 400))
    assert [(r["key"], r["value"]) for r in rows] == [(k, v) for k, v, _, _ in expected]
    assert [r["offset"] for r in rows] == list(range(400))
    assert [int(r["timestamp"].timestamp() * 1000) for r in rows] == [ts for *_, ts in expected]
    assert [[(h["key"], h["value"]) for h in r["headers"]] if r["headers"] else None for r in rows] == [
        h or None for _, _, h, _ in expected
    ]
    # Ranges that start and end inside batches.
    assert [r["offset"] for r in _both(bootstrap, OffsetRange(TP(topic, 1), 13, 201))] == list(range(13, 201))


def test_log_append_time_topics_carry_the_brokers_timestamp_and_type(pylog_broker, pylog_topic):
    topic = pylog_topic(config={"message.timestamp.type": "LogAppendTime"})
    producer = Producer({"bootstrap.servers": pylog_broker.bootstrap_servers})
    for i in range(5):
        producer.produce(topic, value=b"x", timestamp=1_000 + i)
    producer.flush(10)
    rows = _both(pylog_broker.bootstrap_servers, OffsetRange(TP(topic, 0), 0, 5))
    assert {r["timestampType"] for r in rows} == {1}
    assert all(r["timestamp"].year >= 2024 for r in rows)  # the append time, not the producer's 1970 stamp


def _transactions(bootstrap, topic):
    """Interleaved committed and aborted transactions of two producers, plus plain records."""
    plain = Producer({"bootstrap.servers": bootstrap})
    a = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-a"})
    b = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-b"})
    for p in (a, b):
        p.init_transactions(10)
    committed = []
    for round_ in range(6):
        a.begin_transaction()
        b.begin_transaction()
        for i in range(3):
            a.produce(topic, value=f"a{round_}-{i}".encode(), partition=0)
            b.produce(topic, value=f"b{round_}-{i}".encode(), partition=0)
            a.flush(10)
            b.flush(10)
            plain.produce(topic, value=f"p{round_}-{i}".encode(), partition=0)
            plain.flush(10)
            committed.append(f"p{round_}-{i}".encode())
        abort_a = round_ % 2 == 0
        (a.abort_transaction if abort_a else a.commit_transaction)(10)
        (b.commit_transaction if round_ % 3 else b.abort_transaction)(10)
        committed += [f"a{round_}-{i}".encode() for i in range(3) if not abort_a]
        committed += [f"b{round_}-{i}".encode() for i in range(3) if round_ % 3]
    return committed


def test_read_committed_drops_aborted_transactions_as_the_kafka_consumer_does(pylog_broker, pylog_topic):
    topic = pylog_topic()
    bootstrap = pylog_broker.bootstrap_servers
    committed = _transactions(bootstrap, topic)
    end = pylog_broker_end(bootstrap, topic)
    rows = _both(bootstrap, OffsetRange(TP(topic, 0), 0, end), **{"isolation.level": "read_committed"})
    assert sorted(r["value"] for r in rows) == sorted(committed)
    everything = _both(bootstrap, OffsetRange(TP(topic, 0), 0, end))
    assert len(everything) == 6 * 9  # read_uncommitted: aborted records too, markers never


def pylog_broker_end(bootstrap, topic, partition=0):
    client = fetcher.client_for(bootstrap, "probe", 10.0)
    return client.list_offsets(topic, partition)[1]


def test_consecutive_ranges_share_one_pooled_connection(pylog_broker, pylog_topic):
    topic = pylog_topic()
    bootstrap = pylog_broker.bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(50):
        producer.produce(topic, value=str(i).encode())
    producer.flush(10)
    assert [r["offset"] for r in _rows(bootstrap, OffsetRange(TP(topic, 0), 0, 20), fetcher_name="arrow")] == list(
        range(20)
    )
    (client,) = fetcher._POOL.values()
    (conn,) = client.connections.values()
    assert [r["offset"] for r in _rows(bootstrap, OffsetRange(TP(topic, 0), 20, 50), fetcher_name="arrow")] == list(
        range(20, 50)
    )
    assert list(client.connections.values()) == [conn] and not conn.closed


def _small_batches(bootstrap, topic, count):
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 10, "linger.ms": 50})
    for _ in range(count):
        producer.produce(topic, value=b"x" * 100)
    producer.flush(10)


def test_a_read_abandoned_with_a_fetch_in_flight_never_reuses_that_connection(pylog_broker, pylog_topic):
    topic = pylog_topic()
    bootstrap = pylog_broker.bootstrap_servers
    _small_batches(bootstrap, topic, 500)
    partition = _partition(
        bootstrap, OffsetRange(TP(topic, 0), 0, 500), fetcher_name="arrow", **{"max.partition.fetch.bytes": "2000"}
    )
    batches = read_partition(partition)
    first = next(batches)  # the next Fetch is in flight now
    (client,) = fetcher._POOL.values()
    (conn,) = client.connections.values()
    assert conn.in_flight
    batches.close()
    assert conn.closed and not client.connections
    rows = _rows(bootstrap, OffsetRange(TP(topic, 0), first.num_rows, 500), fetcher_name="arrow")
    assert [r["offset"] for r in rows] == list(range(first.num_rows, 500))


def test_fetch_limits_from_the_kafka_options_shape_the_batches(pylog_broker, pylog_topic):
    topic = pylog_topic()
    bootstrap = pylog_broker.bootstrap_servers
    _small_batches(bootstrap, topic, 300)
    small = list(
        read_partition(
            _partition(
                bootstrap,
                OffsetRange(TP(topic, 0), 0, 300),
                fetcher_name="arrow",
                **{"max.partition.fetch.bytes": "3000"},
            )
        )
    )
    large = list(read_partition(_partition(bootstrap, OffsetRange(TP(topic, 0), 0, 300), fetcher_name="arrow")))
    assert sum(b.num_rows for b in small) == sum(b.num_rows for b in large) == 300
    assert len(small) > 5 * len(large)


# -- the decoder on hand-made batches ---------------------------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _batch(base_offset: int, values: list[bytes], *, corrupt_length: bool = False) -> bytes:
    records = b""
    for i, value in enumerate(values):
        body = b"\x00" + _varint(i) + _varint(i) + _varint(-1) + _varint(len(value)) + value + _varint(0)
        length = len(body) + (50 if corrupt_length and i == len(values) - 1 else 0)
        records += _varint(length) + body
    after_crc = (
        struct.pack(">hiqqqhii", 0, len(values) - 1, 1000, 1000 + len(values), -1, -1, -1, len(values)) + records
    )
    return (
        struct.pack(">qiib", base_offset, 9 + len(after_crc), 0, 2)
        + struct.pack(">I", crc32c.crc32c(after_crc))
        + after_crc
    )


def _decode(buf: bytes, low=0, high=1 << 62):
    arr = np.frombuffer(buf, np.uint8)
    index = rd.scan_batches(arr)
    chosen = np.arange(len(index))
    decoded = rd.decode_records(
        arr, index.position + rd.HEADER_SIZE, index.position + index.size, index, chosen, low, high, False
    )
    schema = pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("timestampType", pa.int32()),
        ]
    )
    return index, rd.to_arrow(decoded, "t", 0, schema)


def test_decoder_keeps_complete_batches_and_leaves_a_cut_one_out():
    whole = _batch(0, [b"a", b"bb" * 100]) + _batch(2, [b"c"])
    index, batch = _decode(whole + _batch(3, [b"d"] * 10)[:-7])
    assert len(index) == 2
    assert batch.column("value").to_pylist() == [b"a", b"bb" * 100, b"c"]
    assert batch.column("offset").to_pylist() == [0, 1, 2]
    assert _decode(whole, low=1, high=2)[1].column("offset").to_pylist() == [1]


def test_decoder_names_the_batch_whose_records_run_past_it():
    with pytest.raises(rd.CorruptRecordBatch, match="record batch at offset 7 does not parse"):
        _decode(_batch(0, [b"ok"]) + _batch(7, [b"a", b"b"], corrupt_length=True))


def test_a_read_survives_a_broker_restart_mid_range(tmp_path):
    from kafka_spark.broker import EmbeddedBroker

    with EmbeddedBroker(log_dir=tmp_path / "data", register=False) as broker:
        port = broker.bootstrap_servers.rsplit(":", 1)[1]
        broker.create_topic("restart", partitions=1)
        _small_batches(broker.bootstrap_servers, "restart", 600)
        bootstrap = broker.bootstrap_servers
        batches = read_partition(
            _partition(
                bootstrap,
                OffsetRange(TP("restart", 0), 0, 600),
                fetcher_name="arrow",
                **{"max.partition.fetch.bytes": "4000"},
            )
        )
        rows = next(batches).to_pylist()
    # The broker is gone, with a fetch of ours in flight; it comes back on the same port.
    with EmbeddedBroker(log_dir=tmp_path / "data", port=int(port), register=False):
        rows += [row for batch in batches for row in batch.to_pylist()]
    assert [r["offset"] for r in rows] == list(range(600))


def test_decoder_refuses_a_record_count_the_batch_cannot_hold():
    batch = bytearray(_batch(5, [b"a"]))
    struct.pack_into(">i", batch, 57, 1_000_000)  # recordCount
    with pytest.raises(rd.CorruptRecordBatch, match="offset 5 claims 1000000 records in"):
        _decode(bytes(batch))


def test_decoder_on_randomly_damaged_batches_decodes_or_refuses_never_crashes():
    rng = random.Random(11)
    values = [rng.randbytes(rng.randrange(0, 300)) for _ in range(30)]
    clean = _batch(0, values[:10]) + _batch(10, values[10:25]) + _batch(25, values[25:])
    outcomes = {"decoded": 0, "refused": 0}
    for _ in range(3000):
        damaged = bytearray(clean)
        for _ in range(rng.randrange(1, 6)):
            damaged[rng.randrange(rd.HEADER_SIZE, len(damaged))] = rng.randrange(256)
        if rng.random() < 0.3:
            damaged = damaged[: rng.randrange(len(damaged))]
        try:
            index, batch = _decode(bytes(damaged))
        except rd.CorruptRecordBatch:
            outcomes["refused"] += 1
            continue
        batch.validate(full=True)
        assert batch.num_rows <= int(index.records.sum())
        outcomes["decoded"] += 1
    assert outcomes["decoded"] > 100 and outcomes["refused"] > 100, outcomes


@pytest.mark.parametrize("fetcher_name", ["arrow", "librdkafka"])
def test_a_partition_without_a_leader_is_waited_for_not_reported_lost(tmp_path, fetcher_name, pylog_broker_factory):
    """A partition whose only replica is offline (after a disk error here; during a leader
    election on a cluster) has no leader in Metadata. The read waits for one up to
    kafkaConsumer.pollTimeoutMs and then fails naming the wait; it never treats the partition
    as deleted, which would report its records as lost (or skip them with failOnDataLoss=false)."""
    import dataclasses

    from kafka_spark.read.partition import PylogReadTimeout

    broker = pylog_broker_factory(log_dir=tmp_path / "data")
    broker.create_topic("leaderless", partitions=1)
    _small_batches(broker.bootstrap_servers, "leaderless", 50)
    broker.broker.logs.get_log("leaderless", 0).mark_failed("a test's disk error")
    partition = dataclasses.replace(
        _partition(broker.bootstrap_servers, OffsetRange(TP("leaderless", 0), 0, 50), fetcher_name=fetcher_name),
        poll_timeout_ms=2000,
    )
    with pytest.raises(PylogReadTimeout) as raised:
        list(read_partition(partition))
    if fetcher_name == "arrow":
        assert "has no leader" in str(raised.value)
