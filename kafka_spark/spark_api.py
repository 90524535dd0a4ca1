"""What this PySpark's Python data source API offers, detected from the API, not the version.

pylog runs on PySpark 4.0 to 4.x. Two things it builds on came after 4.0:

* **Admission control** (``pyspark.sql.streaming.datasource``, PySpark 4.2): Spark calls
  ``latestOffset(start, limit)`` with the batch's start and a read limit (``ReadMaxRows``,
  ``ReadMinRows``, ``ReadAllAvailable`` for Trigger.Once), asks ``getDefaultReadLimit`` and
  ``reportLatestOffset``, and drives Trigger.AvailableNow through ``SupportsTriggerAvailableNow``.
  Before it, Spark calls ``latestOffset()`` with no arguments and runs Trigger.AvailableNow as a
  single Trigger.Once batch for Python sources; the stream reader then applies the read limits
  itself (kafka_spark.read.stream, "Without admission control").
* **The Arrow stream writer** (``DataSourceStreamArrowWriter``, PySpark 4.1): tasks get Arrow
  record batches. PySpark 4.0's write worker hands Arrow batches to any writer that is a
  ``DataSourceArrowWriter``, streaming or not, so :data:`StreamArrowWriter` there is a stream
  writer that is also one.

Importing this module needs PySpark (kafka_spark.spark_env checks it first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyspark
import pyspark.sql.datasource as _datasource

__all__ = [
    "ADMISSION_CONTROL",
    "ADMISSION_CONTROL_SINCE",
    "PYSPARK_VERSION",
    "ReadAllAvailable",
    "ReadLimit",
    "ReadMaxRows",
    "ReadMinRows",
    "StreamArrowWriter",
    "SupportsTriggerAvailableNow",
]

#: The PySpark release that brought admission control to Python streaming sources.
ADMISSION_CONTROL_SINCE = "4.2"

PYSPARK_VERSION: str = pyspark.__version__

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as StreamArrowWriter
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )

    ADMISSION_CONTROL: bool
else:
    try:
        from pyspark.sql.streaming.datasource import (
            ReadAllAvailable,
            ReadLimit,
            ReadMaxRows,
            ReadMinRows,
            SupportsTriggerAvailableNow,
        )

        ADMISSION_CONTROL = True
    except ImportError:  # PySpark before 4.2: Spark never passes a read limit
        ADMISSION_CONTROL = False

        class ReadLimit:
            """Stand-in: no PySpark before 4.2 creates one."""

        class ReadAllAvailable(ReadLimit):
            pass

        @dataclass
        class ReadMaxRows(ReadLimit):
            max_rows: int

        @dataclass
        class ReadMinRows(ReadLimit):
            min_rows: int

        class SupportsTriggerAvailableNow:
            """Stand-in: before 4.2 Spark never asks a Python source for it."""

    StreamArrowWriter = getattr(_datasource, "DataSourceStreamArrowWriter", None)
    if StreamArrowWriter is None:  # PySpark 4.0

        class StreamArrowWriter(_datasource.DataSourceStreamWriter, _datasource.DataSourceArrowWriter):
            """A stream writer PySpark 4.0's write worker hands Arrow record batches to (it does
            so for every ``DataSourceArrowWriter``)."""
