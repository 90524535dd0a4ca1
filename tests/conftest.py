"""Shared fixtures: one Spark session for the whole run (Spark start-up is the slow part)."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

from tests.support.leaks import no_leaks  # noqa: F401 - the autouse check that nothing outlives its test
from tests.support.spark_standalone import spark_standalone  # noqa: F401 - one cluster for the session

pytest_plugins = ["pytester"]  # tests/support/test_leaks.py runs the leak check on tests of its own

# Python workers must run this interpreter (the venv), not `python3` on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Broker discovery (no kafka.bootstrap.servers) looks in $PYLOG_HOME. Set before Spark starts so
# that its Python workers inherit it: the suite never touches the user's ~/.pylog.
os.environ["PYLOG_HOME"] = tempfile.mkdtemp(prefix="pylog-test-home-")

# foreachBatch and streaming listeners call back into this process through py4j's callback
# server, which waits on its socket with select(), and select() refuses descriptors numbered
# 1024 or above: a hang. The session starts when the first Spark test runs, often after the
# brokers of hundreds of broker tests hold over a thousand segment files open. These low
# numbers are held from the start and given back just before the callback server starts.
_LOW_DESCRIPTORS = [os.open(os.devnull, os.O_RDONLY) for _ in range(32)]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that takes the `spark` fixture, directly or through another fixture, carries
    the `spark` marker, so `pytest -m "not spark"` leaves out whatever starts the session. Tests
    that run Spark in a subprocess are marked where they are defined."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture
def running_broker(pylog_broker_process):
    """A broker run by `pylog broker start --port 0` in a process of its own, for the CLI tests
    (a :class:`kafka_spark.testing.BrokerProcess`: its ``env`` has the ``PYLOG_HOME`` that
    registers it). Stopped when the test ends."""
    broker = pylog_broker_process()
    assert broker.bootstrap_servers.startswith("127.0.0.1:"), broker.bootstrap_servers  # loopback by default
    return broker


@pytest.fixture(scope="session", autouse=True)
def _stop_on_demand_broker():
    """A broker started on demand by a test (no bootstrap servers) is stopped at the end."""
    yield
    from kafka_spark.broker import discovery

    discovery.stop_running()


def _spark_kafka_jars() -> str:
    """Spark's own Kafka connector (format("kafka"), resolved by scripts/fetch_references.sh),
    for the interop tests that run it beside format("pylog") in this session. Only on the
    classpath, it costs nothing until used; without it those tests fail and name the script."""
    from tests.interop.references import ReferencesMissing, spark_kafka_jars

    try:
        return ",".join(spark_kafka_jars())
    except ReferencesMissing:
        return ""


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", _spark_kafka_jars())
        .appName("pylog-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    from pyspark.java_gateway import ensure_callback_server_started

    while _LOW_DESCRIPTORS:  # see _LOW_DESCRIPTORS: the socket takes the lowest free number
        os.close(_LOW_DESCRIPTORS.pop())
    ensure_callback_server_started(session.sparkContext._gateway)
    number = session.sparkContext._gateway._callback_server.server_socket.fileno()
    assert number < 1024, f"py4j's callback server socket is descriptor {number}: select() cannot wait on it"
    yield session
    session.stop()
