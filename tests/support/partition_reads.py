"""Read one partition to its end with confluent-kafka's consumer (assign mode, no group state)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition


def read_to_end(bootstrap: str, topic: str, partition: int = 0, timeout_s: float = 30, **config: Any) -> list[Message]:
    """Every message from the beginning of ``topic``-``partition`` up to its end (partition EOF);
    ``config`` adds consumer settings (e.g. ``**{"isolation.level": "read_committed"}``)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "partition-reads",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            **config,
        }
    )
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    messages: list[Message] = []
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return messages
                raise AssertionError(message.error())
            messages.append(message)
        raise AssertionError(f"no end of {topic}-{partition} within {timeout_s} s")
    finally:
        consumer.close()
