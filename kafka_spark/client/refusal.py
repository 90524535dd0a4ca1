"""A client's connection refused for its credentials or TLS settings, or its login token not had,
told as such.

librdkafka reports such a refusal only to a client's ``error_cb``; the request that needed the
connection fails with a bare transport error after its whole timeout. :class:`RefusalWatch` is that
callback, and :func:`list_topics_watching` a metadata request that raises
:class:`CredentialsRefused`, naming the settings to check, within about a second.
"""

from __future__ import annotations

import re
import time
from typing import Any

from kafka_spark.client.token_provider import last_failure
from kafka_spark.errors import PylogError

__all__ = ["CredentialsRefused", "RefusalWatch", "explain_refusal", "list_topics_watching"]


class RefusalWatch:
    """An ``error_cb`` for a librdkafka client that remembers the cluster refusing its
    credentials or TLS settings. Such a refusal reaches only this callback; the request that
    needed the connection fails with a bare transport error, and no retry can cure it."""

    def __init__(self) -> None:
        self.error: Any = None

    def __call__(self, error: Any) -> None:
        from confluent_kafka import KafkaError

        if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
            self.error = error

    def explain(self, client: Any, bootstrap_servers: str) -> str | None:
        """Why ``client`` could not connect, if the cluster refused it or no login token could be
        had (serves its callbacks)."""
        client.poll(0)
        if self.error is None:
            return None
        return explain_refusal(self.error.str(), bootstrap_servers)


#: How librdkafka starts the error of an OAUTHBEARER token it could not get (the login's first step).
_NO_TOKEN = "Failed to acquire SASL OAUTHBEARER token: "
#: How librdkafka reports a broker's OAUTHBEARER refusal: RFC 7628's JSON error, {"status":...}.
_TOKEN_REFUSED = re.compile(r'SASL authentication error: (.*\{\s*"status".*?)(?: \(after \d+ms in state \w+\))?$')
_UNREACHABLE = re.compile(r"(?i)could not connect|failed to connect|could not resolve|timed? ?out|connection refused")
_AUDIENCE = re.compile(r"(?i)\baud(ience)?\b")


def explain_refusal(message: str, bootstrap_servers: str) -> str:
    """One line naming the login step that failed, from librdkafka's authentication error."""
    if _NO_TOKEN in message:
        detail = message.split(_NO_TOKEN, 1)[1].strip()
        if detail == "OAuth callback raised exception":  # confluent-kafka drops the reason; pylog kept it
            return last_failure() or "could not get a login token: the token function failed"
        if _UNREACHABLE.search(detail):
            return (
                f"could not get a login token: the OIDC token endpoint is unreachable ({detail}). "
                "Check kafka.sasl.oauthbearer.token.endpoint.url"
            )
        if '"error"' in detail or re.search(r"\(4\d\d\)", detail):  # RFC 6749 5.2's error answer
            return (
                f"could not get a login token: the OIDC token endpoint refused the request ({detail}). "
                'Check clientId="..." and clientSecret="..." in kafka.sasl.jaas.config (or '
                "kafka.sasl.oauthbearer.client.id / client.secret) and scope"
            )
        return f"could not get a login token ({detail}). Check the kafka.sasl.oauthbearer.* settings"
    refused = _TOKEN_REFUSED.search(message)
    if refused:
        said = refused.group(1).strip()
        step = "wrong audience: " if _AUDIENCE.search(said) else ""
        return (
            f"{bootstrap_servers} rejected the login token ({step}{said}). The token was issued but the cluster "
            "does not accept it: check its audience, issuer, scope and expiry against the cluster's OAUTHBEARER "
            "settings, and the principal's ACLs"
        )
    return (
        f"{bootstrap_servers} refused the connection's credentials or TLS settings ({message}). "
        "Check kafka.security.protocol, kafka.sasl.mechanism and kafka.sasl.jaas.config (or "
        "kafka.sasl.username / kafka.sasl.password), kafka.ssl.*"
    )


class CredentialsRefused(PylogError, ConnectionError):
    """The cluster refused the client's credentials or TLS settings (the message says which
    settings to check)."""


def list_topics_watching(client: Any, watch: RefusalWatch, bootstrap_servers: str, timeout_s: float) -> Any:
    """``client.list_topics()`` within ``timeout_s``, asked in growing slices so that a refusal
    of the credentials is reported within about a second (CredentialsRefused) rather than after
    the whole timeout, which is all librdkafka's call itself would say."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    slice_s = 0.5
    while True:
        try:
            return client.list_topics(timeout=max(min(slice_s, deadline - time.monotonic()), 0.1))
        except KafkaException:
            refused = watch.explain(client, bootstrap_servers)
            if refused is not None:
                raise CredentialsRefused(refused) from None
            if time.monotonic() >= deadline:
                raise
        slice_s *= 2
