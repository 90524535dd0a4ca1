"""scripts/chaos_hooks patches what it names: each phase's hook fires on the code path the sinks
really take, so tests/scripts/test_chaos_pipeline.py and scripts/chaos_pipeline.py cannot pass vacuously.

Python prints and ignores an exception raised in a sitecustomize module, so a hook whose target
was renamed or moved would silently patch nothing. The topic sink's two phases wrap module-level
functions, which a caller bypasses if it binds them with ``from ... import``: they are driven
here through the topic writer itself (TopicBatchWriter.write -> write_exactly_once ->
_produce_all), against an embedded broker, with the kill disarmed (PYLOG_CHAOS_AT far away).
The file sink's and the source's phases wrap methods, which no caller can bypass; that they are
in place is checked directly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.paths import SCRIPTS

HOOKS = SCRIPTS / "chaos_hooks"

TOPIC_WRITE = textwrap.dedent(
    """
    import pyarrow as pa
    from pyspark.sql.types import BinaryType, StructField, StructType

    from kafka_spark.broker import EmbeddedBroker
    from kafka_spark.sink import topic_batch_writer

    with EmbeddedBroker(register=False) as broker:
        broker.create_topic("hooked", partitions=1)
        schema = StructType([StructField("value", BinaryType())])
        writer = topic_batch_writer({"kafka.bootstrap.servers": broker.bootstrap_servers, "topic": "hooked"},
                                    schema, False)
        message = writer.write(iter([pa.record_batch({"value": pa.array([b"a", b"b", b"c"], pa.binary())})]))
        print("ROWS", message.rows)
    """
)

PATCHED = textwrap.dedent(
    """
    from kafka_spark.files import commit
    from kafka_spark.files.metadata_log import MetadataLog
    from kafka_spark.files.sidecar import SinkState
    from kafka_spark.read.stream import PylogStreamReader
    from kafka_spark.topics import task

    targets = {"files-written": commit.StreamCommit.run, "sidecar-written": SinkState.write_record,
               "manifest-published": MetadataLog.add, "transaction-open": task._produce_all,
               "transaction-committed": task.write_exactly_once, "batch-planned": PylogStreamReader.partitions,
               "spark-committed": PylogStreamReader.latestOffset}
    for phase, target in targets.items():
        print(phase, target.__module__, target.__qualname__)
    """
)


def _run(script: str, phase: str, counter: Path) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (str(HOOKS), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(
        os.environ, PYTHONPATH=path, PYLOG_CHAOS_AIM=phase, PYLOG_CHAOS_COUNTER=str(counter), PYLOG_CHAOS_AT="1000000"
    )
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize(
    "phase,recorded",
    [("transaction-open", "transaction-open 3 rows"), ("transaction-committed", "transaction-committed batch 0")],
)
def test_the_topic_sink_hooks_fire_on_the_writers_own_call_path(phase, recorded, tmp_path):
    counter = tmp_path / "counter"
    result = _run(TOPIC_WRITE, phase, counter)
    assert result.returncode == 0 and "Error in sitecustomize" not in result.stderr, result.stderr[-3000:]
    assert "ROWS 3" in result.stdout
    assert counter.read_text().splitlines() == [recorded]  # the hook ran, once, where the sink commits
    assert not (tmp_path / "counter.killed").exists()


def test_every_phase_names_a_target_the_hook_replaced(tmp_path):
    """The hook installs the wrappers of all phases (each records only when its phase is aimed):
    every target the sinks and the source call is the wrapper defined in sitecustomize."""
    result = _run(PATCHED, "files-written", tmp_path / "counter")
    assert result.returncode == 0 and "Error in sitecustomize" not in result.stderr, result.stderr[-3000:]
    wrapped = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert set(wrapped) == {
        "files-written",
        "sidecar-written",
        "manifest-published",
        "transaction-open",
        "transaction-committed",
        "batch-planned",
        "spark-committed",
    }
    assert {where.split()[0] for where in wrapped.values()} == {"sitecustomize"}, wrapped
