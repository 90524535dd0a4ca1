"""What a user gets from a normal install: format("pylog") and format("pylog-files") with no
register() call.

Run by scripts/check_install.py with the Python of a fresh virtualenv that holds pylog's wheel
and its dependencies only, from a directory outside the clone, so nothing here can come from the
source tree. Reads an embedded broker's topic with spark.read.format("pylog") and
spark.readStream.format("pylog"), writes both with format("pylog-files"), reads the output back
with stock Spark and prints one line per check.

    python scripts/installed_smoke.py OUTPUT_DIR
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors use this interpreter

import pyspark  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F

import kafka_spark  # noqa: E402
import pyspark_pylog  # noqa: E402
import pyspark_pylog_files  # noqa: E402
from kafka_spark.broker import EmbeddedBroker  # noqa: E402
from kafka_spark.sample_data import produce_orders  # noqa: E402

RECORDS = 300


def main(out: Path) -> None:
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    for module in (kafka_spark, pyspark_pylog, pyspark_pylog_files):
        where = Path(module.__file__).resolve()
        if not where.is_relative_to(site):
            raise SystemExit(f"{module.__name__} was imported from {where}, not from the install in {site}")
    print(f"installed: kafka_spark, pyspark_pylog, pyspark_pylog_files in {site}; pyspark {pyspark.__version__}")

    with EmbeddedBroker() as broker:
        broker.create_topic("orders", partitions=2)
        produce_orders(broker.bootstrap_servers, "orders", RECORDS)
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("pylog-installed-smoke")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        try:
            source = {
                "kafka.bootstrap.servers": broker.bootstrap_servers,
                "subscribe": "orders",
                "startingOffsets": "earliest",
            }
            rows = spark.read.format("pylog").options(**source).load()
            (
                rows.select("key", F.col("value").cast("string").alias("json"), "partition", "offset")
                .write.format("pylog-files")
                .mode("append")
                .save(str(out / "batch"))
            )
            batch = spark.read.parquet(str(out / "batch")).count()
            print(f"spark.read.format('pylog') -> write.format('pylog-files'): {batch} rows")

            query = (
                spark.readStream.format("pylog")
                .options(**source)
                .load()
                .select("key", "value", "partition", "offset")
                .writeStream.format("pylog-files")
                .option("checkpointLocation", str(out / "checkpoint"))
                .trigger(availableNow=True)
                .start(str(out / "stream"))
            )
            query.awaitTermination()
            stream = spark.read.parquet(str(out / "stream")).count()
            print(f"readStream.format('pylog') -> writeStream.format('pylog-files'): {stream} rows")
        finally:
            spark.stop()
    if (batch, stream) != (RECORDS, RECORDS):
        raise SystemExit(f"expected {RECORDS} rows from each read, got {batch} (batch) and {stream} (stream)")
    print(f"ok: {RECORDS} records read and written twice without register()")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-1].strip())
    main(Path(sys.argv[1]).resolve())
