"""The pylog-files sink decides whether a batch continues the output from what it and Spark's
checkpoint recorded (kafka_spark.files.continuity), for any output schema and any sources.

Commit-level tests drive the sink's driver-side commit with checkpoints laid out as Spark writes
them (tests/support/sink_commits.py); the Spark tests run real queries: two pylog sources in one query,
pylog with the rate source, the rate source alone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyarrow.fs import LocalFileSystem
from pyspark.errors import StreamingQueryException

from kafka_spark.files.continuity import OtherSourcesError, UnknownStartError
from kafka_spark.files.metadata_log import MetadataLog
from kafka_spark.files.sidecar import OffsetContinuityError
from kafka_spark.files.table import committed_source_offsets
from tests.support.paths import GOLDEN
from tests.support.sink_commits import FakeCheckpoint, commit_batch_job, commit_stream_batch
from tests.support.source_fixtures import embedded_kafka  # noqa: F401

INITIAL_OFFSETS = GOLDEN / "kafka_source_initial_offsets" / "spark-4.3-kafka-4.2-written-0"


def manifests(out: Path) -> list[int]:
    return MetadataLog(LocalFileSystem(), str(out)).batch_ids()


def write_orders(out: Path, tmp_path: Path, end: dict) -> FakeCheckpoint:
    """A first query that read topic ``orders`` up to ``end``: start batch, then one data batch."""
    first = FakeCheckpoint(tmp_path / "first-ck")
    first.offsets(0, {"orders": {p: 0 for p in end}})
    first.offsets(1, {"orders": end})
    commit_stream_batch(out, first, 0, [])
    commit_stream_batch(out, first, 1, [1, 2, 3])
    return first


def test_first_batch_with_rows_starts_where_sparks_kafka_source_recorded_it(tmp_path):
    """Spark's format("kafka") writes its start to sources/<i>/0 (bytes from Spark 4.3 with the
    Kafka connector 4.2): a first batch that carries data is checked against it exactly."""
    out = tmp_path / "out"
    write_orders(out, tmp_path, {"0": 3, "1": 2})
    kafka_query = FakeCheckpoint(tmp_path / "kafka-ck")
    kafka_query.offsets(0, {"orders": {"0": 5, "1": 4}})
    kafka_query.kafka_initial_offsets(0, INITIAL_OFFSETS.read_bytes())  # starts at {"orders":{"0":0,"1":0}}
    with pytest.raises(OffsetContinuityError) as refused:
        commit_stream_batch(out, kafka_query, 0, [1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert (
        "orders-0: the output holds offsets up to 2; this query starts at 0: offsets 0..2 (3 records) "
        "would be written twice"
    ) in str(refused.value)
    assert (
        "orders-1: the output holds offsets up to 1; this query starts at 0: offsets 0..1 (2 records) "
        "would be written twice"
    ) in str(refused.value)
    assert manifests(out) == [0, 1]

    continuing = FakeCheckpoint(tmp_path / "continuing-ck")
    continuing.offsets(0, {"orders": {"0": 5, "1": 4}})
    continuing.kafka_initial_offsets(0, b'\x00v1\n{"orders":{"0":3,"1":2}}')
    commit_stream_batch(out, continuing, 0, [4, 5, 6, 7])
    assert manifests(out) == [0, 1, 2]
    assert committed_source_offsets(str(out)) == {"orders": {"0": 5, "1": 4}}


def test_first_batch_with_rows_and_no_recorded_start_is_refused_naming_the_offsets(tmp_path):
    out = tmp_path / "out"
    write_orders(out, tmp_path, {"0": 3, "1": 2})
    once = FakeCheckpoint(tmp_path / "once-ck")  # a Python source under Trigger.Once
    once.offsets(0, {"orders": {"0": 5, "1": 4}})
    with pytest.raises(UnknownStartError) as refused:
        commit_stream_batch(out, once, 0, [4, 5, 6, 7])
    message = str(refused.value)
    assert "wrote rows of topic(s) orders, but where it started reading them is recorded nowhere" in message
    assert """.option("startingOffsets", '{"orders":{"0":3,"1":2}}')""" in message
    assert "Trigger.AvailableNow" in message
    assert manifests(out) == [0, 1]


def test_first_batch_on_topics_the_output_never_held_is_accepted_without_a_recorded_start(tmp_path):
    out = tmp_path / "out"
    write_orders(out, tmp_path, {"0": 3, "1": 2})
    other = FakeCheckpoint(tmp_path / "payments-ck")
    other.offsets(0, {"payments": {"0": 7}})
    commit_stream_batch(out, other, 0, [10, 11])  # new input: nothing to overlap
    assert committed_source_offsets(str(out)) == {"orders": {"0": 3, "1": 2}, "payments": {"0": 7}}


def test_output_remembers_the_topics_of_every_query_not_only_the_newest(tmp_path):
    """A query on topic B committing last must not hide that the output holds topic A."""
    out = tmp_path / "out"
    write_orders(out, tmp_path, {"0": 3, "1": 2})
    payments = FakeCheckpoint(tmp_path / "payments-ck")
    payments.offsets(0, {"payments": {"0": 0}})
    payments.offsets(1, {"payments": {"0": 4}})
    commit_stream_batch(out, payments, 0, [])
    commit_stream_batch(out, payments, 1, [20, 21, 22, 23])
    again = FakeCheckpoint(tmp_path / "again-ck")
    again.offsets(0, {"orders": {"0": 0, "1": 0}})  # the start batch of a new query from earliest
    with pytest.raises(OffsetContinuityError, match=r"""startingOffsets", '\{"orders":\{"0":3,"1":2\}\}'\)"""):
        commit_stream_batch(out, again, 0, [])
    assert manifests(out) == [0, 1, 2, 3]


