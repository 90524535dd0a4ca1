"""The whole pipeline: embedded broker → pylog source → pylog-files sink → stock spark.read."""

from __future__ import annotations

import shutil

from pyspark.errors import StreamingQueryException

from kafka_spark.files.table import committed_source_offsets
from tests.support.source_fixtures import embedded_kafka  # noqa: F401


def stream_to_files(spark, cluster, topic: str, out: str, checkpoint: str, **options: str) -> Exception | None:
    reader = (
        spark.readStream.format("pylog")
        .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
        .option("subscribe", topic)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    query = reader.load().writeStream.format("pylog-files").option("checkpointLocation", checkpoint).start(out)
    try:
        query.processAllAvailable()
        return None
    except StreamingQueryException as exc:
        return exc
    finally:
        query.stop()


def test_lost_checkpoint_resumes_from_output_offsets_exactly_once(spark, embedded_kafka, tmp_path):  # noqa: F811
    topic = embedded_kafka.new_topic("files")
    embedded_kafka.produce_values(topic, 0, 12)
    embedded_kafka.produce_values(topic, 1, 8, start=12)
    out = str(tmp_path / "out")

    assert stream_to_files(spark, embedded_kafka, topic, out, str(tmp_path / "ck1"), startingOffsets="earliest") is None
    assert committed_source_offsets(out) == {topic: {"0": 12, "1": 8, "2": 0, "3": 0}}

    embedded_kafka.produce_values(topic, 0, 5, start=20)
    embedded_kafka.produce_values(topic, 3, 5, start=25)
    shutil.rmtree(tmp_path / "ck1")  # the checkpoint is lost; the output knows where it stopped
    assert (
        stream_to_files(spark, embedded_kafka, topic, out, str(tmp_path / "ck2"), startingOffsetsFromOutput=out) is None
    )

    rows = spark.read.parquet(out).selectExpr("partition", "offset", "cast(value as string) v").collect()
    assert sorted(r.v for r in rows) == sorted(f"v{i}" for i in range(30))
    assert len({(r.partition, r.offset) for r in rows}) == 30
    assert committed_source_offsets(out) == {topic: {"0": 17, "1": 8, "2": 0, "3": 5}}

    # A new query that ignores the output's offsets would duplicate: its commit refuses.
    failure = stream_to_files(spark, embedded_kafka, topic, out, str(tmp_path / "ck3"), startingOffsets="earliest")
    assert failure is not None
    assert f""".option("startingOffsets", '{{"{topic}":{{"0":17,"1":8,"2":0,"3":5}}}}')""" in str(failure)
    assert f"{topic}-0: the output holds offsets up to 16; this query starts at 0" in str(failure)
    assert spark.read.parquet(out).count() == 30
