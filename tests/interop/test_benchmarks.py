"""The benchmarks against Apache Kafka and Spark's JVM connector run end to end at tiny sizes
(the figures mean nothing here; the full runs are the scripts, see README "Benchmarks")."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
RATE = r"([\d,]+) (?:msg|rows)/s"


def run(script: str, *args: str) -> str:
    result = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def positive(*rates: str) -> bool:
    return all(int(rate.replace(",", "")) > 0 for rate in rates)


def test_broker_benchmark_pairs_pylog_with_apache_kafka_under_both_flush_policies():
    out = run(
        "broker_throughput.py",
        "--messages",
        "20000",
        "--java-messages",
        "20000",
        "--rounds",
        "1",
        "--warmup",
        "1",
        "--kafka-heap",
        "512m",
        "--consume-runs",
        "2",
        "--java-consume-runs",
        "2",
        "--fetch-requests",
        "5",
    )
    for name in ("pylog-fsync", "kafka-fsync", "pylog-os", "kafka-os"):
        assert re.search(rf"^warm-up 1 {name}\s+done$", out, re.MULTILINE), (name, out)
    for name in ("pylog-os", "kafka-os"):  # a round's figures: the median kcat read and Java run
        line = re.search(rf"^round 1 {name}\s+consume kcat .*$", out, re.MULTILINE)
        assert line, (name, out)
        for kind in ("kcat", "java"):
            found = re.search(rf"consume {kind}\s+{RATE} \(runs ([\d, ]+)\)", line.group(0))
            assert found, (kind, line.group(0))
            runs = [int(rate) for rate in found.group(2).replace(",", "").split()]
            assert len(runs) == 2 and min(runs) > 0, line.group(0)
            assert abs(int(found.group(1).replace(",", "")) - sum(runs) / 2) <= 1, line.group(0)  # median of 2
        # The fetch answer: the median of its 2 runs, each a median over 5 checked answers.
        found = re.search(r"fetch answer ([\d.]+) ms \(runs ([\d.]+), ([\d.]+); ([\d,]+) bytes\)", line.group(0))
        assert found, line.group(0)
        first, second = float(found.group(2)), float(found.group(3))
        assert min(first, second) > 0 and abs(float(found.group(1)) - (first + second) / 2) <= 0.0015, line.group(0)
        assert int(found.group(4).replace(",", "")) > 20_000 * 100 // 8, line.group(0)  # an eighth of the data
    for pair, phases in (
        ("os-flush", ("produce kcat", "produce java", "consume kcat", "consume java")),
        ("fsync-each", ("produce kcat", "produce java")),
    ):
        for phase in phases:
            match = re.search(
                rf"^{pair}\s+{phase}\s+pylog\s+{RATE}\s+kafka\s+{RATE}\s+ratio pylog/kafka\s+([\d.]+)",
                out,
                re.MULTILINE,
            )
            assert match and positive(match.group(1), match.group(2)) and float(match.group(3)) > 0, (pair, phase, out)
    answer = re.search(
        r"^os-flush\s+fetch answer pylog\s+([\d.]+) ms .* kafka\s+([\d.]+) ms .* ratio kafka/pylog time\s+([\d.]+)",
        out,
        re.M,
    )
    assert answer and min(float(answer.group(i)) for i in (1, 2, 3)) > 0, out
    for name in ("pylog-fsync", "kafka-fsync", "pylog-os", "kafka-os"):
        cpu = re.search(rf"^java produce CPU {name}\s+broker\s+([\d.]+) s\s+client JVM\s+([\d.]+) s", out, re.MULTILINE)
        assert cpu and float(cpu.group(2)) > 0, (name, out)  # a JVM that ran used CPU; the broker may round to 0.0
    for name in ("pylog-os", "kafka-os"):
        cpu = re.search(rf"^java consume CPU {name}\s+broker\s+([\d.]+) s\s+client JVM\s+([\d.]+) s", out, re.MULTILINE)
        assert cpu and float(cpu.group(2)) > 0, (name, out)
    assert re.search(rf"^secondary\s+produce kcat\s+pylog\s+{RATE}\s+librdkafka mock\s+{RATE}", out, re.MULTILINE), out


@pytest.mark.spark  # Spark runs in a subprocess
def test_source_benchmark_reads_with_both_sources_and_sweeps_partition_counts():
    out = run(
        "source_throughput.py",
        "--parts",
        "kafka,sweep",
        "--messages",
        "20000",
        "--rounds",
        "1",
        "--sweep-rows",
        "10000",
        "--sweep-partitions",
        "1,8",
    )
    match = re.search(
        rf"^kafka-read pylog\s+{RATE}\s+spark-kafka\s+{RATE}\s+ratio pylog/spark\s+([\d.]+)", out, re.MULTILINE
    )
    assert match and positive(match.group(1), match.group(2)), out
    for partitions in (1, 8):
        sweep = re.search(
            rf"^sweep\s+{partitions} partitions\s+pylog\s+{RATE}\s+spark-kafka\s+{RATE}\s+"
            rf"ratio pylog/spark\s+([\d.]+)\s+pylog/best\s+([\d.]+)\s+median/best median\s+([\d.]+)$",
            out,
            re.MULTILINE,
        )
        assert sweep and positive(sweep.group(1), sweep.group(2)) and 0 < float(sweep.group(4)) <= 1, out
        assert 0 < float(sweep.group(5)) <= 1, out
        spread = re.search(
            r"^\s+rounds pylog [\d,]+-[\d,]+\s+spark-kafka [\d,]+-[\d,]+\s+pylog/spark [\d.]+-[\d.]+\s+"
            r"pylog/best [\d.]+-[\d.]+\s+CPU us/row \(Spark, workers, broker\) pylog ([\d.]+)\s+spark-kafka ([\d.]+)$",
            out[sweep.end() :],
            re.MULTILINE,
        )
        assert spread and float(spread.group(1)) > 0 and float(spread.group(2)) > 0, out
    # Each round reads every partition count (interleaved), not one count's rounds after another's.
    assert re.search(
        r"^sweep round 1: 1: pylog [\d,]+ spark [\d,]+\s+8: pylog [\d,]+ spark [\d,]+$", out, re.MULTILINE
    ), out


@pytest.mark.spark  # Spark runs in a subprocess
def test_sink_benchmark_compares_pylog_topic_sink_with_spark_kafka_sink():
    out = run(
        "sink_throughput.py", "--parts", "kafka", "--topic-rows", "10000", "--repeats", "1", "--kafka-warmup", "1"
    )
    assert re.search(rf"^\s+pylog exactly-once\s+{RATE}", out, re.MULTILINE), out
    assert re.search(rf"^\s+spark format\(kafka\)\s+{RATE}", out, re.MULTILINE), out
    assert re.search(r"^\s+Kafka broker CPU a write\s+pylog \d+\.\d\d s, spark \d+\.\d\d s", out, re.MULTILINE), out
    ratio = re.search(r"^\s+ratio pylog/spark\s+([\d.]+)", out, re.MULTILINE)
    assert ratio and float(ratio.group(1)) > 0, out


def test_broker_benchmark_alternates_the_brokers_in_its_consume_phase(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    from broker_throughput import alternating

    assert alternating(("a", "b"), 3) == ["a", "b", "b", "a", "a", "b"]
    assert alternating(("b", "a"), 2) == ["b", "a", "a", "b"]
    assert alternating(("a", "b"), 1) == ["a", "b"]
