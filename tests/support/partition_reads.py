"""Read partitions to their end with confluent-kafka's consumer (assign mode, no group state)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from tests.support.waiting import wait_until


def read_to_end(bootstrap: str, topic: str, partition: int = 0, timeout_s: float = 30, **config: Any) -> list[Message]:
    """Every message from the beginning of ``topic``-``partition`` up to its end (partition EOF);
    ``config`` adds consumer settings (e.g. ``**{"isolation.level": "read_committed"}``)."""
    return read_partitions_to_end(bootstrap, topic, [partition], timeout_s, **config)


def read_partitions_to_end(
    bootstrap: str, topic: str, partitions: Iterable[int], timeout_s: float = 60, **config: Any
) -> list[Message]:
    """Every message of ``topic``'s ``partitions`` from their beginning until each has reported
    its end (partition EOF), in the order the consumer delivered them; an error other than EOF
    fails the test. ``config`` adds consumer settings (``group.id`` only names the reader: no
    offsets are committed)."""
    wanted = set(partitions)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "partition-reads",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            **config,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(wanted)])
    messages: list[Message] = []
    ended: set[int] = set()

    def at_end() -> bool:
        for message in consumer.consume(1000, timeout=0.5):
            if message.error():
                if message.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(message.error())
                ended.add(message.partition())
            else:
                ended.discard(message.partition())
                messages.append(message)
        return ended >= wanted

    try:
        wait_until(
            at_end,
            lambda: f"the end of {topic} partitions {sorted(wanted - ended)} ({len(messages)} messages read)",
            timeout=timeout_s,
            interval=0,
        )
    finally:
        consumer.close()
    return messages
