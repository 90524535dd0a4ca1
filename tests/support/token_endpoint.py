"""A minimal OAuth 2 token endpoint on loopback, for client logins against Apache Kafka's unsecured
OAUTHBEARER validator: the client-credentials grant (RFC 6749 4.4, client id and secret in an
HTTP Basic header, as librdkafka sends them), answered with an unsigned JWT (``alg: none``; Kafka's
``OAuthBearerUnsecuredValidatorCallbackHandler`` checks its ``sub`` and ``exp`` claims, no
signature) that lives ``lifetime_s`` seconds.

It counts what it issues (``issued``) and refuses (``refused``), so a test can assert that a
client logged in through it and fetched new tokens as old ones neared their expiry.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def unsigned_jwt(claims: dict) -> str:
    """``header.payload.`` with ``alg: none`` (RFC 7519 6.1)."""

    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


@dataclass
class TokenEndpoint:
    """Issues tokens to ``clients`` (client id -> secret), the ``sub`` claim being the client id."""

    clients: dict[str, str]
    lifetime_s: int = 3600
    issued: list[dict] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)  # every token issued (tests grep for them)
    refused: int = 0
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/oauth2/token"

    def start(self) -> TokenEndpoint:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                form = dict(urllib.parse.parse_qsl(body))
                client_id, secret = _basic(self.headers.get("Authorization", ""))
                if form.get("grant_type") != "client_credentials" or endpoint.clients.get(client_id) != secret:
                    endpoint.refused += 1
                    self._answer(401, {"error": "invalid_client"})
                    return
                now = int(time.time())
                claims = {"sub": client_id, "iat": now, "exp": now + endpoint.lifetime_s}
                if form.get("scope"):
                    claims["scope"] = form["scope"]
                endpoint.issued.append(claims)
                token = unsigned_jwt(claims)
                endpoint.tokens.append(token)
                self._answer(200, {"access_token": token, "token_type": "bearer", "expires_in": endpoint.lifetime_s})

            def _answer(self, status: int, document: dict) -> None:
                payload = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="token-endpoint", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> TokenEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _basic(header: str) -> tuple[str, str]:
    if not header.startswith("Basic "):
        return "", ""
    try:
        user, _, secret = base64.b64decode(header[len("Basic ") :]).decode().partition(":")
    except ValueError:
        return "", ""
    return user, secret
