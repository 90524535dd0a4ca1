"""Avro keys and values for the pylog source and topic sink, in plain and Confluent wire format.

Spark's own ``from_avro`` / ``to_avro`` live in the spark-avro jar, which a pip-installed PySpark
lacks, so pylog decodes and encodes Avro itself with fastavro (C reader/writer) into and out of
Arrow columns; the Spark types are Spark's (see :mod:`kafka_spark.avro.schema`).

Wire formats
------------
``plain``
    The Kafka value is one schemaless Avro datum (``fastavro.schemaless_writer``), written with the
    writer schema (``avroWriterSchema``, default: the reader schema ``avroSchema``).
``confluent``
    Confluent's framing: magic byte ``0``, the writer schema's registry id as 4 bytes big-endian,
    then the datum. The decoder fetches the writer schema by id from the schema registry (cached per
    decoder) and resolves it against the reader schema (Avro schema evolution: fields added with a
    default, removed fields, promotions). The encoder registers its schema under the subject once
    (TopicNameStrategy: ``<topic>-value`` / ``<topic>-key``) and frames each datum with that id.

Malformed records
-----------------
A datum fastavro cannot read (truncated, bad union index, invalid UTF-8, wrong framing, unknown
schema id, writer schema not resolvable to the reader schema) is handled per ``avroMode`` (the
names of Spark's ``from_avro`` ``mode`` option): ``FAILFAST`` (default) raises
:class:`MalformedAvroError` naming topic, partition and offset; ``PERMISSIVE`` decodes that row to
null and goes on; the caller keeps the raw bytes next to it, so nothing is dropped silently.
Null Kafka values (tombstones) decode to null in both modes. Bytes after a complete datum are
ignored, as Spark's ``from_avro`` and Confluent's deserializer ignore them. A registry that cannot
be reached is not a malformed record: :class:`AvroRegistryError` is raised in both modes.

Options (for the source and the topic sink; Spark lower-cases option names, lookups here do too)
---------------------------------------------------------------------------------------------
``valueFormat`` / ``keyFormat`` (``binary`` | ``avro``, default ``binary``)
    ``avro`` decodes the column (source) or encodes it (sink) with the options below.
``avroSchema`` / ``keyAvroSchema`` (inline JSON, a primitive name such as ``string``, or an ``.avsc`` path)
    Required for ``avro``. Source: the reader schema, which fixes the column's Spark type (the
    option name of Spark's ``from_avro`` for the evolved reader schema). Sink: the writer schema.
    A path is read once on the driver; executors receive the JSON.
``avroWriterSchema`` / ``keyAvroWriterSchema`` (inline JSON or path; plain wire format, source only)
    The schema the producer wrote with, when it differs from the reader schema (Spark's
    ``from_avro(col, jsonFormatSchema, {"avroSchema": ...})`` pair). Confluent framing carries it.
``avroMode`` (``FAILFAST`` | ``PERMISSIVE``, default ``FAILFAST``; both key and value)
    What a malformed record does (above); Spark's ``from_avro`` ``mode``.
``avroWireFormat`` / ``keyAvroWireFormat`` (``plain`` | ``confluent``)
    Default ``confluent`` when ``schemaRegistryUrl`` is set, else ``plain``; the key defaults to
    the value's setting.
``schemaRegistryUrl``
    The Schema Registry base URL(s), comma-separated (confluent-kafka's ``url``; ``mock://name``
    is confluent-kafka's in-memory registry, one per process).
``schemaRegistry.<conf>``
    Passed to confluent-kafka's ``SchemaRegistryClient`` as ``<conf>``: ``basic.auth.user.info``,
    ``basic.auth.credentials.source``, ``ssl.ca.location``, ``bearer.auth.*``, ``timeout``, ...
    Values are never logged nor shown in a repr.

Thread-safety: decoders and encoders keep per-instance caches guarded by nothing; use one per
thread (Spark runs one partition per Python worker at a time). Registry clients from
:func:`registry_client` are shared per configuration; confluent-kafka's client is thread-safe.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeAlias

import fastavro
import numpy as np
import pyarrow as pa
from fastavro._read_common import SchemaResolutionError

from kafka_spark.avro.schema import (
    AvroSchemaError,
    arrow_type,
    decoding_schema,
    has_struct_unions,
    load_schema,
    load_schema_json,
    parse,
    spark_type,
    union_converters,
)
from kafka_spark.errors import PylogError, PylogOptionError
from kafka_spark.option_names import PYLOG_ONLY, OptionDoc

__all__ = [
    "AVRO_OPTIONS",
    "AVRO_OPTION_DOCS",
    "AvroColumn",
    "AvroDecoder",
    "AvroEncodeError",
    "AvroEncoder",
    "AvroError",
    "AvroRegistryError",
    "AvroSchemaError",
    "MalformedAvroError",
    "arrow_type",
    "load_schema",
    "parse_avro_options",
    "registry_client",
    "spark_type",
    "topic_subject",
]

MODES = ("FAILFAST", "PERMISSIVE")
#: The options of Avro columns, shared by the source and the topic sink (plus ``schemaRegistry.*``).
AVRO_OPTION_DOCS: tuple[OptionDoc, ...] = (
    OptionDoc(
        "valueFormat",
        PYLOG_ONLY,
        "`binary`",
        "`avro`: the source adds a decoded struct column `valueAvro`; the topic sink encodes a struct `value` column.",
    ),
    OptionDoc("keyFormat", PYLOG_ONLY, "`binary`", "`avro`: the same for keys (`keyAvro`, a struct `key` column)."),
    OptionDoc(
        "avroSchema",
        PYLOG_ONLY,
        "",
        "Required with `avro`: inline JSON, a primitive name such as `string`, or an `.avsc` path. Source: the "
        "reader schema (it fixes the column's Spark type). Sink: the writer schema.",
    ),
    OptionDoc("keyAvroSchema", PYLOG_ONLY, "", "`avroSchema` for keys."),
    OptionDoc(
        "avroWriterSchema",
        PYLOG_ONLY,
        "`avroSchema`",
        "Source, plain wire format: the schema the producer wrote with, when it differs from the reader "
        "schema (schema evolution). Confluent framing carries it instead.",
    ),
    OptionDoc("keyAvroWriterSchema", PYLOG_ONLY, "`keyAvroSchema`", "`avroWriterSchema` for keys."),
    OptionDoc(
        "avroWireFormat",
        PYLOG_ONLY,
        "`confluent` with `schemaRegistryUrl`, else `plain`",
        "`plain`: one schemaless Avro datum; `confluent`: Confluent's framing (magic byte, schema id, datum).",
    ),
    OptionDoc("keyAvroWireFormat", PYLOG_ONLY, "`avroWireFormat`", "`avroWireFormat` for keys."),
    OptionDoc(
        "schemaRegistryUrl",
        PYLOG_ONLY,
        "",
        "Schema Registry URL(s), comma-separated. `schemaRegistry.<setting>` options (`basic.auth.user.info`, "
        "`ssl.ca.location`, ...) go to confluent-kafka's registry client and are never logged.",
    ),
    OptionDoc(
        "avroMode",
        PYLOG_ONLY,
        "`FAILFAST`",
        "`FAILFAST` fails naming topic, partition and offset of a malformed payload; `PERMISSIVE` gives null "
        "beside the raw bytes (Spark's `from_avro` `mode`).",
    ),
)
AVRO_OPTIONS = tuple(option.name for option in AVRO_OPTION_DOCS)
WIRE_FORMATS = ("plain", "confluent")
_MAGIC = 0
_HEADER = 5
# What fastavro raises on bytes that are not a datum of the writer schema (EOFError: truncated;
# ValueError incl. UnicodeDecodeError: bad text or lengths; IndexError: bad union or enum index).
_READ_ERRORS = (EOFError, ValueError, IndexError, KeyError, TypeError, OverflowError, SchemaResolutionError)
_WRITE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, OverflowError)
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError, TypeError)

Payloads: TypeAlias = Sequence[bytes | None] | pa.Array | pa.ChunkedArray


class AvroError(PylogError, ValueError):
    """Base of pylog's Avro errors."""


