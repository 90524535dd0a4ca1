"""A new query on an existing pylog-files output, for every output shape: it continues the
output exactly, or it is refused and the refusal names the offsets that make it continue.

The matrix: output shapes {raw rows with Kafka columns, the Quickstart's projection (key, json,
partition, offset: no topic), no Kafka columns, one column, a windowed aggregate} x {new data
produced before each new query, none} x {a fresh checkpoint with the same options (the old one
kept), a lost checkpoint (deleted) with the same options, startingOffsetsFromOutput}. Each case
ends with stock ``spark.read.parquet`` seeing every input id once, or, for the aggregate, the
aggregates of the input exactly. "Same options" read from earliest and must be refused before
anything is read; restarting as the error says must then succeed.

The aggregate counts orders per minute of event time with a 0 s watermark; each chunk of input
ends with a tick record (not counted) far ahead in event time, so that every window of real
records closes within the run that read it and a lost checkpoint loses no state of real records
(state lost with a checkpoint is beyond what any sink can restore).
"""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict

import pytest
from pyarrow.fs import LocalFileSystem
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

from kafka_spark.files.metadata_log import MetadataLog
from tests.support.source_fixtures import Record, embedded_kafka  # noqa: F401

T0 = 1_700_000_040_000  # ms, on a minute boundary
TICK = 1000  # ids from here on are watermark ticks: they close every earlier window
CHUNK = 10  # records per chunk of input, plus one tick


def _event_time(i: int) -> int:
    """Chunk k spans minutes 20k .. 20k+2 of event time; its tick is at minute 20k+15."""
    if i >= TICK:
        return T0 + (i - TICK) * 20 * 60_000 + 15 * 60_000
    return T0 + (i // CHUNK) * 20 * 60_000 + (i % CHUNK) * 15_000


def _chunk(k: int) -> list[Record]:
    ids = [*range(k * CHUNK, (k + 1) * CHUNK), TICK + k]
    return [Record(value=b"%d" % i, key=b"k%d" % (i % 3), partition=i % 2, timestamp=_event_time(i)) for i in ids]


def _windowed(df):
    """Orders per minute of event time, as the demo's revenue per window (append mode)."""
    real = F.col("id") < TICK  # ticks move the watermark but are not counted
    return (
        df.withWatermark("timestamp", "0 seconds")
        .withColumn("id", F.col("value").cast("string").cast("long"))
        .groupBy(F.window("timestamp", "1 minute"))
        .agg(F.count(F.when(real, 1)).alias("n"), F.sum(F.when(real, F.col("id"))).alias("total"))
        .select(F.col("window.start").alias("window_start"), "n", "total")
    )


SHAPES = {
    "raw-rows": (lambda df: df, lambda out: out.select(F.col("value").cast("string").cast("long").alias("id"))),
    "quickstart-projection": (
        lambda df: df.select("key", F.col("value").cast("string").alias("json"), "partition", "offset"),
        lambda out: out.select(F.col("json").cast("long").alias("id")),
    ),
    "no-kafka-columns": (
        lambda df: df.select(
            F.col("value").cast("string").cast("long").alias("id"), F.upper(F.col("key").cast("string")).alias("label")
        ),
        lambda out: out.select("id"),
    ),
    "one-column": (
        lambda df: df.select(F.col("value").cast("string").cast("long").alias("id")),
        lambda out: out.select("id"),
    ),
    "windowed-aggregate": (_windowed, None),
}


def _true_windows(ids) -> list[tuple]:
    windows: dict[int, list[int]] = defaultdict(list)
    for i in ids:
        if i < TICK:
            windows[_event_time(i) - _event_time(i) % 60_000].append(i)
    return sorted((start, len(members), sum(members)) for start, members in windows.items())


def _run(spark, cluster, topic, shape, out, checkpoint, **options):
    """One Trigger.AvailableNow run; its failure (or None)."""
    reader = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        SHAPES[shape][0](reader.load())
        .writeStream.format("pylog-files")
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .trigger(availableNow=True)
        .start(out)
    )
    try:
        query.awaitTermination(180)
    except StreamingQueryException as exc:
        return exc
    return query.exception()


