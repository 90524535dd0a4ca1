"""No kafka.bootstrap.servers: the local embedded broker is found, or started on demand."""

from __future__ import annotations

import os
import subprocess
import sys

import chispa
import pytest
from confluent_kafka import Producer

from kafka_spark.broker import EmbeddedBroker, discovery
from kafka_spark.client.bootstrap import resolve_bootstrap_servers


def test_a_registered_embedded_broker_is_found_without_options():
    with EmbeddedBroker(register=True) as broker:
        assert resolve_bootstrap_servers(None) == broker.bootstrap_servers
        assert discovery.find_running().bootstrap_servers == broker.bootstrap_servers
    assert discovery.find_running() is None  # unregistered on close


def test_explicit_bootstrap_servers_win():
    assert resolve_bootstrap_servers("kafka-1:9092,kafka-2:9092") == "kafka-1:9092,kafka-2:9092"


def test_spark_reads_from_the_registered_broker_with_no_bootstrap_option(spark):
    with EmbeddedBroker(register=True) as broker:
        broker.create_topic("discovered", partitions=2)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(10):
            producer.produce("discovered", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
        assert producer.flush(10) == 0
        df = spark.read.format("pylog").option("subscribe", "discovered").load()
        actual = df.selectExpr("cast(value as string) as value").orderBy("value")
        expected = spark.createDataFrame([(f"v{i}",) for i in range(10)], "value string").orderBy("value")
        chispa.assert_df_equality(actual, expected)


def test_without_any_broker_one_is_started_on_demand_and_managed_by_the_cli():
    assert discovery.find_running() is None
    first = resolve_bootstrap_servers(None)
    try:
        info = discovery.find_running()
        assert info is not None and info.bootstrap_servers == first
        assert info.log_dir == str(discovery.default_data_dir())
        assert resolve_bootstrap_servers(None) == first  # found again, not started twice
        status = subprocess.run(
            [sys.executable, "-m", "kafka_spark.cli", "broker", "status"],
            capture_output=True,
            text=True,
            env=os.environ,
            timeout=60,
        )
        assert status.returncode == 0 and first in status.stdout
    finally:
        stop = subprocess.run(
            [sys.executable, "-m", "kafka_spark.cli", "broker", "stop"],
            capture_output=True,
            text=True,
            env=os.environ,
            timeout=60,
        )
    assert "stopped" in stop.stdout
    assert discovery.find_running() is None


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kafka_spark.cli", *args], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.fixture
def started_broker(tmp_path, monkeypatch, pylog_broker_process):
    """A `pylog broker start` process with its own PYLOG_HOME, which this process uses too."""
    home = tmp_path / "home"
    monkeypatch.setenv("PYLOG_HOME", str(home))
    broker = pylog_broker_process(home=home)
    return broker.bootstrap_servers, broker.env


def test_an_in_process_embedded_broker_leaves_the_started_broker_registered(started_broker):
    bootstrap, env = started_broker
    with EmbeddedBroker() as temporary:
        assert discovery.find_running().bootstrap_servers == bootstrap
        assert temporary.bootstrap_servers != bootstrap
    status = cli("broker", "status", env=env)
    assert status.returncode == 0 and bootstrap in status.stdout
    assert cli("topics", "create", "kept", env=env).returncode == 0
    listed = cli("topics", "list", env=env)
    assert listed.returncode == 0 and "kept" in listed.stdout.split()
    assert resolve_bootstrap_servers(None) == bootstrap  # a query without the option finds it too


def test_a_second_broker_start_names_the_running_one(started_broker, tmp_path):
    bootstrap, env = started_broker
    second = cli("broker", "start", "--port", "0", "--log-dir", str(tmp_path / "other"), env=env)
    assert second.returncode == 1
    assert bootstrap in second.stderr and "pylog broker stop" in second.stderr
    assert "Traceback" not in second.stderr
    assert discovery.find_running().bootstrap_servers == bootstrap


def test_a_registered_broker_refuses_to_replace_a_live_one(started_broker):
    bootstrap, _ = started_broker
    with pytest.raises(discovery.BrokerAlreadyRunning, match=bootstrap):
        EmbeddedBroker(register=True).start()
    assert discovery.find_running().bootstrap_servers == bootstrap
