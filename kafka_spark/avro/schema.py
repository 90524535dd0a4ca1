"""Avro schemas for the pylog source and sinks: loading, and the Spark / Arrow types they map to.

* :func:`load_schema` reads an Avro schema given inline as JSON or as a path to an ``.avsc`` file
  (the ``avroSchema`` / ``keyAvroSchema`` options) and parses it with ``fastavro.parse_schema``.
* :func:`spark_type` / :func:`arrow_type` map an Avro schema to the Spark type Spark's own
  ``from_avro`` produces (spark-avro's ``SchemaConverters.toSqlType``) and to the Arrow type a
  Python data source yields for it:

  ===================================  ==========================  ==============================
  Avro                                 Spark                       Arrow
  ===================================  ==========================  ==============================
  record                               struct                      struct
  int / long / float / double          int / bigint / float / ...  int32 / int64 / float32 / ...
  boolean, string, bytes               boolean, string, binary     bool, string, binary
  enum                                 string                      string
  fixed                                binary                      binary
  array<T>, map<T>                     array<T>, map<string, T>    list<T>, map<string, T>
  [null, T]  (in any order)            T, nullable                 T, nullable
  [int, long] / [float, double]        bigint / double             int64 / float64
  other unions [A, B, ...]             struct<member0: A, ...>     struct (members nullable)
  date                                 date                        date32
  timestamp-millis / -micros           timestamp                   timestamp[us, tz=UTC]
  local-timestamp-millis / -micros     timestamp_ntz               timestamp[us]
  decimal(p, s) on bytes or fixed      decimal(p, s)               decimal128(p, s)
  time-millis / time-micros, uuid      int / bigint, string        int32 / int64, string
  ===================================  ==========================  ==============================

  Nullability follows Spark: a field is nullable exactly when its Avro type is a union with
  ``null``; the members of a union struct are all nullable (one is set per row). Recursive
  records have no Spark type and are rejected, as Spark rejects them by default.

Thread-safety: functions are pure; parsed schemas are plain dicts and must not be mutated.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import fastavro
import pyarrow as pa
from pyspark.sql import types as T

from kafka_spark.errors import PylogOptionError

__all__ = [
    "AvroSchemaError",
    "arrow_type",
    "decoding_schema",
    "has_struct_unions",
    "load_schema",
    "load_schema_json",
    "parse",
    "spark_type",
    "union_converters",
]

AvroSchema = Any  # a parsed fastavro schema: dict, list (union) or str (primitive / named ref)

_PRIMITIVES = {
    "null": T.NullType(),
    "boolean": T.BooleanType(),
    "int": T.IntegerType(),
    "long": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "bytes": T.BinaryType(),
    "string": T.StringType(),
}
_NAMED = ("record", "error", "enum", "fixed")
# Logical types whose fastavro Python value (datetime.time, uuid.UUID) Arrow cannot ingest in the
# Spark type chosen above; decoding drops them so fastavro returns the underlying int / str.
_DROPPED_LOGICAL = {"time-millis", "time-micros", "uuid"}


class AvroSchemaError(PylogOptionError):
    """An Avro schema that cannot be loaded, parsed or mapped; names the option and the problem."""


# --------------------------------------------------------------------------------------------
# loading


def load_schema(text_or_path: str, *, option: str = "avroSchema") -> dict[str, Any] | list | str:
    """Parse the Avro schema given inline as JSON or as a path to an ``.avsc`` file.

    A value whose first non-blank character is ``{``, ``[`` or ``"`` is JSON, a bare primitive
    name (``string``, ``long``, ...) is that schema; anything else is a path (``~`` expanded).
    ``option`` is the option name the value came from; every error names it.
    Returns the ``fastavro.parse_schema`` result (names expanded to full names).
    """
    return load_schema_json(text_or_path, option=option)[1]


def load_schema_json(text_or_path: str, *, option: str = "avroSchema") -> tuple[Any, AvroSchema]:
    """(the schema JSON as written, parsed) for :func:`load_schema`; the former is what a registry gets."""
    if not isinstance(text_or_path, str) or not text_or_path.strip():
        raise AvroSchemaError(
            f"Option {option} is empty: set it to an Avro schema as inline JSON "
            '(e.g. \'{"type": "record", "name": "Order", "fields": [...]}\') or to the path of an .avsc file.'
        )
    text = text_or_path.strip()
    where = "inline JSON"
    if text in _PRIMITIVES and not os.path.exists(text):
        text = json.dumps(text)  # keyAvroSchema=string means the schema "string", as JSON would say
    if text[0] not in '{["':
        path = os.path.expanduser(text)
        where = f"file {path}"
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise AvroSchemaError(
                f"Option {option}={text_or_path!r} is neither inline JSON (it does not start with '{{', "
                f"'[' or '\"') nor a readable .avsc file: {e.strerror or e}. Give the schema JSON "
                "or the path of an existing .avsc file."
            ) from e
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise AvroSchemaError(
            f"Option {option}: the Avro schema ({where}) is not valid JSON: {e.msg} at line {e.lineno} "
            f"column {e.colno}."
        ) from e
    try:
        parsed = parse(raw)
        spark_type(parsed)
    except (fastavro.schema.SchemaParseException, fastavro.schema.UnknownType, ValueError, TypeError, KeyError) as e:
        raise AvroSchemaError(f"Option {option}: the Avro schema ({where}) is not usable: {e}") from e
    return raw, parsed


def parse(schema: Any) -> AvroSchema:
    """``fastavro.parse_schema`` of a JSON string, a dict/list/str schema, or an already parsed one."""
    if isinstance(schema, str) and schema.lstrip()[:1] in ("{", "[", '"'):
        schema = json.loads(schema)
    return fastavro.parse_schema(schema)


# --------------------------------------------------------------------------------------------
# walking a parsed schema


class _Walker:
    """Resolves named-type references of one parsed schema while walking it depth first."""

    def __init__(self, schema: AvroSchema) -> None:
        self.named: dict[str, dict[str, Any]] = {}
        if isinstance(schema, dict):
            self.named.update(schema.get("__named_schemas", {}))

    def resolve(self, node: AvroSchema) -> AvroSchema:
        if isinstance(node, str) and node not in _PRIMITIVES:
            try:
                return self.named[node]
            except KeyError:
                raise AvroSchemaError(f"Avro schema refers to unknown type {node!r}") from None
        if isinstance(node, dict):
            kind = node.get("type")
            if kind in _NAMED:
                self.named.setdefault(node["name"], node)
            elif isinstance(kind, (dict, list)) or (
                isinstance(kind, str) and kind not in _PRIMITIVES and kind not in ("array", "map")
            ):
                # {"type": {...}} or {"type": "ns.Name"}: a wrapped schema
                return self.resolve(kind)
        return node


def _kind(node: AvroSchema) -> str:
    if isinstance(node, list):
        return "union"
    if isinstance(node, str):
        return node
    return node["type"] if isinstance(node["type"], str) else "wrapped"


def _union_shape(members: list[AvroSchema], walker: _Walker) -> tuple[str, list[AvroSchema]]:
    """Spark's reading of a union: ("single" | "long" | "double" | "struct" | "null", non-null members)."""
    resolved = [walker.resolve(m) for m in members]
    non_null = [m for m in resolved if _kind(m) != "null"]
    kinds = sorted(_kind(m) for m in non_null)
    if not non_null:
        return "null", []
    if len(non_null) == 1:
        return "single", non_null
    if kinds == ["int", "long"]:
        return "long", non_null
    if kinds == ["double", "float"]:
        return "double", non_null
    return "struct", non_null


# --------------------------------------------------------------------------------------------
# Spark and Arrow types


def spark_type(avro_schema: Any) -> T.DataType:
    """The Spark type of ``avro_schema`` as Spark's ``from_avro`` maps it (see module table)."""
    parsed = parse(avro_schema)
    walker = _Walker(parsed)
    return _spark(parsed, walker, ())[0]


def _spark(node: AvroSchema, walker: _Walker, stack: tuple[str, ...]) -> tuple[T.DataType, bool]:
    """(Spark type, nullable) of one schema node."""
    node = walker.resolve(node)
    if isinstance(node, list):
        shape, members = _union_shape(node, walker)
        nullable = len(members) < len(node)
        if shape == "null":
            raise AvroSchemaError("an Avro union of only null has no Spark type; give it a non-null member")
        if shape == "single":
            return _spark(members[0], walker, stack)[0], nullable
        if shape == "long":
            return T.LongType(), nullable
        if shape == "double":
            return T.DoubleType(), nullable
        fields = [T.StructField(f"member{i}", _spark(m, walker, stack)[0], True) for i, m in enumerate(members)]
        return T.StructType(fields), nullable
    if isinstance(node, str):
        return _PRIMITIVES[node], node == "null"
    kind = node["type"]
    logical = node.get("logicalType")
    if kind in ("record", "error"):
        name = node["name"]
        if name in stack:
            raise AvroSchemaError(
                f"Avro record {name} is recursive ({' -> '.join(stack + (name,))}); Spark types cannot "
                "be recursive: give the reader schema a non-recursive shape"
            )
        fields = []
        for f in node["fields"]:
            dtype, nullable = _spark(f["type"], walker, stack + (name,))
            fields.append(T.StructField(f["name"], dtype, nullable))
        return T.StructType(fields), False
    if kind == "enum":
        return T.StringType(), False
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(node.get("precision", 0)), int(node.get("scale", 0))
        if not 0 < precision <= 38 or not 0 <= scale <= precision:
            raise AvroSchemaError(
                f"Avro decimal(precision={precision}, scale={scale}) has no Spark type: Spark decimals "
                "need 1 <= precision <= 38 and 0 <= scale <= precision"
            )
        return T.DecimalType(precision, scale), False
    if kind == "fixed":
        return T.BinaryType(), False
    if kind == "array":
        elem, nullable = _spark(node["items"], walker, stack)
        return T.ArrayType(elem, nullable), False
    if kind == "map":
        value, nullable = _spark(node["values"], walker, stack)
        return T.MapType(T.StringType(), value, nullable), False
    if kind == "int" and logical == "date":
        return T.DateType(), False
    if kind == "long" and logical in ("timestamp-millis", "timestamp-micros"):
        return T.TimestampType(), False
    if kind == "long" and logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return T.TimestampNTZType(), False
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind], kind == "null"
    return _spark(kind, walker, stack)


def arrow_type(avro_schema: Any) -> pa.DataType:
    """The Arrow type a decoded column of ``avro_schema`` has (the Arrow form of :func:`spark_type`)."""
    return _arrow(spark_type(avro_schema))


def _arrow(dtype: T.DataType) -> pa.DataType:
    simple = {
        T.BooleanType: pa.bool_(),
        T.IntegerType: pa.int32(),
        T.LongType: pa.int64(),
        T.FloatType: pa.float32(),
        T.DoubleType: pa.float64(),
        T.StringType: pa.string(),
        T.BinaryType: pa.binary(),
        T.DateType: pa.date32(),
        T.TimestampType: pa.timestamp("us", tz="UTC"),
        T.TimestampNTZType: pa.timestamp("us"),
        T.NullType: pa.null(),
    }
    for cls, arrow in simple.items():
        if type(dtype) is cls:
            return arrow
    if isinstance(dtype, T.DecimalType):
        return pa.decimal128(dtype.precision, dtype.scale)
    if isinstance(dtype, T.ArrayType):
        return pa.list_(pa.field("element", _arrow(dtype.elementType), dtype.containsNull))
    if isinstance(dtype, T.MapType):
        return pa.map_(
            pa.field("key", _arrow(dtype.keyType), False),
            pa.field("value", _arrow(dtype.valueType), dtype.valueContainsNull),
        )
    if isinstance(dtype, T.StructType):
        return pa.struct([pa.field(f.name, _arrow(f.dataType), f.nullable) for f in dtype.fields])
    raise AvroSchemaError(f"Spark type {dtype.simpleString()} has no Arrow mapping in pylog's Avro support")


# --------------------------------------------------------------------------------------------
# helpers for the codecs


def decoding_schema(avro_schema: Any) -> AvroSchema:
    """``avro_schema`` with the logical types dropped whose Python values Arrow cannot ingest.

    time-millis / time-micros decode as int / long and uuid as string, matching :func:`spark_type`.
    Schema resolution ignores logical types, so the result resolves against the same writers.
    """

    def strip(node: Any) -> Any:
        if isinstance(node, list):
            return [strip(m) for m in node]
        if not isinstance(node, dict):
            return node
        out = {
            k: (strip(v) if k in ("type", "items", "values") else v) for k, v in node.items() if k != "__named_schemas"
        }
        if "fields" in node:
            out["fields"] = [{**f, "type": strip(f["type"])} for f in node["fields"]]
        if out.get("logicalType") in _DROPPED_LOGICAL:
            del out["logicalType"]
        return out

    parsed = parse(avro_schema)
    # named types from registry references are not inline: hand them over (stripped alike)
    named = {k: strip(v) for k, v in parsed.get("__named_schemas", {}).items()} if isinstance(parsed, dict) else {}
    return fastavro.parse_schema(strip(parsed), named_schemas=named)


def has_struct_unions(avro_schema: Any) -> bool:
    """Whether some union maps to a ``member0..N`` struct (decoding then needs a per-record pass)."""
    parsed = parse(avro_schema)
    walker = _Walker(parsed)
    seen: set[str] = set()

    def visit(node: Any) -> bool:
        node = walker.resolve(node)
        if isinstance(node, list):
            shape, members = _union_shape(node, walker)
            return shape == "struct" or any(visit(m) for m in members)
        if isinstance(node, str):
            return False
        kind = node["type"]
        if kind in ("record", "error"):
            if node["name"] in seen:
                return False
            seen.add(node["name"])
            return any(visit(f["type"]) for f in node["fields"])
        if kind == "array":
            return visit(node["items"])
        if kind == "map":
            return visit(node["values"])
        return False

    return visit(parsed)


def union_converters(avro_schema: Any) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """(to_spark, to_avro): per-record converters between fastavro's union values and Spark's structs.

    ``to_spark`` takes a record decoded with ``return_named_type=True`` (named union members arrive
    as ``(full name, value)`` tuples) and returns it shaped like :func:`spark_type`: struct-mapped
    unions become ``{"member<i>": value}`` dicts. ``to_avro`` is the inverse, producing fastavro's
    tuple notation ``(branch name, value)`` so the writer picks the branch Spark's struct names.
    Only needed when :func:`has_struct_unions`; plain records need no per-record Python work.
    """
    parsed = parse(avro_schema)
    walker = _Walker(parsed)

    def identity(v: Any) -> Any:
        return v

    def branch_name(node: AvroSchema) -> str:
        return node["name"] if isinstance(node, dict) and node["type"] in _NAMED else _kind(node)

    def build(node: AvroSchema, stack: tuple[str, ...]) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
        node = walker.resolve(node)
        if isinstance(node, list):
            shape, members = _union_shape(node, walker)
            convs = [build(m, stack) for m in members]
            names = [branch_name(m) for m in members]

            def untuple(v: Any) -> tuple[int | None, Any]:
                if isinstance(v, tuple) and len(v) == 2 and v[0] in names:
                    return names.index(v[0]), v[1]
                return None, v

            if shape != "struct":
                single_to_spark, single_to_avro = convs[0] if len(convs) == 1 else (identity, identity)

                def to_spark(v: Any) -> Any:
                    i, v = untuple(v)
                    return None if v is None else (convs[i][0] if i is not None else single_to_spark)(v)

                return to_spark, lambda v: None if v is None else single_to_avro(v)

            def struct_to_spark(v: Any) -> Any:
                i, v = untuple(v)
                if v is None:
                    return None
                if i is None:
                    i = _member_for_value(v, members)
                return {f"member{i}": convs[i][0](v)}

            def struct_to_avro(v: Any) -> Any:
                if v is None:
                    return None
                for i, conv in enumerate(convs):
                    item = v.get(f"member{i}")
                    if item is not None:
                        return (names[i], conv[1](item))
                return None

            return struct_to_spark, struct_to_avro
        if isinstance(node, str):
            return identity, identity
        kind = node["type"]
        if kind in ("record", "error"):
            if node["name"] in stack:
                return identity, identity
            fields = [(f["name"], build(f["type"], stack + (node["name"],))) for f in node["fields"]]

            def rec_to_spark(v: Any) -> Any:
                return None if v is None else {name: c[0](v.get(name)) for name, c in fields}

            def rec_to_avro(v: Any) -> Any:
                return None if v is None else {name: c[1](v.get(name)) for name, c in fields}

            return rec_to_spark, rec_to_avro
        if kind == "array":
            c = build(node["items"], stack)
            return (lambda v: None if v is None else [c[0](x) for x in v]), (
                lambda v: None if v is None else [c[1](x) for x in v]
            )
        if kind == "map":
            c = build(node["values"], stack)
            return (lambda v: None if v is None else {k: c[0](x) for k, x in v.items()}), (
                lambda v: None if v is None else {k: c[1](x) for k, x in v.items()}
            )
        return identity, identity

    return build(parsed, ())


def _member_for_value(value: Any, members: list[AvroSchema]) -> int:
    """The union member an unnamed value came from, judged by its Python type (named ones are tuples)."""

    def kind_and_logical(m: AvroSchema) -> tuple[str, str | None]:
        if isinstance(m, dict):
            return str(m["type"]), m.get("logicalType")
        return _kind(m), None

    wanted: tuple[tuple[str, str | None], ...]
    if isinstance(value, bool):
        wanted = (("boolean", None),)
    elif isinstance(value, int):
        # an int and a long member can both hold a small value; Avro's writer prefers the first
        wanted = (("int", None), ("long", None)) if -(2**31) <= value < 2**31 else (("long", None),)
    elif isinstance(value, float):
        wanted = (("float", None), ("double", None))
    elif isinstance(value, str):
        wanted = (("string", None), ("string", "uuid"))
    elif isinstance(value, (bytes, bytearray)):
        wanted = (("bytes", None),)
    elif isinstance(value, decimal.Decimal):
        wanted = (("bytes", "decimal"),)
    elif isinstance(value, dt.datetime):
        wanted = tuple(
            ("long", lt)
            for lt in ("timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros")
        )
    elif isinstance(value, dt.date):
        wanted = (("int", "date"),)
    elif isinstance(value, list):
        wanted = (("array", None),)
    elif isinstance(value, Mapping):
        wanted = (("map", None),)
    else:
        wanted = ()
    for want in wanted:
        for i, m in enumerate(members):
            if kind_and_logical(m) == want:
                return i
    raise AvroSchemaError(f"cannot tell which union member a decoded {type(value).__name__} belongs to")
