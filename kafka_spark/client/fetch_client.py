"""A minimal Kafka wire-protocol fetch client for the executors' Arrow read path.

librdkafka hands records to Python one ``Message`` object at a time, which caps a Python data
source at a few hundred thousand rows per second per core. This client asks the partition leader
for record batches itself (Fetch v11, as every Kafka broker since 2.3 and the embedded broker
serve it) and gives back the raw batch bytes of the response, which kafka_spark.read.record_decoder
turns into Arrow columns with compiled loops.

Scope, deliberately small: Metadata v1 (to find the partition leader), ListOffsets v1 (log start
and end, for the data-loss checks), Fetch v11 (one partition, or all of a task's partitions on
one broker in one request), ApiVersions v0 (to
fail clearly on a broker too old for Fetch v11). Plaintext connections only; a source with
``kafka.security.protocol`` other than PLAINTEXT, or any ``sasl.*`` / ``ssl.*`` setting, reads
through confluent-kafka instead (kafka_spark.options ``fetcher``).

Connections and leader lookups are kept per Python worker (:data:`_POOL`), like the consumer
pool: a worker reading ``orders-3`` in consecutive micro-batches reuses one open connection. A
connection with a request in flight that is abandoned (a task stopped early) is closed, never
reused, so a late response can never be taken for another request's.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from typing import NamedTuple, cast

from kafka_spark.common.kafka_errors import ErrorCode, error_name
from kafka_spark.errors import PylogError

__all__ = [
    "BrokerConnection",
    "FetchClient",
    "FetchedPartition",
    "KafkaProtocolError",
    "RETRIABLE_ERRORS",
    "client_for",
    "close_fetch_clients",
]

log = logging.getLogger("kafka_spark")

API_FETCH, API_LIST_OFFSETS, API_METADATA, API_VERSIONS = 1, 2, 3, 18
FETCH_VERSION = 11

#: Leadership moved or is settling: look the leader up again and retry (name by code, for messages).
RETRIABLE_ERRORS: dict[int, str] = {
    code: error_name(code)
    for code in (
        ErrorCode.leader_not_available,
        ErrorCode.not_leader_or_follower,
        ErrorCode.request_timed_out,
        ErrorCode.replica_not_available,
        ErrorCode.network_exception,
        ErrorCode.kafka_storage_error,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
        ErrorCode.unknown_topic_id,
    )
}

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


class KafkaProtocolError(PylogError, RuntimeError):
    """A broker answered with an error this client cannot work around, or not as Kafka does."""

    def __init__(self, message: str, code: int = -1):
        super().__init__(message)
        self.code = code


def _string(text: str) -> bytes:
    data = text.encode()
    return _I16.pack(len(data)) + data


class _Reader:
    """Sequential big-endian reads over a response body."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview):
        self.buf = buf
        self.pos = 0

    def i8(self) -> int:
        self.pos += 1
        return _I8.unpack_from(self.buf, self.pos - 1)[0]

    def i16(self) -> int:
        self.pos += 2
        return _I16.unpack_from(self.buf, self.pos - 2)[0]

    def i32(self) -> int:
        self.pos += 4
        return _I32.unpack_from(self.buf, self.pos - 4)[0]

    def i64(self) -> int:
        self.pos += 8
        return _I64.unpack_from(self.buf, self.pos - 8)[0]

    def string(self) -> str | None:
        size = self.i16()
        if size < 0:
            return None
        self.pos += size
        return bytes(self.buf[self.pos - size : self.pos]).decode()

    def bytes_view(self) -> memoryview | None:
        size = self.i32()
        if size < 0:
            return None
        if self.pos + size > len(self.buf):
            raise KafkaProtocolError("a response field runs past the end of the response")
        self.pos += size
        return self.buf[self.pos - size : self.pos]


