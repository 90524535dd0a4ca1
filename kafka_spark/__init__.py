"""pylog: a PySpark-native streaming connector for Kafka-style logs.

Public API:

* ``register(spark)`` registers the ``pylog`` source and topic sink and the ``pylog-files``
  file sink explicitly (Spark also finds them on its own through the top-level
  ``pyspark_pylog`` and ``pyspark_pylog_files`` modules).
* ``EmbeddedBroker`` runs a Kafka-compatible broker in this process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from kafka_spark.broker import EmbeddedBroker

__all__ = ["EmbeddedBroker", "register", "__version__"]


def register(spark: Any) -> None:
    """Register the ``pylog`` source and topic sink and the ``pylog-files`` file sink with a
    SparkSession (for Pythons where Spark's auto-registration does not find them)."""
    from kafka_spark.file_sink import FileSinkDataSource
    from kafka_spark.source import PylogDataSource

    spark.dataSource.register(PylogDataSource)
    spark.dataSource.register(FileSinkDataSource)


def __getattr__(name: str) -> Any:
    # Imported lazily so that `pylog broker start` does not pay for importing pyspark.
    if name == "EmbeddedBroker":
        from kafka_spark.broker import EmbeddedBroker

        return EmbeddedBroker
    raise AttributeError(name)
