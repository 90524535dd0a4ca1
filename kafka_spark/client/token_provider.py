"""Token functions as librdkafka's OAUTHBEARER token callback, built where a client is built.

A login whose tokens come from a Python function (``kafka.sasl.oauthbearer.token.provider``, and
AWS MSK IAM) travels in a client config as two strings (kafka_spark.common.token_login): the
function's ``package.module:function`` reference and its options. :func:`with_token_callback`,
called for every client pylog builds (kafka_spark.client.librdkafka_log.routed: on the driver, on
every executor, in the CLI), turns them into confluent-kafka's ``oauth_cb``:

- it imports the function and asks it for the first token before the client exists, so a
  function that cannot give one fails the build at once, in one line naming the function and the
  reason (:class:`TokenLoginError`). Left to confluent-kafka, a failing callback makes the client's
  constructor wait 10 s and then say only "OAuth callback raised exception";
- librdkafka calls the callback again, from its background thread, at 80 % of each token's
  lifetime. A failure then is logged (one warning naming the function and the reason) and kept
  for :func:`last_failure`, which error messages quote; librdkafka keeps the old token while it
  lasts and calls again.

The function's contract (docs/managed-kafka.md): it is called with one dict of strings, its
options plus ``bootstrap.servers``, and returns ``(token, expires_at)``, ``expires_at`` in
seconds since the epoch, optionally followed by the principal name and a dict of SASL extensions
(confluent-kafka's ``oauth_cb`` result). Tokens and secrets never reach a log line or an error
message: option values that look like credentials are masked in a failure's reason.

confluent-kafka waits for the first token in steps of one second, so each client with a token
function costs about 1 s more to create than one with librdkafka's own logins.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from kafka_spark.common.token_login import MSK_PROVIDER, PROVIDER, load_provider, provider_options
from kafka_spark.errors import PylogError

__all__ = ["TokenLoginError", "last_failure", "with_token_callback"]

log = logging.getLogger("kafka_spark")

#: A first token with less than this left is not handed to librdkafka; a new one is asked for.
_FRESH_S = 5.0
#: Option names whose values are masked in error messages.
_SECRET_NAME = re.compile(r"(?i)secret|password|token|credential|key")

_failures: dict[str, str] = {}
_failures_lock = threading.Lock()


class TokenLoginError(PylogError, ConnectionError):
    """A token function (or the AWS MSK IAM signer) gave no usable token; the message names the
    function and why, never a token or a secret."""


def describe(reference: str) -> str:
    """How messages name a token function."""
    return "the AWS MSK IAM signer" if reference == MSK_PROVIDER else f"the token function {reference}"


def last_failure(reference: str | None = None) -> str | None:
    """The last reason a token function of this process failed (``reference``: that function;
    None: any), for error messages; None if none failed since its last success."""
    with _failures_lock:
        if reference is not None:
            return _failures.get(reference)
        return next(reversed(_failures.values()), None)


class TokenCallback:
    """confluent-kafka's ``oauth_cb`` for one client: calls the token function, checks and
    returns its answer. Thread-safe (librdkafka calls it from its background thread)."""

    def __init__(self, reference: str, function: Callable[[dict[str, str]], Any], options: Mapping[str, str]):
        self.reference = reference
        self.function = function
        self.options = dict(options)
        self.calls = 0
        self._first: tuple[Any, ...] | None = None
        self._lock = threading.Lock()

    def first_token(self) -> None:
        """Ask for the first token now; raise :class:`TokenLoginError` if there is none."""
        self._first = self._fetch()

    def __call__(self, _oauthbearer_config: str) -> tuple[Any, ...]:
        with self._lock:
            first, self._first = self._first, None
        if first is not None and first[1] - time.time() > _FRESH_S:
            return first
        try:
            return self._fetch()
        except TokenLoginError as error:
            log.warning("pylog: %s", error)
            raise

    def _fetch(self) -> tuple[Any, ...]:
        self.calls += 1
        try:
            answer = self.function(dict(self.options))
        except PylogError as error:
            self._fail(str(error))
        except Exception as error:  # noqa: BLE001 - any failure of the user's function is named, one line
            self._fail(f"{type(error).__name__}: {error}")
        result = self._checked(answer)
        with _failures_lock:
            _failures.pop(self.reference, None)
        return result

    def _checked(self, answer: Any) -> tuple[Any, ...]:
        if not isinstance(answer, (tuple, list)) or not 2 <= len(answer) <= 4:
            self._fail(
                f"returned a {type(answer).__name__}; it must return (token, expires_at) with expires_at in seconds "
                "since the epoch, optionally followed by the principal and a dict of SASL extensions"
            )
        token, expiry, *rest = answer
        if not isinstance(token, str) or not token:
            self._fail("returned no token (the first item must be a non-empty string)")
        try:
            expires_at = float(expiry)
        except (TypeError, ValueError):
            self._fail("returned an expiry that is not a number (seconds since the epoch)")
        now = time.time()
        if expires_at > now * 100:
            self._fail("returned an expiry in milliseconds; give seconds since the epoch")
        if expires_at <= now:
            self._fail(f"returned a token that expired {now - expires_at:.0f} s ago")
        result: list[Any] = [token, expires_at]
        if rest:
            principal = rest[0]
            result.append("" if principal is None else str(principal))
        if len(rest) > 1 and rest[1]:
            extensions = rest[1]
            if not isinstance(extensions, Mapping):
                self._fail("returned SASL extensions that are not a dict")
            result.append({str(k): str(v) for k, v in extensions.items()})
        return tuple(result)

    def _fail(self, reason: str) -> NoReturn:
        for name, value in self.options.items():
            if value and len(value) >= 4 and _SECRET_NAME.search(name):
                reason = reason.replace(value, "***")
        reason = " ".join(reason.split())  # one line
        message = f"could not get a login token from {describe(self.reference)}: {reason}"
        with _failures_lock:
            _failures.pop(self.reference, None)  # the newest failure last
            _failures[self.reference] = message
        raise TokenLoginError(message)


def with_token_callback(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` for confluent-kafka: a token function's reference replaced by an ``oauth_cb``
    that has its first token already (raises :class:`TokenLoginError` or, for a reference that
    does not resolve, kafka_spark.common.token_login.TokenLoginConfigError). A config without
    one is returned as it is."""
    if PROVIDER not in config:
        return dict(config)
    out = dict(config)
    reference = str(out.pop(PROVIDER)).strip()
    function = load_provider(reference)
    options = provider_options(str(out.get("sasl.oauthbearer.config", "")))
    options["bootstrap.servers"] = str(out.get("bootstrap.servers", ""))
    callback = TokenCallback(reference, function, options)  # type: ignore[arg-type]
    callback.first_token()
    out["oauth_cb"] = callback
    return out