class MalformedAvroError(AvroError):
    """A record that is not Avro of the expected schema, in avroMode FAILFAST."""

    def __init__(self, message: str, *, topic: str, partition: int, offset: int) -> None:
        super().__init__(message)
        self.topic, self.partition, self.offset = topic, partition, offset


class AvroRegistryError(AvroError):
    """The schema registry failed (unreachable, refused, auth) for a reason other than a record."""


class AvroEncodeError(AvroError):
    """A row that does not match the Avro schema it is written with."""


def topic_subject(topic: str, *, is_key: bool = False) -> str:
    """The registry subject of a topic's keys or values under Confluent's TopicNameStrategy."""
    return f"{topic}-{'key' if is_key else 'value'}"


# --------------------------------------------------------------------------------------------
# registry clients

_clients: dict[tuple[tuple[str, str], ...], Any] = {}
_clients_lock = threading.Lock()


# confluent-kafka wants numbers for these; Spark options are strings
_NUMERIC_REGISTRY_CONF = (
    "timeout",
    "cache.capacity",
    "cache.latest.ttl.sec",
    "max.retries",
    "retries.wait.ms",
    "retries.max.wait.ms",
)


def registry_client(conf: Mapping[str, Any]) -> Any:
    """A confluent-kafka ``SchemaRegistryClient`` for ``conf`` (``url`` plus client settings).

    One client per distinct configuration and process, so executors reuse its HTTP connections and
    schema cache across micro-batches. ``mock://`` URLs give confluent-kafka's in-memory registry.
    String values of numeric settings (``timeout``, ``max.retries``, ...) are converted. Raises
    :class:`PylogOptionError` naming ``schemaRegistryUrl`` / ``schemaRegistry.<conf>`` when the
    client rejects the configuration.
    """
    from confluent_kafka.schema_registry import SchemaRegistryClient

    typed: dict[str, Any] = {}
    for k, v in conf.items():
        if k in _NUMERIC_REGISTRY_CONF and isinstance(v, str):
            try:
                v = float(v) if k == "timeout" else int(v)
            except ValueError:
                raise PylogOptionError(f"schemaRegistry.{k}={v!r} is not a number") from None
        typed[str(k)] = v
    key = tuple(sorted((k, repr(v)) for k, v in typed.items()))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            factory = getattr(SchemaRegistryClient, "new_client", SchemaRegistryClient)
            try:
                client = factory(typed)
            except (TypeError, ValueError) as e:
                # the message names the setting but may not quote values; never include conf values here
                raise PylogOptionError(
                    f"The schema registry client rejected its configuration (schemaRegistryUrl / schemaRegistry.*): {e}"
                ) from e
            _clients[key] = client
        return client


