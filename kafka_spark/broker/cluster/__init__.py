"""A replicated cluster of embedded brokers in one process (issue 20).

* ``embedded.py``: ``EmbeddedCluster``, N brokers and their controller, with kill / restart.

The machinery is the broker's own, the same on a single node: the controller and its metadata
images in ``kafka_spark.broker.metadata``, each broker's replicas in
``kafka_spark.broker.replication``, the leader-epoch cache in ``kafka_spark.broker.storage.epochs``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EmbeddedCluster"]


def __getattr__(name: str) -> Any:
    if name == "EmbeddedCluster":
        from kafka_spark.broker.cluster.embedded import EmbeddedCluster

        return EmbeddedCluster
    raise AttributeError(name)
