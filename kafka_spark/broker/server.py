"""The socket shell: accepts connections, splits frames, hands requests to the broker, writes
responses back in request order. It interprets nothing.

A connection that sends a malformed, truncated or oversized frame (above socket.request.max.bytes),
an unknown API key or an unsupported version is closed — that connection only; every other client
keeps being served.

Memory: a connection's receive buffers grow with the bytes it sends, not with the sizes it
declares (protocol/frames.py), and buffers beyond the first chunk come from one pool for all
connections (queued.max.request.bytes, memory_pool.py). A connection that needs more than the
pool has left stops being read until memory comes back: back-pressure, as Kafka mutes a channel,
rather than an error to a healthy client.

Ordering: requests on a connection are dispatched in arrival order and responses leave in that
order. A handler that must wait before deciding (a long-polling Fetch, a coroutine) mutes the
connection until it is done, as Kafka mutes a channel with a request in flight; a handler whose
effects are done but whose answer waits (a Deferred: an acks=all produce waiting for its fsync)
lets the next requests proceed, which is what lets pipelined produces share one fsync.
"""

from __future__ import annotations

import asyncio
import collections
import fcntl
import inspect
import logging
import os
import socket
import ssl
import struct
import termios
from collections.abc import Awaitable
from typing import Any

from kafka_spark.broker import apis
from kafka_spark.broker.authorizer import certificate_principal
from kafka_spark.broker.broker import Broker
from kafka_spark.broker.deferred import Deferred
from kafka_spark.broker.file_region import FileRegion
from kafka_spark.broker.memory_pool import MemoryPool
from kafka_spark.broker.protocol import (
    FrameDecoder,
    FrameError,
    Request,
    UnsupportedRequest,
    decode_request,
    encode_response_parts,
)
from kafka_spark.broker.protocol.codec import ANONYMOUS
from kafka_spark.broker.protocol.versions import SASL_VERSIONS, ApiKey
from kafka_spark.broker.sasl import SaslSession, ScramCredentials

logger = logging.getLogger("kafka_spark.broker")

_PENDING = struct.Struct("i")
_PENDING_ARG = bytes(_PENDING.size)

#: Responses owed on one connection before it stops reading (back-pressure on pipelining clients).
MAX_IN_FLIGHT = 64


# A connection whose socket is full waits for it to take more on the loop's selector, as the
# transport itself does while it holds unsent bytes (the transport holds none then: it is idle).
# asyncio's public add_writer refuses a transport's socket, so the selector loop's own methods
# are used; on a loop without them regions the socket does not take at once are read and queued
# in the transport instead (KafkaConnection._write).
def _can_wait_writable(loop: asyncio.AbstractEventLoop) -> bool:
    return callable(getattr(loop, "_add_writer", None)) and callable(getattr(loop, "_remove_writer", None))


def _wait_writable(loop: asyncio.AbstractEventLoop, fd: int, callback: Any) -> None:
    loop._add_writer(fd, callback)  # type: ignore[attr-defined]


def _stop_waiting_writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    loop._remove_writer(fd)  # type: ignore[attr-defined]


def _abort_level(error: OSError) -> int:
    """A client gone while its answer was being written (a consumer closing mid-fetch) is routine,
    as asyncio's transports treat it; anything else (a segment truncated under a fetch) is not."""
    return logging.DEBUG if isinstance(error, ConnectionError) else logging.WARNING


