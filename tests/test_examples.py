"""Every example runs exactly as the documentation tells a user to run it, and says what it did.

The command lines come from the console blocks of the README and the guides (docs/getting-started.md,
docs/running-on-a-cluster.md). They run from the clone's top directory
with this interpreter's directory first on PATH, which is what `source .venv/bin/activate` does;
TMPDIR points into the test's directory, where the examples' default (temporary) outputs go.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def readme_example_lines() -> list[str]:
    """Every line of a console block of the README or a guide that runs an example, without its
    comment."""
    lines = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for language, code in BLOCK.findall(page.read_text()):
            if language == "console":
                lines += [line.split("  #")[0].strip() for line in code.splitlines() if "examples/" in line]
    return lines


def readme_command(script: str, *, assignments: bool = False) -> str:
    """The README's command line for an example: the one without variable assignments, or the
    one with them."""
    (line,) = [
        line
        for line in readme_example_lines()
        if f"python examples/{script}" in line and ("=" in line.split("python")[0]) == assignments
    ]
    return line


def run(command: str, tmp_path: Path, env: dict[str, str] | None = None, expect_ok: bool = True) -> str:
    env = dict(
        os.environ,
        **(env or {}),
        TMPDIR=str(tmp_path),
        PYLOG_HOME=str(tmp_path / "pylog-home"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    result = subprocess.run(["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    if expect_ok:
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout
    assert result.returncode != 0, result.stdout[-3000:]
    return result.stderr


def test_every_example_has_a_header_saying_what_it_shows_and_a_readme_command_line():
    scripts = sorted(EXAMPLES.glob("*.py"))
    assert len(scripts) >= 4
    for script in scripts:
        text = script.read_text()
        assert text.startswith('"""') and "Shows:" in text.split('"""')[1], script.name
        assert readme_command(script.name) == f"python examples/{script.name}"


@pytest.mark.spark  # Spark runs in a subprocess
def test_quickstart_etl(tmp_path):
    out = run(readme_command("quickstart_etl.py"), tmp_path)
    windows, where = re.search(r"(\d+) closed \(minute, product\) windows written to (\S+)", out).groups()
    assert int(windows) > 0 and Path(where).is_relative_to(tmp_path)


@pytest.mark.spark  # Spark runs in a subprocess
def test_topic_enrichment(tmp_path):
    out = run(readme_command("topic_enrichment.py"), tmp_path)
    total, distinct = map(int, re.search(r"(\d+) enriched orders, (\d+) distinct", out).groups())
    assert total == distinct == 2000


@pytest.mark.spark  # Spark runs in a subprocess
def test_backfill_by_timestamp(tmp_path):
    out = run(readme_command("backfill_by_timestamp.py"), tmp_path)
    count = int(re.search(r"(\d+) records between", out).group(1))
    assert count == 2000  # events 1000..2999: timestamps are strictly increasing


@pytest.mark.spark  # Spark runs in a subprocess
def test_external_cluster_as_it_is_runs_locally_and_stops_its_broker(tmp_path):
    out = run(readme_command("external_cluster.py"), tmp_path)
    count, where = re.search(r"(\d+) records in (\S+)", out).groups()
    assert int(count) == 1000 and Path(where).is_relative_to(tmp_path)
    # nothing left registered or running: the broker was the example's own, in its process
    assert not (tmp_path / "pylog-home" / "broker.json").exists()


def external_command(values: dict[str, str]) -> str:
    """The README's cluster command line with its placeholder values replaced."""
    line = readme_command("external_cluster.py", assignments=True)
    words = shlex.split(line)
    names = [word.split("=", 1)[0] for word in words if "=" in word]
    assert sorted(names) == sorted(values) and words[len(names) :] == ["python", "examples/external_cluster.py"]
    return " ".join([f"{name}={shlex.quote(values[name])}" for name in names] + words[len(names) :])


@pytest.mark.spark  # Spark runs in a subprocess
def test_external_cluster_against_another_kafka_and_a_multi_executor_spark(tmp_path):
    """librdkafka's mock cluster stands in for the external Kafka; local-cluster[2,1,1024] runs two
    executor JVMs, as a real Spark cluster would."""
    sys.path.insert(0, str(ROOT / "bench"))
    from _harness import mock_cluster
    from confluent_kafka import Producer

    with mock_cluster() as bootstrap:
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(500):
            producer.produce("external-orders", value=b"order-%d" % i)
        assert producer.flush(30) == 0
        out = run(
            external_command(
                {
                    "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
                    "SPARK_MASTER": "local-cluster[2,1,1024]",
                    "TOPIC": "external-orders",
                    "OUTPUT": str(tmp_path / "orders"),
                }
            ),
            tmp_path,
        )
        assert f"500 records in {tmp_path / 'orders'}" in out

        # a topic the cluster does not have fails before Spark starts, naming it and what exists
        err = run(
            external_command(
                {
                    "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
                    "SPARK_MASTER": "local[1]",
                    "TOPIC": "no-such-topic",
                    "OUTPUT": str(tmp_path / "none"),
                }
            ),
            tmp_path,
            expect_ok=False,
        )
        assert f"topic 'no-such-topic' does not exist on {bootstrap}: set TOPIC to one of" in err
        assert "'external-orders'" in err and "log4j" not in err  # Spark never started
