"""bench/plot.py draws what a bench script's --json wrote, and names a file it cannot draw from.
(tests/bench/test_source_throughput.py runs the whole path on a tiny Spark run.)"""

from __future__ import annotations

import json
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
