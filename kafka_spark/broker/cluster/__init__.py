"""A replicated cluster of embedded brokers in one process (issue 20).

* ``controller.py``: broker liveness and every partition's leader, epochs, replicas and ISR; pushes
  metadata images to the brokers (the in-process counterpart of KRaft's active controller).
* ``replica_manager.py``: one broker's replicas: leader (HW, ISR, acks=all) or follower (fetches
  from the leader over the wire, truncates by leader epoch).
* the leader-epoch cache and its ``leader-epoch-checkpoint`` file are storage's
  (``kafka_spark.broker.storage.epochs``): the single-node broker keeps them too.
* ``client.py``: the broker-to-broker connection the followers fetch through.
* ``embedded.py``: ``EmbeddedCluster``, N brokers and the controller, with kill / restart.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EmbeddedCluster"]


def __getattr__(name: str) -> Any:
    if name == "EmbeddedCluster":
        from kafka_spark.broker.cluster.embedded import EmbeddedCluster

        return EmbeddedCluster
    raise AttributeError(name)
