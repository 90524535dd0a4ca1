"""Zero-copy fetch (kafka_spark/broker/file_region.py): a Fetch's records go out with sendfile as
FileRegions of the segment file. read_to_send must name exactly the bytes read() returns, for
every shape of read (budgets, KIP-74's oversized first batch, max_offset inside a segment, ranges
across segment rolls); a region must survive its segment's deletion, detect a truncated file, and
reach the client whole whether the socket takes it at once, in part, or not at all, on plain TCP
and on TLS."""

from __future__ import annotations

import os
import socket

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.broker.file_region import FileRegion, RegionTruncatedError, materialize
from tests.broker.storage.test_log import client_batch, decode, open_log
from tests.support.tls_certs import make_pki
from tests.support.waiting import wait_until


def file_with(tmp_path, data: bytes):
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    return path, os.open(path, os.O_RDONLY)


def test_region_reads_its_range_and_outlives_the_deleted_file(tmp_path):
    data = bytes(range(256)) * 1000
    path, fd = file_with(tmp_path, data)
    region = FileRegion(fd, 1000, 50_000)
    os.close(fd)
    path.unlink()  # retention deleted the segment after the fetch was answered
    assert len(region) == 50_000
    assert region.read() == data[1000:51_000]
    assert materialize(region) == data[1000:51_000]
    with pytest.raises(OSError):  # materialize closed it
        region.read()


def test_region_detects_a_truncated_file(tmp_path):
    path, fd = file_with(tmp_path, b"x" * 100_000)
    region = FileRegion(fd, 10_000, 80_000)
    os.truncate(path, 50_000)  # a follower's log cut back under the fetch
    os.close(fd)
    with pytest.raises(RegionTruncatedError, match="40000 bytes short"):
        region.read()
    left, right = socket.socketpair()
    try:
        left.setblocking(False)
        right.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        with pytest.raises(RegionTruncatedError, match="truncated under a fetch"):
            region.send_to(left.fileno())
    finally:
        left.close()
        right.close()
        region.close()


def test_send_to_resumes_after_a_full_socket_and_read_gives_the_rest(tmp_path):
    data = os.urandom(3_000_000)
    _, fd = file_with(tmp_path, data)
    region = FileRegion(fd, 7, len(data) - 7)
    os.close(fd)
    left, right = socket.socketpair()
    left.setblocking(False)
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    try:
        assert region.send_to(left.fileno()) is False  # 3 MB do not fit a 64 KiB buffer
        assert 0 < region.sent < len(region)
        received = bytearray()
        while len(received) < region.sent:
            received += right.recv(1 << 20)
        assert region.send_to(left.fileno()) is False or region.sent == len(region)
        rest = region.read()
        while len(received) < region.sent:
            received += right.recv(1 << 20)
        assert bytes(received) + rest == data[7:]
    finally:
        left.close()
        right.close()
        region.close()


