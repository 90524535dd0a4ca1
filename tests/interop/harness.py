"""What the interop tests share besides fixtures (tests/interop/conftest.py has those)."""

from __future__ import annotations

import itertools
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from pyspark.sql import DataFrame

from tests.interop.references import ToolRunner, java_command, kafka_tool
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-secret"

# The group coordinator is still being elected or loaded (Kafka's first groups after it starts).
COORDINATOR_BUSY = {14, 15, 16}

_names = itertools.count()


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
        return kafka_tool(tool, *first, *args, **{"runner": self.runner, **options})


@dataclass
class OAuthCluster:
    """A broker's SASL_PLAINTEXT listener taking OAUTHBEARER tokens checked as Kafka's unsecured
    validator checks them (``sub`` and ``exp``, no signature): pylog's (the ``pylog_oauth_broker``
    fixture) or Apache Kafka's (its OAUTH listener). Topics are made beside the login, as an
    administrator would: ``create_topic``."""

    name: str
    bootstrap_servers: str
    create_topic: Callable[[str, int], None]


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
            raise AssertionError(
                f"InteropClients {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result.stdout.splitlines()

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            self.command(*args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )


def records(lines: list[str]) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of the RECORD lines of InteropClients read."""
    found = []
    for line in lines:
        kind, *fields = line.split(" ")
        if kind == "RECORD":
            found.append((int(fields[0]), int(fields[1]), fields[2]))
    return found


def table(output: str) -> list[dict[str, str]]:
    """The rows of a Kafka tool's table output (a header line of upper-case column names),
    as dicts by column name."""
    lines = [line for line in output.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        if re.match(r"^GROUP\s+[A-Z]", line) or re.match(r"^TOPIC\s+PARTITION", line):
            header = line.split()
            return [dict(zip(header, row.split(), strict=False)) for row in lines[index + 1 :]]
    return []


# Recent: record timestamps older than retention.ms (7 days) have their segments deleted by
# Apache Kafka's next retention check, whatever the time they were written.
BASE_TS = (int(time.time()) // 3600 - 1) * 3_600_000


def fill(cluster: Cluster, topic: str, partitions: int, per_partition: int) -> None:
    """Records with keys, headers and increasing timestamps, a null key and a null value among them."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for i in range(per_partition):
        for partition in range(partitions):
            key = None if i == 3 else f"k{partition}-{i}".encode()
            value = None if i == 5 else f"v{partition}-{i}".encode()
            producer.produce(
                topic,
                key=key,
                value=value,
                partition=partition,
                timestamp=BASE_TS + i * 1000,
                headers=[("h", f"{i}".encode()), ("empty", None)] if i % 2 else None,
            )
    assert producer.flush(30) == 0


def rows(frame: DataFrame) -> list[tuple]:
    """The rows in a comparable form, sorted (headers as tuples, None for no headers)."""
    out = []
    for row in frame.collect():
        values = row.asDict()
        if values.get("headers") is not None:
            values["headers"] = tuple((h["key"], h["value"]) for h in values["headers"])
        out.append(tuple(values[name] for name in sorted(values)))
    return sorted(out, key=repr)


def read(reader, fmt: str, bootstrap: str, **options: str) -> DataFrame:
    """``reader`` (``spark.read`` or ``spark.readStream``) of ``fmt`` with ``options``."""
    reader = reader.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def wait_for_group_coordinator(bootstrap_servers: str, group: str) -> None:
    """Until ``group``'s coordinator is found and has loaded its partition of __consumer_offsets
    (Kafka creates the topic when a client first looks for a coordinator, then loads it): a
    group's first join then meets a coordinator at work, as it does once a broker has settled."""
    with WireClient(bootstrap_servers) as client:
        wait_until(
            lambda: client.call(10, 4, {"key_type": 0, "coordinator_keys": [group]}).coordinators[0].error_code == 0,
            f"a coordinator for {group}",
            interval=0.2,
        )
        wait_until(  # DescribeGroups answers 14 while the coordinator loads the group's partition
            lambda: (
                client.call(15, 5, {"groups": [group], "include_authorized_operations": False}).groups[0].error_code
                not in COORDINATOR_BUSY
            ),
            f"the coordinator of {group} to have loaded it",
            interval=0.2,
        )
