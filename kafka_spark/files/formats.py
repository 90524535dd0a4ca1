"""Data-file formats of the file sink: Parquet (default), Avro, JSON lines.

Rows arrive as pyarrow RecordBatches (the sink is an Arrow writer). Each format has a schema
check that runs when the query starts (:func:`check_schema`, naming the offending column) and a
part-file writer (:func:`write_part`) that streams batches into one file:

* ``parquet``: pyarrow.parquet, batches buffered into row groups of up to ~64 MiB (Spark's
  micro-batch Arrow batches are small; one row group per batch would make tiny row groups).
  Compression ``snappy`` (Spark's default), ``gzip``, ``zstd``, ``lz4``, ``none``. Readable by
  stock ``spark.read.parquet``.
* ``avro``: fastavro, container file with codec ``snappy`` (default), ``deflate`` or ``null``;
  record name ``topLevelRecord`` as spark-avro names it, nullable fields as ``["null", T]`` unions,
  timestamps ``timestamp-micros``, decimals ``bytes``/``decimal``.
* ``json``: JSON lines (one object per row, UTF-8), as Spark's JSON writer: binary as base64,
  timestamps ISO-8601, maps as objects, nulls omitted. Decimals are written as JSON numbers
  via float (Spark's reader infers double for them anyway).

Thread-safety: functions are stateless.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

from kafka_spark.files.fs import FileSinkError

FORMATS = ("parquet", "avro", "json")
EXTENSIONS = {"parquet": "parquet", "avro": "avro", "json": "json"}
COMPRESSION = {
    "parquet": ("snappy", "gzip", "zstd", "lz4", "none"),
    "avro": ("snappy", "deflate", "null"),
    "json": ("none",),
}
DEFAULT_COMPRESSION = {"parquet": "snappy", "avro": "snappy", "json": "none"}
_ROW_GROUP_BYTES = 64 << 20


class UnsupportedColumnError(FileSinkError):
    """A column's Spark type cannot be written in the chosen file format."""


def _type_problem(dtype: T.DataType, file_format: str) -> str | None:
    """Why ``dtype`` cannot be written as ``file_format`` (None if it can)."""
    if isinstance(dtype, (T.NullType, T.CalendarIntervalType, T.VariantType)):
        return f"{dtype.simpleString()} has no {file_format} representation"
    if isinstance(dtype, (T.DayTimeIntervalType, T.YearMonthIntervalType)) or type(dtype).__name__ == "TimeType":
        return f"{dtype.simpleString()} is not supported by the pylog {file_format} writer; cast it to string or long"
    if isinstance(dtype, T.ArrayType):
        return _type_problem(dtype.elementType, file_format)
    if isinstance(dtype, T.MapType):
        if file_format == "avro" and not isinstance(dtype.keyType, T.StringType):
            return f"avro maps need string keys, got {dtype.keyType.simpleString()}"
        return _type_problem(dtype.keyType, file_format) or _type_problem(dtype.valueType, file_format)
    if isinstance(dtype, T.StructType):
        for field in dtype.fields:
            problem = _type_problem(field.dataType, file_format)
            if problem:
                return f"field {field.name!r}: {problem}"
    return None


def check_schema(schema: T.StructType, file_format: str) -> None:
    """Raise :class:`UnsupportedColumnError` naming the first column ``file_format`` cannot hold."""
    for field in schema.fields:
        problem = _type_problem(field.dataType, file_format)
        if problem:
            raise UnsupportedColumnError(
                f"column {field.name!r} ({field.dataType.simpleString()}) cannot be written with "
                f"fileFormat={file_format}: {problem}"
            )


def write_part(stream: BinaryIO, batches: Iterator[pa.RecordBatch], file_format: str, compression: str) -> int:
    """Write every batch of ``batches`` into ``stream`` as one ``file_format`` file; rows written."""
    if file_format == "parquet":
        return _write_parquet(stream, batches, compression)
    if file_format == "avro":
        return _write_avro(stream, batches, compression)
    return _write_json(stream, batches)


