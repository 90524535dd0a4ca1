"""Topic-to-topic enrichment with the exactly-once topic sink.

Shows: reading `orders`, joining each order with a product catalog (a static DataFrame), and
writing enriched JSON records keyed by customer to `orders-enriched` with
`writeStream.format("pylog")` — one Kafka transaction per task, so consumers with
isolation.level=read_committed see every order exactly once, even across restarts.

    python examples/topic_enrichment.py [CHECKPOINT_DIR]
"""

import json
import os
import sys
import tempfile

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F

from kafka_spark.broker import EmbeddedBroker  # noqa: E402
from kafka_spark.sample_data import PRODUCTS, produce_orders  # noqa: E402

checkpoint = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="pylog-enrichment-")

with EmbeddedBroker() as broker:
    broker.create_topic("orders", partitions=3)
    broker.create_topic("orders-enriched", partitions=3)
    produce_orders(broker.bootstrap_servers, "orders", 2_000)

    spark = SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    catalog = spark.createDataFrame(
        [(name, price, "accessories" if price < 50 else "equipment") for name, price in PRODUCTS],
        "product string, list_price double, category string",
    )
    orders = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", "orders")
        .option("startingOffsets", "earliest")
        .load()
        .select(
            "key",
            F.from_json(
                F.col("value").cast("string"), "order_id long, product string, quantity int, country string"
            ).alias("o"),
        )
        .select("key", "o.*")
    )
    enriched = orders.join(F.broadcast(catalog), "product").select(
        "key",
        F.to_json(F.struct("order_id", "product", "category", "quantity", "list_price", "country")).alias("value"),
    )
    query = (
        enriched.writeStream.format("pylog")  # the exactly-once topic sink
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", "orders-enriched")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()

    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "enrichment-check",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    reader.assign([TopicPartition("orders-enriched", p, OFFSET_BEGINNING) for p in range(3)])
    seen, eof = [], 0
    while eof < 3:
        for message in reader.consume(500, timeout=1.0):
            if message.error():
                eof += 1
            else:
                seen.append(json.loads(message.value()))
    reader.close()
    print(f"{len(seen)} enriched orders, {len({o['order_id'] for o in seen})} distinct; first: {seen[0]}")
