"""No kafka.bootstrap.servers: the local embedded broker is found, or started on demand."""

from __future__ import annotations

import os
import subprocess
import sys

import chispa
from confluent_kafka import Producer

from kafka_spark.bootstrap import resolve_bootstrap_servers
from kafka_spark.broker import EmbeddedBroker, discovery


def test_a_registered_embedded_broker_is_found_without_options():
    with EmbeddedBroker() as broker:
        assert resolve_bootstrap_servers(None) == broker.bootstrap_servers
        assert discovery.find_running().bootstrap_servers == broker.bootstrap_servers
    assert discovery.find_running() is None  # unregistered on close


def test_explicit_bootstrap_servers_win():
    assert resolve_bootstrap_servers("kafka-1:9092,kafka-2:9092") == "kafka-1:9092,kafka-2:9092"


def test_spark_reads_from_the_registered_broker_with_no_bootstrap_option(spark):
    with EmbeddedBroker() as broker:
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
        status = subprocess.run([sys.executable, "-m", "kafka_spark.cli", "broker", "status"],
                                capture_output=True, text=True, env=os.environ, timeout=60)
        assert status.returncode == 0 and first in status.stdout
    finally:
        stop = subprocess.run([sys.executable, "-m", "kafka_spark.cli", "broker", "stop"],
                              capture_output=True, text=True, env=os.environ, timeout=60)
    assert "stopped" in stop.stdout
    assert discovery.find_running() is None