@pytest.mark.parametrize("segment_bytes", [10**9, 40_000])
def test_read_to_send_names_the_bytes_read_returns_for_every_read_shape(tmp_path, segment_bytes):
    """The matrix: fetch offsets inside and at batches, budgets from below one batch to beyond the
    log, max_offset cuts, region thresholds on and off, one segment and many (segment rolls)."""
    log = open_log(tmp_path, segment_bytes=segment_bytes, index_interval_bytes=4096)
    offsets = [0]
    for tag in range(60):  # batches of 1 to 40 records (~0.2-5 KB each)
        log.append(client_batch(1 + (tag * 7) % 40, tag=tag))
        offsets.append(log.log_end_offset)
    if segment_bytes < 10**9:
        assert len(log.segment_base_offsets) > 3
    end = log.log_end_offset
    shapes = 0
    for fetch_offset in sorted({*offsets[:-1], 1, 3, end // 2, end - 1, end}):
        for max_bytes in (1, 100, 3_000, 20_000, 65_536, 10**7):
            for max_offset in (None, end // 3, end - 2, fetch_offset + 1):
                expected = bytes(log.read(fetch_offset, max_bytes, max_offset=max_offset))
                for region_bytes in (1, 4096, 10**8):
                    got = log.read_to_send(fetch_offset, max_bytes, max_offset=max_offset, region_bytes=region_bytes)
                    if len(got) >= region_bytes and expected:
                        shapes += isinstance(got, FileRegion)
                    assert bytes(materialize(got)) == expected, (fetch_offset, max_bytes, max_offset, region_bytes)
    assert shapes > 100  # regions were made, not only bytes
    assert decode(materialize(log.read_to_send(0, 10**9, region_bytes=1)))[:3] == decode(log.read(0, 10**9))[:3]
    log.close()


def consume_all(config: dict, topic: str, partitions: int, count: int) -> list[bytes]:
    consumer = Consumer({**config, "group.id": "region-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    try:
        while len(values) < count:
            # consume() waits for all it asks for (or its timeout): ask only for what is missing
            messages = consumer.consume(min(10_000, count - len(values)), timeout=10)
            assert messages, f"stalled after {len(values)} of {count} records"
            for message in messages:
                assert message.error() is None, message.error()
                values.append(message.value())
        extra = consumer.consume(1, timeout=1)  # and nothing past them
        assert not extra, f"a record past the {count} expected: {extra[0].value()[:40]!r}"
    finally:
        consumer.close()
    return values


def produce(config: dict, topic: str, partitions: int, count: int) -> list[bytes]:
    producer = Producer({**config, "linger.ms": 20, "batch.size": 1_000_000})
    values = [b"%07d:" % i + os.urandom(200) for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % partitions)
    assert producer.flush(30) == 0
    return values


class RegionCalls:
    """Counts, in the embedded broker's thread (same process), how regions went out: sendfile
    calls that finished a region, sendfile calls that left part of one for later, and regions
    read into memory (whole, or the rest after sendfile sent part)."""

    def __init__(self, monkeypatch) -> None:
        self.whole = self.partial = self.read_only = self.read_rest = 0
        send_to, read = FileRegion.send_to, FileRegion.read

        def counted_send_to(region: FileRegion, fd: int) -> bool:
            done = send_to(region, fd)
            self.whole += done
            self.partial += not done and region.sent > 0
            return done

        def counted_read(region: FileRegion) -> bytes:
            self.read_only += region.sent == 0
            self.read_rest += region.sent > 0
            return read(region)

        monkeypatch.setattr(FileRegion, "send_to", counted_send_to)
        monkeypatch.setattr(FileRegion, "read", counted_read)


def test_large_fetches_arrive_whole_over_tcp_with_slow_and_fast_readers(tmp_path, monkeypatch, pylog_broker_factory):
    """Megabyte fetches of four partitions: a consumer taking 1 MiB a partition (sendfile takes
    them), and one asking 16 MiB a partition through a 16 KiB receive buffer (the socket fills:
    sendfile sends part, and the rest when the socket can take more). No region is ever read
    into the broker's memory on plain TCP."""
    calls = RegionCalls(monkeypatch)
    broker = pylog_broker_factory(log_dir=tmp_path)
    broker.create_topic("big", partitions=4)
    config = {"bootstrap.servers": broker.bootstrap_servers}
    values = produce(config, "big", 4, 40_000)  # ~2.3 MB a partition
    assert sorted(consume_all(config, "big", 4, len(values))) == sorted(values)
    assert calls.whole > 0
    slow = {
        **config,
        "socket.receive.buffer.bytes": 16_384,
        "max.partition.fetch.bytes": 16_000_000,
        "fetch.max.bytes": 64_000_000,
    }
    assert sorted(consume_all(slow, "big", 4, len(values))) == sorted(values)
    assert calls.partial > 0, vars(calls)
    assert calls.read_only == calls.read_rest == 0, vars(calls)


def fetch_body(topic: str, max_bytes: int) -> dict:
    partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1}
    return {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{**partition, "partition_max_bytes": max_bytes}]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def test_pipelined_answers_behind_a_full_socket_arrive_whole_and_in_order(tmp_path, monkeypatch):
    """A client sends four Fetches (~2.5 MB of records each, more in all than a socket's send
    buffer holds), then an ApiVersions, and reads nothing through a 16 KiB receive buffer until
    the socket has filled in the middle of a region: every answer after that one waits behind it
    (bytes and regions), then all go out in order, each region by sendfile. A broker stopping
    while a client reads nothing does not wait for it."""
    from kio.serial import entity_reader

    from kafka_spark.broker.protocol.schemas import response_class
    from tests.support.wire import WireClient

    calls = RegionCalls(monkeypatch)
    fetches = 4
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        broker.create_topic("big", partitions=1)
        config = {"bootstrap.servers": broker.bootstrap_servers}
        values = produce(config, "big", 1, 12_000)
        with WireClient(broker.bootstrap_servers, timeout=60) as client:
            client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16_384)
            for _ in range(fetches):
                client.send(1, 11, fetch_body("big", 8 << 20))
            client.send(18, 3, {"client_software_name": "wire-test", "client_software_version": "1"})
            wait_until(lambda: calls.partial > 0, f"the socket never filled mid-region: {vars(calls)}")
            frames = [client.read_frame() for _ in range(fetches + 1)]
        fetch_class = response_class(1, 11)
        for number, frame in enumerate(frames[:fetches], start=1):
            assert int.from_bytes(frame[:4], "big") == number
            body, size = entity_reader(fetch_class)(frame, 4)
            assert 4 + size == len(frame)
            records = body.responses[0].partitions[0].records
            assert sorted(value for _, value in decode(records)) == sorted(values), number
        assert int.from_bytes(frames[fetches][:4], "big") == fetches + 1  # the ApiVersions answer, last
        assert calls.read_only == calls.read_rest == 0, vars(calls)
        stuck = WireClient(broker.bootstrap_servers, timeout=60)
        stuck.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16_384)
        before = calls.partial
        for _ in range(fetches):
            stuck.send(1, 11, fetch_body("big", 8 << 20))
        wait_until(lambda: calls.partial > before, f"the stuck client's socket never filled: {vars(calls)}")
    stuck.close()  # the broker stopped with this client's answers unread


def test_a_client_gone_while_its_answer_waits_is_let_go_quietly(tmp_path, monkeypatch, caplog):
    """A consumer that closes in the middle of a Fetch answer (its socket reset) is routine: the
    broker drops the waiting answer and the connection without a warning, as for any other
    client that goes away."""
    import logging
    import struct

    from tests.support.wire import WireClient

    calls = RegionCalls(monkeypatch)
    caplog.set_level(logging.DEBUG, logger="kafka_spark.broker")
    with EmbeddedBroker(log_dir=tmp_path, register=False) as broker:
        broker.create_topic("big", partitions=1)
        produce({"bootstrap.servers": broker.bootstrap_servers}, "big", 1, 12_000)
        client = WireClient(broker.bootstrap_servers, timeout=60)
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16_384)
        for _ in range(4):
            client.send(1, 11, fetch_body("big", 8 << 20))
        wait_until(lambda: calls.partial > 0, f"the socket never filled mid-region: {vars(calls)}")
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # a reset, with the answers unread
        wait_until(lambda: not broker._server.connections, "the broker kept the reset connection")
    closes = [record for record in caplog.records if "closing connection" in record.getMessage()]
    assert closes and all(record.levelno == logging.DEBUG for record in closes), [
        (record.levelname, record.getMessage()) for record in closes
    ]


def test_large_fetches_arrive_whole_over_tls(tmp_path, monkeypatch, pylog_broker_factory):
    calls = RegionCalls(monkeypatch)
    pki = make_pki(tmp_path / "pki")
    broker = pylog_broker_factory(log_dir=tmp_path / "data", ssl_certfile=str(pki.broker))
    broker.create_topic("big", partitions=2)
    config = {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca),
    }
    values = produce(config, "big", 2, 12_000)
    assert sorted(consume_all(config, "big", 2, len(values))) == sorted(values)
    assert calls.read_only > 0 and calls.whole == calls.partial == 0, vars(calls)  # TLS: never sendfile


