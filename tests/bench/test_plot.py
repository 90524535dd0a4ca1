"""bench/plot.py draws what a bench script's --json wrote, and names a file it cannot draw from.
(tests/bench/test_source_throughput.py runs the whole path on a tiny Spark run.)"""

from __future__ import annotations

import json
import re
import sys

import pytest

from tests.support.paths import BENCH

sys.path.insert(0, str(BENCH))

import plot  # noqa: E402
from _results import Comparison, Results  # noqa: E402


def test_each_comparison_becomes_an_svg_that_names_its_contenders_and_the_same_data_the_same_file(tmp_path):
    results = Results("example", {"rounds": 3})
    results.add(
        Comparison(
            id="example-latency",
            title="produce -> visible",
            unit="ms",
            better="lower",
            groups=["p50", "p95"],
            series={
                "pylog": [[50.0, 60.0, 55.0], [90.0, 95.0, 99.0]],
                "reference": [[300.0, 310.0, 320.0], [500.0, 510.0, 520.0]],
            },
            ratio_label="pylog / reference",
        )
    )
    data = tmp_path / "example.json"
    results.write(str(data))
    assert json.loads(data.read_text())["comparisons"][0]["ratios"][0] == [50 / 300, 60 / 310, 55 / 320]
    plot.main([str(data), "--out", str(tmp_path / "a")])
    plot.main([str(data), "--out", str(tmp_path / "b")])
    svg = (tmp_path / "a" / "example-latency.svg").read_text()
    assert "pylog" in svg and "reference" in svg and "(0.17-0.19)" in svg  # p50: the ratio's range, as text
    assert svg == (tmp_path / "b" / "example-latency.svg").read_text()


def test_a_file_that_is_not_benchmark_results_is_named(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"comparisons": []}))
    with pytest.raises(ValueError, match=r"other\.json: not a benchmark results file .*--json"):
        plot.main([str(other)])


def test_a_series_that_does_not_match_the_groups_is_refused():
    with pytest.raises(ValueError, match=r"series 'pylog' has 1 groups of values, the comparison names 2"):
        Comparison(id="x", title="x", unit="ms", better="lower", groups=["p50", "p95"], series={"pylog": [[1.0]]})


def test_a_sweep_draws_a_line_a_contender_over_the_partition_counts_on_a_log_axis(tmp_path):
    """The partition sweep's kind (bench/source_throughput.py --parts sweep): groups on a scale."""
    results = Results("sweep", {"rounds": 2})
    results.add(
        Comparison(
            id="example-partitions",
            title="rows/s by partition count",
            unit="rows/s",
            better="higher",
            groups=["1", "64", "1,000"],
            series={
                "pylog": [[2.0e6, 2.2e6], [2.1e6, 2.0e6], [1.9e6, 2.0e6]],
                "Spark": [[5.0e5, 6.0e5], [5.0e4, 6.0e4], [4.0e3, 5.0e3]],
            },
            ratio_label="pylog / Spark",
            log_y=True,
            plot="lines",
            x_label="partitions",
        )
    )
    data = tmp_path / "sweep.json"
    results.write(str(data))
    plot.main([str(data), "--out", str(tmp_path)])
    svg = (tmp_path / "example-partitions.svg").read_text()
    assert "partitions" in svg and "above the points" in svg and "(400.00-475.00)" in svg  # 1,000: 2.0M/5k .. 1.9M/4k
    for colour in plot.COLOURS[:2]:  # a line through each contender's 3 medians, its 6 rounds as dots
        line = re.search(rf'<path d="M [^"]*"[^>]*style="fill: none; stroke: {colour}; stroke-width: 1.5', svg)
        assert line and line.group(0).count("\nL ") == 2, colour
        assert svg.count(f'style="fill: {colour}; fill-opacity: 0.7') == 6, colour


def test_the_broker_benchmark_writes_each_flush_policy_and_the_fetch_answer_as_pylog_against_kafka(tmp_path):
    """bench/broker_throughput.py's figures per round become comparisons plot.py draws (the full
    script runs in tests/interop/test_benchmarks.py)."""
    import argparse

    from broker_throughput import BROKERS, comparisons

    phases = ("produce kcat", "produce java", "consume kcat", "consume java")
    results = {name: {phase: [1.0e6 + i, 1.1e6 + i] for i, phase in enumerate(phases)} for name in BROKERS}
    for name in BROKERS:
        if "fsync" in name:  # consume reads the os-flush topics only
            del results[name]["consume kcat"], results[name]["consume java"]
    results["kafka-os"]["produce java"] = [5.0e5, 1.0e6]
    results["pylog-os"]["fetch answer"], results["kafka-os"]["fetch answer"] = [0.0007, 0.0008], [0.0014, 0.0012]
    args = argparse.Namespace(messages=1000, java_messages=2000)
    written = Results("broker_throughput", {})
    for comparison in comparisons(results, args):
        written.add(comparison)
    data = tmp_path / "broker.json"
    written.write(str(data))
    document = json.loads(data.read_text())
    found = {c["id"]: c for c in document["comparisons"]}
    assert list(found) == ["broker-os-flush", "broker-fsync-each", "broker-fetch-answer"]
    assert [len(found["broker-os-flush"]["groups"]), len(found["broker-fsync-each"]["groups"])] == [4, 2]
    assert found["broker-os-flush"]["ratios"][1] == [(1.0e6 + 1) / 5.0e5, (1.1e6 + 1) / 1.0e6]  # pylog / Kafka
    assert found["broker-fetch-answer"]["unit"] == "ms"
    assert found["broker-fetch-answer"]["series"]["pylog"] == [[0.7, 0.8]]
    plot.main([str(data), "--out", str(tmp_path)])
    svg = (tmp_path / "broker-os-flush.svg").read_text()
    assert "Apache Kafka" in svg and "Java perf test" in svg and "(1.10-2.00)" in svg
