"""`make demo`: the main job, on the embedded broker — an exactly-once streaming ETL.

1. An embedded broker starts in this process with its data under ./demo-output/broker; the query
   is given its address (``kafka.bootstrap.servers``). Being in-process, it does not register as
   the machine's local broker, so a `pylog broker start` running beside the demo is left alone.
2. A generator writes realistic orders (JSON, keyed by customer, with headers) to ``orders``.
3. A Structured Streaming query reads them with ``format("pylog")``, parses the JSON, computes
   revenue per country per minute of event time with a watermark, and writes the closed windows
   to Parquet through the exactly-once file sink ``pylog-files`` (Trigger.AvailableNow).
4. A summary: rows in, rows out, the source offsets committed with the output, where it is.

Run it again: the broker keeps its data, new orders are added, the query resumes from its
checkpoint, and the output still holds every window exactly once.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

TOPIC = "orders"
PARTITIONS = 3
ORDERS_PER_RUN = 5_000


def main(out: Path = Path("demo-output")) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # executors run this interpreter
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a laptop demo: Spark on loopback only
    import kafka_spark.spark_env  # noqa: F401  (first: names a missing or doubled PySpark, and the fix)

    # isort: split
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from kafka_spark.broker import EmbeddedBroker
    from kafka_spark.files.table import committed_source_offsets
    from kafka_spark.sample_data import produce_orders

    output, checkpoint = out / "revenue_by_country", out / "checkpoint"
    with EmbeddedBroker(log_dir=out / "broker") as broker:
        print(f"[1/4] embedded broker at {broker.bootstrap_servers} (data in {broker.log_dir})")
        if TOPIC not in broker.topics():
            broker.create_topic(TOPIC, partitions=PARTITIONS)
        already = _end_offsets(broker.bootstrap_servers)
        started = time.perf_counter()
        produced = produce_orders(broker.bootstrap_servers, TOPIC, ORDERS_PER_RUN, first_id=sum(already.values()))
        print(
            f"[2/4] produced {produced:,} orders to '{TOPIC}' in {time.perf_counter() - started:.1f}s "
            f"({sum(already.values()):,} were there from earlier runs)"
        )

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("pylog-demo")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        try:
            order = (
                "order_id long, customer_id string, product string, quantity int, unit_price double, "
                "country string, event_time long"
            )
            orders = (
                spark.readStream.format("pylog")
                .option("kafka.bootstrap.servers", broker.bootstrap_servers)
                .option("subscribe", TOPIC)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", 4000)
                .load()
            )
            revenue = (
                orders.select(F.from_json(F.col("value").cast("string"), order).alias("o"))
                .select("o.*")
                .withColumn("event_time", F.timestamp_millis("event_time"))
                .withWatermark("event_time", "2 minutes")
                .groupBy(F.window("event_time", "1 minute"), "country")
                .agg(
                    F.round(F.sum(F.col("quantity") * F.col("unit_price")), 2).alias("revenue"),
                    F.count("*").alias("orders"),
                )
                .select(
                    F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"),
                    "country",
                    "revenue",
                    "orders",
                )
            )
            query = (
                revenue.writeStream.format("pylog-files")
                .option("checkpointLocation", str(checkpoint))
                .outputMode("append")
                .trigger(availableNow=True)
                .start(str(output))
            )
            query.awaitTermination()
            rows_in = sum(progress["numInputRows"] for progress in query.recentProgress)
            print(f"[3/4] streaming ETL: {len(query.recentProgress)} micro-batch(es), {rows_in:,} orders read")

            written = spark.read.parquet(str(output))  # stock Spark: sees committed files only
            rows_out = written.count()
            distinct = written.select("window_start", "country").distinct().count()
            orders_out = written.agg(F.sum("orders")).collect()[0][0] or 0
            offsets = committed_source_offsets(str(output))
        finally:
            spark.stop()

    print("[4/4] summary")
    print(f"  rows in (this run):        {rows_in:,} orders")
    print(
        f"  rows out (total):          {rows_out:,} closed (window, country) rows covering {orders_out:,} orders"
        + ("" if rows_out == distinct else f"  DUPLICATES: only {distinct:,} distinct")
    )
    print(f"  offsets committed:         {json.dumps(offsets, sort_keys=True)}")
    print(f"  output (Parquet):          {output.resolve()}")
    print("  windows still open wait for the watermark (2 minutes of event time); run again to add orders")
    return 0 if rows_out == distinct else 1


def _end_offsets(bootstrap: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pylog-demo"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main())
