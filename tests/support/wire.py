"""A minimal Kafka wire client for tests that need byte-level control (versions, raw frames).

It encodes requests and decodes responses with kio, the same generated codec the broker uses
for requests — but the broker side is exercised as a black box over a real TCP socket.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from kafka_spark.broker.protocol.codec import build
from kafka_spark.broker.protocol.schemas import request_class as load_request_schema
from kafka_spark.broker.protocol.schemas import response_class as load_response_schema


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> int:
        request_class = load_request_schema(api_key, version)
        self.correlation_id += 1
        buffer = io.BytesIO()
        buffer.write(struct.pack(">hhi", api_key, version, self.correlation_id))
        buffer.write(struct.pack(">h", len(b"wire-test")) + b"wire-test")
        if request_class.__flexible__:
            buffer.write(b"\0")
        entity_writer(request_class)(buffer, build(request_class, body))
        payload = buffer.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self.correlation_id

    def receive(self, api_key: int, version: int) -> Any:
        frame = self.read_frame()
        response_class = load_response_schema(api_key, version)
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        assert correlation_id == self.correlation_id, (correlation_id, self.correlation_id)
        position = 4
        if response_class.__flexible__ and api_key != 18:
            position += 1  # empty header tag buffer
        body, size = entity_reader(response_class)(frame, position)
        assert position + size == len(frame), f"{len(frame) - position - size} bytes after the response body"
        return body

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self.send(api_key, version, body)
        return self.receive(api_key, version)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._read_exactly(4))
        return self._read_exactly(size)

    def _read_exactly(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self.sock.recv(size - len(chunks))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks += chunk
        return bytes(chunks)