class BrokerServer:
    """Listens for one broker. Runs on the broker's event loop."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._server: asyncio.base_events.Server | None = None
        self.connections: set[KafkaConnection] = set()
        self.memory = MemoryPool(broker.config.queued_max_request_bytes, broker.loop)
        config = broker.config
        # shared: derived once per user
        self.scram = ScramCredentials(config.sasl_users or {}, broker.credentials) if config.sasl_enabled else None

    async def start(self, serve: bool = True) -> int:
        """Bind, and listen unless ``serve`` is false (then :meth:`start_serving` does, once the
        broker is ready to answer); return the bound port."""
        config = self.broker.config
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: KafkaConnection(self),
            host=config.host,
            port=config.port,
            reuse_address=True,
            ssl=tls_context(config),
            start_serving=serve,
        )
        port = self._server.sockets[0].getsockname()[1]
        self.broker.port = port
        return port

    async def start_serving(self) -> None:
        """Listen and accept connections (after ``start(serve=False)``; until now, connecting
        was refused, as to a broker that is down)."""
        assert self._server is not None
        await self._server.start_serving()

    @property
    def buffered_bytes(self) -> int:
        """Bytes received of requests not complete yet, over every connection."""
        return sum(connection.decoder.buffered for connection in self.connections)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [task for connection in self.connections for task in connection.tasks]
        for connection in list(self.connections):
            connection.close(flush=False)  # an answer the client is not reading does not hold the stop up
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()


def tls_context(config: Any) -> ssl.SSLContext | None:
    """The listener's TLS context (an SSL or SASL_SSL listener), or None for plaintext: the
    broker's certificate chain and key (PEM), and with ``ssl_client_auth`` "requested" or
    "required" the CAs that client certificates must chain to (Kafka's ssl.client.auth)."""
    if not config.ssl_certfile:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=config.ssl_cafile)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile, password=config.ssl_key_password)
    context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}[
        config.ssl_client_auth
    ]
    return context


