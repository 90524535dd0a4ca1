"""pylog: a PySpark-native streaming connector for Kafka-style logs.

Public API:

* ``register(spark)`` registers the ``pylog`` source and topic sink and the ``pylog-files``
  file sink explicitly (Spark also finds them on its own through the top-level
  ``pyspark_pylog`` and ``pyspark_pylog_files`` modules).
* ``EmbeddedBroker`` runs a Kafka-compatible broker in this process; ``EmbeddedCluster`` runs N
  of them replicating each other, with a controller (kafka_spark.broker.cluster).
* ``lag_metrics(progress)`` and ``LagListener``: Spark's ``minOffsetsBehindLatest`` /
  ``maxOffsetsBehindLatest`` / ``avgOffsetsBehindLatest`` of a pylog source (kafka_spark.lag).
* ``topic_writer(**options)``: a ``foreachBatch`` function writing each micro-batch to a topic
  exactly once, for Update output mode (kafka_spark.update_mode).
* ``PylogError``: the root of every exception the connector raises (kafka_spark.errors); each
  is also the builtin it always was (a bad option a ``ValueError``, a read timeout a
  ``TimeoutError``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

if TYPE_CHECKING:  # pragma: no cover
    from kafka_spark.broker import EmbeddedBroker, EmbeddedCluster

__all__ = [
    "EmbeddedBroker",
    "EmbeddedCluster",
    "LagListener",
    "PylogError",
    "lag_metrics",
    "register",
    "topic_writer",
    "__version__",
]

_LAZY = {
    "EmbeddedBroker": "kafka_spark.broker",
    "EmbeddedCluster": "kafka_spark.broker",
    "LagListener": "kafka_spark.lag",
    "PylogError": "kafka_spark.errors",
    "lag_metrics": "kafka_spark.lag",
    "topic_writer": "kafka_spark.update_mode",
}


def register(spark: Any) -> None:
    """Register the ``pylog`` source and topic sink and the ``pylog-files`` file sink with a
    SparkSession (for Pythons where Spark's auto-registration does not find them)."""
    from kafka_spark.sink import FileSinkDataSource
    from kafka_spark.source import PylogDataSource

    spark.dataSource.register(PylogDataSource)
    spark.dataSource.register(FileSinkDataSource)


def __getattr__(name: str) -> Any:
    # Imported lazily so that `pylog broker start` does not pay for importing pyspark.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)
