"""Unsecured JWS validation (``alg: none``), as Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``
does it: the default validator of an OAUTHBEARER listener, for development and tests (anyone can
write such a token; never use it where the network is not trusted).

The token is an unsecured JWS compact serialization (RFC 7515 appendix A.5): a base64url JSON
header with ``"alg": "none"``, a base64url JSON claims set, and an empty signature. Its checks,
under the JAAS options of Kafka's handler (``listener.name.<l>.oauthbearer.sasl.jaas.config``):

- ``unsecuredValidatorPrincipalClaimName`` (default ``sub``): a non-empty string claim, the principal;
- ``exp`` is required, a number, and must be after now minus the allowed skew;
- ``iat`` (if present) a number not after now plus the skew; ``iat``, ``nbf`` and ``exp`` consistent;
- ``unsecuredValidatorScopeClaimName`` (default ``scope``): a space-delimited string or a list of
  strings, which must hold every value of ``unsecuredValidatorRequiredScope`` (space-delimited;
  else ``insufficient_scope``);
- ``unsecuredValidatorAllowableClockSkewMs`` (default 0): the skew allowed on ``exp`` and ``iat``.

librdkafka writes such tokens with ``enable.sasl.oauthbearer.unsecure.jwt=true``, Kafka's Java
client with ``OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";``.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from kafka_spark.broker.oauthbearer.validator import OAuthBearerToken, OAuthBearerValidationError, OAuthBearerValidator

_OPTIONS = (
    "unsecuredValidatorPrincipalClaimName",
    "unsecuredValidatorScopeClaimName",
    "unsecuredValidatorRequiredScope",
    "unsecuredValidatorAllowableClockSkewMs",
)


class UnsecuredJwsValidator(OAuthBearerValidator):
    """Validates unsecured JWTs (see the module docstring). Stateless, so thread-safe."""

    def __init__(
        self,
        principal_claim_name: str = "sub",
        scope_claim_name: str = "scope",
        required_scope: tuple[str, ...] = (),
        allowable_clock_skew_ms: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if allowable_clock_skew_ms < 0:
            raise ValueError(
                f"unsecuredValidatorAllowableClockSkewMs={allowable_clock_skew_ms}: give 0 or more milliseconds"
            )
        self.principal_claim_name = principal_claim_name
        self.scope_claim_name = scope_claim_name
        self.required_scope = tuple(required_scope)
        self.allowable_clock_skew_ms = allowable_clock_skew_ms
        self._clock = clock

    @classmethod
    def from_jaas_options(cls, options: Mapping[str, str]) -> UnsecuredJwsValidator:
        """From the options of Kafka's JAAS line (``unsecuredValidator*``; the others, such as the
        broker's own ``unsecuredLogin*``, are not the validator's)."""
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip()
        try:
            skew_ms = int(skew) if skew else 0
        except ValueError:
            raise ValueError(
                f"unsecuredValidatorAllowableClockSkewMs={skew!r}: give a whole number of milliseconds"
            ) from None
        return cls(
            principal_claim_name=options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub",
            scope_claim_name=options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
            required_scope=tuple(options.get("unsecuredValidatorRequiredScope", "").split()),
            allowable_clock_skew_ms=skew_ms,
        )

    def validate(self, token: str, extensions: Mapping[str, str]) -> OAuthBearerToken:
        header, claims = _decode_unsecured(token)
        if header.get("alg") != "none":
            raise OAuthBearerValidationError(
                f"the token is signed (alg {header.get('alg')!r}) but this listener validates unsecured tokens "
                "(alg none) only; to accept signed tokens, set the listener's "
                "oauthbearer.sasl.server.callback.handler.class to OAuthBearerValidatorCallbackHandler"
            )
        principal = claims.get(self.principal_claim_name)
        if not isinstance(principal, str) or not principal.strip():
            raise OAuthBearerValidationError(
                f"the token has no {self.principal_claim_name!r} claim naming the principal (a non-empty string)"
            )
        now_ms = int(self._clock() * 1000)
        skew = self.allowable_clock_skew_ms
        expires = _number_claim(claims, "exp", required=True)
        issued = _number_claim(claims, "iat")
        not_before = _number_claim(claims, "nbf")
        assert expires is not None
        if issued is not None and issued * 1000 > now_ms + skew:
            raise OAuthBearerValidationError(
                f"the token's issued-at time ({issued:.0f} s) is after now ({now_ms} ms) plus the allowed clock "
                f"skew ({skew} ms)"
            )
        if now_ms - skew >= expires * 1000:
            raise OAuthBearerValidationError(
                f"the token expired: its expiration time ({expires:.0f} s) is not after now ({now_ms} ms) minus the "
                f"allowed clock skew ({skew} ms)"
            )
        if issued is not None and expires <= issued:
            raise OAuthBearerValidationError(
                f"the token's expiration time ({expires:.0f} s) is not after its issued-at time ({issued:.0f} s)"
            )
        if not_before is not None and (expires <= not_before or (issued is not None and not_before < issued)):
            raise OAuthBearerValidationError(
                f"the token's not-before time ({not_before:.0f} s) is not between its issued-at and expiration times"
            )
        scope = scope_claim(claims, self.scope_claim_name)
        missing = [value for value in self.required_scope if value not in scope]
        if missing:
            raise OAuthBearerValidationError(
                f"the token's scope lacks {' '.join(missing)} (required: {' '.join(self.required_scope)})",
                status="insufficient_scope",
                scope=" ".join(self.required_scope),
            )
        return OAuthBearerToken(
            principal_name=principal,
            lifetime_ms=int(expires * 1000),
            scope=scope,
            start_time_ms=None if issued is None else int(issued * 1000),
            claims=claims,
        )


def _decode_unsecured(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    parts = token.split(".")
    if len(parts) != 3:
        raise OAuthBearerValidationError(
            f"the token is not a JWS compact serialization (three dot-separated parts; it has {len(parts)})"
        )
    if parts[2]:
        raise OAuthBearerValidationError(
            "the token carries a signature, which an unsecured JWS (alg none) must not; to accept signed tokens, "
            "set the listener's oauthbearer.sasl.server.callback.handler.class to OAuthBearerValidatorCallbackHandler"
        )
    return _json_part(parts[0], "header"), _json_part(parts[1], "claims")


def _json_part(part: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise OAuthBearerValidationError(f"the token's {what} is not base64url-encoded JSON") from None
    if not isinstance(value, dict):
        raise OAuthBearerValidationError(f"the token's {what} is not a JSON object")
    return value


def _number_claim(claims: Mapping[str, Any], name: str, required: bool = False) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise OAuthBearerValidationError(f"the token has no {name!r} claim (a number of seconds since the epoch)")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OAuthBearerValidationError(f"the token's {name!r} claim is not a number of seconds since the epoch")
    return float(value)


def scope_claim(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    """The scope a token grants: a space-delimited string or a list of strings (RFC 8693 and
    Kafka take both); no claim is no scope."""
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return frozenset(item for item in value if item.strip())
    raise OAuthBearerValidationError(f"the token's {name!r} claim is neither a string nor a list of strings")


def unsecured_token(
    subject: str,
    lifetime_s: float = 3600.0,
    scope: str | list[str] | None = None,
    principal_claim_name: str = "sub",
    **claims: Any,
) -> str:
    """An unsecured JWT (alg none) for ``subject``, as Kafka's unsecured login and librdkafka's
    ``enable.sasl.oauthbearer.unsecure.jwt`` write them: for clients given a token callback
    (kafka-python's and aiokafka's ``sasl_oauth_token_provider``) in tests."""
    now = time.time()
    body: dict[str, Any] = {principal_claim_name: subject, "iat": int(now), "exp": now + lifetime_s, **claims}
    if scope is not None:
        body["scope"] = scope
    return ".".join((_b64(json.dumps({"alg": "none"}).encode()), _b64(json.dumps(body).encode()), ""))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
