"""Avro through the topic sink and the source, plain and Confluent-framed, with schema evolution."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from pyspark.errors import PySparkException
from pyspark.sql import Row

from kafka_spark.avro.registry_server import EmbeddedSchemaRegistry

V1 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "product", "type": "string"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
V2 = {**V1, "fields": V1["fields"] + [{"name": "channel", "type": "string", "default": "web"}]}


def write_orders(spark, bootstrap: str, topic: str, **avro_options: str) -> None:
    df = spark.createDataFrame(
        [(i, f"p{i % 3}", [f"t{i}"]) for i in range(20)], "id long, product string, tags array<string>"
    )
    writer = (
        df.selectExpr("cast(id as string) as key", "struct(id, product, tags) as value")
        .write.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("valueFormat", "avro")
        .option("avroSchema", json.dumps(V1))
    )
    for key, value in avro_options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def read_orders(spark, bootstrap: str, topic: str, **avro_options: str):
    reader = (
        spark.read.format("pylog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("valueFormat", "avro")
        .option("avroSchema", json.dumps(V2))
    )
    for key, value in avro_options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_plain_avro_round_trips_with_an_evolved_reader_schema(spark, pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=2)
    write_orders(spark, pylog_broker.bootstrap_servers, topic)
    df = read_orders(spark, pylog_broker.bootstrap_servers, topic, avroWriterSchema=json.dumps(V1))
    rows = sorted(df.select("valueAvro.*").collect(), key=lambda r: r.id)
    assert rows == [Row(id=i, product=f"p{i % 3}", tags=[f"t{i}"], channel="web") for i in range(20)]


def test_confluent_framed_avro_round_trips_through_a_schema_registry(spark, pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=2)
    with EmbeddedSchemaRegistry() as registry:
        write_orders(spark, pylog_broker.bootstrap_servers, topic, schemaRegistryUrl=registry.url)
        df = read_orders(spark, pylog_broker.bootstrap_servers, topic, schemaRegistryUrl=registry.url)
        rows = sorted(df.select("value", "valueAvro.*").collect(), key=lambda r: r.id)
    assert [r.value[0] for r in rows] == [0] * 20  # magic byte of Confluent framing
    assert [(r.id, r.product, r.tags, r.channel) for r in rows] == [
        (i, f"p{i % 3}", [f"t{i}"], "web") for i in range(20)
    ]


def test_malformed_payloads_fail_with_the_offset_or_become_null_beside_their_bytes(spark, pylog_broker, pylog_topic):
    topic = pylog_topic(partitions=1)
    write_orders(spark, pylog_broker.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": pylog_broker.bootstrap_servers})
    landed: list[int] = []
    producer.produce(
        topic, value=b"\xff\xff\xff not avro", partition=0, on_delivery=lambda err, msg: landed.append(msg.offset())
    )
    assert producer.flush(10) == 0
    bad_offset = landed[0]  # after the 20 records and the sink's transaction markers
    permissive = read_orders(
        spark, pylog_broker.bootstrap_servers, topic, avroWriterSchema=json.dumps(V1), avroMode="PERMISSIVE"
    )
    bad = permissive.where("valueAvro is null").select("offset", "value").collect()
    assert [(r.offset, bytes(r.value)) for r in bad] == [(bad_offset, b"\xff\xff\xff not avro")]
    assert permissive.where("valueAvro is not null").count() == 20
    with pytest.raises(PySparkException, match=f"{topic}.*offset {bad_offset}|offset {bad_offset}.*{topic}"):
        read_orders(spark, pylog_broker.bootstrap_servers, topic, avroWriterSchema=json.dumps(V1)).collect()
