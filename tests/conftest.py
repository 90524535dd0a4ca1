"""Shared fixtures: one Spark session for the whole run (Spark start-up is the slow part)."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

# Python workers must run this interpreter (the venv), not `python3` on PATH.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Broker discovery (no kafka.bootstrap.servers) looks in $PYLOG_HOME. Set before Spark starts so
# that its Python workers inherit it: the suite never touches the user's ~/.pylog.
os.environ["PYLOG_HOME"] = tempfile.mkdtemp(prefix="pylog-test-home-")


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
    from interop.references import ReferencesMissing, spark_kafka_jars

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
    # foreachBatch and streaming listeners call back into this process through py4j's callback
    # server, which waits on its socket with select(): started late in a run, when the session's
    # brokers hold over a thousand segment files, its socket is numbered above 1023, select()
    # refuses it and the query hangs. Started now, it gets a low number.
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(session.sparkContext._gateway)
    assert session.sparkContext._gateway._callback_server.server_socket.fileno() < 1024
    yield session
    session.stop()
