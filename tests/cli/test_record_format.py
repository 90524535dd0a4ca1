"""kcat format strings and JSON lines of `pylog consume`, on confluent-kafka Message values."""

from __future__ import annotations

import json
import re

import pytest
from confluent_kafka import Message

from kafka_spark.cli.record_format import FormatError, compile_format, json_line

RECORD = Message(
    topic="orders",
    partition=3,
    offset=42,
    key=b"alice",
    value=b"paid 10",
    headers=[("source", b"web"), ("trace", None)],
    timestamp=(1, 1_700_000_000_123),
)
TOMBSTONE = Message(topic="orders", partition=0, offset=7, key=b"bob", value=None, timestamp=(0, 0))


@pytest.mark.parametrize(
    ("text", "record", "expected"),
    [
        ("%s\n", RECORD, b"paid 10\n"),
        ("%t/%p/%o", RECORD, b"orders/3/42"),
        ("%k=%s (%K,%S)", RECORD, b"alice=paid 10 (5,7)"),
        ("%h", RECORD, b"source=web,trace="),
        ("%T", RECORD, b"1700000000123"),
        ("%k:%s %S %T %h|", TOMBSTONE, b"bob: -1 -1 |"),  # null value, no timestamp, no headers
        (r"%p\t%o\r\n\\ %% \x41", RECORD, b"3\t42\r\n\\ % A"),
        ("plain", RECORD, b"plain"),
    ],
)
def test_format_tokens_print_as_kcat_prints_them(text, record, expected):
    assert compile_format(text)(record) == expected


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("%x", "%x is not one of"),
        ("%s\\q", "\\q is not one of"),
        ("value %", "ends in a lone '%'"),
        ("value \\", "ends in a lone"),
    ],
)
def test_unknown_tokens_are_refused_naming_them(text, complaint):
    with pytest.raises(FormatError, match=re.escape(complaint)):
        compile_format(text)


def test_json_line_holds_every_field_and_keeps_bytes_that_are_not_utf8():
    record = json.loads(json_line(RECORD))
    assert record == {
        "topic": "orders",
        "partition": 3,
        "offset": 42,
        "timestamp": 1_700_000_000_123,
        "key": "alice",
        "value": "paid 10",
        "headers": {"source": "web", "trace": None},
    }
    tombstone = json.loads(json_line(TOMBSTONE))
    assert tombstone["value"] is None and tombstone["timestamp"] is None and tombstone["headers"] == {}
    binary = json.loads(json_line(Message(topic="t", partition=0, offset=0, value=b"\xff\x00ok", timestamp=(1, 5))))
    assert binary["value"].encode("utf-8", "surrogateescape") == b"\xff\x00ok"
