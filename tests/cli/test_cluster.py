"""`pylog cluster start | status` and `pylog topics describe` against a replicated cluster."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest


def pylog(*args: str, env: dict) -> str:
    return subprocess.run(
        [sys.executable, "-m", "kafka_spark.cli", *args],
        capture_output=True,
        env=env,
        timeout=120,
        check=True,
        text=True,
    ).stdout


@pytest.fixture
def running_cluster(tmp_path):
    env = dict(os.environ, PYLOG_HOME=str(tmp_path / "home"))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kafka_spark.cli",
            "cluster",
            "start",
            "--brokers",
            "3",
            "--log-dir",
            str(tmp_path / "data"),
            "--min-insync-replicas",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    line = process.stdout.readline().strip()
    assert re.fullmatch(r"bootstrap\.servers=(127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+", line), (
        line,
        process.stderr.read() if process.poll() is not None else "",
    )
    yield process, line.split("=", 1)[1], env
    if process.poll() is None:
        process.kill()
        process.wait()


def test_cluster_start_status_and_topics_describe_show_brokers_leaders_replicas_and_isr(running_cluster, tmp_path):
    process, bootstrap, env = running_cluster
    status = pylog("cluster", "status", env=env)  # found through the local registry, no --bootstrap-server
    assert "Brokers: 3" in status and re.search(r"Controller: [012]\b", status)
    assert sorted(re.findall(r"Broker: (\d)", status)) == ["0", "1", "2"]

    assert "Created topic orders" in pylog(
        "topics",
        "create",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--bootstrap-server",
        bootstrap,
        env=env,
    )
    described = pylog("topics", "describe", "orders", "--bootstrap-server", bootstrap, env=env)
    rows = re.findall(r"Partition: (\d)\tLeader: (\d)\tReplicas: ([\d,]+)\tIsr: ([\d,]+)", described)
    assert len(rows) == 3, described
    assert {leader for _, leader, _, _ in rows} == {"0", "1", "2"}, "leaders spread over the brokers"
    for _, leader, replicas, isr in rows:
        assert sorted(replicas.split(",")) == ["0", "1", "2"] and sorted(isr.split(",")) == ["0", "1", "2"]
        assert replicas.split(",")[0] == leader, "the preferred (first) replica leads"
    assert (tmp_path / "data" / "broker-2" / "orders-0").is_dir()

    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0
    assert "cluster stopped" in process.stderr.read()