def _is_not_found(error: Exception) -> bool:
    return getattr(error, "http_status_code", None) == 404


def _registry_error_types() -> tuple[type[Exception], ...]:
    from confluent_kafka.schema_registry.common._httpx_compat import httpx
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    # httpx (httpx2) transport errors are not OSErrors; ValueError covers bad schema JSON / Avro
    return (SchemaRegistryError, httpx.HTTPError, OSError, ValueError, fastavro.schema.SchemaParseException)


def _schema_json(schema: Any) -> str:
    """JSON of a raw or fastavro-parsed schema, without fastavro's bookkeeping keys."""

    def clean(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: clean(v) for k, v in node.items() if not str(k).startswith("__")}
        if isinstance(node, list):
            return [clean(v) for v in node]
        return node

    if isinstance(schema, str) and schema.lstrip()[:1] in ("{", "[", '"'):
        schema = json.loads(schema)
    return json.dumps(clean(schema), separators=(",", ":"))


# --------------------------------------------------------------------------------------------
# decoding


class AvroDecoder:
    """Decodes a column of Kafka keys or values into an Arrow array of ``arrow_type(reader_schema)``.

    ``decode`` returns a StructArray for record reader schemas (the usual case), else an array of
    the mapped type; row *i* is the datum of ``values[i]``, null for tombstones and, in PERMISSIVE
    mode, for malformed records. ``offsets``, ``topic`` and ``partition`` only name records in
    errors. Replays decode the same bytes to the same rows: the writer schema of a Confluent id is
    immutable in a registry, and it is cached per decoder.
    """

    def __init__(
        self,
        reader_schema: Any,
        *,
        confluent: bool = False,
        registry: Any = None,
        mode: str = "FAILFAST",
        writer_schema: Any = None,
        role: str = "value",
    ) -> None:
        if mode not in MODES:
            raise PylogOptionError(f"avroMode={mode!r} is not one of {', '.join(MODES)}")
        if confluent and registry is None:
            raise PylogOptionError(
                "The Confluent wire format needs a schema registry: set schemaRegistryUrl (or pass registry=)"
            )
        self.mode, self.role, self._confluent, self._registry = mode, role, confluent, registry
        self.reader_schema = parse(reader_schema)
        self.arrow_type = arrow_type(self.reader_schema)
        self._reader = decoding_schema(self.reader_schema)
        self._struct_unions = has_struct_unions(self.reader_schema)
        self._to_spark = union_converters(self._reader)[0] if self._struct_unions else None
        self._plain_writer = decoding_schema(writer_schema) if writer_schema is not None else None
        self._writers: dict[int, Any] = {}  # registry id -> parsed decoding schema

    # -- public --------------------------------------------------------------------------------

    def decode(self, values: Payloads, offsets: Sequence[int] | pa.Array, topic: str, partition: int) -> pa.Array:
        """Decode ``values`` (bytes or None per record, or an Arrow binary array) into Arrow rows."""
        errors: list[tuple[int, str]] = []  # (row, reason)
        n, groups = self._split(values, errors)

        decoded: list[tuple[np.ndarray | None, list[Any]]] = []
        for rows, payloads, writer in groups:
            records, bad = self._read_all(payloads, writer)
            errors.extend((i if rows is None else int(rows[i]), reason) for i, reason in bad)
            decoded.append((rows, records))
        if errors and self.mode == "FAILFAST":
            row, reason = min(errors)
            self._fail(row, reason, offsets, topic, partition)

        if len(decoded) == 1 and decoded[0][0] is None:
            result, bad_rows = self._to_arrow(decoded[0][1])
            rows_of = None
        else:
            records = [r for _, group in decoded for r in group]
            rows_of = np.concatenate([g for g, _ in decoded]) if decoded else np.empty(0, np.int64)
            result, bad_rows = self._to_arrow(records + [None])
            # row i of the output is records[gather[i]]; rows without a record take the final null
            gather = np.full(n, len(records), dtype=np.int64)
            gather[rows_of.astype(np.int64)] = np.arange(len(records), dtype=np.int64)
            result = result.take(pa.array(gather))
        if bad_rows and self.mode == "FAILFAST":
            row, reason = min((i if rows_of is None else int(rows_of[i]), reason) for i, reason in bad_rows)
            self._fail(row, reason, offsets, topic, partition)
        return result

    # -- internals -----------------------------------------------------------------------------

    def _split(self, values: Payloads, errors: list) -> tuple[int, list[tuple[np.ndarray | None, list[bytes], Any]]]:
        """(row count, groups of (rows or None for all, payloads, writer schema)); framing errors to ``errors``."""
        if not self._confluent and isinstance(values, list) and None not in values:
            # the common plain case: fastavro reads the caller's bytes objects as they are
            return len(values), [(None, values, self._plain_writer)]
        arr = _binary_array(values)
        groups: list[tuple[np.ndarray | None, list[bytes], Any]] = []
        if self._confluent:
            self._confluent_groups(arr, groups, errors)
        elif arr.null_count == 0:
            groups.append((None, arr.to_pylist(), self._plain_writer))
        else:
            rows = np.flatnonzero(arr.is_valid().to_numpy(zero_copy_only=False))
            groups.append((rows, arr.take(pa.array(rows)).to_pylist(), self._plain_writer))
        return len(arr), groups

    def _confluent_groups(self, arr: pa.BinaryArray, groups: list, errors: list) -> None:
        """Split framed values by writer schema id (vectorised over the Arrow buffers)."""
        import pyarrow.compute as pc  # here, not at import: option parsing in Spark's planner imports this module

        n = len(arr)
        wire_option = "avroWireFormat" if self.role == "value" else "keyAvroWireFormat"
        lengths = pc.fill_null(pc.binary_length(arr), -1).to_numpy(zero_copy_only=False)
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset : arr.offset + n + 1]
        data_buf = arr.buffers()[2]
        data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        framed = lengths >= _HEADER
        starts = offsets[:-1].astype(np.int64)
        safe = np.where(framed, starts, 0)
        magic_ok = np.zeros(n, dtype=bool)
        if framed.any():
            magic_ok[framed] = data[safe[framed]] == _MAGIC
        ok = framed & magic_ok
        for row in np.flatnonzero((lengths >= 0) & ~ok):
            errors.append(
                (
                    int(row),
                    f"not in the Confluent wire format (magic byte 0 + 4-byte schema id), got "
                    f"{len(arr[int(row)].as_py())} bytes starting {arr[int(row)].as_py()[:_HEADER]!r}; if this "
                    f"topic's producers do not use a schema registry, set {wire_option}=plain",
                )
            )
        ok_rows = np.flatnonzero(ok)
        if not len(ok_rows):
            return
        s = starts[ok_rows]
        ids = (
            (data[s + 1].astype(np.int64) << 24)
            | (data[s + 2].astype(np.int64) << 16)
            | (data[s + 3].astype(np.int64) << 8)
            | data[s + 4].astype(np.int64)
        )
        for schema_id in np.unique(ids):
            rows = ok_rows[ids == schema_id]
            writer = self._writer_for(int(schema_id))
            if isinstance(writer, str):  # the reason this id cannot be read
                errors.extend((int(r), writer) for r in rows)
                continue
            # an explicit stop: pyarrow's binary_slice mis-sizes its output when stop is left open
            payloads = pc.binary_slice(arr.take(pa.array(rows)), _HEADER, 2**31 - 1).to_pylist()
            groups.append((rows, payloads, writer))

    def _writer_for(self, schema_id: int) -> Any:
        """The parsed writer schema of a registry id, or a reason string if the registry has no such id."""
        cached = self._writers.get(schema_id)
        if cached is not None:
            return cached
        try:
            registered = self._registry.get_schema(schema_id)
            if getattr(registered, "schema_type", None) not in (None, "AVRO"):
                return f"schema id {schema_id} is a {registered.schema_type} schema, not Avro"
            writer = decoding_schema(_resolve_references(self._registry, registered))
        except _registry_error_types() as e:
            if _is_not_found(e):
                return f"schema id {schema_id} is not in the schema registry"
            if isinstance(e, (ValueError, fastavro.schema.SchemaParseException)):
                return f"schema id {schema_id} is not an Avro schema pylog can read: {e}"
            raise AvroRegistryError(
                f"Fetching writer schema id {schema_id} from the schema registry failed: {e}. Check "
                "schemaRegistryUrl and the schemaRegistry.* settings (auth, TLS); the read is retried "
                "with the task."
            ) from e
        self._writers[schema_id] = writer
        return writer

    def _read_all(self, payloads: list[bytes], writer: Any) -> tuple[list[Any], list[tuple[int, str]]]:
        """Decode every payload; malformed ones become None with their reason."""
        if writer is None:
            read = partial(fastavro.schemaless_reader, writer_schema=self._reader, reader_schema=None)
        else:
            read = partial(fastavro.schemaless_reader, writer_schema=writer, reader_schema=self._reader)
        if self._struct_unions:
            read = partial(read, return_named_type=True)
        try:
            # one C call per record and no Python frame per record: the hot path
            return list(map(read, map(io.BytesIO, payloads))), []
        except _READ_ERRORS:
            # some payload is malformed: decode one by one to isolate it
            return self._read_each(payloads, read)

    @staticmethod
    def _read_each(payloads: list[bytes], read: Any) -> tuple[list[Any], list[tuple[int, str]]]:
        records: list[Any] = []
        bad: list[tuple[int, str]] = []
        for i, payload in enumerate(payloads):
            try:
                records.append(read(io.BytesIO(payload)))
            except _READ_ERRORS as e:
                records.append(None)
                bad.append((i, _reason(e, payload)))
        return records, bad

    def _to_arrow(self, records: list[Any]) -> tuple[pa.Array, list[tuple[int, str]]]:
        if self._to_spark is not None:
            records = [self._to_spark(r) for r in records]
        try:
            return pa.array(records, type=self.arrow_type), []
        except _ARROW_ERRORS:
            # a value fastavro read does not fit the Spark type (e.g. a writer decimal wider than
            # the reader's): find the rows one by one
            return self._to_arrow_each(records)

    def _to_arrow_each(self, records: list[Any]) -> tuple[pa.Array, list[tuple[int, str]]]:
        records = list(records)
        bad: list[tuple[int, str]] = []
        for i, r in enumerate(records):
            try:
                pa.array([r], type=self.arrow_type)
            except _ARROW_ERRORS as e:
                bad.append((i, f"decoded value does not fit {spark_type(self.reader_schema).simpleString()}: {e}"))
                records[i] = None
        return pa.array(records, type=self.arrow_type), bad

    def _fail(self, row: int, reason: str, offsets: Any, topic: str, partition: int) -> None:
        offset = offsets[row]
        offset = offset.as_py() if isinstance(offset, pa.Scalar) else int(offset)
        option = "avroSchema" if self.role == "value" else "keyAvroSchema"
        raise MalformedAvroError(
            f"Malformed Avro {self.role} at topic {topic!r} partition {partition} offset {offset}: {reason}. "
            f"Check the producer and {option}"
            + (" (and the schema registry)" if self._confluent else "")
            + f", or set avroMode=PERMISSIVE to read malformed {self.role}s as null and keep going "
            "(the raw bytes stay in the output).",
            topic=topic,
            partition=partition,
            offset=offset,
        )


