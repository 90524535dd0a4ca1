"""Realistic sample events for demos, examples and notebooks: an online shop's orders.

Each event is a JSON order keyed by customer id, with headers saying where it came from and
which schema it follows; timestamps advance through a simulated day so that windowed
aggregations have something to show.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass

PRODUCTS = [
    ("keyboard", 49.0),
    ("mouse", 19.5),
    ("monitor", 189.0),
    ("laptop-stand", 35.0),
    ("headset", 79.0),
    ("webcam", 59.0),
    ("usb-hub", 25.0),
    ("desk-lamp", 42.0),
]
COUNTRIES = ["DE", "FR", "NL", "ES", "IT", "PL", "SE", "US"]


@dataclass(frozen=True)
class Event:
    key: bytes
    value: bytes
    headers: list[tuple[str, str | bytes | None]]
    timestamp_ms: int


def orders(count: int, *, start_ms: int = 1_767_225_600_000, seed: int = 42, first_id: int = 0) -> Iterator[Event]:
    """``count`` order events, deterministic for a seed; about one order per 250 ms of event time."""
    rng = random.Random(seed + first_id)
    timestamp = start_ms + first_id * 250
    for order_id in range(first_id, first_id + count):
        timestamp += rng.randrange(50, 450)
        product, price = rng.choice(PRODUCTS)
        customer = f"customer-{rng.randrange(500):04d}"
        order = {
            "order_id": order_id,
            "customer_id": customer,
            "product": product,
            "quantity": rng.choice([1, 1, 1, 2, 2, 3]),
            "unit_price": price,
            "country": rng.choice(COUNTRIES),
            "event_time": timestamp,
        }
        yield Event(
            key=customer.encode(),
            value=json.dumps(order, separators=(",", ":")).encode(),
            headers=[("source", b"webshop"), ("schema", b"order-v1")],
            timestamp_ms=timestamp,
        )


def produce_orders(bootstrap_servers: str, topic: str, count: int, *, first_id: int = 0) -> int:
    """Produce ``count`` orders with an idempotent producer; returns how many were acknowledged."""
    from confluent_kafka import Producer

    from kafka_spark.client.librdkafka_log import routed

    producer = Producer(routed({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "linger.ms": 10}))
    delivered = 0

    def on_delivery(error: object, message: object) -> None:
        nonlocal delivered
        if error is None:
            delivered += 1

    for event in orders(count, first_id=first_id):
        while True:
            try:
                producer.produce(
                    topic,
                    key=event.key,
                    value=event.value,
                    headers=event.headers,
                    timestamp=event.timestamp_ms,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)
    return delivered
