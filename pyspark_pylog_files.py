"""Spark auto-registration of the pylog file sink.

Spark imports every top-level ``pyspark_*`` module that has a ``DefaultSource`` data source
(pyspark/sql/worker/lookup_data_sources.py), so with pylog installed
``df.writeStream.format("pylog-files")`` and ``df.write.format("pylog-files")`` work with no
register() call.
"""

from kafka_spark.sink import FileSinkDataSource as DefaultSource

__all__ = ["DefaultSource"]