class BrokerConnection:
    """One blocking TCP connection to one broker: requests out, responses in, in order."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float):
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.settimeout(timeout_s)
        self.correlation = 0
        self.in_flight: list[int] = []
        self.closed = False
        self.versions: dict[int, tuple[int, int]] = {}  # API key -> (min, max), from ApiVersions
        self._size = bytearray(4)
        self._buffer = bytearray(1 << 16)

    def send(self, api_key: int, version: int, body: bytes) -> int:
        self.correlation = (self.correlation + 1) & 0x7FFFFFFF
        header = struct.pack(">hhi", api_key, version, self.correlation) + _string(self.client_id)
        self.sock.sendall(_I32.pack(len(header) + len(body)) + header + body)
        self.in_flight.append(self.correlation)
        return self.correlation

    def receive(self, correlation: int) -> memoryview:
        """The body of the response to ``correlation`` (the oldest request in flight).

        The view is into this connection's receive buffer, reused by the next ``receive``: parse
        or copy what you need before receiving again (the fetch path decodes every response
        into fresh Arrow buffers before it asks for the next one).
        """
        if not self.in_flight or self.in_flight[0] != correlation:
            raise KafkaProtocolError(f"response {correlation} awaited out of order on {self.address}")
        self._read_into(memoryview(self._size))
        size = _I32.unpack(self._size)[0]
        if size < 4:
            raise KafkaProtocolError(f"{self.address} sent a response frame of {size} bytes")
        if size > len(self._buffer):
            self._buffer = bytearray(max(size, 2 * len(self._buffer)))
        frame = memoryview(self._buffer)[:size]
        self._read_into(frame)
        self.in_flight.pop(0)
        got = _I32.unpack_from(frame, 0)[0]
        if got != correlation:
            raise KafkaProtocolError(f"{self.address} answered request {got}, expected {correlation}")
        return frame[4:]

    def request(self, api_key: int, version: int, body: bytes) -> memoryview:
        return self.receive(self.send(api_key, version, body))

    def _read_into(self, view: memoryview) -> None:
        size, got = len(view), 0
        while got < size:
            n = self.sock.recv_into(view[got:], size - got)
            if not n:
                raise ConnectionError(f"{self.address} closed the connection")
            got += n

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass


class FetchedPartition(NamedTuple):
    """One partition's part of a Fetch response. (A NamedTuple rather than a dataclass: importing
    dataclasses costs `pylog consume`, which reads through this module, 10 ms of its ~90.)"""

    error: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]]  # (producer_id, first_offset), as the broker listed them
    records: memoryview


def _fetch_body(
    topic: str,
    partition: int,
    offset: int,
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
    isolation: int,
) -> bytes:
    return b"".join(
        (
            struct.pack(">iiiibii", -1, max_wait_ms, min_bytes, max_bytes, isolation, 0, -1),
            _I32.pack(1),
            _string(topic),
            _I32.pack(1),
            struct.pack(">iiqqi", partition, -1, offset, -1, partition_max_bytes),
            _I32.pack(0),
            _string(""),
        )
    )


def _fetch_body_many(
    wanted: list[tuple[str, int, int, int]], *, max_wait_ms: int, min_bytes: int, max_bytes: int, isolation: int
) -> bytes:
    """A Fetch of many partitions: ``wanted`` holds ``(topic, partition, offset,
    partition_max_bytes)``, in the order the broker should fill the response (KIP-74: the first
    partition with data gets at least one batch, later ones what is left of ``max_bytes``).
    A topic is named once, at its first partition's place."""
    topics: dict[str, list[bytes]] = {}
    for topic, partition, offset, partition_max_bytes in wanted:
        topics.setdefault(topic, []).append(struct.pack(">iiqqi", partition, -1, offset, -1, partition_max_bytes))
    parts = [struct.pack(">iiiibii", -1, max_wait_ms, min_bytes, max_bytes, isolation, 0, -1), _I32.pack(len(topics))]
    for topic, entries in topics.items():
        parts += [_string(topic), _I32.pack(len(entries)), *entries]
    parts += [_I32.pack(0), _string("")]
    return b"".join(parts)


def _parse_fetch_all(body: memoryview) -> tuple[int, dict[tuple[str | None, int], FetchedPartition]]:
    """``(top-level error, {(topic, partition): its part})`` of a Fetch v11 response."""
    r = _Reader(body)
    r.i32()  # throttle_time_ms
    error = r.i16()
    r.i32()  # session_id
    found: dict[tuple[str | None, int], FetchedPartition] = {}
    if error:
        return error, found
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            index, code = r.i32(), r.i16()
            hw, lso, start = r.i64(), r.i64(), r.i64()
            count = r.i32()
            aborted = [(r.i64(), r.i64()) for _ in range(max(count, 0))]
            r.i32()  # preferred_read_replica
            records = r.bytes_view()
            found[(name, index)] = FetchedPartition(
                code, hw, lso, start, aborted, records if records is not None else memoryview(b"")
            )
    return 0, found


def _parse_fetch(body: memoryview, topic: str, partition: int) -> FetchedPartition:
    return _parse_fetch_many(body, [(topic, partition)])[0]


