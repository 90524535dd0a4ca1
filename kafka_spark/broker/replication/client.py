"""A broker's own Kafka client: asyncio connections to other brokers.

Followers reach their leader over its listener with the requests Kafka's replica fetchers send
(Fetch with a replica id, OffsetForLeaderEpoch), and transaction coordinators send WriteTxnMarkers
to the partitions' leaders (:class:`Peers`), encoded and decoded with kio — the other broker serves
them on the same code path as any client's request.
"""

from __future__ import annotations

import asyncio
import io
import logging
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kafka_spark.broker.protocol.codec import build
from kafka_spark.broker.protocol.schemas import request_class, response_class

if TYPE_CHECKING:
    from kafka_spark.broker.metadata.image import BrokerRegistration

_SIZE = struct.Struct(">i")
_SASL_HANDSHAKE, _SASL_AUTHENTICATE = 17, 36
logger = logging.getLogger("kafka_spark.broker.cluster")


class BrokerConnection:
    """Requests one at a time over one connection; ``request`` raises OSError-family errors
    (ConnectionError, asyncio.IncompleteReadError) when the other broker goes away."""

    def __init__(self, host: str, port: int, client_id: str, login: Any = None) -> None:
        self.host, self.port = host, port
        self.client_id = client_id.encode("utf-8")
        self.login = login  # on a SASL listener: how this broker logs in (oauthbearer/login.py)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0
        self._reauthenticate_at: float | None = None  # time.monotonic(); KIP-368

    async def request(self, api_key: int, version: int, body: dict[str, Any], timeout: float = 30.0) -> Any:
        if self._writer is None:
            self._reader, self._writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), timeout)
            if self.login is not None:
                await self._authenticate(timeout)
        elif self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at:
            await self._authenticate(timeout)
        return await self._exchange(api_key, version, body, timeout)

    async def _authenticate(self, timeout: float) -> None:
        """SaslHandshake and SaslAuthenticate, and again before the session the other broker
        grants ends (KIP-368: at 85% of it), as Kafka's clients re-authenticate."""
        mechanism = self.login.mechanism
        handshake = await self._exchange(_SASL_HANDSHAKE, 1, {"mechanism": mechanism}, timeout)
        answer = None
        if handshake.error_code == ErrorCode.none:
            auth_bytes = await self.login.initial_response()
            answer = await self._exchange(_SASL_AUTHENTICATE, 2, {"auth_bytes": auth_bytes}, timeout)
        if answer is None or answer.error_code != ErrorCode.none or answer.auth_bytes:
            why = (answer.error_message or bytes(answer.auth_bytes).decode()) if answer else f"{mechanism} not enabled"
            logger.warning("broker %s:%d refused this broker's SASL %s login: %s", self.host, self.port, mechanism, why)
            self.close()
            raise ConnectionError(f"broker {self.host}:{self.port} refused the SASL {mechanism} login: {why}")
        lifetime_s = answer.session_lifetime.total_seconds()
        self._reauthenticate_at = time.monotonic() + 0.85 * lifetime_s if lifetime_s > 0 else None

    async def _exchange(self, api_key: int, version: int, body: dict[str, Any], timeout: float) -> Any:
        reader, writer = self._reader, self._writer  # close() may drop them while this request waits
        assert reader is not None and writer is not None
        cls = request_class(api_key, version)
        self._correlation_id += 1
        buffer = io.BytesIO()
        buffer.write(struct.pack(">hhi", api_key, version, self._correlation_id))
        buffer.write(struct.pack(">h", len(self.client_id)) + self.client_id)
        if cls.__flexible__:
            buffer.write(b"\0")  # request header v2: empty tag buffer
        entity_writer(cls)(buffer, build(cls, body))
        payload = buffer.getvalue()
        writer.write(_SIZE.pack(len(payload)) + payload)
        await writer.drain()
        (size,) = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(4), timeout))
        frame = await asyncio.wait_for(reader.readexactly(size), timeout)
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        if correlation_id != self._correlation_id:
            raise ConnectionError(
                f"broker {self.host}:{self.port} answered correlation id {correlation_id}, "
                f"expected {self._correlation_id}"
            )
        response = response_class(api_key, version)
        position = 5 if response.__flexible__ else 4  # response header v1: empty tag buffer
        body_out, _ = entity_reader(response)(frame, position)
        return body_out

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


class Peers:
    """One connection per other broker, one request at a time on each (the coordinators'
    requests); a connection that fails is dropped and the next request opens a new one."""

    def __init__(self, client_id: str, login: Callable[[], Any]) -> None:
        """``login()``: how this broker logs in to the others (None without SASL), asked when a
        connection opens."""
        self._client_id = client_id
        self._login = login
        self._connections: dict[int, tuple[BrokerConnection, asyncio.Lock]] = {}

    async def request(
        self, broker: BrokerRegistration, api_key: int, version: int, body: dict[str, Any], timeout: float
    ) -> Any:
        """``broker``'s response; OSError-family errors when the connection fails."""
        known = self._connections.get(broker.node_id)
        if known is None or (known[0].host, known[0].port) != (broker.host, broker.port):
            if known is not None:
                known[0].close()
            known = (BrokerConnection(broker.host, broker.port, self._client_id, self._login()), asyncio.Lock())
            self._connections[broker.node_id] = known
        connection, lock = known
        async with lock:
            try:
                return await connection.request(api_key, version, body, timeout=timeout)
            except BaseException:
                connection.close()
                if self._connections.get(broker.node_id) is known:
                    del self._connections[broker.node_id]
                raise

    def close(self) -> None:
        for connection, _ in self._connections.values():
            connection.close()
        self._connections.clear()