class KafkaConnection(asyncio.BufferedProtocol):
    """One client connection. Not thread-safe: lives on the broker's event loop.

    A BufferedProtocol: the socket is read straight into the frame decoder's buffers, so a request
    is in memory once, where the handler parses it and the log writes it from."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.broker = server.broker
        self.decoder = FrameDecoder(self.broker.config.socket_request_max_bytes, server.memory, self._socket_pending)
        self._socket_fd = -1
        # A plain TCP connection writes its socket itself (FileRegions with sendfile); a TLS one
        # hands every byte to its transport (see _write).
        self._writes_socket = False
        # Answer parts the socket has not taken yet, in order (_write); written when it can take
        # more, the regions still with sendfile.
        self._blocked: collections.deque[bytes | memoryview | FileRegion] = collections.deque()
        self._close_when_written = False  # close() with answers still blocked: close once they are out
        self.transport: asyncio.Transport | None = None
        self.peer: Any = None
        self.client_host = ""
        self.principal = ANONYMOUS  # User:NAME once authenticated (the authorizer decides by it)
        self._inbox: collections.deque[memoryview] = collections.deque()
        self._outbox: collections.deque[tuple[Request, asyncio.Future[Any]]] = collections.deque()
        self._muted = False  # a coroutine handler is running: do not dispatch more
        self._reading_paused = False
        self._writing_paused = False
        self._waiting_for_memory = False
        self._closed = False
        self._close_when_answered = False  # a failed SASL authentication: answer, then close
        self.tasks: set[asyncio.Future[Any]] = set()  # handlers still running (parked fetches)
        config = self.broker.config
        self.sasl: SaslSession | None = (
            SaslSession(
                config.sasl_users or {},
                config.sasl_mechanisms,
                server.scram,
                config.sasl_oauthbearer_validator,
                config.connections_max_reauth_ms,
            )
            if config.sasl_enabled
            else None
        )
        self._refusal_logged = False
        self.sasl_logins = 0  # successful SASL exchanges: the first, then re-authentications (KIP-368)

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.client_host = f"/{self.peer[0]}" if self.peer else ""  # Kafka's spelling: "/127.0.0.1"
        self.principal = certificate_principal(transport.get_extra_info("peercert")) or ANONYMOUS
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Kafka's socket.send/receive.buffer.bytes (config.py). The send buffer also bounds
            # how much of a Fetch's data one sendfile call queues (README, "Benchmarks").
            config = self.broker.config
            if config.socket_send_buffer_bytes != -1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, config.socket_send_buffer_bytes)
            if config.socket_receive_buffer_bytes != -1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, config.socket_receive_buffer_bytes)
            self._socket_fd = sock.fileno()
            # only where the transport adds nothing to the bytes, on a loop that can wait for the
            # socket to take more (see _write)
            loop = asyncio.get_running_loop()
            self._writes_socket = transport.get_extra_info("sslcontext") is None and _can_wait_writable(loop)
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._drop_blocked()
        self.server.connections.discard(self)
        for task in list(self.tasks):
            task.cancel()  # a parked Fetch of a gone client has no one to answer
        for _, future in self._outbox:
            future.cancel()
        self._outbox.clear()
        self._inbox.clear()
        self.server.memory.cancel(id(self))
        self.decoder.release()

    def _socket_pending(self) -> int:
        """Bytes received by the kernel and not read yet (0 when unknown)."""
        if self._socket_fd < 0:
            return 0
        try:
            return _PENDING.unpack(fcntl.ioctl(self._socket_fd, termios.FIONREAD, _PENDING_ARG))[0]
        except OSError:
            return 0

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self._inbox.extend(self.decoder.received(nbytes))
        except FrameError as error:
            self._abort(str(error))
            return
        self._dispatch()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    # -- request pipeline ----------------------------------------------------------------------

    def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        while self._inbox and not self._muted and not self._closed:
            frame = self._inbox.popleft()
            if self.sasl is not None and self.sasl.legacy and self.sasl.exchanging:
                self._legacy_sasl_token(frame)
                continue
            try:
                if self.sasl is not None:
                    self._check_sasl_session(frame)
                request = decode_request(frame, self.client_host, self.principal)
                if self.sasl is None and request.api_key in SASL_VERSIONS:
                    raise UnsupportedRequest(
                        f"api key {request.api_key} (SASL) on a {self.broker.config.security_protocol} listener"
                    )
            except UnsupportedRequest as error:
                self._flush()  # answers already decided still go out before the close
                self._abort(str(error))
                return
            if request.api_key in SASL_VERSIONS:
                future: asyncio.Future[Any] = loop.create_future()
                self._outbox.append((request, future))
                answer = self._sasl_step(request)
                if inspect.isawaitable(answer):  # an OAUTHBEARER token being validated
                    self._muted = True
                    self._chain(asyncio.ensure_future(answer), future, unmute=True)
                    continue
                future.set_result(answer)
                if self._close_when_answered:
                    self._flush()  # answers, then closes
                    return
                continue
            try:
                result = apis.dispatch(self.broker, request)
            except Exception:  # a handler bug must cost one connection, not the broker
                logger.exception("handler for api key %d failed; closing %s", request.api_key, self.peer)
                self._abort("internal error")
                return
            if not self._outbox and (result is None or type(result) is dict):
                # Nothing waits to be answered before it: an answer decided at once (every Produce
                # on a single node at Kafka's default flush policy) goes straight out, without a
                # future and the queue; acks=0 has none.
                if result is not None:
                    self._write(encode_response_parts(request, result))
                continue
            future = loop.create_future()
            self._outbox.append((request, future))
            if isinstance(result, Deferred):
                self._chain(asyncio.ensure_future(result.response), future)
            elif inspect.isawaitable(result):
                self._muted = True
                self._chain(asyncio.ensure_future(result), future, unmute=True)
            else:
                future.set_result(result)
        self._flush()
        self._update_reading()

    # -- SASL (sasl.py) ------------------------------------------------------------------------

    def _check_sasl_session(self, frame: memoryview) -> None:
        """Before authentication a connection may send only ApiVersions and the SASL requests;
        while it re-authenticates only the SASL requests, and once its session has expired
        (KIP-368) nothing but a re-authentication (checked on the raw header, before anything else
        of the frame is read)."""
        assert self.sasl is not None
        if len(frame) < 2:
            return  # decode_request names the problem
        api_key = int.from_bytes(frame[:2], "big", signed=True)
        if not self.sasl.authenticated:
            if api_key not in SASL_VERSIONS and api_key != ApiKey.API_VERSIONS:
                raise UnsupportedRequest(f"api key {api_key} before SASL authentication")
            return
        refusal = self.sasl.refuses(api_key)
        if refusal is not None:
            raise UnsupportedRequest(refusal)

    def _sasl_step(self, request: Request) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        assert self.sasl is not None
        if request.api_key == ApiKey.SASL_HANDSHAKE:
            return self._sasl_stepped(self.sasl.handshake(request.body.mechanism, request.api_version))
        response = self.sasl.authenticate(request.body.auth_bytes)
        if inspect.isawaitable(response):
            return self._sasl_stepped_later(response)
        return self._sasl_stepped(response)

    async def _sasl_stepped_later(self, response: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        return self._sasl_stepped(await response)

    def _sasl_stepped(self, response: dict[str, Any]) -> dict[str, Any]:
        """After a SASL step: log a refusal once, close after answering a failure, take the
        principal of a success."""
        assert self.sasl is not None
        self._log_sasl_refusal()
        if self.sasl.failed:
            self._close_when_answered = True
        elif self.sasl.authenticated and not self.sasl.exchanging:  # an exchange just succeeded
            self.principal = f"User:{self.sasl.user}"
            self.sasl_logins += 1
            logger.debug(
                "SASL %s %s of %s as %s; session lifetime %d ms",
                self.sasl.mechanism,
                "re-authentication" if self.sasl_logins > 1 else "authentication",
                self.peer,
                self.principal,
                self.sasl.session_lifetime_ms,
            )
        return response

    def _log_sasl_refusal(self) -> None:
        """The reason an exchange failed, once per connection (a refused token is logged when its
        challenge goes out: a client may hang up rather than answer it). Never the credentials."""
        assert self.sasl is not None
        if self._refusal_logged or not (self.sasl.failed or self.sasl.refusal):
            return
        self._refusal_logged = True
        reason = self.sasl.refusal or self.sasl.failure or "refused"
        phase = "re-authentication" if self.sasl.authenticated else "authentication"
        logger.warning("SASL %s %s of %s failed: %s", self.sasl.mechanism, phase, self.peer, reason)

    def _legacy_sasl_token(self, frame: memoryview) -> None:
        """SaslHandshake v0's flow: the tokens as bare frames, answered by bare frames."""
        assert self.sasl is not None and self.transport is not None
        self._flush()  # the handshake's answer goes first
        answer = self.sasl.step(bytes(frame))
        if not inspect.isawaitable(answer):
            self._legacy_sasl_answer(answer)
            return
        self._muted = True  # an OAUTHBEARER token being validated
        task = asyncio.ensure_future(answer)
        self.tasks.add(task)

        def done(finished: asyncio.Future[bytes]) -> None:
            self.tasks.discard(task)
            self._muted = False
            if self._closed or finished.cancelled():
                return
            self._legacy_sasl_answer(finished.result())
            self._dispatch()

        task.add_done_callback(done)

    def _legacy_sasl_answer(self, answer: bytes) -> None:
        assert self.sasl is not None
        self._log_sasl_refusal()
        if self.sasl.failed:
            self._abort("SASL authentication failed")
            return
        if self.sasl.authenticated and not self.sasl.exchanging:
            self.principal = f"User:{self.sasl.user}"
            self.sasl_logins += 1
        self._write([len(answer).to_bytes(4, "big") + answer])

    def _chain(self, task: asyncio.Future[Any], future: asyncio.Future[Any], unmute: bool = False) -> None:
        self.tasks.add(task)

        def done(finished: asyncio.Future[Any]) -> None:
            self.tasks.discard(task)
            if unmute:
                self._muted = False
            if future.done() or self._closed:
                return  # the connection is gone; its answers with it
            if finished.cancelled():
                future.cancel()
            elif finished.exception() is not None:
                error = finished.exception()
                logger.error("handler failed on %s: %r", self.peer, error, exc_info=error)
                future.set_exception(error)  # type: ignore[arg-type]
            else:
                future.set_result(finished.result())
            self._flush()
            self._dispatch()

        task.add_done_callback(done)

    def _flush(self) -> None:
        """Write every response at the head of the queue that is ready, in order."""
        while self._outbox and self._outbox[0][1].done() and not self._closed:
            request, future = self._outbox.popleft()
            if future.cancelled() or future.exception() is not None:
                self._abort("internal error")
                return
            response = future.result()
            if response is not None:
                self._write(encode_response_parts(request, response))
        if self._close_when_answered and not self._outbox:
            self.close()  # after the answer is written: the client learns why

    def _write(self, parts: list[bytes | memoryview | FileRegion]) -> None:
        """Write a response's parts in order.

        A plain TCP connection writes its socket itself: bytes with ``write``, a FileRegion (a
        Fetch's records in a segment file) with ``sendfile``, so a region's data is never copied
        into the broker. What the socket does not take at once (a client reading slower than the
        broker answers) waits in ``_blocked``, a region as a region, and goes out when the socket
        can take more, again with sendfile, as Kafka's transferTo does; meanwhile the connection
        reads no further requests, as Kafka mutes a channel whose answer is being sent. A TLS
        connection (or a loop that cannot wait for the socket) reads each region and hands every
        byte to its transport."""
        if self._blocked:
            self._blocked.extend(parts)
            return
        if not self._writes_socket:
            self._write_to_transport(parts)
            return
        fd = self._socket_fd
        for index, part in enumerate(parts):
            try:
                if isinstance(part, FileRegion):
                    if part.send_to(fd):
                        part.close()
                        continue
                else:
                    sent = os.write(fd, part)
                    if sent == len(part):
                        continue
                    part = memoryview(part)[sent:]
            except BlockingIOError:  # the socket took none of these bytes
                pass
            except OSError as error:  # the file truncated under the fetch, or the peer gone
                self._drop_blocked(parts[index:])
                self._abort(f"answer not written: {error}", _abort_level(error))
                return
            self._blocked.append(part)
            self._blocked.extend(parts[index + 1 :])
            _wait_writable(asyncio.get_running_loop(), fd, self._write_blocked)
            self._update_reading()
            return

    def _write_to_transport(self, parts: list[bytes | memoryview | FileRegion]) -> None:
        transport = self.transport
        assert transport is not None
        for index, part in enumerate(parts):
            if isinstance(part, FileRegion):
                try:
                    data = part.read()
                except OSError as error:  # the file truncated under the fetch
                    self._drop_blocked(parts[index:])
                    self._abort(f"fetch response not written: {error}")
                    return
                part.close()
                transport.write(data)
            else:
                transport.write(part)

    def _write_blocked(self) -> None:
        """The socket can take more: write what waits in ``_blocked``, in order, until it is all
        out or the socket is full again (then wait once more)."""
        blocked, fd = self._blocked, self._socket_fd
        try:
            while blocked:
                part = blocked[0]
                if isinstance(part, FileRegion):
                    if not part.send_to(fd):
                        return
                    part.close()
                else:
                    sent = os.write(fd, part)
                    if sent < len(part):
                        blocked[0] = memoryview(part)[sent:]
                        return
                blocked.popleft()
        except BlockingIOError:
            return
        except OSError as error:  # the file truncated under the fetch, or the peer gone
            self._abort(f"answer not written: {error}", _abort_level(error))
            return
        _stop_waiting_writable(asyncio.get_running_loop(), fd)
        if self._close_when_written and self.transport is not None:
            self.transport.close()
            return
        self._update_reading()

    def _drop_blocked(self, parts: list[bytes | memoryview | FileRegion] | None = None) -> None:
        """Let go of what waits unwritten (the connection is closing), the regions' files too."""
        if self._blocked:
            _stop_waiting_writable(asyncio.get_running_loop(), self._socket_fd)
        for part in (*self._blocked, *(parts or ())):
            if isinstance(part, FileRegion):
                part.close()
        self._blocked.clear()

    def _memory_available(self) -> None:
        self._waiting_for_memory = False
        if not self._closed:
            self.decoder.make_room()
            self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self._closed:
            return
        starved = self.decoder.starved  # the memory pool refused this connection's next buffer
        if starved and not self._waiting_for_memory:
            self._waiting_for_memory = True
            self.server.memory.wait(id(self), self._memory_available)
        should_pause = (
            starved
            or self._writing_paused
            or bool(self._blocked)  # an answer waits for the socket: read no more until it is out
            or len(self._outbox) >= MAX_IN_FLIGHT
            or len(self._inbox) >= MAX_IN_FLIGHT
        )
        if should_pause and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            self.transport.resume_reading()
            self._reading_paused = False

    def _abort(self, reason: str, level: int = logging.WARNING) -> None:
        if self._closed:
            return
        logger.log(level, "closing connection from %s: %s", self.peer, reason)
        self._closed = True
        self._drop_blocked()
        if self.transport is not None:
            self.transport.abort()

    def close(self, flush: bool = True) -> None:
        """Close once the answers already written are out (``flush``), or now, dropping them."""
        if self.transport is not None and not self._closed:
            self._closed = True
            if self._blocked and flush:  # as the transport does with bytes in its own buffer
                self._close_when_written = True
                return
            self._drop_blocked()
            self.transport.close()
