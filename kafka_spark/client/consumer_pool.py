"""Executor side: the worker's pool of consumers, as Spark's ``KafkaDataConsumer`` pool.

:func:`acquire_consumer` / :func:`release_consumer` keep a module-level pool of consumers:
PySpark reuses Python workers across tasks and micro-batches, so a consumer assigned to
``orders-3`` in batch 7 is still connected, and usually positioned exactly where batch 8 starts,
when batch 8 reads ``orders-3`` in the same worker.
"""

from __future__ import annotations

import atexit
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafka_spark.client.evictor import Evictor
from kafka_spark.client.librdkafka_log import routed
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
    last_used: float = field(default_factory=time.monotonic)

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


_lock = threading.Lock()

_EVICTOR = Evictor("pylog-consumer-evictor")

_idle: dict[tuple[ConfigKey, TopicPartition], list[PooledConsumer]] = {}


def _evict_idle_locked(now: float) -> list[PooledConsumer]:
    evicted: list[PooledConsumer] = []
    for key in list(_idle):
        keep = [c for c in _idle[key] if now - c.last_used <= IDLE_TIMEOUT_S]
        evicted.extend(c for c in _idle[key] if now - c.last_used > IDLE_TIMEOUT_S)
        if keep:
            _idle[key] = keep
        else:
            del _idle[key]
    pooled = sorted((c for cs in _idle.values() for c in cs), key=lambda c: c.last_used)
    for c in pooled[: max(0, len(pooled) - CAPACITY)]:
        _idle[c.key].remove(c)
        if not _idle[c.key]:
            del _idle[c.key]
        evicted.append(c)
    return evicted


def evict_idle_consumers() -> int:
    """Close the pooled consumers idle for over :data:`IDLE_TIMEOUT_S`, and the oldest past
    :data:`CAPACITY`; how many were closed. The pool's evictor thread calls it every minute."""
    with _lock:
        stale = _evict_idle_locked(time.monotonic())
    for c in stale:
        c.close()
    return len(stale)


def attempt_number() -> int:
    from pyspark import TaskContext

    context = TaskContext.get()
    return context.attemptNumber() if context is not None else 0


def acquire_consumer(config: ConfigKey, tp: TopicPartition) -> PooledConsumer:
    """A consumer for ``tp`` with ``config``: a pooled one if this worker has one, else new.

    A task retry (``TaskContext.attemptNumber() > 0``) closes every pooled consumer of the key
    first, "for safety", as Spark does: whatever failed the first attempt may live in it.
    Idle consumers older than :data:`IDLE_TIMEOUT_S` are closed on the way, and by the pool's
    evictor thread (kafka_spark.client.evictor) in a worker that no longer reads. Thread-safe.
    """
    _EVICTOR.ensure_running(lambda: evict_idle_consumers)
    key = (config, tp)
    retry = attempt_number() > 0
    with _lock:
        stale = _evict_idle_locked(time.monotonic())
        if retry:
            stale.extend(_idle.pop(key, []))
        candidates = _idle.get(key)
        pooled = candidates.pop() if candidates else None
        if candidates == []:
            del _idle[key]
    for c in stale:
        c.close()
    if pooled is not None:
        return pooled
    from confluent_kafka import Consumer

    return PooledConsumer(key=key, consumer=Consumer(routed(dict(config))))


def release_consumer(pooled: PooledConsumer, *, reusable: bool) -> None:
    """Return a consumer to the pool, or close it when ``reusable`` is false (after an error)."""
    if not reusable:
        pooled.close()
        return
    pooled.last_used = time.monotonic()
    with _lock:
        _idle.setdefault(pooled.key, []).append(pooled)


def close_pooled_consumers() -> None:
    """Close every idle pooled consumer of this process (at exit, and in tests)."""
    with _lock:
        pooled = [c for cs in _idle.values() for c in cs]
        _idle.clear()
    for c in pooled:
        c.close()


# A worker exiting closes its consumers instead of leaving librdkafka threads to die mid-request.
atexit.register(close_pooled_consumers)


def pooled_consumer_count() -> int:
    """How many idle consumers this worker holds (for tests and diagnostics)."""
    with _lock:
        return sum(len(cs) for cs in _idle.values())
