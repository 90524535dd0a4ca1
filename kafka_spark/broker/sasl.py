"""SASL authentication of a connection (a SASL_PLAINTEXT listener), as Kafka does it: PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512.

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
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
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
    """The authentication state of one connection."""

    users: Mapping[str, str]
    mechanisms: tuple[str, ...] = MECHANISMS
    scram: ScramCredentials | None = None
    mechanism: str | None = None  # chosen by SaslHandshake
    legacy: bool = False  # SaslHandshake v0: the tokens come as bare frames
    user: str | None = None  # set once authenticated
    failed: bool = False
    _scram_state: dict = field(default_factory=dict)

    @property
    def authenticated(self) -> bool:
        return self.user is not None

    def handshake(self, mechanism: str, version: int) -> dict:
        """The SaslHandshake response; a mechanism this broker lacks fails the connection."""
        if self.authenticated or self.mechanism is not None:
            self.failed = True
            return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": list(self.mechanisms)}
        if mechanism not in self.mechanisms:
            self.failed = True
            return {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": list(self.mechanisms)}
        self.mechanism = mechanism
        self.legacy = version == 0
        return {"error_code": ErrorCode.none, "mechanisms": list(self.mechanisms)}

    def authenticate(self, token: bytes) -> dict:
        """The SaslAuthenticate response to the next token of the exchange."""
        response = {"auth_bytes": b"", "session_lifetime": datetime.timedelta(0)}
        if self.mechanism is None or self.authenticated:
            self.failed = True
            return {
                **response,
                "error_code": ErrorCode.illegal_sasl_state,
                "error_message": "SaslAuthenticate without a SaslHandshake, or after authentication",
            }
        answer = self.step(bytes(token))
        if self.failed:
            return {
                **response,
                "error_code": ErrorCode.sasl_authentication_failed,
                "error_message": f"Authentication failed: Invalid username or password ({self.mechanism})",
            }
        return {**response, "auth_bytes": answer, "error_code": ErrorCode.none, "error_message": None}

    def step(self, token: bytes) -> bytes:
        """The server's answer to one client token; sets ``user`` when done, ``failed`` on a
        refusal (the answer is then meaningless)."""
        if self.mechanism == "PLAIN":
            self.check_plain(token)
            return b""
        try:
            return self._scram_step(token)
        except (ValueError, KeyError, UnicodeDecodeError):  # a malformed message: refused
            self.failed = True
            return b""

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
            self.failed = True
        self.user = user
        return user

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
            self.failed = True
            return b""
        self.user = state["user"]
        server_signature = hmac.new(credential.server_key, auth_message, hash_name).digest()
        return b"v=" + base64.b64encode(server_signature)


def _fields(message: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in message.split(",") if part)
