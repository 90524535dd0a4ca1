"""Fixtures of the interop tests: Apache Kafka, Kafka's Java clients and tools, beside pylog.

Every test here is marked ``interop`` (run them alone with ``pytest -m interop`` or
``pytest tests/interop``). One Apache Kafka node serves the whole session; its start time and
memory are printed in the terminal summary.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.harness import SCRAM_PASSWORD, SCRAM_USER, Cluster, JavaClients, OAuthCluster
from tests.interop.references import (
    SPARK_CONNECTOR_VERSION,
    ApacheKafka,
    ReferencesMissing,
    ToolRunner,
    kafka_clients_jar,
)

_report: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.interop)


def pytest_terminal_summary(terminalreporter) -> None:
    for line in _report:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def apache_kafka() -> Iterator[ApacheKafka]:
    """One Apache Kafka node (KRaft) for the session, with a SCRAM user on its SASL listener."""
    kafka = ApacheKafka(scram_users={SCRAM_USER: SCRAM_PASSWORD}).start()
    _report.append(
        f"Apache Kafka fixture: started in {kafka.start_seconds:.1f} s, "
        f"RSS {kafka.rss_kib() / 1024:.0f} MiB after start"
    )
    try:
        yield kafka
    finally:
        _report.append(f"Apache Kafka fixture: RSS {kafka.rss_kib() / 1024:.0f} MiB at the end")
        kafka.stop()


@pytest.fixture(scope="session")
def tool_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolRunner]:
    """One JVM for the session's runs of Kafka's tools, started here: a session's process, not
    one the first test to run a tool would leave behind (tests/support/leaks.py)."""
    runner = ToolRunner.compiled(tmp_path_factory.mktemp("tool-runner"))
    runner.start()
    yield runner
    runner.close()


@pytest.fixture(scope="session", params=["pylog", "kafka"])
def cluster(request: pytest.FixtureRequest, tool_runner: ToolRunner) -> Cluster:
    """Each test taking it runs against pylog's broker and against Apache Kafka."""
    if request.param == "pylog":
        broker = request.getfixturevalue("pylog_broker")
        return Cluster("pylog", broker.bootstrap_servers, tool_runner)
    return Cluster("kafka", request.getfixturevalue("apache_kafka").bootstrap_servers, tool_runner)


@pytest.fixture(scope="session", params=["pylog", "kafka"])
def oauth_cluster(request: pytest.FixtureRequest, tool_runner: ToolRunner) -> OAuthCluster:
    """Each test taking it runs against pylog's OAUTHBEARER listener and Apache Kafka's, both
    validating unsecured tokens."""
    if request.param == "pylog":
        broker = request.getfixturevalue("pylog_oauth_broker")
        return OAuthCluster(
            "pylog",
            broker.bootstrap_servers,
            lambda name, partitions: broker.create_topic(name, partitions=partitions),
        )
    kafka = request.getfixturevalue("apache_kafka")
    plaintext = Cluster("kafka", kafka.bootstrap_servers, tool_runner)
    return OAuthCluster(
        "kafka",
        kafka.oauth_bootstrap_servers,
        lambda name, partitions: plaintext.tool(
            "kafka-topics", "--create", "--topic", name, "--partitions", str(partitions)
        ),
    )


@pytest.fixture(scope="session")
def java_clients(tmp_path_factory: pytest.TempPathFactory) -> JavaClients:
    classes = tmp_path_factory.mktemp("java-classes")
    source = Path(__file__).parent / "java" / "InteropClients.java"
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", str(kafka_clients_jar()), str(source)],
        check=True,
        capture_output=True,
        timeout=180,
    )
    return JavaClients(classes)


@pytest.fixture(scope="session")
def spark_kafka(spark):
    """The shared session, with Spark's Kafka connector on its classpath."""
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    if f"spark-sql-kafka-0-10_2.13-{SPARK_CONNECTOR_VERSION}.jar" not in jars:
        raise ReferencesMissing(
            "Spark's Kafka connector is not in the test session's spark.jars: run "
            "`bash scripts/fetch_references.sh` (make bootstrap does)"
        )
    return spark