def _parse_fetch_many(body: memoryview, keys: list[tuple[str, int]]) -> list[FetchedPartition]:
    """The parts of a Fetch response for ``keys`` (topic, partition), in that order; a top-level
    error is every partition's error."""
    error, found = _parse_fetch_all(body)
    if error:
        return [FetchedPartition(error, -1, -1, -1, [], memoryview(b"")) for _ in keys]
    parts = []
    for topic, partition in keys:
        part = found.get((topic, partition))
        if part is None:
            raise KafkaProtocolError(f"the Fetch response holds no entry for {topic}-{partition}")
        parts.append(part)
    return parts


def parse_metadata(r: _Reader) -> list[tuple[int, str, dict[int, tuple[str, int] | None]]]:
    """The topics of a Metadata v1 response: ``(error code, name, {partition: leader's (host,
    port), None when it has no leader})``."""
    brokers: dict[int, tuple[str, int]] = {}
    for _ in range(r.i32()):
        node, host, port = r.i32(), cast(str, r.string()), r.i32()  # host and name: never null here
        r.string()  # rack
        brokers[node] = (host, port)
    r.i32()  # controller_id
    topics = []
    for _ in range(r.i32()):
        error, name = r.i16(), cast(str, r.string())
        r.i8()  # is_internal
        partitions = {}
        for _ in range(r.i32()):
            r.i16()
            index, leader = r.i32(), r.i32()
            for _ in range(2):  # replicas, isr
                count = max(r.i32(), 0)
                r.pos += 4 * count
            partitions[index] = brokers.get(leader)
        topics.append((error, name, partitions))
    return topics


