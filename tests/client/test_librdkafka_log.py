"""librdkafka's log goes through Python logging, a handful of lines per kind, never thousands."""

from __future__ import annotations

import logging
import socket

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kafka_spark.client import librdkafka_log
from kafka_spark.client.librdkafka_log import RateLimit, routed
from kafka_spark.client.reachability import bootstrap_addresses, unreachable_reason


@pytest.fixture
def fresh_limit(monkeypatch):
    monkeypatch.setattr(librdkafka_log.LOGGER, "filters", [RateLimit(burst=3, window_s=60)])


def test_a_client_against_a_down_broker_logs_a_few_lines_through_python_logging(fresh_limit, caplog, capfd):
    admin = AdminClient(routed({"bootstrap.servers": "127.0.0.1:1"}))
    with caplog.at_level(logging.INFO, logger="kafka_spark.librdkafka"):
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=2)  # librdkafka reconnects dozens of times meanwhile
        admin.poll(0)  # hands the queued log lines to Python
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka_spark.librdkafka"]
    assert lines and all("127.0.0.1:1" in line for line in lines if line.startswith("FAIL"))
    assert sum(line.startswith("FAIL") for line in lines) == 3
    assert "Connection refused" not in capfd.readouterr().err  # nothing printed by librdkafka itself


def test_the_first_line_after_the_window_counts_the_suppressed_ones():
    record = logging.LogRecord(
        "kafka_spark.librdkafka",
        logging.ERROR,
        __file__,
        1,
        "%s [%s] %s",
        ("FAIL", "rdkafka#producer-1", "refused"),
        None,
    )
    limit = RateLimit(burst=1, window_s=3600)
    assert [limit.filter(logging.makeLogRecord(record.__dict__)) for _ in range(4)] == [True, False, False, False]
    other_kind = logging.makeLogRecord({**record.__dict__, "args": ("ERROR", "rdkafka#producer-1", "down")})
    assert limit.filter(other_kind)
    limit._kinds[(logging.ERROR, "FAIL")][0] -= 3600  # the window has passed
    later = logging.makeLogRecord(record.__dict__)
    assert limit.filter(later)
    assert later.getMessage() == "FAIL [rdkafka#producer-1] refused (3 similar librdkafka messages suppressed)"


def test_bootstrap_lists_are_read_as_librdkafka_reads_them():
    assert bootstrap_addresses("kafka-1:9093, PLAINTEXT://kafka-2:9094,[::1]:9095,kafka-3") == [
        ("kafka-1", 9093),
        ("kafka-2", 9094),
        ("::1", 9095),
        ("kafka-3", 9092),
    ]


def test_unreachable_reasons_name_each_address():
    assert unreachable_reason("127.0.0.1:1") == "127.0.0.1:1: connection refused"
    assert unreachable_reason("127.0.0.1:notaport") == "127.0.0.1: the port is not a number from 1 to 65535"
    assert unreachable_reason("no-such-host.invalid:9092") == "no-such-host.invalid: unknown host"


def test_a_silent_address_is_told_from_one_that_answers(pylog_broker):

    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        assert unreachable_reason(address, 0.5) is None  # the connection alone is accepted
        assert unreachable_reason(address, 0.5, require_answer=True) == (
            f"{address}: accepts connections but sent no answer to a Kafka request within 0.5s"
        )
    assert unreachable_reason(pylog_broker.bootstrap_servers, 5.0, require_answer=True) is None
