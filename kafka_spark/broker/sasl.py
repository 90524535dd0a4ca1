"""SASL authentication of a connection (a SASL_PLAINTEXT listener), as Kafka does it: PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER.

A broker given users (``EmbeddedBroker(sasl_users={"alice": "alice-secret"})``, or Kafka's
``listener.name.sasl_plaintext.plain.sasl.jaas.config`` with ``user_alice="alice-secret"``)
authenticates every connection before serving it. Until then a connection may send only
ApiVersions, SaslHandshake (17) and SaslAuthenticate (36); anything else closes it, as Kafka
closes it. Both of Kafka's flows are served:

- SaslHandshake v1, then SaslAuthenticate requests carrying the tokens (librdkafka, kafka-python,
  aiokafka with brokers from Kafka 1.0 on);
- SaslHandshake v0, then the tokens as bare size-prefixed frames, answered the same way
  (clients of Kafka before 1.0).

PLAIN's token is ``authzid NUL username NUL password`` (RFC 4616); an authorization id other than
the username is refused, as Kafka refuses it. SCRAM (RFC 5802/7677) takes two round trips; each
user's salted credentials are derived once per broker from its password (4096 iterations, as
kafka-configs' default), and an unknown user gets a made-up salt so that the exchange does not
tell it from a wrong password. A failed authentication is answered with
SASL_AUTHENTICATION_FAILED, then the connection is closed. Passwords are compared in constant
time and never logged. PLAIN sends the password in clear text: over anything but loopback, put TLS
in front of the broker.

OAUTHBEARER (``sasl_mechanisms`` holding it) takes a bearer token (RFC 7628,
oauthbearer/exchange.py) and has the listener's validator check it (oauthbearer/validator.py: an
unsecured JWS by default, signed JWTs against a JWKS, or any pluggable one); the principal is the
token's subject. Tokens expire, and so do sessions (KIP-368): a successful SaslAuthenticate v1+
tells the client its session lifetime, the token's remaining life capped by
``connections.max.reauth.ms`` (which bounds PLAIN and SCRAM sessions too). A client re-authenticates
over the same connection (SaslHandshake and SaslAuthenticate again, the same mechanism and
principal) and keeps it; a connection that sends any other request after its session ended is
closed, as Kafka closes it.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import inspect
import os
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.oauthbearer.exchange import OAuthBearerExchange, SaslAuthenticationFailed
from kafka_spark.broker.protocol.versions import ApiKey

OAUTHBEARER = "OAUTHBEARER"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER)
DEFAULT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LONGEST_SESSION_MS = 10**15  # ~31,700 years: a token "never" expiring still fits the response's timedelta
_EMPTY_ANSWER = {"auth_bytes": b"", "session_lifetime": datetime.timedelta(0)}
SCRAM_ITERATIONS = 4096
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int = SCRAM_ITERATIONS


class ScramCredentials:
    """Each user's SCRAM credential per hash: the one stored in the broker's metadata
    (credentials.py, set with AlterUserScramCredentials) when there is one, else derived from the
    user's PLAIN password on first use and kept for the broker's life (the server never needs the
    password itself after that)."""

    def __init__(self, users: Mapping[str, str], store: Any = None) -> None:
        self._users = users
        self._store = store
        self._cache: dict[tuple[str, str], ScramCredential] = {}
        self._unknown_salt = os.urandom(16)

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        stored = self._store.get(mechanism, user) if self._store is not None else None
        if stored is not None:
            salt, iterations, stored_key, server_key = stored
            return ScramCredential(salt, stored_key, server_key, iterations)
        key = (mechanism, user)
        if key not in self._cache:
            password = self._users.get(user)
            if password is None:
                return None
            self._cache[key] = derive(_HASHES[mechanism], password, os.urandom(16))
        return self._cache[key]

    def decoy(self, mechanism: str, user: str) -> ScramCredential:
        """The same made-up salt for an unknown user every time, as if the user existed."""
        salt = hmac.new(self._unknown_salt, user.encode(), "sha256").digest()[:16]
        return derive(_HASHES[mechanism], os.urandom(16).hex(), salt)


def derive(hash_name: str, password: str, salt: bytes, iterations: int = SCRAM_ITERATIONS) -> ScramCredential:
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    return ScramCredential(
        salt,
        hashlib.new(hash_name, client_key).digest(),
        hmac.new(salted, b"Server Key", hash_name).digest(),
        iterations,
    )


@dataclass
class SaslSession:
    """The authentication state of one connection, and its re-authentications (KIP-368)."""

    users: Mapping[str, str]
    mechanisms: tuple[str, ...] = MECHANISMS
    scram: ScramCredentials | None = None
    oauthbearer_validator: Any = None  # OAUTHBEARER's (oauthbearer/validator.py)
    connections_max_reauth_ms: int = 0  # Kafka's connections.max.reauth.ms; 0: only a token's expiry bounds
    mechanism: str | None = None  # chosen by SaslHandshake
    legacy: bool = False  # SaslHandshake v0: the tokens come as bare frames
    user: str | None = None  # set once authenticated (kept while re-authenticating)
    failed: bool = False
    failure: str | None = None  # the error message of a failed exchange (no secrets in it)
    refusal: str | None = None  # why a token was refused (the log says it as soon as it is known)
    exchanging: bool = False  # a SaslHandshake began an exchange that is not over
    session_lifetime_ms: int = 0  # what the last successful SaslAuthenticate (v1+) told the client
    expires_at: float | None = None  # time.monotonic() after which the session is over (KIP-368)
    _previous_mechanism: str | None = None  # a re-authentication's: it may not change
    _scram_state: dict = field(default_factory=dict)
    _oauthbearer: OAuthBearerExchange | None = None

    @property
    def authenticated(self) -> bool:
        return self.user is not None

    @property
    def reauthenticating(self) -> bool:
        return self.exchanging and self.authenticated

    def handshake(self, mechanism: str, version: int) -> dict:
        """The SaslHandshake response; a mechanism this broker lacks fails the connection. On an
        authenticated connection it begins a re-authentication (KIP-368), which must keep the
        mechanism and the principal."""
        if self.exchanging or self.failed or (self.authenticated and version == 0):
            self.failed = True
            self.failure = "SaslHandshake in the middle of an exchange, or v0 for re-authentication"
            return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": list(self.mechanisms)}
        if mechanism not in self.mechanisms:
            self.failed = True
            self.failure = f"unsupported SASL mechanism {mechanism!r}"
            return {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": list(self.mechanisms)}
        self._previous_mechanism = self.mechanism if self.authenticated else None
        self.mechanism = mechanism
        self.legacy = version == 0
        self.exchanging = True
        self._scram_state = {}
        self._oauthbearer = OAuthBearerExchange(self.oauthbearer_validator) if mechanism == OAUTHBEARER else None
        return {"error_code": ErrorCode.none, "mechanisms": list(self.mechanisms)}

    def authenticate(self, token: bytes) -> dict | Awaitable[dict]:
        """The SaslAuthenticate response to the next token of the exchange (an awaitable of it
        while an OAUTHBEARER token is validated)."""
        if not self.exchanging:
            self.failed = True
            self.failure = "SaslAuthenticate without a SaslHandshake, or after authentication"
            return {**_EMPTY_ANSWER, "error_code": ErrorCode.illegal_sasl_state, "error_message": self.failure}
        answer = self.step(bytes(token))
        if inspect.isawaitable(answer):
            return self._response_later(answer)
        return self._response(answer)

    async def _response_later(self, answer: Awaitable[bytes]) -> dict:
        return self._response(await answer)

    def _response(self, answer: bytes) -> dict:
        if self.failed:
            return {**_EMPTY_ANSWER, "error_code": ErrorCode.sasl_authentication_failed, "error_message": self.failure}
        lifetime = datetime.timedelta(milliseconds=0 if self.exchanging else self.session_lifetime_ms)
        return {"auth_bytes": answer, "session_lifetime": lifetime, "error_code": ErrorCode.none, "error_message": None}

    def step(self, token: bytes) -> bytes | Awaitable[bytes]:
        """The server's answer to one client token (an awaitable of it for OAUTHBEARER); sets
        ``user`` when done, ``failed`` and ``failure`` on a refusal (the answer is then meaningless)."""
        if self._previous_mechanism is not None and self.mechanism != self._previous_mechanism:
            return self._fail(
                f"SASL mechanism '{self.mechanism}' requested by client is not supported for re-authentication "
                f"of mechanism '{self._previous_mechanism}'"
            )
        if self.mechanism == OAUTHBEARER:
            return self._oauthbearer_step(token)
        if self.mechanism == "PLAIN":
            self.check_plain(token)
            return b""
        try:
            return self._scram_step(token)
        except (ValueError, KeyError, UnicodeDecodeError):  # a malformed message: refused
            return self._fail(self._invalid_credentials())

    async def _oauthbearer_step(self, token: bytes) -> bytes:
        exchange = self._oauthbearer
        assert exchange is not None
        try:
            answer = await exchange.evaluate(token)
        except SaslAuthenticationFailed as error:
            return self._fail(str(error))
        finally:
            self.refusal = exchange.refusal
        if exchange.token is not None:
            self._complete(exchange.token.principal_name, exchange.token.lifetime_ms)
        return answer

    def check_plain(self, token: bytes) -> str | None:
        """The authenticated user name, or None (this session then counts as failed)."""
        parts = bytes(token).split(b"\0")
        user = None
        if len(parts) == 3:
            authzid, username, password = (part.decode("utf-8", "replace") for part in parts)
            expected = self.users.get(username)
            # Compare in constant time even for an unknown user, so timing tells nothing.
            matches = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0").encode())
            if expected is not None and matches and authzid in ("", username):
                user = username
        if user is None:
            self._fail(self._invalid_credentials())
            return None
        self._complete(user)
        return user if not self.failed else None

    def _invalid_credentials(self) -> str:
        return f"Authentication failed: Invalid username or password ({self.mechanism})"

    def _fail(self, message: str) -> bytes:
        self.failed = True
        self.failure = message
        self.exchanging = False
        return b""

    def _complete(self, user: str, credential_expiry_ms: int | None = None) -> None:
        """The exchange succeeded for ``user``: the session's lifetime, as Kafka computes it (the
        credential's remaining life, capped by connections.max.reauth.ms; neither: no bound)."""
        if self.authenticated and user != self.user:
            self._fail(f"Cannot change principals during re-authentication from User.{self.user}: User.{user}")
            return
        self.user = user
        self.exchanging = False
        self._previous_mechanism = None
        max_reauth = self.connections_max_reauth_ms if self.connections_max_reauth_ms > 0 else None
        if credential_expiry_ms is None and max_reauth is None:
            self.session_lifetime_ms, self.expires_at = 0, None
            return
        lifetimes = [max_reauth] if max_reauth is not None else []
        if credential_expiry_ms is not None:
            lifetimes.append(credential_expiry_ms - int(time.time() * 1000))
        self.session_lifetime_ms = max(0, min(*lifetimes, _LONGEST_SESSION_MS))
        self.expires_at = time.monotonic() + self.session_lifetime_ms / 1000

    def refuses(self, api_key: int) -> str | None:
        """Why a request with ``api_key`` on this authenticated connection closes it, or None: only
        the SASL requests may come while re-authenticating, and nothing else once the session has
        expired (KIP-368: a client re-authenticates before then, or is disconnected)."""
        if api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            return None
        if self.exchanging:
            return f"api key {api_key} during SASL re-authentication"
        if self.expires_at is not None and time.monotonic() > self.expires_at:
            return (
                f"the SASL session of User:{self.user} expired {self.session_lifetime_ms} ms after it began and "
                "the client did not re-authenticate"
            )
        return None

    def _scram_step(self, token: bytes) -> bytes:
        assert self.mechanism is not None and self.scram is not None
        state = self._scram_state
        text = token.decode("utf-8")
        if not state:  # client-first: gs2 header, then n=user,r=nonce[,extensions]
            gs2_flag, authzid, bare = text.split(",", 2)
            if gs2_flag not in ("n", "y"):
                raise ValueError("channel binding is not supported")
            fields = _fields(bare)
            user = fields["n"].replace("=2C", ",").replace("=3D", "=")
            if authzid and authzid[2:] != user:
                raise ValueError("an authorization id other than the user")
            found = self.scram.get(self.mechanism, user)
            state.update(
                user=user,
                known=found is not None,
                credential=found or self.scram.decoy(self.mechanism, user),
                nonce=fields["r"] + base64.b64encode(os.urandom(18)).decode(),
                first_bare=bare,
                header=f"{gs2_flag},{authzid},",
            )
            server_first = (
                f"r={state['nonce']},s={base64.b64encode(state['credential'].salt).decode()},"
                f"i={state['credential'].iterations}"
            )
            state["server_first"] = server_first
            return server_first.encode()
        if "done" in state:
            raise ValueError("the exchange is over")
        fields = _fields(text)  # client-final: c=channel binding,r=nonce,p=proof
        without_proof = text[: text.rindex(",p=")]
        if fields["r"] != state["nonce"] or base64.b64decode(fields["c"]) != state["header"].encode():
            raise ValueError("nonce or channel binding mismatch")
        hash_name = _HASHES[self.mechanism]
        credential: ScramCredential = state["credential"]
        auth_message = f"{state['first_bare']},{state['server_first']},{without_proof}".encode()
        client_signature = hmac.new(credential.stored_key, auth_message, hash_name).digest()
        proof = base64.b64decode(fields["p"])
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=False))
        state["done"] = True
        if not (
            state["known"]
            and len(proof) == len(client_signature)
            and hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), credential.stored_key)
        ):
            return self._fail(self._invalid_credentials())
        self._complete(state["user"])
        if self.failed:
            return b""
        server_signature = hmac.new(credential.server_key, auth_message, hash_name).digest()
        return b"v=" + base64.b64encode(server_signature)


def _fields(message: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in message.split(",") if part)
