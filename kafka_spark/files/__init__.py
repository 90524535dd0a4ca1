"""The ``pylog-files`` sink's machinery: exactly-once Parquet / Avro / JSON files.

writers.py (the data source and its writers), task.py (executor: part files), commit.py (driver:
the commit point), metadata_log.py (Spark's ``_spark_metadata``), sidecar.py (``_sink/``: which
query committed which offsets), continuity.py, options.py, formats.py and fs.py.
"""
