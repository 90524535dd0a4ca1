"""Spark's entry point for the ``pylog`` data source.

PySpark imports every top-level module named ``pyspark_*`` and registers its ``DefaultSource``
(pyspark/sql/worker/lookup_data_sources.py), so with pylog installed
``spark.readStream.format("pylog")`` works without calling ``kafka_spark.register(spark)``.
"""

from kafka_spark.source import PylogDataSource as DefaultSource

__all__ = ["DefaultSource"]
