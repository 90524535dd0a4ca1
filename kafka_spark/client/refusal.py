"""A client's connection refused for its credentials or TLS settings, told as such.

librdkafka reports such a refusal only to a client's ``error_cb``; the request that needed the
connection fails with a bare transport error after its whole timeout. :class:`RefusalWatch` is that
callback, and :func:`list_topics_watching` a metadata request that raises
:class:`CredentialsRefused`, naming the settings to check, within about a second.
"""

from __future__ import annotations

import time
from typing import Any

from kafka_spark.errors import PylogError

__all__ = ["CredentialsRefused", "RefusalWatch", "list_topics_watching"]


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
        """Why ``client`` could not connect, if the cluster refused it (serves its callbacks)."""
        client.poll(0)
        if self.error is None:
            return None
        return (
            f"{bootstrap_servers} refused the connection's credentials or TLS settings ({self.error.str()}). "
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
