"""startingOffsetsFromOutput: a new query continues where a pylog file-sink output left off."""

from __future__ import annotations

from kafka_spark.files.table import committed_source_offsets
from tests.support.source_fixtures import kafka_cluster, mock_kafka  # noqa: F401


def _copy(spark, cluster, topic, out, checkpoint, **options):
    reader = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", topic)
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load().selectExpr("topic", "partition", "offset", "cast(value as string) v")
    query = (
        df.writeStream.format("pylog-files")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(out)
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()


def test_new_query_with_a_new_checkpoint_continues_the_output_without_duplicates(spark, kafka_cluster, tmp_path):
    topic = kafka_cluster.new_topic("continue")
    out = str(tmp_path / "out")
    kafka_cluster.produce_values(topic, 0, 3)
    kafka_cluster.produce_values(topic, 2, 2, start=3)
    _copy(spark, kafka_cluster, topic, out, str(tmp_path / "chk-1"), startingOffsets="earliest")
    assert committed_source_offsets(out) == {topic: {"0": 3, "1": 0, "2": 2, "3": 0}}

    kafka_cluster.produce_values(topic, 0, 2, start=5)
    # A lost checkpoint: the new query would re-read everything from earliest without the option.
    _copy(
        spark,
        kafka_cluster,
        topic,
        out,
        str(tmp_path / "chk-2"),
        startingOffsets="earliest",
        startingOffsetsFromOutput=out,
    )
    rows = spark.read.parquet(out).collect()
    assert sorted((r.partition, r.offset, r.v) for r in rows) == [
        (0, 0, "v0"),
        (0, 1, "v1"),
        (0, 2, "v2"),
        (0, 3, "v5"),
        (0, 4, "v6"),
        (2, 0, "v3"),
        (2, 1, "v4"),
    ]


def test_output_without_committed_batches_falls_back_to_starting_options(spark, kafka_cluster, tmp_path):
    topic = kafka_cluster.new_topic("fresh")
    kafka_cluster.produce_values(topic, 1, 2)
    out = str(tmp_path / "out")
    _copy(
        spark,
        kafka_cluster,
        topic,
        out,
        str(tmp_path / "chk"),
        startingOffsets="earliest",
        startingOffsetsFromOutput=str(tmp_path / "nothing-here"),
    )
    assert sorted(r.offset for r in spark.read.parquet(out).collect()) == [0, 1]
