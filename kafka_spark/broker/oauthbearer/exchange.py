"""The server side of one SASL/OAUTHBEARER exchange (RFC 7628), as Kafka's ``OAuthBearerSaslServer``.

The client's initial response is ``n,[a=<authzid>],`` then ``\\x01``-separated ``key=value`` pairs,
``auth=Bearer <token>`` among them and any others being SASL extensions, then ``\\x01\\x01``::

    n,,\\x01auth=Bearer eyJhbGciOi...\\x01traceId=abc\\x01\\x01

A token the validator accepts ends the exchange with an empty answer. A refused token is
answered, as RFC 7628 section 3.2.2 says, with a JSON challenge
(``{"status":"invalid_token"}``, with ``scope`` for ``insufficient_scope``); the client answers it
with a lone ``\\x01``, and the exchange then fails with the reason. A malformed message, an
authorization id other than the token's principal, or anything but ``\\x01`` after the challenge
fails it at once. Nothing here keeps or logs the token.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from kafka_spark.broker.oauthbearer.validator import OAuthBearerToken, OAuthBearerValidationError, validated

logger = logging.getLogger("kafka_spark.broker")

# RFC 5801's saslname (no "," or "=" but as =2C and =3D), RFC 7628's key and value.
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<pairs>(?:{_KEY}={_VALUE}\x01)*)\x01", re.DOTALL
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
_CONTROL_A = b"\x01"


class SaslAuthenticationFailed(Exception):
    """The exchange failed; the message is for the client and the log (no secret in it)."""


class OAuthBearerExchange:
    """One OAUTHBEARER authentication: :meth:`evaluate` each client message in turn."""

    def __init__(self, validator: Any) -> None:
        self.validator = validator
        self.token: OAuthBearerToken | None = None  # set once the exchange succeeded
        self.refusal: str | None = None  # why the token was refused (set with the challenge)
        self._challenge: str | None = None

    async def evaluate(self, message: bytes) -> bytes:
        """The answer to one client message; raises :class:`SaslAuthenticationFailed`."""
        if self._challenge is not None:
            if message == _CONTROL_A:
                raise SaslAuthenticationFailed(f"Authentication failed: {self.refusal} ({self._challenge})")
            raise SaslAuthenticationFailed(
                "Authentication failed: the client answered the OAUTHBEARER error challenge with something "
                "other than %x01"
            )
        if self.token is not None:
            raise SaslAuthenticationFailed("Authentication failed: the OAUTHBEARER exchange is already complete")
        authzid, token, extensions = parse_initial_response(message)
        try:
            self.token = await validated(self.validator, token, extensions)
        except OAuthBearerValidationError as error:
            self.refusal = error.reason
            challenge: dict[str, str] = {"status": error.status}
            if error.scope is not None:
                challenge["scope"] = error.scope
            self._challenge = json.dumps(challenge, separators=(",", ":"))
            return self._challenge.encode()
        except Exception as error:  # noqa: BLE001 - a validator's bug or outage costs this login, not the broker
            logger.error("the OAUTHBEARER validator %s failed", type(self.validator).__name__, exc_info=error)
            raise SaslAuthenticationFailed(
                "Authentication failed: the token could not be validated due to an internal error on the server"
            ) from None
        if authzid and authzid != self.token.principal_name:
            principal = self.token.principal_name
            self.token = None
            raise SaslAuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different from "
                f"the token's principal name ({principal})"
            )
        return b""


def parse_initial_response(message: bytes) -> tuple[str, str, dict[str, str]]:
    """``(authorization id, token, extensions)`` of a client's initial response."""
    text = message.decode("utf-8", "replace")
    match = _INITIAL_RESPONSE.fullmatch(text)
    if match is None:
        raise SaslAuthenticationFailed(
            "Authentication failed: invalid OAUTHBEARER client first message (expected RFC 7628's "
            "n,,\\x01auth=Bearer <token>\\x01\\x01)"
        )
    pairs = dict(pair.split("=", 1) for pair in match.group("pairs").split("\x01") if pair)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise SaslAuthenticationFailed("Authentication failed: the OAUTHBEARER client first message has no auth=")
    bearer = _AUTH.fullmatch(auth)
    if bearer is None or bearer.group("scheme").lower() != "bearer":
        raise SaslAuthenticationFailed(
            "Authentication failed: the OAUTHBEARER client first message's auth= is not 'Bearer <token>'"
        )
    authzid = (match.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
    return authzid, bearer.group("token"), pairs
