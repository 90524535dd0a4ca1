"""Every example runs as a user would run it, and says what it did."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(script: str, *args: str, env: dict | None = None, timeout: int = 600) -> str:
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                            timeout=timeout, env=env or dict(os.environ))
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_every_example_has_a_header_saying_what_it_shows():
    scripts = sorted(EXAMPLES.glob("*.py"))
    assert len(scripts) >= 4
    for script in scripts:
        text = script.read_text()
        assert text.startswith('"""') and "Shows:" in text.split('"""')[1], script.name


def test_quickstart_etl(tmp_path):
    out = run("quickstart_etl.py", str(tmp_path))
    windows = int(re.search(r"(\d+) closed \(minute, product\) windows", out).group(1))
    assert windows > 0


def test_topic_enrichment(tmp_path):
    out = run("topic_enrichment.py", str(tmp_path / "checkpoint"))
    total, distinct = map(int, re.search(r"(\d+) enriched orders, (\d+) distinct", out).groups())
    assert total == distinct == 2000


def test_backfill_by_timestamp(tmp_path):
    out = run("backfill_by_timestamp.py", str(tmp_path))
    count = int(re.search(r"(\d+) records between", out).group(1))
    assert count == 2000  # events 1000..2999: timestamps are strictly increasing


def test_external_cluster_against_another_kafka_and_a_multi_executor_spark(tmp_path):
    """librdkafka's mock cluster stands in for the external Kafka; local-cluster[2,1,1024] runs two
    executor JVMs, as a real Spark cluster would."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from _harness import mock_cluster
    from confluent_kafka import Producer

    with mock_cluster() as bootstrap:
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(500):
            producer.produce("external-orders", value=b"order-%d" % i)
        assert producer.flush(30) == 0
        env = dict(os.environ, KAFKA_BOOTSTRAP_SERVERS=bootstrap, SPARK_MASTER="local-cluster[2,1,1024]",
                   TOPIC="external-orders", OUTPUT=str(tmp_path / "orders"))
        out = run("external_cluster.py", env=env)
    assert f"500 records in {tmp_path / 'orders'}" in out