def _reason(error: BaseException, payload: bytes) -> str:
    detail = str(error) or type(error).__name__
    if isinstance(error, EOFError):
        detail = f"truncated ({detail})" if str(error) else "truncated"
    return f"{type(error).__name__}: {detail} (datum of {len(payload)} bytes)"


def _binary_array(values: Payloads) -> pa.BinaryArray:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values if values.type == pa.binary() else values.cast(pa.binary())
    return pa.array(values, type=pa.binary())


def _resolve_references(registry: Any, registered: Any) -> Any:
    """The writer schema of a registry entry, with the named types of its references parsed in."""
    named: dict[str, Any] = {}

    def add(schema: Any) -> None:
        for ref in getattr(schema, "references", None) or []:
            referenced = registry.get_version(ref.subject, ref.version).schema
            add(referenced)
            fastavro.parse_schema(json.loads(referenced.schema_str), named_schemas=named)

    add(registered)
    return fastavro.parse_schema(json.loads(registered.schema_str), named_schemas=named)


# --------------------------------------------------------------------------------------------
# encoding


class AvroEncoder:
    """Encodes rows into Kafka key or value bytes with one Avro schema.

    ``encode`` takes an Arrow array (a StructArray for record schemas) or a list of Python values
    shaped like ``spark_type(schema)`` and returns one ``bytes`` per row, ``None`` for null rows
    (Kafka null values). In Confluent mode the schema is registered under ``subject`` at the first
    ``encode`` (registering an identical schema again returns the same id) and each datum is
    framed with magic byte 0 and that id.
    """

    def __init__(
        self,
        schema: Any,
        *,
        confluent: bool = False,
        registry: Any = None,
        subject: str | None = None,
        role: str = "value",
    ) -> None:
        if confluent and (registry is None or not subject):
            raise PylogOptionError(
                "The Confluent wire format needs a schema registry (schemaRegistryUrl) and a subject "
                "(TopicNameStrategy: <topic>-value / <topic>-key)"
            )
        self._schema_text = _schema_json(schema)  # registered as given, not in fastavro's expanded form
        self.schema = parse(schema)
        spark_type(self.schema)  # rejects schemas Spark rows cannot have (recursive, ...)
        self._writer = decoding_schema(self.schema)
        self._to_avro = union_converters(self._writer)[1] if has_struct_unions(self.schema) else None
        self._confluent, self._registry, self.subject, self.role = confluent, registry, subject, role
        self._header: bytes | None = None if confluent else b""

    @property
    def schema_id(self) -> int | None:
        """The registry id the payloads are framed with (registers on first use); None if plain."""
        return int.from_bytes(self._frame_header()[1:], "big") if self._confluent else None

    def _frame_header(self) -> bytes:
        if self._header is None:
            from confluent_kafka.schema_registry import Schema

            try:
                schema_id = self._registry.register_schema(self.subject, Schema(self._schema_text, "AVRO"))
            except _registry_error_types() as e:
                raise AvroRegistryError(
                    f"Registering the Avro schema under subject {self.subject!r} failed: {e}. Check "
                    "schemaRegistryUrl, the schemaRegistry.* settings, and that the schema is compatible "
                    "with the subject's earlier versions (the registry's compatibility rule)."
                ) from e
            self._header = bytes([_MAGIC]) + int(schema_id).to_bytes(4, "big")
        return self._header

    def encode(self, rows: pa.Array | pa.ChunkedArray | Sequence[Any]) -> list[bytes | None]:
        """One Avro datum (framed in Confluent mode) per row; None rows stay None."""
        if isinstance(rows, pa.ChunkedArray):
            rows = rows.combine_chunks()
        if isinstance(rows, pa.Array):
            rows = rows.to_pylist(maps_as_pydicts="strict")
        if self._to_avro is not None:
            rows = [self._to_avro(r) for r in rows]
        header = self._frame_header()
        write, schema = fastavro.schemaless_writer, self._writer
        out: list[bytes | None] = []
        append = out.append
        for i, row in enumerate(rows):
            if row is None:
                append(None)
                continue
            buf = io.BytesIO()
            buf.write(header)
            try:
                write(buf, schema, row)
            except _WRITE_ERRORS as e:
                raise AvroEncodeError(
                    f"Row {i} cannot be written with the Avro schema"
                    + (f" of subject {self.subject!r}" if self.subject else "")
                    + f": {type(e).__name__}: {e}. Make the {self.role} column match "
                    + ("avroSchema" if self.role == "value" else "keyAvroSchema")
                    + ": same field names and types, non-null values where the Avro type has no null."
                ) from e
            append(buf.getvalue())
        return out