def test_batch_appends_between_streaming_batches_keep_what_the_output_holds(tmp_path):
    out = tmp_path / "out"
    write_orders(out, tmp_path, {"0": 3, "1": 2})
    commit_batch_job(out, [100, 101])  # df.write append: allowed, carries no offsets
    assert committed_source_offsets(str(out)) == {"orders": {"0": 3, "1": 2}}
    again = FakeCheckpoint(tmp_path / "again-ck")
    again.offsets(0, {"orders": {"0": 0, "1": 0}})
    with pytest.raises(OffsetContinuityError, match="would be written twice"):
        commit_stream_batch(out, again, 0, [])


def test_output_written_before_its_records_held_the_coverage_is_read_from_all_records(tmp_path):
    """Records written by earlier versions of the sink lack ``outputOffsets``: the coverage is
    rebuilt from every record (here: topic orders held by the older of two queries)."""
    out = tmp_path / "out"
    write_orders(out, tmp_path, {"0": 3, "1": 2})
    payments = FakeCheckpoint(tmp_path / "payments-ck")
    payments.offsets(0, {"payments": {"0": 4}})
    commit_stream_batch(out, payments, 0, [])
    for record in (out / "_sink" / "offsets").iterdir():
        old = json.loads(record.read_text())
        del old["outputOffsets"], old["otherSourceQueries"]
        record.write_text(json.dumps(old))
    assert committed_source_offsets(str(out)) == {"orders": {"0": 3, "1": 2}, "payments": {"0": 4}}
    again = FakeCheckpoint(tmp_path / "again-ck")
    again.offsets(0, {"orders": {"0": 1, "1": 2}})
    with pytest.raises(
        OffsetContinuityError, match="orders-0: the output holds offsets up to 2; this query starts at 1"
    ):
        commit_stream_batch(out, again, 0, [])


def test_gap_is_refused_unless_the_sink_accepts_data_loss(tmp_path):
    out = tmp_path / "out"
    write_orders(out, tmp_path, {"0": 3, "1": 2})
    ahead = FakeCheckpoint(tmp_path / "ahead-ck")
    ahead.offsets(0, {"orders": {"0": 3, "1": 6}})
    with pytest.raises(OffsetContinuityError) as refused:
        commit_stream_batch(out, ahead, 0, [])
    assert (
        "orders-1: the output continues at offset 2; this query starts at 6: offsets 2..5 (4) would be skipped"
    ) in str(refused.value)
    assert "failOnDataLoss=false" in str(refused.value)


def test_sources_without_kafka_offsets_continue_only_from_the_query_that_wrote_them(tmp_path):
    """Rate- or file-source offsets are private to a checkpoint: another query's cannot be
    compared, so only the query that wrote them may go on; Kafka-only queries may still write."""
    out = tmp_path / "out"
    rate = FakeCheckpoint(tmp_path / "rate-ck")
    rate.offsets(0, "5")
    commit_stream_batch(out, rate, 0, [0, 1, 2, 3, 4])
    second_rate = FakeCheckpoint(tmp_path / "second-rate-ck")
    second_rate.offsets(0, "3")
    with pytest.raises(OtherSourcesError) as refused:
        commit_stream_batch(out, second_rate, 0, [0, 1, 2])
    assert f"query {rate.query_id} read from such sources" in str(refused.value)
    assert "Continue that query from its own checkpoint, or write this query to a new output path" in str(refused.value)
    assert manifests(out) == [0]
    rate.offsets(1, "9")
    commit_stream_batch(out, rate, 1, [5, 6, 7, 8])  # the rate query itself goes on
    kafka = FakeCheckpoint(tmp_path / "kafka-ck")
    kafka.offsets(0, {"orders": {"0": 0}})
    commit_stream_batch(out, kafka, 0, [])
    assert manifests(out) == [0, 1, 2]


