"""A small OpenID Connect provider on loopback, for tests of OAUTHBEARER logins.

    with OidcProvider() as idp:
        client_id, secret = idp.add_client("etl", scope="kafka")
        broker = EmbeddedBroker(sasl_mechanisms=("OAUTHBEARER",), sasl_oauthbearer_validator=idp.validator())
        librdkafka = {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": idp.token_endpoint_url,
                      "sasl.oauthbearer.client.id": client_id, "sasl.oauthbearer.client.secret": secret, ...}

It serves, over HTTP on 127.0.0.1 (a port of its own):

- ``POST /oauth2/token``: the client-credentials grant (RFC 6749 section 4.4): ``grant_type=client_credentials``
  and an optional ``scope``, the client authenticated by HTTP Basic (``client_id:client_secret``,
  each form-urlencoded, as section 2.3.1 says and Kafka's Java client sends) or by
  ``client_id``/``client_secret`` form fields. The answer is ``{"access_token": <JWT>,
  "token_type": "Bearer", "expires_in": ..., "scope": ...}``; a wrong secret gets 401
  ``invalid_client``, another grant 400 ``unsupported_grant_type``, a scope the client may not
  have 400 ``invalid_scope``.
- ``GET /.well-known/jwks.json``: the public keys (JWKS) the tokens are signed with;
- ``GET /.well-known/openid-configuration``: the discovery document naming both.

Tokens are JWTs signed RS256 (or ES256: ``algorithm="ES256"``) with ``iss`` (the provider's
URL), ``sub`` (the client id, or the subject given to :meth:`add_client`), ``aud``, ``iat``,
``exp``, ``scope``, ``client_id`` and ``jti``. :meth:`rotate_key` signs from then on with a new key
(the old one stays published unless told otherwise), and :meth:`issue` mints a token directly,
including the bad ones a test needs (expired, another audience or issuer, signed by a key the
JWKS does not hold, an unknown ``kid``).

Secrets are generated per provider and never logged; :attr:`token_requests` counts the grants
served per client (for tests of token refresh). Thread-safe: the server runs in a thread.
"""

from __future__ import annotations

import base64
import http.server
import itertools
import json
import math
import secrets
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka_spark.errors import PylogError

_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
TOKEN_PATH = "/oauth2/token"
JWKS_PATH = "/.well-known/jwks.json"
DISCOVERY_PATH = "/.well-known/openid-configuration"


class OidcProviderError(PylogError, RuntimeError):
    """The test provider cannot do what was asked (a missing library, an unknown client)."""


def _joserfc() -> Any:
    try:
        import joserfc.jwk
        import joserfc.jwt
    except ImportError:
        raise OidcProviderError("the local OIDC provider needs joserfc: pip install 'pyspark-pylog[oauth]'") from None
    return joserfc


@dataclass(frozen=True)
class _Client:
    secret: str
    subject: str
    scope: frozenset[str]
    audience: str | None


