"""What an OAUTHBEARER listener validates tokens with: the pluggable interface, as Kafka's
``listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class`` is.

A validator turns the token a client presents (RFC 7628's ``auth=Bearer <token>``) into an
:class:`OAuthBearerToken` (the principal, the expiry and the scope), or refuses it with an
:class:`OAuthBearerValidationError` that says why. pylog ships two, as Kafka does:
:class:`~kafka_spark.broker.oauthbearer.unsecured.UnsecuredJwsValidator` (Kafka's
``OAuthBearerUnsecuredValidatorCallbackHandler``, the default) and
:class:`~kafka_spark.broker.oauthbearer.jwks.JwksValidator` (``OAuthBearerValidatorCallbackHandler``:
signed JWTs checked against a JWKS). Any other kind of token (a cloud's presigned request, an
in-house opaque token) plugs in the same way:

    class MyValidator(OAuthBearerValidator):
        def __init__(self, configs: Mapping[str, str]) -> None:   # when named in server.properties
            ...
        async def validate(self, token: str, extensions: Mapping[str, str]) -> OAuthBearerToken:
            ...   # raise OAuthBearerValidationError("why", ...) to refuse

and is given as ``EmbeddedBroker(sasl_mechanisms=("OAUTHBEARER",), sasl_oauthbearer_validator=MyValidator(...))``
or named in server.properties as
``listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class=package.module:MyValidator``
(then built with the listener's OAUTHBEARER settings: every ``sasl.oauthbearer.*`` key, with or
without the listener prefix, and the options of its JAAS line).

Contract:

- ``validate`` runs on the broker's event loop. It returns the token, or an awaitable of it; a
  validator that does I/O (fetching keys, calling a service) must be a coroutine or hand the I/O
  to a thread (``asyncio.to_thread``), never block. The same instance serves every connection,
  and on an EmbeddedCluster every broker (each with its own event loop and thread): keep shared
  state thread-safe.
- ``extensions`` are the SASL extensions the client sent (RFC 7628 ``key=value`` pairs besides
  ``auth``); a validator that does not know them ignores them, as Kafka does.
- The refusal's ``reason`` goes into the broker's log and the client's error: it must not hold the
  token or any secret. ``status`` is RFC 6750's error code in the JSON challenge
  (``invalid_token``, or ``insufficient_scope`` with the ``scope`` that was required).
- The principal is ``User:<principal_name>``; ACLs and ``super.users`` apply to it.
- ``lifetime_ms`` (the expiry, milliseconds since the epoch) bounds the connection's session
  (KIP-368): the broker tells the client, and closes a connection used after it without having
  re-authenticated.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OAuthBearerToken:
    """A validated token, as Kafka's ``OAuthBearerToken``: never the token's text itself."""

    principal_name: str
    lifetime_ms: int  # when the token expires, in milliseconds since the epoch
    scope: frozenset[str] = frozenset()
    start_time_ms: int | None = None  # "iat", when the token says it was issued
    claims: Mapping[str, Any] = field(default_factory=dict, repr=False)


class OAuthBearerValidationError(Exception):
    """A token refused; ``reason`` names why (logged and sent to the client: no secrets in it)."""

    def __init__(self, reason: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.scope = scope


class OAuthBearerValidator:
    """Base class of token validators (see the module docstring for the contract)."""

    def validate(self, token: str, extensions: Mapping[str, str]) -> OAuthBearerToken | Awaitable[OAuthBearerToken]:
        raise NotImplementedError


async def validated(validator: Any, token: str, extensions: Mapping[str, str]) -> OAuthBearerToken:
    """``validator.validate``'s answer, awaited when it is awaitable (any object with a ``validate``
    method of that shape serves: deriving from :class:`OAuthBearerValidator` is not required)."""
    result = validator.validate(token, extensions)
    if inspect.isawaitable(result):
        result = await result
    if not isinstance(result, OAuthBearerToken):
        raise TypeError(
            f"{type(validator).__name__}.validate returned {type(result).__name__}, not an OAuthBearerToken"
        )
    return result
