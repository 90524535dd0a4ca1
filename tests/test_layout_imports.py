"""The package layout keeps its rules: the import-linter contracts of setup.cfg hold, and what
Spark's Python workers import to look the formats up and to plan a batch stays light.

PySpark imports every top-level ``pyspark_*`` module in the worker that looks data sources up,
and the planner worker plans every micro-batch; neither should pay for the executors' decoder
(numba), the Kafka client (confluent_kafka), pyarrow.compute or the embedded broker (kio).
"""

from __future__ import annotations

import configparser
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_import_linter_contracts_of_setup_cfg_hold():
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint_imports, "import-linter is not installed in this environment: run `make bootstrap`"
    result = subprocess.run([lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    contracts = sum(section.startswith("importlinter:contract:") for section in config.sections())
    kept = [line for line in result.stdout.splitlines() if line.startswith("Contracts:")]
    assert kept and kept[-1].startswith(f"Contracts: {contracts} kept, 0 broken"), result.stdout[-2000:]


def _sibling_cycle(graph, package: str) -> list[str] | None:
    """A cycle among the children of ``package`` (each with its descendants), or None."""
    children = sorted(graph.find_children(package))
    edges = {
        child: [
            other
            for other in children
            if other != child and graph.direct_import_exists(importer=child, imported=other, as_packages=True)
        ]
        for child in children
    }
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node) :] + [node]
        if node in done:
            return None
        for other in edges[node]:
            cycle = visit(other, [*path, node])
            if cycle:
                return cycle
        done.add(node)
        return None

    for child in children:
        cycle = visit(child, [])
        if cycle:
            return cycle
    return None


def test_no_import_cycles_even_through_imports_for_the_type_checker_only():
    """setup.cfg's no-cycles contract leaves out imports under ``if TYPE_CHECKING:`` (other
    contracts need that); no package has a cycle among its modules and subpackages even with them:
    nothing hands a collaborator the whole object that made it (issue 39: the transaction
    coordinator typed the Broker it was given, the last cycle)."""
    import grimp

    graph = grimp.build_graph("kafka_spark", exclude_type_checking_imports=False)
    packages = sorted(
        module for module in graph.modules if module.startswith("kafka_spark") and graph.find_children(module)
    )
    cycles = {package: cycle for package in packages if (cycle := _sibling_cycle(graph, package))}
    assert "kafka_spark.broker" in packages and "kafka_spark.broker.coordinator" in packages
    assert cycles == {}


LOOKUP_AND_PLAN = textwrap.dedent(
    """
    import json, sys
    import pyspark_pylog, pyspark_pylog_files  # what Spark's lookup worker imports
    from kafka_spark.common.topic_partition import TopicPartition
    from kafka_spark.offsets import OffsetRange
    from kafka_spark.options import parse_source_options
    from kafka_spark.planning import plan_for_options

    opts = parse_source_options({"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"})
    ranges = [OffsetRange(TopicPartition("t", p), 0, 500_000) for p in range(3)]
    config = (("bootstrap.servers", "127.0.0.1:9092"), ("group.id", "g"))
    partitions = plan_for_options(ranges, opts, config)
    heavy = ["numba", "confluent_kafka", "pyarrow.compute", "kio", "kafka_spark.broker",
             "kafka_spark.read.arrow", "kafka_spark.read.record_decoder", "kafka_spark.topics"]
    print(json.dumps({"tasks": len(partitions), "fetcher": partitions[0].fetcher,
                      "loaded": [m for m in heavy if m in sys.modules]}))
    """
)


def test_looking_the_formats_up_and_planning_a_batch_import_nothing_heavy():
    result = subprocess.run([sys.executable, "-c", LOOKUP_AND_PLAN], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.splitlines()[-1])
    assert outcome["tasks"] == 8 and outcome["fetcher"] == "arrow"  # by work: 1.5M records in 8 equal shares; plaintext
    assert outcome["loaded"] == []
