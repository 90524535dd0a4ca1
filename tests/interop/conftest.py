"""Fixtures of the interop tests: Apache Kafka, Kafka's Java clients and tools, beside pylog.

Every test here is marked ``interop`` (run them alone with ``pytest -m interop`` or
``pytest tests/interop``). One Apache Kafka node serves the whole session; its start time and
memory are printed in the terminal summary.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from interop.references import ApacheKafka, ToolRunner, java_command, kafka_clients_jar, kafka_tool

SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-secret"

_names = itertools.count()
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
    _report.append(f"Apache Kafka fixture: started in {kafka.start_seconds:.1f} s, "
                   f"RSS {kafka.rss_kib() / 1024:.0f} MiB after start")
    try:
        yield kafka
    finally:
        _report.append(f"Apache Kafka fixture: RSS {kafka.rss_kib() / 1024:.0f} MiB at the end")
        kafka.stop()


@pytest.fixture(scope="session")
def tool_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolRunner]:
    """One JVM for the session's runs of Kafka's tools."""
    runner = ToolRunner.compiled(tmp_path_factory.mktemp("tool-runner"))
    yield runner
    runner.close()


@dataclass
class Cluster:
    """A broker the same test runs against: pylog's or Apache Kafka (the reference)."""

    name: str
    bootstrap_servers: str
    runner: ToolRunner

    def topic(self, partitions: int = 1, prefix: str = "interop") -> str:
        """A new topic, created with Kafka's own kafka-topics tool."""
        name = f"{prefix}-{next(_names)}-{int(time.time() * 1000) % 100000}"
        self.tool("kafka-topics", "--create", "--topic", name, "--partitions", str(partitions))
        return name

    def tool(self, tool: str, *args: str, bootstrap: bool = True, **options) -> subprocess.CompletedProcess:
        """Kafka's ``tool`` with ``--bootstrap-server`` of this broker first (``bootstrap``), in
        the session's tool runner JVM."""
        first = ("--bootstrap-server", self.bootstrap_servers) if bootstrap else ()
        return kafka_tool(tool, *first, *args, runner=self.runner, **options)


@pytest.fixture(scope="session", params=["pylog", "kafka"])
def cluster(request: pytest.FixtureRequest, tool_runner: ToolRunner) -> Cluster:
    """Each test taking it runs against pylog's broker and against Apache Kafka."""
    if request.param == "pylog":
        broker = request.getfixturevalue("pylog_broker")
        return Cluster("pylog", broker.bootstrap_servers, tool_runner)
    return Cluster("kafka", request.getfixturevalue("apache_kafka").bootstrap_servers, tool_runner)


@dataclass
class JavaClients:
    """tests/interop/java/InteropClients.java, compiled against Kafka's kafka-clients."""

    classes: Path

    def command(self, *args: str) -> list[str]:
        return java_command("InteropClients", *args, extra_classpath=[str(self.classes)])

    def run(self, *args: str, timeout: float = 180) -> list[str]:
        """Run to completion; its stdout lines (raises with stderr when it fails)."""
        result = subprocess.run(self.command(*args), capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise AssertionError(f"InteropClients {' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result.stdout.splitlines()

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.command(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, bufsize=1)


@pytest.fixture(scope="session")
def java_clients(tmp_path_factory: pytest.TempPathFactory) -> JavaClients:
    classes = tmp_path_factory.mktemp("java-classes")
    source = Path(__file__).parent / "java" / "InteropClients.java"
    subprocess.run(["javac", "-d", str(classes), "-cp", str(kafka_clients_jar()), str(source)],
                   check=True, capture_output=True, timeout=180)
    return JavaClients(classes)


def table(output: str) -> list[dict[str, str]]:
    """The rows of a Kafka tool's table output (a header line of upper-case column names),
    as dicts by column name."""
    lines = [line for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if re.match(r"^GROUP\s+[A-Z]", line) or re.match(r"^TOPIC\s+PARTITION", line):
            header = line.split()
            return [dict(zip(header, row.split())) for row in lines[index + 1:]]
    return []
