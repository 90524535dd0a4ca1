"""The source benchmark runs end to end at tiny sizes: the full run is `python bench/source_throughput.py`."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.support.paths import BENCH

pytestmark = pytest.mark.spark  # Spark runs in a subprocess

SCRIPT = BENCH / "source_throughput.py"


def test_source_benchmark_prints_both_rates_the_ratio_and_latency_percentiles_and_its_json_plots(tmp_path):
    data = tmp_path / "source.json"
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--parts",
            "synthetic,latency",
            "--latency-broker",
            "pylog",
            "--latency-rounds",
            "1",
            "--latency-warmup",
            "0",
            "--json",
            str(data),
            "--messages",
            "40000",
            "--rounds",
            "1",
            "--latency-messages",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    read = re.search(
        r"^read\s+pylog\s+([\d,]+) rows/s\s+synthetic\s+([\d,]+) rows/s\s+ratio pylog/synthetic\s+([\d.]+)$",
        result.stdout,
        re.MULTILINE,
    )
    assert read, result.stdout
    assert float(read.group(3)) > 0
    latency = re.search(r"p50 (\d+) ms, p95 (\d+) ms", result.stdout)
    assert latency and int(latency.group(1)) <= int(latency.group(2))
    # pylog beside Spark's own source, interleaved on one broker: every run's percentiles in the JSON
    document = json.loads(data.read_text())
    comparisons = {c["id"]: c for c in document["comparisons"]}
    assert set(comparisons) == {"source-vs-synthetic", "source-latency", "source-latency-batch"}, comparisons
    latency_runs = comparisons["source-latency"]
    assert latency_runs["groups"] == ["p50", "p95", "p99"]
    assert set(latency_runs["series"]) == {"pylog", "Spark's Kafka source"}
    for per_group in latency_runs["series"].values():
        assert [len(runs) for runs in per_group] == [1, 1, 1]
        assert 0 < per_group[0][0] <= per_group[1][0] <= per_group[2][0]
    assert [len(r) for r in latency_runs["ratios"]] == [1, 1, 1]
    assert re.search(r"^source-latency p50: pylog [\d.,]+ ms .* pylog / Spark [\d.]+ \(", result.stdout, re.MULTILINE)
    # ... and bench/plot.py draws each comparison from it as SVG
    plots = tmp_path / "plots"
    subprocess.run([sys.executable, str(BENCH / "plot.py"), str(data), "--out", str(plots)], check=True, timeout=120)
    assert sorted(p.name for p in plots.iterdir()) == [
        "source-latency-batch.svg",
        "source-latency.svg",
        "source-vs-synthetic.svg",
    ]
    for per_group in comparisons["source-latency-batch"]["series"].values():
        assert len(per_group[0]) == 1 and per_group[0][0] > 0  # Spark's progress was read
    svg = (plots / "source-latency.svg").read_text()
    assert svg.startswith("<?xml") and "<svg" in svg and "Spark" in svg
