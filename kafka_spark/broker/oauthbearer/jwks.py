"""Signed JWTs checked against an identity provider's JWKS, as Kafka's
``OAuthBearerValidatorCallbackHandler`` (its ``BrokerJwtValidator``) checks them.

A token passes when:

- its header names an asymmetric algorithm (RS*, PS*, ES*, EdDSA; never ``none`` nor an HMAC one)
  and a key of the JWKS at ``sasl.oauthbearer.jwks.endpoint.url`` verifies its signature (the key
  its ``kid`` names; without a ``kid``, any key of the set);
- it has ``exp`` (not past, give or take ``sasl.oauthbearer.clock.skew.seconds``, default 30) and
  ``iat``; a ``nbf`` is not in the future;
- its ``aud`` holds one of ``sasl.oauthbearer.expected.audience`` and its ``iss`` is
  ``sasl.oauthbearer.expected.issuer``, where those are set;
- the ``sasl.oauthbearer.sub.claim.name`` claim (default ``sub``) is a non-empty string: the
  principal. ``sasl.oauthbearer.scope.claim.name`` (default ``scope``) gives the scope.

Keys: fetched (http, https or file URL) in a worker thread, never on the event loop; kept for
``sasl.oauthbearer.jwks.endpoint.refresh.ms`` (default an hour) and refetched after that, the old
keys serving meanwhile; a fetch that fails is retried with backoff from
``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms`` doubling up to ``...retry.backoff.max.ms``
(defaults 100 ms and 10 s). A token whose ``kid`` the keys lack makes one fetch at once (an
identity provider rotated its keys), at most once a minute per ``kid``, as Kafka's
``RefreshingHttpsJwks`` does; then it is refused if the key is still unknown.

The signature and the claims are checked by joserfc (``pip install 'pyspark-pylog[oauth]'``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from kafka_spark.broker.oauthbearer.unsecured import scope_claim
from kafka_spark.broker.oauthbearer.validator import OAuthBearerToken, OAuthBearerValidationError, OAuthBearerValidator

logger = logging.getLogger("kafka_spark.broker")

#: Asymmetric JWS algorithms only: a JWKS holds public keys, and an HMAC "key" made of one would
#: let anyone sign (algorithm confusion).
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
_UNKNOWN_KID_INTERVAL_S = 60.0  # Kafka's RefreshingHttpsJwks: one expedited refresh a minute per kid
_FETCH_TIMEOUT_S = 10.0


def _joserfc() -> Any:
    try:
        import joserfc.errors
        import joserfc.jwk
        import joserfc.jws
        import joserfc.jwt
    except ImportError:
        raise ImportError(
            "validating signed OAUTHBEARER tokens needs joserfc: pip install 'pyspark-pylog[oauth]'"
        ) from None
    return joserfc


class JwksKeys:
    """The keys published at a JWKS URL, shared by every connection and broker (thread-safe)."""

    def __init__(
        self, url: str, refresh_ms: int = 3_600_000, retry_backoff_ms: int = 100, retry_backoff_max_ms: int = 10_000
    ) -> None:
        if not url.startswith(("http://", "https://", "file:")):
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url={url!r}: give an http, https or file URL")
        if refresh_ms <= 0 or retry_backoff_ms <= 0 or retry_backoff_max_ms < retry_backoff_ms:
            raise ValueError(
                "sasl.oauthbearer.jwks.endpoint.refresh.ms and retry.backoff.ms must be positive, and "
                "retry.backoff.max.ms at least retry.backoff.ms"
            )
        self.url = url
        self.refresh_s = refresh_ms / 1000
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.retry_backoff_max_s = retry_backoff_max_ms / 1000
        self._lock = threading.Lock()
        self._keys: Any = None  # a joserfc KeySet
        self._kids: frozenset[str] = frozenset()
        self._fetched_at = 0.0  # time.monotonic()
        self._fetching: concurrent.futures.Future[None] | None = None
        self._looked_up: dict[str, float] = {}  # unknown kid -> when a fetch was made for it
        self.fetches = 0  # successful fetches (for tests and logs)

    async def key_set(self, kid: str | None) -> Any:
        """The keys to verify a token naming ``kid`` with: fetched first if there are none yet
        or ``kid`` is unknown (and not looked for within the last minute), refreshed in the
        background once they are older than the refresh interval."""
        now = time.monotonic()
        with self._lock:
            keys, kids, age = self._keys, self._kids, now - self._fetched_at
            unknown = kid is not None and kids and kid not in kids
            look_up = (
                unknown and now - self._looked_up.get(kid or "", -_UNKNOWN_KID_INTERVAL_S) >= _UNKNOWN_KID_INTERVAL_S
            )
            if look_up:
                if len(self._looked_up) > 1_000:  # bounded: made-up kids must not grow it without end
                    self._looked_up.clear()
                self._looked_up[kid or ""] = now
        if keys is None or look_up:
            await asyncio.wrap_future(self._fetch())
        elif age > self.refresh_s:
            self._fetch()  # the current keys serve until the new ones are in
        with self._lock:
            return self._keys

    def _fetch(self) -> concurrent.futures.Future[None]:
        """One fetch at a time, in a thread of its own; its future fails with the reason."""
        with self._lock:
            if self._fetching is not None and not self._fetching.done():
                return self._fetching
            future: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._fetching = future
        threading.Thread(target=self._fetch_with_retries, args=(future,), name="pylog-jwks", daemon=True).start()
        return future

    def _fetch_with_retries(self, future: concurrent.futures.Future[None]) -> None:
        joserfc = _joserfc()
        backoff, deadline = self.retry_backoff_s, time.monotonic() + self.retry_backoff_max_s
        while True:
            try:
                with urllib.request.urlopen(self.url, timeout=_FETCH_TIMEOUT_S) as response:  # noqa: S310 - http(s) or file, checked above
                    document = json.loads(response.read())
                keys = joserfc.jwk.KeySet.import_key_set(document)
                kids = frozenset(key.kid for key in keys if key.kid)
            except (OSError, ValueError, TypeError, KeyError, urllib.error.URLError) as error:
                if time.monotonic() + backoff > deadline:
                    reason = f"the JWKS at {self.url} could not be read: {error}"
                    logger.warning("OAUTHBEARER: %s", reason)
                    future.set_exception(OAuthBearerValidationError(reason))
                    return
                time.sleep(backoff)
                backoff = min(backoff * 2, self.retry_backoff_max_s)
                continue
            with self._lock:
                self._keys, self._kids, self._fetched_at = keys, kids, time.monotonic()
                self.fetches += 1
            logger.info("OAUTHBEARER: %d key(s) from the JWKS at %s (kids %s)", len(kids), self.url, sorted(kids))
            future.set_result(None)
            return


class JwksValidator(OAuthBearerValidator):
    """Kafka's ``OAuthBearerValidatorCallbackHandler``: signed JWTs against a JWKS (module docstring)."""

    def __init__(
        self,
        jwks_url: str,
        expected_audience: tuple[str, ...] | list[str] = (),
        expected_issuer: str | None = None,
        sub_claim_name: str = "sub",
        scope_claim_name: str = "scope",
        clock_skew_seconds: int = 30,
        jwks_refresh_ms: int = 3_600_000,
        jwks_retry_backoff_ms: int = 100,
        jwks_retry_backoff_max_ms: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        _joserfc()  # a missing library is named when the listener is configured, not at the first login
        if clock_skew_seconds < 0:
            raise ValueError(f"sasl.oauthbearer.clock.skew.seconds={clock_skew_seconds}: give 0 or more seconds")
        self.keys = JwksKeys(jwks_url, jwks_refresh_ms, jwks_retry_backoff_ms, jwks_retry_backoff_max_ms)
        self.expected_audience = tuple(expected_audience)
        self.expected_issuer = expected_issuer
        self.sub_claim_name = sub_claim_name
        self.scope_claim_name = scope_claim_name
        self.clock_skew_seconds = clock_skew_seconds
        self._clock = clock

    @classmethod
    def from_configs(cls, configs: Mapping[str, str]) -> JwksValidator:
        """From Kafka's ``sasl.oauthbearer.*`` broker settings (settings.py)."""
        url = configs.get("sasl.oauthbearer.jwks.endpoint.url", "").strip()
        if not url:
            raise ValueError(
                "OAuthBearerValidatorCallbackHandler needs sasl.oauthbearer.jwks.endpoint.url: the identity "
                "provider's JWKS (its openid-configuration's jwks_uri)"
            )

        def number(key: str, default: int) -> int:
            text = configs.get(key, "").strip()
            try:
                return int(text) if text else default
            except ValueError:
                raise ValueError(f"{key}={text!r}: expected a whole number") from None

        audience = configs.get("sasl.oauthbearer.expected.audience", "")
        return cls(
            jwks_url=url,
            expected_audience=tuple(part.strip() for part in audience.split(",") if part.strip()),
            expected_issuer=configs.get("sasl.oauthbearer.expected.issuer", "").strip() or None,
            sub_claim_name=configs.get("sasl.oauthbearer.sub.claim.name", "").strip() or "sub",
            scope_claim_name=configs.get("sasl.oauthbearer.scope.claim.name", "").strip() or "scope",
            clock_skew_seconds=number("sasl.oauthbearer.clock.skew.seconds", 30),
            jwks_refresh_ms=number("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000),
            jwks_retry_backoff_ms=number("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100),
            jwks_retry_backoff_max_ms=number("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10_000),
        )

    async def validate(self, token: str, extensions: Mapping[str, str]) -> OAuthBearerToken:
        joserfc = _joserfc()
        header = _header(joserfc, token)
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise OAuthBearerValidationError(
                f"the token's algorithm {algorithm!r} is not accepted; signed tokens use one of {', '.join(ALGORITHMS)}"
            )
        kid = header.get("kid") if isinstance(header.get("kid"), str) else None
        keys = await self.keys.key_set(kid)
        claims = self._verified_claims(joserfc, token, keys, kid)
        self._check_claims(joserfc, claims)
        subject = claims.get(self.sub_claim_name)
        if not isinstance(subject, str) or not subject.strip():
            raise OAuthBearerValidationError(
                f"the token has no {self.sub_claim_name!r} claim naming the principal (a non-empty string; "
                "sasl.oauthbearer.sub.claim.name names the claim)"
            )
        issued = claims.get("iat")
        return OAuthBearerToken(
            principal_name=subject,
            lifetime_ms=int(float(claims["exp"]) * 1000),
            scope=scope_claim(claims, self.scope_claim_name),
            start_time_ms=int(float(issued) * 1000) if isinstance(issued, int | float) else None,
            claims=claims,
        )

    def _verified_claims(self, joserfc: Any, token: str, keys: Any, kid: str | None) -> dict[str, Any]:
        if kid is not None and kid not in {key.kid for key in keys}:
            raise OAuthBearerValidationError(f"the JWKS at {self.keys.url} has no key with the token's kid {kid!r}")
        candidates = [key for key in keys if kid is None or key.kid == kid]
        for key in candidates:
            try:
                return dict(joserfc.jwt.decode(token, key, algorithms=list(ALGORITHMS)).claims)
            except joserfc.errors.BadSignatureError:
                continue
            except (joserfc.errors.JoseError, ValueError) as error:
                raise OAuthBearerValidationError(f"the token could not be verified: {error}") from None
        which = f"the key {kid!r}" if kid is not None else f"any of the {len(candidates)} key(s)"
        raise OAuthBearerValidationError(
            f"the token's signature does not verify with {which} of the JWKS at {self.keys.url}"
        )

    def _check_claims(self, joserfc: Any, claims: Mapping[str, Any]) -> None:
        registry = joserfc.jwt.JWTClaimsRegistry(
            now=lambda: int(self._clock()),
            leeway=self.clock_skew_seconds,
            exp={"essential": True},
            iat={"essential": True},
            **({"aud": {"essential": True, "values": list(self.expected_audience)}} if self.expected_audience else {}),
            **({"iss": {"essential": True, "value": self.expected_issuer}} if self.expected_issuer else {}),
        )
        try:
            registry.validate(dict(claims))
        except joserfc.errors.ExpiredTokenError:
            raise OAuthBearerValidationError(
                f"the token expired at {_when(claims.get('exp'))} (clock skew allowed: {self.clock_skew_seconds} s)"
            ) from None
        except joserfc.errors.MissingClaimError as error:
            raise OAuthBearerValidationError(f"the token has no {error.claim!r} claim, which is required") from None
        except joserfc.errors.InvalidClaimError as error:
            if error.claim == "aud":
                raise OAuthBearerValidationError(
                    f"the token's audience {claims.get('aud')!r} is not the expected {list(self.expected_audience)} "
                    "(sasl.oauthbearer.expected.audience)"
                ) from None
            if error.claim == "iss":
                raise OAuthBearerValidationError(
                    f"the token's issuer {claims.get('iss')!r} is not the expected {self.expected_issuer!r} "
                    "(sasl.oauthbearer.expected.issuer)"
                ) from None
            raise OAuthBearerValidationError(f"the token's {error.claim!r} claim is invalid") from None
        except joserfc.errors.JoseError as error:  # iat or nbf in the future
            raise OAuthBearerValidationError(f"the token's times are invalid: {error}") from None


def _header(joserfc: Any, token: str) -> dict[str, Any]:
    try:
        return dict(joserfc.jws.extract_compact(token.encode()).headers())
    except (joserfc.errors.JoseError, ValueError, UnicodeError):
        raise OAuthBearerValidationError(
            "the token is not a JWS compact serialization (header.claims.signature)"
        ) from None


def _when(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return repr(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
