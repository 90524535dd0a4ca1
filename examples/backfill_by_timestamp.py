"""Backfill: a batch read of one day of an existing topic, by timestamp.

Shows: `spark.read.format("pylog")` with `startingOffsetsByTimestamp` / `endingOffsetsByTimestamp`
(Spark's option names and JSON shape), turning a time range into exact offsets per partition,
and writing the slice to Parquet for reprocessing.

    python examples/backfill_by_timestamp.py [OUTPUT_DIR]
"""

import json
import os
import sys
import tempfile

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F

from kafka_spark.broker import EmbeddedBroker  # noqa: E402
from kafka_spark.sample_data import orders, produce_orders  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="pylog-backfill-")

with EmbeddedBroker() as broker:
    broker.create_topic("orders", partitions=2)
    produce_orders(broker.bootstrap_servers, "orders", 4_000)
    events = list(orders(4_000))
    start_ms, end_ms = events[1_000].timestamp_ms, events[3_000].timestamp_ms  # the slice to replay

    spark = SparkSession.builder.master("local[2]").getOrCreate()
    by_partition = {"orders": {"0": start_ms, "1": start_ms}}
    until = {"orders": {"0": end_ms, "1": end_ms}}
    backfill = (
        spark.read.format("pylog")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", "orders")
        .option("startingOffsetsByTimestamp", json.dumps(by_partition))
        .option("endingOffsetsByTimestamp", json.dumps(until))
        .load()
    )
    window = backfill.agg(
        F.count("*").alias("records"), F.min("timestamp").alias("first"), F.max("timestamp").alias("last")
    )
    window.show(truncate=False)
    backfill.write.mode("overwrite").parquet(os.path.join(out, "orders-slice"))
    print(f"{backfill.count()} records between {start_ms} and {end_ms} written to {out}/orders-slice")
    spark.stop()
