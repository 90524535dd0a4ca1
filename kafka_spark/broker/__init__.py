"""The embedded Kafka-compatible broker: ``from kafka_spark.broker import EmbeddedBroker``."""

from __future__ import annotations

from typing import Any

__all__ = ["EmbeddedBroker", "EmbeddedCluster"]


def __getattr__(name: str) -> Any:
    # Lazy, so that the sans-I/O protocol and storage layers import without the server.
    if name == "EmbeddedBroker":
        from kafka_spark.broker.embedded import EmbeddedBroker

        return EmbeddedBroker
    if name == "EmbeddedCluster":
        from kafka_spark.broker.cluster.embedded import EmbeddedCluster

        return EmbeddedCluster
    raise AttributeError(name)