def test_refused_commit_deletes_the_batchs_files(tmp_path):
    out = tmp_path / "out"
    write_orders(out, tmp_path, {"0": 3, "1": 2})
    once = FakeCheckpoint(tmp_path / "once-ck")
    once.offsets(0, {"orders": {"0": 5, "1": 4}})
    before = {p.name for p in out.iterdir()}
    with pytest.raises(UnknownStartError):
        commit_stream_batch(out, once, 0, [4, 5, 6, 7])
    assert {p.name for p in out.iterdir()} == before


# ---------------------------------------------------------------- real queries


def _pylog(spark, cluster, topic, **options):
    reader = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().selectExpr("cast(value as string) as v")


def _write(df, out, checkpoint):
    query = (
        df.writeStream.format("pylog-files")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(out))
    )
    try:
        query.awaitTermination(180)
    except StreamingQueryException as exc:
        return exc
    return query.exception()


def test_union_of_two_pylog_sources_is_continued_or_refused_naming_both_topics(spark, embedded_kafka, tmp_path):
    a, b = embedded_kafka.new_topic("union-a"), embedded_kafka.new_topic("union-b")
    embedded_kafka.produce_values(a, 0, 3)
    embedded_kafka.produce_values(b, 1, 2, start=3)
    out = tmp_path / "out"

    def union(**options):
        return _pylog(spark, embedded_kafka, a, **options).union(_pylog(spark, embedded_kafka, b, **options))

    assert _write(union(), out, tmp_path / "ck1") is None
    embedded_kafka.produce_values(b, 1, 2, start=5)
    refused = _write(union(), out, tmp_path / "ck2")
    assert refused is not None
    expected = {a: {"0": 3, "1": 0, "2": 0, "3": 0}, b: {"0": 0, "1": 2, "2": 0, "3": 0}}
    assert (f""".option("startingOffsets", '{json.dumps(expected, separators=(",", ":"))}')""") in str(refused)
    assert _write(union(startingOffsetsFromOutput=str(out)), out, tmp_path / "ck3") is None
    assert sorted(r.v for r in spark.read.parquet(str(out)).collect()) == [f"v{i}" for i in range(7)]


def test_pylog_with_the_rate_source_cannot_be_continued_by_a_new_query(spark, embedded_kafka, tmp_path):
    topic = embedded_kafka.new_topic("with-rate")
    embedded_kafka.produce_values(topic, 0, 3)
    out = tmp_path / "out"

    def mixed(**options):
        rate = (
            spark.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", 5)
            .load()
            .selectExpr("concat('r', cast(value as string)) as v")
        )
        return _pylog(spark, embedded_kafka, topic, **options).union(rate)

    assert _write(mixed(), out, tmp_path / "ck1") is None
    refused = _write(mixed(startingOffsetsFromOutput=str(out)), out, tmp_path / "ck2")
    assert refused is not None and "whose offsets are not Kafka-style" in str(refused)
    assert "Continue that query from its own checkpoint, or write this query to a new output path" in str(refused)
    rows = sorted(r.v for r in spark.read.parquet(str(out)).collect())
    assert [v for v in rows if not v.startswith("r")] == ["v0", "v1", "v2"]
    assert len(rows) == len(set(rows))
    shutil.rmtree(tmp_path / "ck2")
    assert _write(mixed(), out, tmp_path / "ck1") is None  # the query that wrote them goes on


def test_trigger_once_cannot_continue_an_output_it_did_not_start(spark, embedded_kafka, tmp_path):
    """Trigger.Once has no start batch (one batch only), so where its first batch starts is not
    recorded: on an output holding its topic the sink refuses it and recommends AvailableNow."""
    topic = embedded_kafka.new_topic("once-on-output")
    embedded_kafka.produce_values(topic, 0, 3)
    out = tmp_path / "out"
    assert _write(_pylog(spark, embedded_kafka, topic), out, tmp_path / "ck1") is None
    embedded_kafka.produce_values(topic, 0, 2, start=3)
    query = (
        _pylog(spark, embedded_kafka, topic, startingOffsetsFromOutput=str(out))
        .writeStream.format("pylog-files")
        .option("checkpointLocation", str(tmp_path / "ck2"))
        .trigger(once=True)
        .start(str(out))
    )
    with pytest.raises(StreamingQueryException) as refused:
        query.awaitTermination(180)
    assert f"wrote rows of topic(s) {topic}, but where it started reading them is recorded nowhere" in str(
        refused.value
    )
    assert "Trigger.AvailableNow" in str(refused.value)
    shutil.rmtree(tmp_path / "ck2")
    assert (
        _write(_pylog(spark, embedded_kafka, topic, startingOffsetsFromOutput=str(out)), out, tmp_path / "ck2") is None
    )
    assert sorted(r.v for r in spark.read.parquet(str(out)).collect()) == [f"v{i}" for i in range(5)]