def test_read_committed_fetches_drop_an_aborted_transaction_from_a_region(tmp_path, pylog_broker_factory):
    """read_committed over records large enough to be regions: the aborted transactions are found
    from the region's batches (read for their last offset) and the consumer skips them."""
    broker = pylog_broker_factory(log_dir=tmp_path)
    broker.create_topic("txn", partitions=1)
    config = {"bootstrap.servers": broker.bootstrap_servers}
    producer = Producer({**config, "transactional.id": "region-txn", "linger.ms": 20})
    producer.init_transactions(15)
    kept: list[bytes] = []
    for transaction in range(4):  # ~300 KB each: aborted, committed, aborted, committed
        producer.begin_transaction()
        values = [b"%d-%06d:" % (transaction, i) + os.urandom(300) for i in range(1_000)]
        for value in values:
            producer.produce("txn", value, partition=0)
        assert producer.flush(15) == 0  # in the log before the end (an abort purges what is queued)
        if transaction % 2:
            producer.commit_transaction(15)
            kept += values
        else:
            producer.abort_transaction(15)
    got = consume_all({**config, "isolation.level": "read_committed"}, "txn", 1, len(kept))
    assert got == kept
    everything = consume_all({**config, "isolation.level": "read_uncommitted"}, "txn", 1, 4_000)
    assert len(everything) == 4_000  # the aborted records are in the log: read_committed dropped them
