"""pylog under Spark Connect, as a thin-client user meets it (scripts/check_connect.py).

PySpark's own Spark Connect server runs from the test virtualenv's PySpark (pylog installed
there), and a fresh client virtualenv holds the built wheel with its ``connect`` extra and
``pyspark-client``, not ``pyspark``. Selected with ``-m connect``; part of ``make test``. The client
virtualenv is built once per run from pip's cache; ``python scripts/check_connect.py --full`` adds
replays, a batch write, register() and LagListener.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.connect
@pytest.mark.spark  # a Connect server (Spark) in a subprocess
def test_a_thin_client_reads_and_writes_through_a_connect_server(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_connect.py"), "--work-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    out = result.stdout
    assert result.returncode == 0, out[-4000:] + result.stderr[-4000:]
    # The client: pyspark-client of the server's release or an earlier one of its major, no pyspark.
    client = re.search(r"^client: pyspark-client (\d+)\.(\d+)\.(\d+), no pyspark distribution; pylog", out, re.M)
    assert client, out[-3000:]
    server = tuple(int(n) for n in pyspark.__version__.split(".")[:3])
    assert client.group(1) == str(server[0]) and tuple(map(int, client.groups())) <= server
    assert f"server: Spark {pyspark.__version__} at sc://127.0.0.1:" in out
    assert "spark.read.format('pylog') without register(): 120 rows, per partition {0: 60, 1: 60}" in out
    assert "writeStream.format('pylog-files'), AvailableNow: 120 rows in micro-batches of" in out
    lag = re.search(r"^lag_metrics\(recentProgress\[0\]\): \{'minOffsetsBehindLatest': '(\d+)'", out, re.M)
    assert lag and int(lag.group(1)) > 0
    assert "lag_metrics(lastProgress): {'minOffsetsBehindLatest': '0', 'maxOffsetsBehindLatest': '0'" in out
    assert "writeStream.format('pylog') topic sink: 120 records in 'copied', each once" in out
    assert "foreachBatch(kafka_spark.topic_writer(checkpoint_location=...)): 120 records in 'counted', each once" in out
    assert "ok: pylog's formats and helpers through Spark Connect" in out
