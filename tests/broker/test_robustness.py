"""Bad input closes one connection; the broker keeps serving everyone else."""

from __future__ import annotations

import random
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_spark.broker import EmbeddedBroker
from tests.support.wire import WireClient

API_VERSIONS, METADATA = 18, 3


def metadata_works(bootstrap: str) -> None:
    with WireClient(bootstrap) as client:
        response = client.call(
            METADATA,
            8,
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        )
        assert response.brokers[0].port == int(bootstrap.rsplit(":", 1)[1])


def send_raw(bootstrap: str, data: bytes) -> bytes:
    """Send bytes, half-close, and return whatever the broker answered before closing."""
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks)
        except (TimeoutError, ConnectionResetError, BrokenPipeError):
            return b""


def valid_request(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    payload = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"fuzz" + body
    return struct.pack(">i", len(payload)) + payload


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=600))
def test_random_bytes_never_kill_the_broker(pylog_broker, data):
    send_raw(pylog_broker.bootstrap_servers, data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(api_key=st.sampled_from([0, 1, 2, 3, 18, 19, 20]), version=st.integers(-2, 20), body=st.binary(max_size=300))
def test_well_framed_garbage_bodies_never_kill_the_broker(pylog_broker, api_key, version, body):
    send_raw(pylog_broker.bootstrap_servers, valid_request(api_key, version, body))


def test_truncated_and_oversized_frames_close_only_their_connection(pylog_broker):
    bootstrap = pylog_broker.bootstrap_servers
    with WireClient(bootstrap) as bystander:
        bystander.call(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        # oversized declared length: rejected before any buffering, connection closed
        assert send_raw(bootstrap, struct.pack(">i", 200 * 1024 * 1024) + b"\0" * 100) == b""
        # a frame cut short: the broker waits for the rest, then sees the close
        good = valid_request(METADATA, 1, struct.pack(">i", -1))
        assert send_raw(bootstrap, good[: len(good) // 2]) == b""
        # every byte-length truncation of a valid Metadata body is answered or closed, never fatal
        for cut in range(4, len(good)):
            send_raw(bootstrap, good[:4] + good[4:cut])
        # unknown api key: closed without a response
        assert send_raw(bootstrap, valid_request(999, 0, b"")) == b""
        # the bystander's connection still works, and so do new ones
        reply = bystander.call(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert reply.error_code == 0
    metadata_works(bootstrap)


def test_garbage_after_a_valid_request_still_gets_the_valid_response(pylog_broker):
    good = valid_request(API_VERSIONS, 0, b"", correlation_id=42)
    reply = send_raw(pylog_broker.bootstrap_servers, good + struct.pack(">i", 12) + b"\xff" * 12)
    assert struct.unpack_from(">ii", reply)[1] == 42


def test_broker_survives_a_storm_of_random_connections(pylog_broker):
    rng = random.Random(7)
    bootstrap = pylog_broker.bootstrap_servers
    for _ in range(300):
        kind = rng.randrange(3)
        if kind == 0:
            data = rng.randbytes(rng.randrange(1, 200))
        elif kind == 1:
            data = valid_request(
                rng.choice([0, 1, 2, 3, 19, 20]), rng.randrange(0, 12), rng.randbytes(rng.randrange(0, 80))
            )
        else:
            data = struct.pack(">i", rng.randrange(-(2**31), 2**31))
        send_raw(bootstrap, data)
    metadata_works(bootstrap)


def test_a_start_that_fails_on_a_taken_port_releases_the_log_directory(tmp_path):
    """The port is taken: start() raises, and holds nothing (the directory's lock, the log
    cleaner's thread, the event loop's thread), so the same broker starts at once on the same
    directory when the port is free again, as a supervisor's retry would."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        broker = EmbeddedBroker(log_dir=tmp_path, port=port, register=False)
        with pytest.raises(OSError):
            broker.start()
    with broker:
        assert broker.port == port
        metadata_works(broker.bootstrap_servers)