def _write_parquet(stream: BinaryIO, batches: Iterator[pa.RecordBatch], compression: str) -> int:
    writer: pq.ParquetWriter | None = None
    pending: list[pa.RecordBatch] = []
    pending_bytes = rows = 0
    try:
        for batch in batches:
            if writer is None:
                writer = pq.ParquetWriter(stream, batch.schema, compression=compression)
            pending.append(batch)
            pending_bytes += batch.nbytes
            rows += batch.num_rows
            if pending_bytes >= _ROW_GROUP_BYTES:
                writer.write_table(pa.Table.from_batches(pending), row_group_size=1 << 30)
                pending, pending_bytes = [], 0
        if writer is not None and pending:
            writer.write_table(pa.Table.from_batches(pending), row_group_size=1 << 30)
    finally:
        if writer is not None:
            writer.close()
    return rows


def avro_schema(schema: pa.Schema) -> dict[str, Any]:
    """The Avro schema of an Arrow schema, named as spark-avro names records."""

    def convert(dtype: pa.DataType, name: str) -> Any:
        if pa.types.is_boolean(dtype):
            return "boolean"
        if pa.types.is_int8(dtype) or pa.types.is_int16(dtype) or pa.types.is_int32(dtype):
            return "int"
        if pa.types.is_int64(dtype):
            return "long"
        if pa.types.is_float32(dtype):
            return "float"
        if pa.types.is_float64(dtype):
            return "double"
        if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
            return "string"
        if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
            return "bytes"
        if pa.types.is_date32(dtype):
            return {"type": "int", "logicalType": "date"}
        if pa.types.is_timestamp(dtype):
            logical = "timestamp-micros" if dtype.tz is not None else "local-timestamp-micros"
            return {"type": "long", "logicalType": logical}
        if pa.types.is_decimal(dtype):
            return {"type": "bytes", "logicalType": "decimal", "precision": dtype.precision, "scale": dtype.scale}
        if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            return {"type": "array", "items": nullable(dtype.value_field, name)}
        if pa.types.is_map(dtype):
            return {"type": "map", "values": nullable(dtype.item_field, name)}
        if pa.types.is_struct(dtype):
            return record(list(dtype), name)
        raise UnsupportedColumnError(f"column {name!r}: Arrow type {dtype} has no Avro mapping")

    def nullable(field: pa.Field, name: str) -> Any:
        inner = convert(field.type, name)
        return ["null", inner] if field.nullable else inner

    def record(fields: list[pa.Field], name: str) -> dict[str, Any]:
        return {
            "type": "record",
            "name": name.replace(".", "_") if name != "topLevelRecord" else name,
            "namespace": "topLevelRecord" if name != "topLevelRecord" else "",
            "fields": [
                {"name": f.name, "type": nullable(f, f"{name}.{f.name}" if name != "topLevelRecord" else f.name)}
                for f in fields
            ],
        }

    return record(list(schema), "topLevelRecord")


def _write_avro(stream: BinaryIO, batches: Iterator[pa.RecordBatch], compression: str) -> int:
    import fastavro

    rows = 0
    first = next(batches, None)
    if first is None:
        return 0
    parsed = fastavro.parse_schema(avro_schema(first.schema))

    def records() -> Iterator[dict[str, Any]]:
        nonlocal rows
        batch: pa.RecordBatch | None = first
        while batch is not None:
            rows += batch.num_rows
            yield from batch.to_pylist(maps_as_pydicts="strict")
            batch = next(batches, None)

    fastavro.writer(stream, parsed, records(), codec=compression)
    return rows


def _json_value(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dt.datetime):
        text = value.isoformat(timespec="microseconds")
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    return value


def _write_json(stream: BinaryIO, batches: Iterator[pa.RecordBatch]) -> int:
    rows = 0
    for batch in batches:
        rows += batch.num_rows
        lines = [
            json.dumps(_json_value(row), ensure_ascii=False, separators=(",", ":"))
            for row in batch.to_pylist(maps_as_pydicts="strict")
        ]
        if lines:
            stream.write(("\n".join(lines) + "\n").encode("utf-8"))
    return rows
