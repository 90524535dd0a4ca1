"""`make demo`: the main job on the embedded default.

For now (the Spark source and sinks are being built) it exercises the broker end to end: start
an embedded broker with its data under ./demo-output/broker, create an `orders` topic, produce
sample orders, consume them back and print a summary. Run it twice: the data persists and the
second run adds to it.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from kafka_spark.broker import EmbeddedBroker
from kafka_spark.sample_data import produce_orders

TOPIC = "orders"
PARTITIONS = 3
ORDERS_PER_RUN = 5_000


def main() -> int:
    out = Path("demo-output")
    with EmbeddedBroker(log_dir=out / "broker") as broker:
        print(f"embedded broker at {broker.bootstrap_servers} (data in {broker.log_dir})")
        if TOPIC not in broker.topics():
            broker.create_topic(TOPIC, partitions=PARTITIONS)
        started = time.perf_counter()
        before = _end_offsets(broker.bootstrap_servers)
        produced = produce_orders(broker.bootstrap_servers, TOPIC, ORDERS_PER_RUN, first_id=sum(before.values()))
        produce_s = time.perf_counter() - started
        started = time.perf_counter()
        records = _consume_all(broker.bootstrap_servers)
        consume_s = time.perf_counter() - started
        after = _end_offsets(broker.bootstrap_servers)
    by_country = Counter(json.loads(value)["country"] for value in records)
    revenue = sum(json.loads(v)["quantity"] * json.loads(v)["unit_price"] for v in records)
    print(f"produced {produced:,} orders in {produce_s:.2f}s; topic now holds {len(records):,} "
          f"(read back in {consume_s:.2f}s)")
    print("end offsets per partition: " + json.dumps({TOPIC: {str(p): o for p, o in sorted(after.items())}}))
    print("orders by country: " + ", ".join(f"{c}={n}" for c, n in by_country.most_common()))
    print(f"total revenue: {revenue:,.2f}")
    return 0 if len(records) == sum(after.values()) else 1


def _end_offsets(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def _consume_all(bootstrap: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "demo", "enable.partition.eof": True,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values, eof = [], set()
    try:
        while len(eof) < PARTITIONS:
            for message in consumer.consume(5000, timeout=1.0):
                if message.error():
                    if message.error().code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(message.error().str())
                    eof.add(message.partition())
                else:
                    values.append(message.value())
    finally:
        consumer.close()
    return values


if __name__ == "__main__":
    sys.exit(main())
