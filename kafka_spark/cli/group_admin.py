"""Deleting a consumer group's committed offsets for some partitions (OffsetDelete).

What ``kafka-consumer-groups --delete-offsets`` does: find the group's coordinator, ask it to
forget the group's offsets of the given partitions. A group's offsets of a topic that one of its
current members subscribes to are kept (GROUP_SUBSCRIBED_TO_TOPIC): the member would commit them
again. confluent-kafka's Python binding has no call for this request, so it is spoken here over
the plain connection of the fetch client (FindCoordinator v1, OffsetDelete v0: Kafka 2.4 and
later, and the embedded broker). Plaintext listeners only, like that client.
"""

from __future__ import annotations

import struct
import time

from kafka_spark.client.fetch_client import BrokerConnection, KafkaProtocolError, _host_port, _Reader, _string
from kafka_spark.common.kafka_errors import ErrorCode, error_name

API_FIND_COORDINATOR, API_OFFSET_DELETE = 10, 47
_I8, _I32 = struct.Struct(">b"), struct.Struct(">i")

#: The coordinator is moving or loading: find it again and retry.
_RETRY_COORDINATOR = frozenset(
    {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available, ErrorCode.not_coordinator}
)


class GroupAdminError(KafkaProtocolError):
    """The coordinator refused the whole request (``code`` is Kafka's error code)."""


def delete_group_offsets(
    bootstrap_servers: str, group: str, topic: str, partitions: list[int], timeout_s: float = 30.0
) -> dict[int, int]:
    """Kafka's error code per partition (0: the group's offset of it is deleted)."""
    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        try:
            with _Connection(_find_coordinator(bootstrap_servers, group, timeout_s), timeout_s) as conn:
                return _offset_delete(conn, group, topic, partitions)
        except GroupAdminError as error:
            if error.code not in _RETRY_COORDINATOR or time.monotonic() > deadline:
                raise
        attempt += 1
        time.sleep(min(0.05 * 2**attempt, 1.0))


class _Connection:
    def __init__(self, address: tuple[str, int], timeout_s: float) -> None:
        self.conn = BrokerConnection(address[0], address[1], "pylog-cli", timeout_s)

    def __enter__(self) -> BrokerConnection:
        return self.conn

    def __exit__(self, *exc_info: object) -> None:
        self.conn.close()


def _find_coordinator(bootstrap_servers: str, group: str, timeout_s: float) -> tuple[str, int]:
    failures = []
    for server in bootstrap_servers.split(","):
        try:
            with _Connection(_host_port(server), timeout_s) as conn:
                reader = _Reader(conn.request(API_FIND_COORDINATOR, 1, _string(group) + _I8.pack(0)))
        except OSError as error:
            failures.append(f"{server.strip()}: {error}")
            continue
        reader.i32()  # throttle_time_ms
        code, message = reader.i16(), reader.string()
        reader.i32()  # node_id
        host, port = reader.string(), reader.i32()
        if code:
            raise GroupAdminError(
                f"finding the coordinator of group {group!r} failed: "
                f"{error_name(code)}{': ' + message if message else ''}",
                code,
            )
        return host or "", port
    raise ConnectionError(f"no bootstrap server answered ({'; '.join(failures)})")


def _offset_delete(conn: BrokerConnection, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
    body = (
        _string(group)
        + _I32.pack(1)
        + _string(topic)
        + _I32.pack(len(partitions))
        + b"".join(_I32.pack(p) for p in partitions)
    )
    reader = _Reader(conn.request(API_OFFSET_DELETE, 0, body))
    code = reader.i16()
    reader.i32()  # throttle_time_ms
    if code:
        raise GroupAdminError(f"deleting offsets of group {group!r} failed: {error_name(code)}", code)
    results = {}
    for _ in range(reader.i32()):
        reader.string()
        for _ in range(reader.i32()):
            partition = reader.i32()
            results[partition] = reader.i16()
    return results