class OidcProvider:
    """A client-credentials token endpoint and a JWKS on loopback (see the module docstring)."""

    def __init__(
        self,
        audience: str = "kafka",
        algorithm: str = "RS256",
        token_lifetime_s: float = 3600.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if algorithm not in ("RS256", "ES256"):
            raise ValueError(f"algorithm={algorithm!r}: the provider signs with RS256 or ES256")
        self.audience = audience
        self.algorithm = algorithm
        self.token_lifetime_s = token_lifetime_s
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._clients: dict[str, _Client] = {}
        self._keys: list[Any] = []  # published; the last one signs
        self._kids = itertools.count(1)
        self.token_requests: Counter[str] = Counter()
        # the client add_client registered last (the pylog_oidc fixture's one client)
        self.client_id: str | None = None
        self.client_secret: str | None = None
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.rotate_key()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> OidcProvider:
        if self._server is not None:
            return self
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                path = urllib.parse.urlsplit(self.path).path
                if path == JWKS_PATH:
                    self._answer(200, provider.jwks())
                elif path == DISCOVERY_PATH:
                    self._answer(200, provider.openid_configuration())
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode("utf-8", "replace"))
                if urllib.parse.urlsplit(self.path).path != TOKEN_PATH:
                    self._answer(404, {"error": "not_found"})
                    return
                status, body = provider._grant(self.headers.get("Authorization"), form)
                self._answer(status, body)

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass  # requests carry secrets (Authorization, form fields): never logged

        self._server = http.server.ThreadingHTTPServer((self._host, self._port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="pylog-oidc", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        assert self._thread is not None
        self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> OidcProvider:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- addresses -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The provider's base URL, also the ``iss`` of its tokens."""
        if self._server is None:
            raise OidcProviderError("the OIDC provider is not started; use `with OidcProvider() as idp:`")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def issuer(self) -> str:
        return self.url

    @property
    def token_endpoint_url(self) -> str:
        return self.url + TOKEN_PATH

    @property
    def jwks_url(self) -> str:
        return self.url + JWKS_PATH

    def openid_configuration(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "token_endpoint": self.token_endpoint_url,
            "jwks_uri": self.jwks_url,
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "id_token_signing_alg_values_supported": [self.algorithm],
        }

    def broker_properties(self, listener: str = "sasl_plaintext") -> dict[str, str]:
        """Kafka's broker settings for a listener validating this provider's tokens."""
        prefix = f"listener.name.{listener}.oauthbearer."
        return {
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            f"{prefix}sasl.server.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            ),
            f"{prefix}sasl.jaas.config": f"{_LOGIN_MODULE} required ;",
            "sasl.oauthbearer.jwks.endpoint.url": self.jwks_url,
            "sasl.oauthbearer.expected.audience": self.audience,
            "sasl.oauthbearer.expected.issuer": self.issuer,
        }

    def validator(self, **settings: Any) -> Any:
        """A broker-side validator of this provider's tokens (a JwksValidator expecting its issuer
        and audience; ``settings`` override its parameters)."""
        from kafka_spark.broker.oauthbearer.jwks import JwksValidator

        return JwksValidator(
            **{"jwks_url": self.jwks_url, "expected_audience": (self.audience,), "expected_issuer": self.issuer}
            | settings
        )

    def token_provider(self, client_id: str, secret: str, scope: str = "") -> Callable[[], str]:
        """A callable fetching a token for ``client_id`` from the token endpoint (a real HTTP
        client-credentials grant each call): e.g. a cluster's ``sasl_oauthbearer_token_provider``."""
        endpoint = self.token_endpoint_url

        def fetch() -> str:
            form = {"grant_type": "client_credentials", **({"scope": scope} if scope else {})}
            credentials = f"{urllib.parse.quote_plus(client_id)}:{urllib.parse.quote_plus(secret)}"
            request = urllib.request.Request(
                endpoint,
                data=urllib.parse.urlencode(form).encode(),
                headers={"Authorization": "Basic " + base64.b64encode(credentials.encode()).decode()},
            )
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - the provider's own URL
                return str(json.loads(response.read())["access_token"])

        return fetch

    # -- clients and keys ------------------------------------------------------------------------

    def add_client(
        self,
        client_id: str,
        secret: str | None = None,
        subject: str | None = None,
        scope: str = "",
        audience: str | None = None,
    ) -> tuple[str, str]:
        """Register a client (its secret generated unless given); ``subject`` is its tokens' ``sub``
        (default the client id), ``scope`` the space-delimited scope it may ask for (and gets when
        it asks for none), ``audience`` its tokens' ``aud`` (default the provider's). Returns
        ``(client_id, secret)``."""
        secret = secret if secret is not None else secrets.token_urlsafe(24)
        with self._lock:
            self._clients[client_id] = _Client(secret, subject or client_id, frozenset(scope.split()), audience)
            self.client_id, self.client_secret = client_id, secret
        return client_id, secret

    def rotate_key(self, keep_previous: bool = True) -> str:
        """Sign from now on with a new key; returns its ``kid``. The previous keys stay in the JWKS
        unless ``keep_previous`` is false (then tokens they signed no longer verify)."""
        key = self.new_key()
        with self._lock:
            self._keys = [*self._keys, key] if keep_previous else [key]
        return str(key.kid)

    def new_key(self, kid: str | None = None) -> Any:
        """A fresh signing key of the provider's algorithm (not published: for tokens signed by a
        key the JWKS does not hold)."""
        joserfc = _joserfc()
        parameters = {"kid": kid or f"pylog-{next(self._kids)}", "alg": self.algorithm, "use": "sig"}
        if self.algorithm == "RS256":
            return joserfc.jwk.RSAKey.generate_key(2048, parameters=parameters)
        return joserfc.jwk.ECKey.generate_key("P-256", parameters=parameters)

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            keys = list(self._keys)
        return {"keys": [key.as_dict(private=False) for key in keys]}

    def issue(
        self,
        subject: str,
        *,
        audience: str | list[str] | None = None,
        issuer: str | None = None,
        lifetime_s: float | None = None,
        scope: str = "",
        key: Any = None,
        kid: str | None = None,
        **claims: Any,
    ) -> str:
        """A signed token for ``subject``: by the current key unless ``key`` is given, its header
        naming ``kid`` (default the key's); ``claims`` add or replace claims (``None`` drops one)."""
        joserfc = _joserfc()
        with self._lock:
            signing = key if key is not None else self._keys[-1]
        now = time.time()
        body: dict[str, Any] = {
            "iss": issuer if issuer is not None else self.issuer,
            "sub": subject,
            "aud": audience if audience is not None else self.audience,
            "iat": int(now),
            "exp": math.ceil(now + (self.token_lifetime_s if lifetime_s is None else lifetime_s)),
            "jti": secrets.token_hex(8),
        }
        if scope:
            body["scope"] = scope
        body.update(claims)
        body = {name: value for name, value in body.items() if value is not None}
        header = {"alg": self.algorithm, "typ": "JWT", "kid": kid or signing.kid}
        return str(joserfc.jwt.encode(header, body, signing))

    def _grant(self, authorization: str | None, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        fields = {name: values[0] for name, values in form.items() if values}
        client_id, secret = fields.get("client_id"), fields.get("client_secret")
        if authorization and authorization.lower().startswith("basic "):
            try:
                decoded = base64.b64decode(authorization[6:].strip()).decode()
            except (ValueError, UnicodeDecodeError):
                return 401, {"error": "invalid_client", "error_description": "malformed Basic authorization"}
            user, _, password = decoded.partition(":")
            client_id, secret = urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password)
        with self._lock:
            client = self._clients.get(client_id or "")
        if client is None or secret is None or not secrets.compare_digest(client.secret.encode(), secret.encode()):
            return 401, {"error": "invalid_client", "error_description": "unknown client or wrong secret"}
        if fields.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type", "error_description": "only client_credentials is served"}
        asked = frozenset(fields.get("scope", "").split())
        if not asked <= client.scope:
            return 400, {
                "error": "invalid_scope",
                "error_description": f"{client_id} may not have {' '.join(sorted(asked - client.scope))}",
            }
        granted = " ".join(sorted(asked or client.scope))
        with self._lock:
            self.token_requests[client_id or ""] += 1
        token = self.issue(client.subject, audience=client.audience, scope=granted, client_id=client_id)
        return 200, {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": int(self.token_lifetime_s),
            **({"scope": granted} if granted else {}),
        }
