"""`pylog cluster start | status` and `pylog topics describe` against a replicated cluster."""

from __future__ import annotations

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
def running_cluster(tmp_path, pylog_broker_process):
    cluster = pylog_broker_process(
        "--brokers",
        "3",
        "--min-insync-replicas",
        "2",
        command=("cluster", "start"),
        port=None,
        home=tmp_path / "home",
        log_dir=tmp_path / "data",
    )
    assert re.fullmatch(r"(127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+", cluster.bootstrap_servers), cluster.bootstrap_servers
    return cluster


def test_cluster_start_status_and_topics_describe_show_brokers_leaders_replicas_and_isr(running_cluster, tmp_path):
    process, bootstrap, env = running_cluster.process, running_cluster.bootstrap_servers, running_cluster.env
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
    assert "cluster stopped" in running_cluster.stderr_text()
