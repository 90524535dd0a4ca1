"""A query started before issue 16's move of the connector into subpackages resumes after it.

tests/data/pre_layout_query holds the checkpoint and the pylog-files output of a streaming query
that pylog 0.1.0 (the flat layout) ran: 30 records of each of the 2 partitions of topic
``layout``, read and committed. Nothing the query persisted names a Python module (Spark's offset
log holds the source's offset JSON, ``_spark_metadata`` and ``_sink/`` are JSON), so the same
query on today's code must go on from there: the 20 newer records of each partition land in the
output once, and none of the 30 old ones again.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq

DATA = Path(__file__).parent / "data" / "pre_layout_query"
# The query, the topic and the records, as they were written.
_spec = importlib.util.spec_from_file_location("pre_layout_query_generate", DATA / "generate.py")
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)


def _relocated(tmp_path: Path) -> Path:
    """A copy of the pre-move checkpoint and output under tmp_path, with the absolute directory
    they were written in (named by _spark_metadata and _sink records) replaced by tmp_path."""
    old_base = (DATA / "base").read_text().strip()
    for name in ("checkpoint", "out"):
        shutil.copytree(DATA / name, tmp_path / name)
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file() and path.parent.name != "out":  # the JSON records, not the parquet file
            path.write_text(path.read_text().replace(old_base, str(tmp_path)))
    return tmp_path


def _committed_rows(out: Path) -> list[tuple[int, int, str]]:
    files = []
    for manifest in sorted((out / "_spark_metadata").iterdir(), key=lambda p: int(p.name)):
        for line in manifest.read_text().splitlines()[1:]:
            files.append(json.loads(line)["path"].removeprefix("file://"))
    rows = []
    for file in files:
        table = pq.read_table(file)
        rows += zip(
            table["partition"].to_pylist(), table["offset"].to_pylist(), table["value"].to_pylist(), strict=True
        )
    return rows


def test_a_checkpoint_and_output_written_before_the_move_resume_exactly_once(spark, tmp_path):
    from kafka_spark.broker import EmbeddedBroker

    base = _relocated(tmp_path)
    query_id = json.loads((base / "checkpoint" / "metadata").read_text())["id"]
    assert len(_committed_rows(base / "out")) == generate.PARTITIONS * generate.PER_PARTITION  # as written
    with EmbeddedBroker(register=False) as broker:
        broker.create_topic(generate.TOPIC, partitions=generate.PARTITIONS)
        generate.produce(broker.bootstrap_servers, 0, generate.PER_PARTITION)  # the records it read
        generate.produce(broker.bootstrap_servers, generate.PER_PARTITION, 20)  # newer ones
        generate.run_query(spark, broker.bootstrap_servers, str(base / "checkpoint"), str(base / "out"))

    rows = _committed_rows(base / "out")
    expected = [(p, i, f"{p}-{i}") for p in range(generate.PARTITIONS) for i in range(generate.PER_PARTITION + 20)]
    assert sorted(rows) == expected  # each record once: the old ones not again, the new ones all
    # It was the same query going on (its checkpoint's next batch), not a new one from the output.
    newest = max((base / "out" / "_sink" / "offsets").iterdir(), key=lambda p: int(p.name))
    record = json.loads(newest.read_text())
    assert record["queryId"] == query_id and record["batchId"] >= 2
    assert record["offsets"] == {generate.TOPIC: {"0": 50, "1": 50}}