class FetchClient:
    """Leader lookups and connections for one bootstrap address and client config, per worker."""

    def __init__(
        self,
        bootstrap_servers: str,
        client_id: str,
        timeout_s: float,
        librdkafka_advice: str = "set the source option fetcher=librdkafka to read through confluent-kafka",
    ):
        #: What an error tells the user to do to read through confluent-kafka instead (the source
        #: has an option, the console consumer a flag).
        self.librdkafka_advice = librdkafka_advice
        self.bootstrap = [_host_port(a) for a in bootstrap_servers.split(",") if a.strip()]
        if not self.bootstrap:
            raise KafkaProtocolError("no bootstrap servers to fetch from")
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.leaders: dict[tuple[str, int], tuple[str, int]] = {}
        self.leaderless: set[tuple[str, int]] = set()  # partitions that exist but have no leader now
        self.connections: dict[tuple[str, int], BrokerConnection] = {}

    # -- connections ---------------------------------------------------------------------------

    def connection(self, address: tuple[str, int]) -> BrokerConnection:
        conn = self.connections.get(address)
        if conn is None or conn.closed:
            conn = BrokerConnection(address[0], address[1], self.client_id, self.timeout_s)
            try:
                self._check_versions(conn)
            except BaseException:
                conn.close()
                raise
            self.connections[address] = conn
        return conn

    def discard(self, conn: BrokerConnection) -> None:
        conn.close()
        for address, held in list(self.connections.items()):
            if held is conn:
                del self.connections[address]

    def _check_versions(self, conn: BrokerConnection) -> None:
        r = _Reader(conn.request(API_VERSIONS, 0, b""))
        error = r.i16()
        versions = {}
        for _ in range(r.i32()):
            key, low, high = r.i16(), r.i16(), r.i16()
            versions[key] = (low, high)
        conn.versions = versions
        needed = {API_FETCH: FETCH_VERSION, API_LIST_OFFSETS: 1, API_METADATA: 1}
        missing = [
            k for k, v in needed.items() if not (versions.get(k, (0, -1))[0] <= v <= versions.get(k, (0, -1))[1])
        ]
        if error or missing:
            raise KafkaProtocolError(
                f"the broker at {conn.address} does not serve Fetch v{FETCH_VERSION} / Metadata v1 / "
                f"ListOffsets v1 (Kafka 2.3 or newer does); {self.librdkafka_advice}",
                ErrorCode.unsupported_version,
            )

    def _any_broker(self) -> BrokerConnection:
        last: Exception | None = None
        for address in list(self.connections) + self.bootstrap:
            try:
                return self.connection(address)
            except OSError as error:
                last = error
        raise ConnectionError(f"no broker of {self._bootstrap_text()} is reachable: {last}")

    def _bootstrap_text(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.bootstrap)

    # -- requests ------------------------------------------------------------------------------

    def leader(self, topic: str, partition: int, *, refresh: bool = False) -> tuple[str, int]:
        key = (topic, partition)
        if refresh or key not in self.leaders:
            self._load_metadata(topic)
        address = self.leaders.get(key)
        if address is None:
            if key in self.leaderless:  # an election, or its only replica is offline: wait, as consumers do
                raise KafkaProtocolError(
                    f"{topic}-{partition} has no leader at the moment", ErrorCode.leader_not_available
                )
            raise KafkaProtocolError(f"{topic}-{partition} does not exist", ErrorCode.unknown_topic_or_partition)
        return address

    def _load_metadata(self, topic: str) -> None:
        conn = self._any_broker()
        try:
            r = _Reader(conn.request(API_METADATA, 1, _I32.pack(1) + _string(topic)))
        except (OSError, KafkaProtocolError):
            self.discard(conn)
            raise
        self.leaderless = {key for key in self.leaderless if key[0] != topic}
        for _, name, partitions in parse_metadata(r):  # a missing topic just has no partitions here
            for index, leader in partitions.items():
                if leader is not None:
                    self.leaders[(name, index)] = leader
                    self.leaderless.discard((name, index))
                else:
                    self.leaders.pop((name, index), None)
                    self.leaderless.add((name, index))

    def send_fetch(self, conn: BrokerConnection, topic: str, partition: int, offset: int, **limits: int) -> int:
        return conn.send(API_FETCH, FETCH_VERSION, _fetch_body(topic, partition, offset, **limits))

    def receive_fetch(self, conn: BrokerConnection, correlation: int, topic: str, partition: int) -> FetchedPartition:
        return _parse_fetch(conn.receive(correlation), topic, partition)

    def send_fetch_many(self, conn: BrokerConnection, wanted: list[tuple[str, int, int, int]], **limits: int) -> int:
        """One Fetch of many partitions of this broker (see :func:`_fetch_body_many`)."""
        return conn.send(API_FETCH, FETCH_VERSION, _fetch_body_many(wanted, **limits))

    def receive_fetch_many(
        self, conn: BrokerConnection, correlation: int, keys: list[tuple[str, int]]
    ) -> list[FetchedPartition]:
        """The parts of the response to ``correlation`` for ``keys``, in order. Their ``records``
        are views into the connection's buffer: decode them before the next ``receive`` or
        request on ``conn``."""
        return _parse_fetch_many(conn.receive(correlation), keys)

    def list_offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """``(log start, log end)`` of a partition, from its leader (ListOffsets v1)."""
        result = []
        for spec in (-2, -1):
            conn = self.connection(self.leader(topic, partition))
            body = struct.pack(">ii", -1, 1) + _string(topic) + struct.pack(">iiq", 1, partition, spec)
            try:
                r = _Reader(conn.request(API_LIST_OFFSETS, 1, body))
            except (OSError, KafkaProtocolError):
                self.discard(conn)
                raise
            r.i32()
            r.string()
            r.i32()
            r.i32()
            code, _, offset = r.i16(), r.i64(), r.i64()
            if code:
                raise KafkaProtocolError(f"ListOffsets for {topic}-{partition} failed with error code {code}", code)
            result.append(offset)
        return result[0], result[1]

    def close(self) -> None:
        for conn in self.connections.values():
            conn.close()
        self.connections.clear()


def _host_port(address: str) -> tuple[str, int]:
    address = address.strip()
    for prefix in ("PLAINTEXT://", "plaintext://"):
        address = address.removeprefix(prefix)
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise KafkaProtocolError(f"bootstrap server {address!r} is not host:port")
    return host.strip("[]"), int(port)


_POOL: dict[tuple[str, str, float], FetchClient] = {}
_POOL_LOCK = threading.Lock()


def client_for(bootstrap_servers: str, client_id: str, timeout_s: float, *, fresh: bool = False) -> FetchClient:
    """The worker's FetchClient for this bootstrap address and client id (created once).
    ``fresh`` (a task retry) closes the pooled one first, as Spark drops its consumers."""
    key = (bootstrap_servers, client_id, timeout_s)
    with _POOL_LOCK:
        client = _POOL.get(key)
        if client is not None and fresh:
            client.close()
            client = None
        if client is None:
            client = _POOL[key] = FetchClient(bootstrap_servers, client_id, timeout_s)
        return client


def close_fetch_clients() -> None:
    with _POOL_LOCK:
        for client in _POOL.values():
            client.close()
        _POOL.clear()


def backoff(attempt: int) -> None:
    time.sleep(min(0.05 * (2**attempt), 1.0))
