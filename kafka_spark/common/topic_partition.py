"""The unit of ordering and parallelism in a Kafka-style log."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A topic-partition; sorts by (topic, partition) as Spark and Kafka order them."""

    topic: str
    partition: int

    def __str__(self) -> str:
        # Kafka's and Spark's spelling in logs and error messages: "orders-3".
        return f"{self.topic}-{self.partition}"
