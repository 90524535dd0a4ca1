"""Fixtures for the source tests: a Kafka-protocol cluster and helpers to fill topics.

``mock_kafka`` is librdkafka's built-in mock cluster (``test.mock.num.brokers``): a real
Kafka-protocol broker, written by others, listening on 127.0.0.1 so Spark's Python workers reach
it. It lives as long as the producer that created it, so the fixture keeps that producer.
Topics are auto-created with 4 partitions (the mock's default) on first use.

Tests take ``kafka_cluster`` (not ``mock_kafka`` directly), so the same tests can run against the
embedded broker by parametrizing that one fixture.

Import from test modules with ``from tests.source_fixtures import *  # noqa: F401,F403`` or
``pytest_plugins``; conftest.py is not changed.
"""

from __future__ import annotations

import itertools
import logging
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pytest
from confluent_kafka import Producer

from tests.support.waiting import wait_until

MOCK_PARTITIONS = 4

_names = itertools.count()


@dataclass
class Record:
    """One record to produce, and (after producing) where it landed."""

    value: bytes | None
    key: bytes | None = None
    partition: int = 0
    timestamp: int | None = None
    headers: list[tuple[str, bytes | None]] | None = None
    offset: int = -1


@dataclass
class KafkaCluster:
    """A running Kafka-protocol cluster for tests."""

    bootstrap_servers: str
    producer: Producer
    partitions_per_topic: int = MOCK_PARTITIONS
    supports_timestamp_lookup: bool = True
    #: The embedded broker object, when the cluster is one (for retention, topic deletion).
    broker: object = None
    _keepalive: list = field(default_factory=list)

    def new_topic(self, prefix: str = "t", config: dict[str, str] | None = None) -> str:
        """A unique topic name, created (with ``partitions_per_topic`` partitions) now."""
        name = f"{prefix}-{next(_names)}-{uuid.uuid4().hex[:6]}"
        if self.broker is not None:
            self.broker.create_topic(name, partitions=self.partitions_per_topic, config=config)

        def created() -> bool:
            metadata = self.producer.list_topics(topic=name, timeout=10)
            return len(metadata.topics[name].partitions) == self.partitions_per_topic

        wait_until(
            created,
            lambda: f"topic {name} auto-created: {self.producer.list_topics(topic=name, timeout=10).topics[name]}",
            10,
        )
        return name

    def produce(self, topic: str, records: Sequence[Record]) -> list[Record]:
        """Produce ``records`` in order, wait for every delivery, fill in their offsets."""
        errors = []

        def delivered(record: Record):
            def callback(err, msg):
                if err is not None:
                    errors.append(err)
                else:
                    record.offset = msg.offset()

            return callback

        for record in records:
            kwargs = {}
            if record.timestamp is not None:
                kwargs["timestamp"] = record.timestamp
            if record.headers is not None:
                kwargs["headers"] = record.headers
            self.producer.produce(
                topic,
                value=record.value,
                key=record.key,
                partition=record.partition,
                on_delivery=delivered(record),
                **kwargs,
            )
        remaining = self.producer.flush(30)
        assert remaining == 0 and not errors, (remaining, errors)
        return list(records)

    def produce_values(self, topic: str, partition: int, count: int, start: int = 0) -> list[Record]:
        """``count`` records ``v{start}..`` with keys ``k{i}`` into one partition."""
        return self.produce(
            topic,
            [
                Record(value=f"v{i}".encode(), key=f"k{i}".encode(), partition=partition)
                for i in range(start, start + count)
            ],
        )


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(scope="session")
def mock_kafka() -> Iterator[KafkaCluster]:
    """librdkafka's mock cluster; its address is read from the "Mock cluster enabled" log line."""
    lines = _Lines()
    logger = logging.getLogger("pylog-tests.mock-kafka")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    producer = Producer(
        {
            "test.mock.num.brokers": 1,
            "bootstrap.servers": "unused:9092",
            "debug": "mock",
            "logger": logger,
            "linger.ms": 5,
        }
    )

    def logged_address() -> str | None:
        producer.poll(0.1)  # delivers queued log lines
        found = (re.search(r"replaced with (\S+)", line) for line in lines.lines)
        return next((match.group(1) for match in found if match), None)

    address = wait_until(logged_address, lambda: f"the mock cluster's address logged: {lines.lines}", 10, 0)
    # Keep librdkafka's mock debug lines (debug=mock stays on) out of the test log from now on.
    logger.removeHandler(lines)
    logger.setLevel(logging.WARNING)
    cluster = KafkaCluster(
        bootstrap_servers=address,
        producer=producer,
        # The mock answers ListOffsets by timestamp with -1 ("no such record") whatever the log
        # holds (librdkafka 2.16), so timestamp lookups that should find a record cannot be
        # tested against it.
        supports_timestamp_lookup=False,
    )
    producer.list_topics(timeout=30)  # connected now, as embedded_kafka's producer (below)
    yield cluster
    producer.flush(10)


@pytest.fixture(scope="session")
def embedded_kafka(tmp_path_factory) -> Iterator[KafkaCluster]:
    """pylog's embedded broker (4 partitions per topic), not registered for discovery."""
    from kafka_spark.broker import EmbeddedBroker

    with EmbeddedBroker(
        log_dir=tmp_path_factory.mktemp("embedded-broker"), num_partitions=MOCK_PARTITIONS, register=False
    ) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        # Connected now: librdkafka starts a thread per broker it learns of, and the session's
        # producer must not start it during the first test that uses it (tests/support/leaks.py).
        producer.list_topics(timeout=30)
        yield KafkaCluster(bootstrap_servers=broker.bootstrap_servers, producer=producer, broker=broker)
        producer.flush(10)


@pytest.fixture(scope="session")
def kafka_cluster(mock_kafka: KafkaCluster) -> KafkaCluster:
    """The cluster source tests run against (parametrize here to add the embedded broker)."""
    return mock_kafka
