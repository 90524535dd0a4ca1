"""Whether a Kafka cluster can be reached at all, asked before the first request to it.

librdkafka never says "nothing listens there": every request to a cluster that is down or
misnamed waits out its whole timeout and fails with a bare transport error, and every retry does
it again (the CLI took half a minute per command, a query two minutes). A TCP connection to the
bootstrap addresses answers that question within milliseconds when the port is closed, so
clients of pylog (the CLI, the source's driver-side lookups) ask it first and fail with one
message naming the address and what to check. An address that accepts connections but never
answers (a silent proxy, a port forward to nothing, a stopped process whose socket is still open)
makes the clients wait just as long, so with ``require_answer`` the check also sends a Kafka
ApiVersions request and waits for a reply within the same deadline. Any reply counts, even a
closed connection (a TLS listener drops the plain request at once): the check tells silence from
an answer; what the answer means is left to the client and its own timeouts and retries.

Thread-safe; no state.
"""

from __future__ import annotations

import socket
import struct
import time

from kafka_spark.errors import PylogError

#: Pause between connection attempts while waiting for a cluster to come up.
RETRY_INTERVAL_S = 0.25

#: An ApiVersions v0 request (api key 18, correlation id 1, client id "pylog"), which every Kafka
#: broker answers, before authentication too; a size-prefixed header and an empty body.
_API_VERSIONS_V0 = struct.pack(">ihhih5s", 2 + 2 + 4 + 2 + 5, 18, 0, 1, 5, b"pylog")


class ClusterUnreachable(PylogError, ConnectionError):
    """No bootstrap address accepted a TCP connection within the wait (the message names them)."""


def bootstrap_addresses(bootstrap_servers: str) -> list[tuple[str, int]]:
    """``host:port`` pairs of a ``bootstrap.servers`` list (``PROTOCOL://`` prefixes and IPv6
    brackets allowed, as librdkafka takes them); entries without a port use Kafka's 9092."""
    addresses = []
    for entry in bootstrap_servers.split(","):
        entry = entry.strip().rpartition("://")[2]
        if not entry:
            continue
        host, colon, port = entry.rpartition(":")
        if not colon or "]" in port:  # no port (or a bare IPv6 address)
            host, port = entry, "9092"
        try:
            number = int(port)
        except ValueError:
            number = -1
        addresses.append((host.strip("[]") or "localhost", number))
    return addresses


def unreachable_reason(bootstrap_servers: str, timeout_s: float = 5.0, require_answer: bool = False) -> str | None:
    """``None`` if some bootstrap address accepts a TCP connection within ``timeout_s`` (and,
    with ``require_answer``, replies to a Kafka request or closes the connection within it), else
    why none does (e.g. ``127.0.0.1:1: connection refused``)."""
    addresses = bootstrap_addresses(bootstrap_servers)
    if not addresses:
        return "no address given"
    deadline = time.monotonic() + timeout_s
    reasons = []
    for host, port in addresses:
        if not 0 < port < 65536:
            reasons.append(f"{host}: the port is not a number from 1 to 65535")
            continue
        try:
            with socket.create_connection((host, port), timeout=max(deadline - time.monotonic(), 0.1)) as connection:
                if not require_answer or _answers(connection, deadline):
                    return None
                reasons.append(
                    f"{host}:{port}: accepts connections but sent no answer to a Kafka request within {timeout_s:g}s"
                )
                continue
        except socket.gaierror:
            reasons.append(f"{host}: unknown host")
        except ConnectionRefusedError:
            reasons.append(f"{host}:{port}: connection refused")
        except TimeoutError:
            reasons.append(f"{host}:{port}: no answer within {timeout_s:g}s")
        except OSError as error:
            reasons.append(f"{host}:{port}: {error.strerror or error}")
    return "; ".join(reasons)


def _answers(connection: socket.socket, deadline: float) -> bool:
    """Whether the peer replies to an ApiVersions request (or ends the connection) by ``deadline``."""
    try:
        connection.settimeout(max(deadline - time.monotonic(), 0.1))
        connection.sendall(_API_VERSIONS_V0)
        connection.recv(1)  # a byte of the reply, or b"" when the peer closed the connection
    except TimeoutError:
        return False
    except OSError:  # reset or refused mid-way: something there answered
        pass
    return True


def wait_reachable(bootstrap_servers: str, timeout_s: float, require_answer: bool = False) -> None:
    """Return once some bootstrap address accepts a TCP connection (and, with
    ``require_answer``, answers a Kafka request), trying again every :data:`RETRY_INTERVAL_S`
    (a broker that is starting or restarting is waited for); raise :class:`ClusterUnreachable`
    naming the addresses and the last reason after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        reason = unreachable_reason(bootstrap_servers, min(max(deadline - time.monotonic(), 0.1), 5.0), require_answer)
        if reason is None:
            return
        if time.monotonic() + RETRY_INTERVAL_S >= deadline:
            raise ClusterUnreachable(
                f"no Kafka broker reachable at {bootstrap_servers} within {timeout_s:g}s ({reason})"
            )
        time.sleep(RETRY_INTERVAL_S)
