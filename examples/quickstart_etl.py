"""Quickstart: an exactly-once streaming ETL from a Kafka topic to Parquet, no Kafka to install.

Shows: an embedded broker in one line, `spark.readStream.format("pylog")` with Spark's Kafka
options, a windowed aggregation with a watermark, and the exactly-once file sink
`pylog-files`, whose output stock `spark.read.parquet` reads (committed files only).

    python examples/quickstart_etl.py [OUTPUT_DIR]
"""

import os
import sys
import tempfile

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F

from kafka_spark.broker import EmbeddedBroker  # noqa: E402
from kafka_spark.sample_data import produce_orders  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="pylog-quickstart-")

with EmbeddedBroker() as broker:  # a Kafka-compatible broker in this process, temporary data
    broker.create_topic("orders", partitions=3)
    produce_orders(broker.bootstrap_servers, "orders", 3_000)

    spark = SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    schema = "order_id long, product string, quantity int, unit_price double, country string, event_time long"
    sales = (
        spark.readStream.format("pylog")  # was: .format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", "orders")
        .option("startingOffsets", "earliest")
        .load()
        .select(F.from_json(F.col("value").cast("string"), schema).alias("order"))
        .select("order.*", F.timestamp_millis("order.event_time").alias("ts"))
        .withWatermark("ts", "2 minutes")
        .groupBy(F.window("ts", "1 minute"), "product")
        .agg(F.sum(F.col("quantity") * F.col("unit_price")).alias("revenue"))
    )
    query = (
        sales.writeStream.format("pylog-files")  # exactly-once: the manifest is the commit point
        .option("checkpointLocation", os.path.join(out, "checkpoint"))
        .outputMode("append")
        .trigger(availableNow=True)
        .start(os.path.join(out, "sales"))
    )
    query.awaitTermination()

    result = spark.read.parquet(os.path.join(out, "sales"))
    result.orderBy("window", "product").show(10, truncate=False)
    print(f"{result.count()} closed (minute, product) windows written to {os.path.join(out, 'sales')}")
    spark.stop()
