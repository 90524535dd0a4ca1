"""The at-least-once topic sink's producer pool in a Python worker (kafka_spark.topics.task):
producers are reused across tasks, closed once idle for Spark's cache timeout, and never reused
after a failed task."""

from __future__ import annotations

import time

from kafka_spark.topics.task import _ProducerPool
from tests.support.client_threads import librdkafka_threads
from tests.support.waiting import wait_until


def test_a_pooled_producer_is_reused_then_closed_by_the_evictor_once_idle(pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=1)
    before = librdkafka_threads()
    pool = _ProducerPool(idle_timeout_s=0.5, evict_interval_s=0.1)
    config = {"bootstrap.servers": pylog_broker.bootstrap_servers, "enable.idempotence": True}
    producer = pool.acquire(config)
    producer.produce(topic, b"one")
    assert producer.flush(30) == 0
    pool.release(producer, reusable=True)
    again = pool.acquire(dict(reversed(config.items())))  # the same settings in another order
    assert again is producer and len(pool) == 1
    past_timeout = time.monotonic() + 0.5
    # borrowed: the evictor looks after the idle timeout has passed, and keeps it
    wait_until(lambda: pool.pool.last_eviction > past_timeout, "an eviction round past the idle timeout", timeout=30)
    assert len(pool) == 1
    pool.release(again, reusable=True)
    del producer, again
    wait_until(lambda: len(pool) == 0, "the idle producer was never evicted", timeout=30)
    wait_until(lambda: librdkafka_threads() == before, "the evicted producer's threads still run", timeout=30)


def test_a_producer_given_back_by_a_failed_task_is_not_reused(pylog_broker):
    before = librdkafka_threads()
    pool = _ProducerPool()  # the default timeouts: only the failure takes it out
    config = {"bootstrap.servers": pylog_broker.bootstrap_servers}
    producer = pool.acquire(config)
    pool.release(producer, reusable=False)
    assert len(pool) == 0
    fresh = pool.acquire(config)
    assert fresh is not producer
    del producer
    pool.release(fresh, reusable=True)
    assert pool.evict_idle() == 0  # idle for less than ten minutes: kept
    pool.close_all()
    assert len(pool) == 0
    del fresh
    wait_until(lambda: librdkafka_threads() == before, "the producers' threads still run", timeout=30)
