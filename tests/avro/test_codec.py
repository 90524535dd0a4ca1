"""Avro codecs (kafka_spark.avro.codec, kafka_spark.avro.schema): types, round trips, evolution, framing.

The Confluent path runs against confluent-kafka's in-memory schema registry (``mock://``), the
client library's own registry implementation; interop is checked against confluent-kafka's own
AvroSerializer / AvroDeserializer.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import sys
import time
import uuid

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark import cloudpickle
from pyspark.sql import types as T

from kafka_spark.avro.codec import (
    AvroDecoder,
    AvroEncodeError,
    AvroEncoder,
    AvroRegistryError,
    AvroSchemaError,
    MalformedAvroError,
    parse_avro_options,
    registry_client,
    topic_subject,
)
from kafka_spark.avro.schema import arrow_type, load_schema, spark_type
from kafka_spark.options import PylogOptionError

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [
                    {"name": "name", "type": "string"},
                    {"name": "email", "type": ["null", "string"], "default": None},
                ],
            },
        },
        {
            "name": "lines",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Line",
                    "fields": [
                        {"name": "sku", "type": "string"},
                        {"name": "qty", "type": "int"},
                        {
                            "name": "price",
                            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
                        },
                    ],
                },
            },
        },
        {"name": "tags", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "placed_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "digest", "type": {"type": "fixed", "name": "Md5", "size": 4}},
        {
            "name": "amount",
            "type": {
                "type": "fixed",
                "name": "Amount",
                "size": 8,
                "logicalType": "decimal",
                "precision": 12,
                "scale": 3,
            },
        },
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "at", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "ok", "type": "boolean"},
        {"name": "ratio", "type": "float"},
        {"name": "note", "type": ["null", "bytes"]},
        {"name": "count", "type": ["int", "long"]},
    ],
}

ORDER_SPARK = T.StructType(
    [
        T.StructField("id", T.LongType(), False),
        T.StructField(
            "customer",
            T.StructType(
                [
                    T.StructField("name", T.StringType(), False),
                    T.StructField("email", T.StringType(), True),
                ]
            ),
            False,
        ),
        T.StructField(
            "lines",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("sku", T.StringType(), False),
                        T.StructField("qty", T.IntegerType(), False),
                        T.StructField("price", T.DecimalType(9, 2), False),
                    ]
                ),
                False,
            ),
            False,
        ),
        T.StructField("tags", T.MapType(T.StringType(), T.DoubleType(), True), False),
        T.StructField("status", T.StringType(), False),
        T.StructField("placed", T.TimestampType(), False),
        T.StructField("placed_us", T.TimestampType(), False),
        T.StructField("local", T.TimestampNTZType(), False),
        T.StructField("day", T.DateType(), False),
        T.StructField("digest", T.BinaryType(), False),
        T.StructField("amount", T.DecimalType(12, 3), False),
        T.StructField("ref", T.StringType(), False),
        T.StructField("at", T.IntegerType(), False),
        T.StructField("ok", T.BooleanType(), False),
        T.StructField("ratio", T.FloatType(), False),
        T.StructField("note", T.BinaryType(), True),
        T.StructField("count", T.LongType(), False),
    ]
)

UTC = dt.UTC

# Spark ships the test data source to Python workers, which cannot import this test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def order(i: int) -> dict:
    return {
        "id": i,
        "customer": {"name": f"c{i}", "email": None if i % 2 else f"c{i}@example.com"},
        "lines": [{"sku": f"s{j}", "qty": j, "price": decimal.Decimal(f"{j}.25")} for j in range(i % 3)],
        "tags": {"vip": 1.5, "none": None} if i % 2 else {},
        "status": ["NEW", "PAID", "SHIPPED"][i % 3],
        "placed": dt.datetime(2026, 11, 22, 8, 30, 0, 123000, tzinfo=UTC) + dt.timedelta(seconds=i),
        "placed_us": dt.datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC),
        "local": dt.datetime(2026, 1, 2, 3, 4, 5, 6),
        "day": dt.date(2026, 11, 22),
        "digest": bytes([i % 256, 1, 2, 3]),
        "amount": decimal.Decimal("-12345.678"),
        "ref": str(uuid.UUID(int=i)),
        "at": 3_600_000 + i,
        "ok": bool(i % 2),
        "ratio": 0.5,
        "note": None if i % 2 else b"\x00\xff",
        "count": 2**40 + i,
    }


def plain_bytes(schema: dict, record: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


def schema_v1() -> dict:
    return {
        "type": "record",
        "name": "User",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": "string"},
        ],
    }


def schema_v2() -> dict:
    v2 = schema_v1()
    v2["fields"] = v2["fields"] + [
        {"name": "country", "type": "string", "default": "NL"},
        {"name": "score", "type": ["null", "int"], "default": None},
    ]
    return v2


@pytest.fixture
def registry(request):
    # one in-memory registry per test (registry_client caches per configuration)
    return registry_client({"url": f"mock://pylog-tests-{request.node.name}"})


# -------------------------------------------------------------------------------------------
# schemas and types


def test_spark_type_maps_like_spark_schema_converters():
    assert spark_type(ORDER) == ORDER_SPARK


def test_arrow_type_is_the_arrow_form_of_the_spark_type():
    at = arrow_type(ORDER)
    assert at.field("placed").type == pa.timestamp("us", tz="UTC")
    assert at.field("local").type == pa.timestamp("us")
    assert at.field("day").type == pa.date32()
    assert at.field("amount").type == pa.decimal128(12, 3)
    assert at.field("tags").type == pa.map_(pa.string(), pa.float64())
    assert at.field("lines").type.value_field.nullable is False
    assert at.field("customer").type.field("email").nullable is True
    assert at.field("customer").nullable is False


def test_general_union_becomes_member_struct_and_null_makes_it_nullable():
    schema = {
        "type": "record",
        "name": "U",
        "fields": [
            {
                "name": "u",
                "type": [
                    "null",
                    "int",
                    "string",
                    {"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]},
                ],
            },
            {"name": "d", "type": ["float", "double"]},
        ],
    }
    assert spark_type(schema) == T.StructType(
        [
            T.StructField(
                "u",
                T.StructType(
                    [
                        T.StructField("member0", T.IntegerType(), True),
                        T.StructField("member1", T.StringType(), True),
                        T.StructField("member2", T.StructType([T.StructField("x", T.IntegerType(), False)]), True),
                    ]
                ),
                True,
            ),
            T.StructField("d", T.DoubleType(), False),
        ]
    )


def test_recursive_record_is_rejected_with_the_path():
    node = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(AvroSchemaError, match="recursive"):
        spark_type(node)


def test_load_schema_reads_inline_json_and_avsc_paths(tmp_path):
    path = tmp_path / "order.avsc"
    path.write_text(json.dumps(ORDER))
    assert spark_type(load_schema(str(path))) == ORDER_SPARK
    assert spark_type(load_schema(json.dumps(ORDER))) == ORDER_SPARK
    assert load_schema('"string"') == "string"
    assert load_schema("long", option="keyAvroSchema") == "long"  # a bare primitive name, as keys often are


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('{"type": "record", "name": "A", "fields": [', r"keyAvroSchema: .*not valid JSON"),
        ("/no/such/dir/a.avsc", r"keyAvroSchema='/no/such/dir/a.avsc' is neither inline JSON .* nor a readable"),
        (
            '{"type": "record", "name": "A", "fields": [{"name": "x", "type": "nope"}]}',
            r"keyAvroSchema: .*not usable: .*nope",
        ),
        ("  ", r"keyAvroSchema is empty"),
    ],
)
def test_load_schema_errors_name_the_option_and_the_problem(value, expected):
    with pytest.raises(AvroSchemaError, match=expected):
        load_schema(value, option="keyAvroSchema")


# -------------------------------------------------------------------------------------------
# plain round trips


def test_nested_records_arrays_maps_enums_and_logical_types_round_trip():
    records = [order(i) for i in range(6)]
    values = AvroEncoder(ORDER).encode(records)
    decoded = AvroDecoder(ORDER).decode(values, list(range(6)), "orders", 0)
    assert decoded.type == arrow_type(ORDER)
    got = decoded.to_pylist(maps_as_pydicts="strict")
    assert got == records
    # and the Arrow rows encode back to the same bytes
    assert AvroEncoder(ORDER).encode(decoded) == values


def test_plain_bytes_from_another_writer_decode():
    record = order(7)
    value = plain_bytes(ORDER, record)
    decoded = AvroDecoder(ORDER).decode([value], [41], "orders", 3)
    assert decoded.to_pylist(maps_as_pydicts="strict") == [record]


def test_general_unions_round_trip_through_member_structs():
    schema = {
        "type": "record",
        "name": "U",
        "fields": [
            {
                "name": "u",
                "type": [
                    "null",
                    "int",
                    "string",
                    {"type": "enum", "name": "E", "symbols": ["A", "B"]},
                    {"type": "record", "name": "P", "fields": [{"name": "x", "type": "int"}]},
                    {"type": "array", "items": "long"},
                ],
            },
        ],
    }
    avro_values = [None, 5, "s", ("E", "B"), ("P", {"x": 1}), [1, 2]]
    spark_values = [
        None,
        {"member0": 5},
        {"member1": "s"},
        {"member2": "B"},
        {"member3": {"x": 1}},
        {"member4": [1, 2]},
    ]
    payloads = [plain_bytes(schema, {"u": v}) for v in avro_values]
    decoded = AvroDecoder(schema).decode(payloads, list(range(6)), "t", 0)
    members = [f"member{i}" for i in range(5)]
    expected = [{"u": None if s is None else {m: s.get(m) for m in members}} for s in spark_values]
    assert decoded.to_pylist() == expected
    assert AvroEncoder(schema).encode(decoded) == payloads


EVENT = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "values", "type": {"type": "array", "items": ["null", "double"]}},
        {"name": "attrs", "type": {"type": "map", "values": "bytes"}},
        {"name": "choice", "type": ["null", "int", "string", "boolean"]},
    ],
}
events = st.fixed_dictionaries(
    {
        "id": st.integers(-(2**63), 2**63 - 1),
        "name": st.none() | st.text(),
        "values": st.lists(st.none() | st.floats(allow_nan=False)),
        "attrs": st.dictionaries(st.text(), st.binary()),
        "choice": st.none() | st.integers(-(2**31), 2**31 - 1) | st.text() | st.booleans(),
    }
)


def spark_shape(event: dict) -> dict:
    choice = event["choice"]
    members = {"member0": None, "member1": None, "member2": None}
    if isinstance(choice, bool):
        members["member2"] = choice
    elif isinstance(choice, int):
        members["member0"] = choice
    elif isinstance(choice, str):
        members["member1"] = choice
    return {**event, "choice": None if choice is None else members}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.none() | events, max_size=20))
def test_any_batch_of_events_and_tombstones_round_trips(batch):
    payloads = [None if e is None else plain_bytes(EVENT, e) for e in batch]
    decoded = AvroDecoder(EVENT).decode(payloads, list(range(len(batch))), "events", 0)
    assert decoded.to_pylist(maps_as_pydicts="strict") == [None if e is None else spark_shape(e) for e in batch]
    assert AvroEncoder(EVENT).encode(decoded) == payloads


def test_tombstones_decode_to_null_rows():
    values = [plain_bytes(schema_v1(), {"id": 1, "name": "a"}), None, plain_bytes(schema_v1(), {"id": 3, "name": "c"})]
    for mode in ("FAILFAST", "PERMISSIVE"):
        decoded = AvroDecoder(schema_v1(), mode=mode).decode(values, [0, 1, 2], "users", 0)
        assert decoded.to_pylist() == [{"id": 1, "name": "a"}, None, {"id": 3, "name": "c"}]


def test_arrow_binary_input_decodes_like_a_list():
    values = pa.array([plain_bytes(schema_v1(), {"id": i, "name": str(i)}) for i in range(3)], pa.large_binary())
    decoded = AvroDecoder(schema_v1()).decode(values.slice(1), pa.array([11, 12]), "users", 0)
    assert decoded.to_pylist() == [{"id": 1, "name": "1"}, {"id": 2, "name": "2"}]


def test_primitive_key_schema_decodes_to_a_plain_column():
    keys = AvroEncoder("string").encode(["k1", None, "k3"])
    assert keys[1] is None
    assert AvroDecoder('"string"', role="key").decode(keys, [0, 1, 2], "t", 0).to_pylist() == ["k1", None, "k3"]


# -------------------------------------------------------------------------------------------
# schema evolution


def test_plain_reader_schema_with_added_defaulted_field_reads_v1_data():
    v1 = [plain_bytes(schema_v1(), {"id": i, "name": f"u{i}"}) for i in range(3)]
    decoded = AvroDecoder(schema_v2(), writer_schema=schema_v1()).decode(v1, [0, 1, 2], "users", 0)
    assert decoded.to_pylist() == [{"id": i, "name": f"u{i}", "country": "NL", "score": None} for i in range(3)]


def test_confluent_reader_v2_reads_v1_and_v2_records_in_offset_order(registry):
    enc_v1 = AvroEncoder(schema_v1(), confluent=True, registry=registry, subject="users-value")
    enc_v2 = AvroEncoder(schema_v2(), confluent=True, registry=registry, subject="users-value")
    a, b = enc_v1.encode([{"id": 1, "name": "a"}, {"id": 3, "name": "c"}])
    (c,) = enc_v2.encode([{"id": 2, "name": "b", "country": "FR", "score": 7}])
    assert enc_v1.schema_id != enc_v2.schema_id
    decoded = AvroDecoder(schema_v2(), confluent=True, registry=registry).decode(
        [a, c, None, b], [5, 6, 7, 8], "users", 0
    )
    assert decoded.to_pylist() == [
        {"id": 1, "name": "a", "country": "NL", "score": None},
        {"id": 2, "name": "b", "country": "FR", "score": 7},
        None,
        {"id": 3, "name": "c", "country": "NL", "score": None},
    ]


def test_confluent_encoder_registers_once_under_the_topic_subject_and_frames(registry):
    encoder = AvroEncoder(schema_v1(), confluent=True, registry=registry, subject=topic_subject("users"))
    first = encoder.encode([{"id": 1, "name": "a"}])[0]
    second = encoder.encode([{"id": 2, "name": "b"}])[0]
    schema_id = registry.get_latest_version("users-value").schema_id
    header = b"\x00" + schema_id.to_bytes(4, "big")
    assert first.startswith(header) and second.startswith(header)
    assert first[5:] == plain_bytes(schema_v1(), {"id": 1, "name": "a"})
    assert registry.get_versions("users-value") == [1]
    assert topic_subject("users", is_key=True) == "users-key"


def test_confluent_writer_schema_with_references_resolves(registry):
    from confluent_kafka.schema_registry import Schema, SchemaReference

    address = {"type": "record", "name": "Address", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
    registry.register_schema("shop.Address", Schema(json.dumps(address), "AVRO"))
    person_ref = {
        "type": "record",
        "name": "Person",
        "namespace": "shop",
        "fields": [{"name": "home", "type": "shop.Address"}],
    }
    schema_id = registry.register_schema(
        "people-value",
        Schema(json.dumps(person_ref), "AVRO", [SchemaReference("shop.Address", "shop.Address", 1)]),
    )
    person = {
        **person_ref,
        "fields": [{"name": "home", "type": address}, {"name": "age", "type": "int", "default": -1}],
    }
    framed = (
        b"\x00"
        + schema_id.to_bytes(4, "big")
        + plain_bytes(person_ref | {"fields": [{"name": "home", "type": address}]}, {"home": {"city": "Gent"}})
    )
    decoded = AvroDecoder(person, confluent=True, registry=registry).decode([framed], [0], "people", 0)
    assert decoded.to_pylist() == [{"home": {"city": "Gent"}, "age": -1}]


def test_confluent_serializer_output_decodes_and_our_output_deserializes(registry):
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext("users", MessageField.VALUE)
    theirs = AvroSerializer(registry, json.dumps(schema_v1()))({"id": 9, "name": "z"}, ctx)
    decoded = AvroDecoder(schema_v2(), confluent=True, registry=registry).decode([theirs], [0], "users", 0)
    assert decoded.to_pylist() == [{"id": 9, "name": "z", "country": "NL", "score": None}]

    ours = AvroEncoder(schema_v2(), confluent=True, registry=registry, subject="users-value").encode(
        [{"id": 4, "name": "d", "country": "BE", "score": 1}]
    )[0]
    assert AvroDeserializer(registry)(ours, ctx) == {"id": 4, "name": "d", "country": "BE", "score": 1}


# -------------------------------------------------------------------------------------------
# malformed records


def malformed_batch() -> list:
    good = plain_bytes(schema_v1(), {"id": 1, "name": "alice"})
    return [good, good[:4], b"\x02\x0a\xff\xfe\xfd\xfc\xfb", None, good]


def test_failfast_names_topic_partition_offset_and_permissive():
    with pytest.raises(MalformedAvroError) as raised:
        AvroDecoder(schema_v1()).decode(malformed_batch(), [100, 101, 102, 103, 104], "users", 4)
    message = str(raised.value)
    assert "topic 'users' partition 4 offset 101: EOFError: truncated" in message
    assert "avroMode=PERMISSIVE" in message
    assert (raised.value.topic, raised.value.partition, raised.value.offset) == ("users", 4, 101)


def test_permissive_reads_malformed_values_as_null_and_keeps_going():
    values = malformed_batch()
    decoded = AvroDecoder(schema_v1(), mode="PERMISSIVE").decode(values, [100, 101, 102, 103, 104], "users", 4)
    assert decoded.to_pylist() == [{"id": 1, "name": "alice"}, None, None, None, {"id": 1, "name": "alice"}]
    assert len(decoded) == len(values)  # one row per record: the caller pairs it with the raw bytes


def test_confluent_bad_framing_and_unknown_schema_id(registry):
    good = AvroEncoder(schema_v1(), confluent=True, registry=registry, subject="users-value").encode(
        [{"id": 1, "name": "a"}]
    )[0]
    unknown_id = b"\x00\x00\x00\x27\x0f" + good[5:]
    values = [good, b"\x01" + good[1:], b"\x00\x00", unknown_id, good[:7]]
    decoded = AvroDecoder(schema_v1(), confluent=True, registry=registry, mode="PERMISSIVE").decode(
        values, [10, 11, 12, 13, 14], "users", 0
    )
    assert decoded.to_pylist() == [{"id": 1, "name": "a"}, None, None, None, None]
    for offset, bad, reason in [
        (11, values[1], "Confluent wire format"),
        (12, values[2], "Confluent wire format"),
        (13, unknown_id, "schema id 9999 is not in the schema registry"),
        (14, values[4], "truncated"),
    ]:
        with pytest.raises(MalformedAvroError, match=f"partition 0 offset {offset}: .*{reason}"):
            AvroDecoder(schema_v1(), confluent=True, registry=registry).decode(
                [good, bad], [offset - 1, offset], "users", 0
            )


def test_value_too_wide_for_the_reader_type_is_malformed_not_truncated():
    def price(precision: int) -> dict:
        return {
            "type": "record",
            "name": "P",
            "fields": [
                {"name": "p", "type": {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": 2}}
            ],
        }

    values = AvroEncoder(price(20)).encode([{"p": decimal.Decimal("1.25")}, {"p": decimal.Decimal("123456789.12")}])
    permissive = AvroDecoder(price(5), writer_schema=price(20), mode="PERMISSIVE")
    assert permissive.decode(values, [7, 8], "prices", 0).to_pylist() == [{"p": decimal.Decimal("1.25")}, None]
    with pytest.raises(MalformedAvroError, match=r"offset 8: decoded value does not fit struct<p:decimal\(5,2\)>"):
        AvroDecoder(price(5), writer_schema=price(20)).decode(values, [7, 8], "prices", 0)


def test_unreachable_registry_raises_in_both_modes_instead_of_nulls():
    # port 1 on loopback refuses at once; a registry outage must not turn records into nulls
    registry = registry_client({"url": "http://127.0.0.1:1", "max.retries": "0"})
    framed = b"\x00\x00\x00\x00\x01" + plain_bytes(schema_v1(), {"id": 1, "name": "a"})
    for mode in ("FAILFAST", "PERMISSIVE"):
        with pytest.raises(AvroRegistryError, match="schema id 1 .* failed: .*schemaRegistryUrl"):
            AvroDecoder(schema_v1(), confluent=True, registry=registry, mode=mode).decode([framed], [0], "users", 0)


def test_empty_batches_decode_to_empty_arrays(registry):
    for confluent in (False, True):
        decoded = AvroDecoder(schema_v1(), confluent=confluent, registry=registry).decode([], [], "users", 0)
        assert len(decoded) == 0 and decoded.type == arrow_type(schema_v1())


def test_encoding_a_row_without_a_required_field_names_the_row():
    with pytest.raises(AvroEncodeError, match="Row 1 cannot be written"):
        AvroEncoder(schema_v1()).encode([{"id": 1, "name": "a"}, {"id": 2}])


# -------------------------------------------------------------------------------------------
# options


def test_options_read_avsc_on_the_driver_and_ship_json(tmp_path):
    path = tmp_path / "v2.avsc"
    path.write_text(json.dumps(schema_v2()))
    columns = parse_avro_options(
        {
            "valueformat": "avro",
            "avroschema": str(path),
            "avrowriterschema": json.dumps(schema_v1()),
            "avromode": "permissive",
            "keyformat": "avro",
            "keyavroschema": '"string"',
        }
    )
    value, key = columns["value"], columns["key"]
    assert json.loads(value.schema_json) == schema_v2()
    assert (value.wire_format, value.mode, key.wire_format) == ("plain", "PERMISSIVE", "plain")
    path.unlink()  # executors never read the file
    v1 = plain_bytes(schema_v1(), {"id": 1, "name": "a"})
    assert value.decoder().decode([v1, b"\x01"], [0, 1], "t", 0).to_pylist() == [
        {"id": 1, "name": "a", "country": "NL", "score": None},
        None,
    ]
    assert key.spark_type() == T.StringType()


def test_registry_options_default_to_confluent_and_hide_credentials():
    columns = parse_avro_options(
        {
            "valueformat": "avro",
            "avroschema": json.dumps(schema_v1()),
            "schemaregistryurl": "mock://pylog-tests-options",
            "schemaregistry.basic.auth.user.info": "me:s3cret",
        }
    )
    value = columns["value"]
    assert value.wire_format == "confluent"
    assert dict(value.registry_conf) == {"url": "mock://pylog-tests-options", "basic.auth.user.info": "me:s3cret"}
    assert "s3cret" not in repr(value)
    framed = value.encoder("users").encode([{"id": 1, "name": "a"}])
    assert value.decoder().decode(framed, [0], "users", 0).to_pylist() == [{"id": 1, "name": "a"}]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"valueformat": "avro"}, "valueFormat=avro needs avroSchema"),
        ({"avroschema": '"string"'}, "avroSchema is set but valueFormat is binary: set valueFormat=avro"),
        (
            {"valueformat": "avro", "avroschema": '"string"', "avrowireformat": "confluent"},
            "avroWireFormat=confluent needs schemaRegistryUrl",
        ),
        ({"valueformat": "avro", "avroschema": '"string"', "avromode": "DROPMALFORMED"}, "avroMode='DROPMALFORMED'"),
        ({"keyformat": "avro", "keyavroschema": "{"}, "keyAvroSchema: .*not valid JSON"),
        (
            {
                "valueformat": "avro",
                "avroschema": '"string"',
                "schemaregistryurl": "mock://x",
                "avrowriterschema": '"string"',
            },
            "avroWriterSchema applies to the plain wire format only",
        ),
    ],
)
def test_invalid_avro_options_name_the_option(options, expected):
    with pytest.raises(PylogOptionError, match=expected):
        parse_avro_options(options)


# -------------------------------------------------------------------------------------------
# Spark


def test_spark_reads_decoded_batches_from_a_python_data_source(spark):
    """The decoded Arrow arrays are what a Python data source yields for a column of spark_type."""
    from pyspark.sql.datasource import DataSource, DataSourceReader

    records = [order(i) for i in range(4)]
    values = AvroEncoder(ORDER).encode(records) + [None, b"\x01"]
    schema = T.StructType(
        [
            T.StructField("value", T.BinaryType(), True),
            T.StructField("offset", T.LongType(), False),
            T.StructField("order", spark_type(ORDER), True),
        ]
    )

    class Reader(DataSourceReader):
        def read(self, partition):
            decoded = AvroDecoder(ORDER, mode="PERMISSIVE").decode(values, list(range(6)), "orders", 0)
            # Spark compares nullability too: the decoded array's type must be arrow_type(ORDER)
            arrow_schema = pa.schema(
                [
                    pa.field("value", pa.binary()),
                    pa.field("offset", pa.int64(), False),
                    pa.field("order", arrow_type(ORDER)),
                ]
            )
            yield pa.record_batch(
                [pa.array(values, pa.binary()), pa.array(range(6), pa.int64()), decoded], schema=arrow_schema
            )

    class Source(DataSource):
        @classmethod
        def name(cls):
            return "pylog-avro-test"

        def schema(self):
            return schema

        def reader(self, schema):
            return Reader()

    spark.dataSource.register(Source)
    rows = spark.read.format("pylog-avro-test").load().orderBy("offset").collect()
    assert [r["order"] is None for r in rows] == [False] * 4 + [True, True]
    assert rows[5]["value"] == b"\x01"  # the malformed record's bytes are still there
    first = rows[0]["order"]
    assert first["status"] == "NEW" and first["amount"] == decimal.Decimal("-12345.678")
    assert first["placed"] == dt.datetime(2026, 11, 22, 8, 30, 0, 123000)  # session time zone UTC
    assert first["local"] == dt.datetime(2026, 1, 2, 3, 4, 5, 6)
    assert rows[1]["order"]["tags"] == {"vip": 1.5, "none": None}


# -------------------------------------------------------------------------------------------
# speed


def test_decoding_100k_small_records_into_arrow_is_fast():
    schema = {
        "type": "record",
        "name": "Event",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "user", "type": "string"},
            {"name": "score", "type": "double"},
            {"name": "ok", "type": "boolean"},
        ],
    }
    n = 100_000
    values = AvroEncoder(schema).encode(
        [{"id": i, "user": f"u{i % 1000}", "score": i / 7, "ok": i % 2 == 0} for i in range(n)]
    )
    decoder = AvroDecoder(schema)
    offsets = list(range(n))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        decoded = decoder.decode(values, offsets, "events", 0)
        best = min(best, time.perf_counter() - start)
    assert len(decoded) == n and decoded[n - 1].as_py()["id"] == n - 1
    rate = n / best
    print(f"\navro decode: {rate:,.0f} records/s ({n} records of ~{sum(map(len, values[:1000])) // 1000} bytes)")
    assert rate > 50_000  # an order of magnitude below what 2 shared cores do; catches per-record Python slow paths
