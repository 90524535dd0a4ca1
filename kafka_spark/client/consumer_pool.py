"""Executor side: the worker's pool of consumers, as Spark's ``KafkaDataConsumer`` pool.

:func:`acquire_consumer` / :func:`release_consumer` borrow from an exclusive
:class:`~kafka_spark.client.pool.ClientPool` of consumers: PySpark reuses Python workers across
tasks and micro-batches, so a consumer assigned to ``orders-3`` in batch 7 is still connected,
and usually positioned exactly where batch 8 starts, when batch 8 reads ``orders-3`` in the same
worker. Eviction, closing at exit and fork safety are the pool's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafka_spark.client.librdkafka_log import routed
from kafka_spark.client.pool import ClientPool
from kafka_spark.common.topic_partition import TopicPartition

if TYPE_CHECKING:  # pragma: no cover
    from confluent_kafka import Consumer, Message

    from kafka_spark.client.config import ConfigKey

__all__ = [
    "CAPACITY",
    "IDLE_TIMEOUT_S",
    "PooledConsumer",
    "acquire_consumer",
    "attempt_number",
    "close_pooled_consumers",
    "evict_idle_consumers",
    "pooled_consumer_count",
    "release_consumer",
]


#: Idle consumers older than this are closed (Spark's spark.kafka.consumer.cache.timeout, 5m).
IDLE_TIMEOUT_S = 300.0

#: Soft cap on pooled consumers per worker (Spark's spark.kafka.consumer.cache.capacity, 64).
CAPACITY = 64


@dataclass(eq=False)
class PooledConsumer:
    """A consumer assigned to one topic-partition, with what it already fetched.

    ``next_offset`` is the offset the previous read stopped at (its ``until``) and ``buffered``
    the records it fetched past that point. A read that starts exactly at ``next_offset`` keeps
    both, so consecutive micro-batches do not re-fetch; any other start re-assigns (seeks) and
    drops the buffer. Used by one task at a time.
    """

    key: tuple[ConfigKey, TopicPartition]
    consumer: Consumer
    next_offset: int | None = None
    buffered: list[Message] = field(default_factory=list)

    def seek(self, offset: int) -> None:
        """Position the consumer at ``offset`` unless it is already there."""
        if self.next_offset == offset:
            return
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        tp = self.key[1]
        self.consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, offset)])
        self.buffered = []
        self.next_offset = offset

    def close(self) -> None:
        try:
            self.consumer.close()
        except RuntimeError:
            # Already closed (confluent-kafka raises RuntimeError then); nothing left to free.
            pass


# The timeout and capacity are read at each eviction, so that tests may change them.
_POOL: ClientPool[PooledConsumer] = ClientPool(
    "consumer",
    lambda pooled: pooled.close(),
    exclusive=True,
    idle_timeout_s=lambda: IDLE_TIMEOUT_S,
    capacity=lambda: CAPACITY,
)
_EVICTOR = _POOL.evictor


def evict_idle_consumers() -> int:
    """Close the pooled consumers idle for over :data:`IDLE_TIMEOUT_S`, and the oldest past
    :data:`CAPACITY`; how many were closed. The pool's evictor thread calls it every minute."""
    return _POOL.evict_idle()


def attempt_number() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.attemptNumber() if context is not None else 0


def acquire_consumer(config: ConfigKey, tp: TopicPartition) -> PooledConsumer:
    """A consumer for ``tp`` with ``config``: a pooled one if this worker has one, else new.

    A task retry (``TaskContext.attemptNumber() > 0``) closes every pooled consumer of the key
    first, "for safety", as Spark does: whatever failed the first attempt may live in it.
    Idle consumers older than :data:`IDLE_TIMEOUT_S` are closed on the way, and by the pool's
    evictor thread in a worker that no longer reads. Thread-safe.
    """
    key = (config, tp)

    def create() -> PooledConsumer:
        from confluent_kafka import Consumer

        return PooledConsumer(key=key, consumer=Consumer(routed(dict(config))))

    return _POOL.acquire(key, create, fresh=attempt_number() > 0)


def release_consumer(pooled: PooledConsumer, *, reusable: bool) -> None:
    """Return a consumer to the pool, or close it when ``reusable`` is false (after an error)."""
    _POOL.release(pooled, reusable=reusable)


def close_pooled_consumers() -> None:
    """Close every idle pooled consumer of this process (at exit, which the pool does itself,
    and in tests)."""
    _POOL.close_idle()


def pooled_consumer_count() -> int:
    """How many idle consumers this worker holds (for tests and diagnostics)."""
    return len(_POOL)
