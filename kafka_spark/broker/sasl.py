"""SASL/PLAIN authentication of a connection (a SASL_PLAINTEXT listener), as Kafka does it.

A broker given users (``EmbeddedBroker(sasl_users={"alice": "alice-secret"})``, or Kafka's
``listener.name.sasl_plaintext.plain.sasl.jaas.config`` with ``user_alice="alice-secret"``)
authenticates every connection before serving it. Until then a connection may send only
ApiVersions, SaslHandshake (17) and SaslAuthenticate (36); anything else closes it, as Kafka
closes it. Both of Kafka's flows are served:

- SaslHandshake v1, then SaslAuthenticate requests carrying the tokens (librdkafka, kafka-python,
  aiokafka with brokers from Kafka 1.0 on);
- SaslHandshake v0, then the token as a bare size-prefixed frame, answered by an empty frame
  (clients of Kafka before 1.0).

PLAIN's token is ``authzid NUL username NUL password`` (RFC 4616); an authorization id other than
the username is refused, as Kafka refuses it. A failed authentication is answered with
SASL_AUTHENTICATION_FAILED (and nothing that tells a wrong user from a wrong password), then the
connection is closed. Passwords are compared in constant time and never logged. PLAIN sends the
password in clear text: over anything but loopback, put TLS in front of the broker.
"""

from __future__ import annotations

import datetime
import hmac
from dataclasses import dataclass
from typing import Mapping

MECHANISMS = ("PLAIN",)
UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE, SASL_AUTHENTICATION_FAILED = 33, 34, 58


@dataclass
class SaslSession:
    """The authentication state of one connection."""

    users: Mapping[str, str]
    mechanism: str | None = None  # chosen by SaslHandshake
    legacy: bool = False  # SaslHandshake v0: the token comes as a bare frame
    user: str | None = None  # set once authenticated
    failed: bool = False

    @property
    def authenticated(self) -> bool:
        return self.user is not None

    def handshake(self, mechanism: str, version: int) -> dict:
        """The SaslHandshake response; a mechanism this broker lacks fails the connection."""
        if self.authenticated or self.mechanism is not None:
            self.failed = True
            return {"error_code": ILLEGAL_SASL_STATE, "mechanisms": list(MECHANISMS)}
        if mechanism not in MECHANISMS:
            self.failed = True
            return {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": list(MECHANISMS)}
        self.mechanism = mechanism
        self.legacy = version == 0
        return {"error_code": 0, "mechanisms": list(MECHANISMS)}

    def authenticate(self, token: bytes) -> dict:
        """The SaslAuthenticate response to a PLAIN token."""
        response = {"auth_bytes": b"", "session_lifetime": datetime.timedelta(0)}
        if self.mechanism is None or self.authenticated:
            self.failed = True
            return {**response, "error_code": ILLEGAL_SASL_STATE,
                    "error_message": "SaslAuthenticate without a SaslHandshake, or after authentication"}
        user = self.check_plain(token)
        if user is None:
            self.failed = True
            return {**response, "error_code": SASL_AUTHENTICATION_FAILED,
                    "error_message": "Authentication failed: Invalid username or password"}
        return {**response, "error_code": 0, "error_message": None}

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