# --------------------------------------------------------------------------------------------
# options


@dataclass(frozen=True)
class AvroColumn:
    """How one column (``key`` or ``value``) is Avro-encoded; picklable, shipped to executors.

    Schemas are kept as JSON text (an ``.avsc`` path is read on the driver). ``registry_conf``
    holds credentials and is left out of repr.
    """

    role: str
    schema_json: str
    writer_schema_json: str | None
    wire_format: str
    mode: str
    registry_conf: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def confluent(self) -> bool:
        return self.wire_format == "confluent"

    def spark_type(self) -> Any:
        return spark_type(self.schema_json)

    def registry(self) -> Any:
        return registry_client(dict(self.registry_conf)) if self.confluent else None

    def decoder(self) -> AvroDecoder:
        return AvroDecoder(
            self.schema_json,
            confluent=self.confluent,
            registry=self.registry(),
            mode=self.mode,
            writer_schema=self.writer_schema_json,
            role=self.role,
        )

    def encoder(self, topic: str | None = None) -> AvroEncoder:
        subject = topic_subject(topic, is_key=self.role == "key") if topic is not None else None
        return AvroEncoder(
            self.schema_json, confluent=self.confluent, registry=self.registry(), subject=subject, role=self.role
        )


def parse_avro_options(options: Mapping[str, str]) -> dict[str, AvroColumn]:
    """The Avro columns that ``options`` configure: ``{"key": ..., "value": ...}`` (either may be absent).

    Lookups are by lower-cased name (Spark hands data sources lower-cased keys). Raises
    :class:`PylogOptionError` (or :class:`AvroSchemaError`) naming the option to fix.
    """
    opts = {str(k).lower(): v for k, v in options.items()}
    registry_conf: dict[str, str] = {
        k[len("schemaregistry.") :]: str(v) for k, v in opts.items() if k.startswith("schemaregistry.")
    }
    url = opts.get("schemaregistryurl")
    if url:
        registry_conf["url"] = str(url)
    mode = str(opts.get("avromode", "FAILFAST")).upper()
    if mode not in MODES:
        raise PylogOptionError(f"avroMode={opts['avromode']!r} is not valid: use FAILFAST (default) or PERMISSIVE")
    value_wire = str(opts.get("avrowireformat", "confluent" if url else "plain")).lower()
    columns: dict[str, AvroColumn] = {}
    for role, prefix in (("value", ""), ("key", "key")):
        fmt_option = f"{role}Format"
        fmt = str(opts.get(fmt_option.lower(), "binary")).lower()
        schema_option = f"{prefix}AvroSchema" if prefix else "avroSchema"
        writer_option = f"{prefix}AvroWriterSchema" if prefix else "avroWriterSchema"
        wire_option = f"{prefix}AvroWireFormat" if prefix else "avroWireFormat"
        wire = str(opts.get(wire_option.lower(), value_wire)).lower()
        if fmt not in ("binary", "avro"):
            raise PylogOptionError(f"{fmt_option}={fmt!r} is not valid: use binary (default) or avro")
        if fmt != "avro":
            stray = [o for o in (schema_option, writer_option) if o.lower() in opts]
            if stray:
                raise PylogOptionError(f"{', '.join(stray)} is set but {fmt_option} is {fmt}: set {fmt_option}=avro")
            continue
        if wire not in WIRE_FORMATS:
            raise PylogOptionError(f"{wire_option}={wire!r} is not valid: use plain or confluent")
        if schema_option.lower() not in opts:
            raise PylogOptionError(
                f"{fmt_option}=avro needs {schema_option}: the Avro schema as inline JSON or an .avsc path"
            )
        schema = _json_of(opts[schema_option.lower()], schema_option)
        writer = opts.get(writer_option.lower())
        if writer is not None and wire == "confluent":
            raise PylogOptionError(
                f"{writer_option} applies to the plain wire format only: Confluent framing names the "
                "writer schema by registry id. Remove it."
            )
        if wire == "confluent" and "url" not in registry_conf:
            raise PylogOptionError(f"{wire_option}=confluent needs schemaRegistryUrl (the schema registry's URL)")
        columns[role] = AvroColumn(
            role=role,
            schema_json=schema,
            writer_schema_json=_json_of(writer, writer_option) if writer is not None else None,
            wire_format=wire,
            mode=mode,
            registry_conf=tuple(sorted(registry_conf.items())) if wire == "confluent" else (),
        )
    if url and not any(c.confluent for c in columns.values()):
        raise PylogOptionError(
            "schemaRegistryUrl is set but no Avro column uses avroWireFormat=confluent: set "
            "valueFormat=avro / keyFormat=avro with the Confluent wire format, or remove it"
        )
    return columns


def _json_of(text_or_path: str, option: str) -> str:
    """The schema JSON of an option value (validated; a path is read here, on the driver)."""
    return _schema_json(load_schema_json(str(text_or_path), option=option)[0])
