"""The ``pylog`` data source: options -> batch reader, stream reader (and, later, writers).

``spark.read.format("pylog")`` and ``spark.readStream.format("pylog")`` take the options of
Spark's Kafka source and produce its schema (kafka_spark.options documents the options).
Options are validated in :meth:`PylogDataSource.schema`, which Spark calls when ``load()``
defines the DataFrame, so a bad option fails there, not when the query runs; the batch- or
streaming-only rules are checked when the reader is created.
"""

from __future__ import annotations

import kafka_spark.spark_env  # noqa: F401  (first: names a missing or doubled PySpark, and the fix)

# isort: split
from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, DataSourceWriter
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafka_spark.client.config import check_client_configs
from kafka_spark.options import (
    PylogOptionError,
    SourceOptions,
    check_batch,
    check_streaming,
    parse_source_options,
)
from kafka_spark.read.batch import PylogBatchReader
from kafka_spark.read.stream import PylogStreamReader

__all__ = ["PylogDataSource", "source_schema"]


def source_schema(include_headers: bool = False, avro_columns: tuple = ()) -> StructType:
    """Spark's Kafka source schema (KafkaRecordToRowConverter); every column nullable. With
    keyFormat/valueFormat=avro, decoded struct columns ``keyAvro`` / ``valueAvro`` follow (the
    binary ``key`` / ``value`` stay, so a PERMISSIVE null keeps its raw bytes beside it)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    for column in avro_columns:
        fields.append(StructField(f"{column.role}Avro", column.spark_type()))
    return StructType(fields)


def resolve_bootstrap_servers(options: SourceOptions) -> str:
    """The bootstrap servers this source talks to, resolved on the driver.

    ``kafka.bootstrap.servers`` when given; otherwise the local embedded broker, found or started
    on demand (kafka_spark.client.bootstrap). The result travels to executors inside each input
    partition, so executors never resolve it themselves.
    """
    from kafka_spark.client.bootstrap import resolve_bootstrap_servers as resolve

    return resolve(options.kafka_config.get("bootstrap.servers", "").strip() or None)


class PylogDataSource(DataSource):
    """``format("pylog")``: Kafka-protocol logs with the options and schema of Spark's Kafka
    source. Picklable; holds only the option dict Spark gave it."""

    @classmethod
    def name(cls) -> str:
        return "pylog"

    def _source_options(self, *, warn: bool = False) -> SourceOptions:
        return parse_source_options(self.options, warn=warn)

    def schema(self) -> StructType:
        """Called once where ``load()`` defines the DataFrame: every check that does not depend on
        batch or streaming runs here (PySpark does not say which one ``load()`` is), and ignored
        options are logged, once."""
        options = self._source_options(warn=True)
        check_client_configs(options)
        resolve_bootstrap_servers(options)
        return source_schema(options.include_headers, options.avro_columns)

    def _check_schema(self, schema: StructType, options: SourceOptions) -> None:
        expected = source_schema(options.include_headers, options.avro_columns)
        if schema is not None and [(f.name, f.dataType) for f in schema.fields] != [
            (f.name, f.dataType) for f in expected.fields
        ]:
            raise PylogOptionError(
                "The pylog source has a fixed schema and does not accept a user-specified schema "
                f"(got {schema.simpleString()}): remove .schema(...). Its columns are "
                f"{expected.simpleString()}; decode key and value with DataFrame functions "
                "(e.g. from_json, from_avro)."
            )

    def reader(self, schema: StructType) -> PylogBatchReader:
        options = self._source_options()
        self._check_schema(schema, options)
        check_batch(options)
        return PylogBatchReader(options, resolve_bootstrap_servers(options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """``df.write.format("pylog")``: the topic sink (kafka_spark.sink, kafka_spark.topics)."""
        from kafka_spark.sink import topic_batch_writer

        return topic_batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """``df.writeStream.format("pylog")``: the exactly-once topic sink (kafka_spark.sink,
        kafka_spark.topics)."""
        from kafka_spark.sink import topic_stream_writer

        return topic_stream_writer(self.options, schema, overwrite)

    def streamReader(self, schema: StructType) -> PylogStreamReader:
        options = self._source_options()
        self._check_schema(schema, options)
        check_streaming(options)
        return PylogStreamReader(options, resolve_bootstrap_servers(options))
