"""The cluster benchmark runs end to end at a small size: the full run is `python bench/cluster_failover.py`."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from tests.support.paths import BENCH

SCRIPT = BENCH / "cluster_failover.py"


def test_cluster_benchmark_prints_the_throughput_ratio_and_failover_percentiles(tmp_path):
    data = tmp_path / "cluster.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--messages", "2000", "--rounds", "1", "--kills", "2", "--json", str(data)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    ratio = re.search(r"^acks=all produce .* ratio cluster/single ([\d.]+)$", result.stdout, re.MULTILINE)
    assert ratio and float(ratio.group(1)) > 0, result.stdout
    failover = re.search(r"^failover .* kills 2  p50 ([\d,]+) ms  p95 ([\d,]+) ms", result.stdout, re.MULTILINE)
    assert failover, result.stdout
    print(ratio.group(0), failover.group(0), sep="\n")  # the figures at this size, for the record; not asserted
    comparisons = {c["id"]: c for c in json.loads(data.read_text())["comparisons"]}
    assert [len(r) for r in comparisons["cluster-produce"]["ratios"]] == [1]
    (kills,) = comparisons["cluster-failover"]["series"]["3-broker cluster"]
    assert len(kills) == 2 and all(ms > 0 for ms in kills)