def _check_exact(spark, shape, out, ids) -> None:
    written = spark.read.parquet(out)
    if shape == "windowed-aggregate":
        rows = [(int(r.window_start.timestamp() * 1000), r.n, r.total) for r in written.collect()]
        assert len({start for start, _, _ in rows}) == len(rows), f"{shape}: a window was written twice"
        # A tick's own window (no real record) closes only when a later tick arrives, so whether
        # it is in the output depends on the run; the windows of real records must all be exact.
        assert sorted(r for r in rows if r[1] > 0) == _true_windows(ids), f"{shape}: aggregates differ"
    else:
        seen = sorted(r.id for r in SHAPES[shape][1](written).collect())
        assert seen == sorted(ids), f"{shape}: ids read back differ from the input (duplicates or gaps)"


def _refusal_offsets(failure, out: str, topic: str, expected: dict) -> str:
    """The startingOffsets JSON the refusal names (asserting it is the output's exact offsets)."""
    assert failure is not None, "a new query reading from earliest was not refused"
    text = str(failure)
    assert f"does not continue the output {out}" in text, text[-3000:]
    assert "would be written twice" in text
    named = re.search(r"\.option\(\"startingOffsets\", '(\{.*?\})'\)", text)
    assert named is not None, text[-3000:]
    assert json.loads(named.group(1)) == {topic: expected}
    assert f'.option("startingOffsetsFromOutput", "{out}")' in text
    return named.group(1)


def _manifests(out: str) -> list[int]:
    return MetadataLog(LocalFileSystem(), out).batch_ids()


class _Input:
    """The topic and what was produced into it."""

    def __init__(self, cluster, shape: str) -> None:
        self.cluster = cluster
        # Event times are in 2023: without retention.ms=-1 the broker's 7-day retention by record
        # timestamp would delete the records while the test runs.
        self.topic = cluster.new_topic(f"matrix-{shape}", config={"retention.ms": "-1"})
        self.ids: list[int] = []
        self.next_offsets = {str(p): 0 for p in range(embedded_partitions(cluster))}
        self.chunks = 0

    def produce_chunk(self) -> None:
        for record in self.cluster.produce(self.topic, _chunk(self.chunks)):
            self.ids.append(int(record.value))
            self.next_offsets[str(record.partition)] = record.offset + 1
        self.chunks += 1

    def end_offsets(self) -> dict[str, int]:
        return dict(self.next_offsets)


def embedded_partitions(cluster) -> int:
    return cluster.partitions_per_topic


@pytest.mark.parametrize("with_new_data", [False, True], ids=["no-new-data", "new-data"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_new_query_on_an_existing_output_continues_it_exactly_or_is_refused(
    spark, embedded_kafka, tmp_path, shape, with_new_data
):
    """The modes run one after the other on one output; with new data, each mode starts after
    another chunk of input was produced."""
    source = _Input(embedded_kafka, shape)
    topic = source.topic
    out = str(tmp_path / "out")

    def run(checkpoint: str, **options):
        return _run(spark, embedded_kafka, topic, shape, out, str(tmp_path / checkpoint), **options)

    source.produce_chunk()
    assert run("first-ck") is None
    _check_exact(spark, shape, out, source.ids)

    # A fresh checkpoint with the same options, the first query's checkpoint kept.
    held = source.end_offsets()
    if with_new_data:
        source.produce_chunk()
    before = _manifests(out)
    starting = _refusal_offsets(run("fresh-ck"), out, topic, held)
    assert _manifests(out) == before, "the refused query committed something"
    shutil.rmtree(tmp_path / "fresh-ck")  # as the error says: delete its checkpoint and restart
    assert run("fresh-ck", startingOffsets=starting) is None
    _check_exact(spark, shape, out, source.ids)
    # The first query resumes from its checkpoint: it may not write again what the new one wrote.
    resumed = run("first-ck")
    if with_new_data:
        assert resumed is not None and "would be written twice" in str(resumed)
    else:
        assert resumed is None  # nothing new to read: it plans no batch
    _check_exact(spark, shape, out, source.ids)

    # The checkpoint of the query that wrote last is lost; it restarts with the same options.
    held = source.end_offsets()
    if with_new_data:
        source.produce_chunk()
    shutil.rmtree(tmp_path / "fresh-ck")
    starting = _refusal_offsets(run("fresh-ck"), out, topic, held)
    shutil.rmtree(tmp_path / "fresh-ck")
    assert run("fresh-ck", startingOffsets=starting) is None
    _check_exact(spark, shape, out, source.ids)

    # startingOffsetsFromOutput: the documented way to continue an output with a new checkpoint.
    if with_new_data:
        source.produce_chunk()
    assert run("from-output-ck", startingOffsetsFromOutput=out) is None
    _check_exact(spark, shape, out, source.ids)
