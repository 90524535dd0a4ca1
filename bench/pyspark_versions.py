"""The source's throughput on two PySpark releases in one run: bench/source_throughput.py's
synthetic part (``spark.read.format("pylog")`` over the embedded broker, beside Spark's Python
data source ceiling) in two virtualenvs, rounds interleaved (the order alternating), so load drift
falls on both alike.

Each virtualenv holds pylog installed (scripts/test_matrix.py makes them in
~/.cache/pylog/matrix/venvs);
the benchmark runs from a copy of bench/ outside the checkout, so pylog comes from each
virtualenv's install, not from this tree. Prints each round, then per release the median rows/s of
pylog and of the synthetic source with their ranges, and the ratio of the medians (A/B) with the
range of the per-round ratios.

    python bench/pyspark_versions.py ~/.cache/pylog/matrix/venvs/pyspark-4.0.5-py311 \\
        ~/.cache/pylog/matrix/venvs/pyspark-4.3.0-py311
        [--rounds 3] [--messages 500000]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
RATES = re.compile(r"read\s+pylog\s+([\d,]+) rows/s\s+synthetic\s+([\d,]+) rows/s")


def one_round(venv: Path, bench: Path, messages: int) -> tuple[str, float, float]:
    python = venv / "bin" / "python"
    release = subprocess.run(
        [str(python), "-c", "import pyspark; print(pyspark.__version__)"], capture_output=True, text=True, check=True
    ).stdout.strip()
    command = [str(python), str(bench / "source_throughput.py"), "--parts", "synthetic", "--rounds", "1"]
    command += ["--messages", str(messages), "--latency-messages", "200"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON")}
    result = subprocess.run(command, cwd=bench, capture_output=True, text=True, env=env)
    found = RATES.search(result.stdout)
    if result.returncode != 0 or found is None:
        raise SystemExit(f"pyspark_versions: {venv} failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    return release, float(found.group(1).replace(",", "")), float(found.group(2).replace(",", ""))


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):12,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv_a", type=Path)
    parser.add_argument("venv_b", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=500_000)
    args = parser.parse_args()
    venvs = (args.venv_a.resolve(), args.venv_b.resolve())
    pylog: dict[Path, list[float]] = {v: [] for v in venvs}
    synthetic: dict[Path, list[float]] = {v: [] for v in venvs}
    names: dict[Path, str] = {}
    with tempfile.TemporaryDirectory(prefix="pylog-bench-") as temporary:
        bench = Path(temporary) / "bench"  # its parent holds no kafka_spark: each venv's install runs
        shutil.copytree(HERE, bench, ignore=shutil.ignore_patterns("__pycache__"))
        for n in range(args.rounds):
            for venv in venvs if n % 2 == 0 else venvs[::-1]:
                release, rate, ceiling = one_round(venv, bench, args.messages)
                names[venv] = release
                pylog[venv].append(rate)
                synthetic[venv].append(ceiling)
                print(f"round {n + 1}: PySpark {release}: pylog {rate:12,.0f} rows/s  synthetic {ceiling:12,.0f}")
    a, b = venvs
    print(f"spark.read of {args.messages:,} rows, local[2], {args.rounds} interleaved rounds: median (range)")
    for venv in venvs:
        print(f"PySpark {names[venv]}: pylog {spread(pylog[venv])} rows/s  synthetic {spread(synthetic[venv])}")
    ratios = [x / y for x, y in zip(pylog[a], pylog[b], strict=True)]
    median_ratio = statistics.median(pylog[a]) / statistics.median(pylog[b])
    print(
        f"pylog {names[a]}/{names[b]}: {median_ratio:.2f} (rounds {min(ratios):.2f}-{max(ratios):.2f}); "
        f"synthetic {statistics.median(synthetic[a]) / statistics.median(synthetic[b]):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
