"""How `pylog consume` prints a record: kcat's ``-f`` format strings and ``-J``-style JSON lines.

A format string is compiled once into a function of a confluent-kafka ``Message`` returning the
bytes to write; the tokens are kcat's:

    %t topic    %p partition    %o offset    %T timestamp (ms since the epoch, -1 if none)
    %k key      %K key length (-1 for a null key)      %s value    %S value length (-1 for null)
    %h headers as name=value,name=value    %% a percent sign
    \\n \\r \\t \\\\ and \\xHH (a byte in hex)

A null key or value prints as nothing, as kcat prints it. JSON lines carry one object per record,
``{"topic", "partition", "offset", "timestamp", "key", "value", "headers"}``: key, value and header
values are UTF-8 text or null (bytes that are not UTF-8 come out as ``\\udcXX`` escapes, Python's
surrogateescape, so nothing is lost), headers an object of name to value as kcat's ``-J`` prints
them (a name repeated within a record keeps its last value).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from kafka_spark.errors import PylogError

Formatter = Callable[[Any], bytes]

_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\"}
_TOKEN = re.compile(r"%(.)|\\x([0-9a-fA-F]{2})|\\(.)|%$|\\$", re.DOTALL)


class FormatError(PylogError, ValueError):
    """A format string with a token kcat does not define."""


def _length(data: bytes | None) -> bytes:
    return b"-1" if data is None else str(len(data)).encode()


def _headers(message: Any) -> bytes:
    return b",".join(name.encode() + b"=" + (value or b"") for name, value in message.headers() or ())


def _timestamp(message: Any) -> int:
    kind, millis = message.timestamp()
    return millis if kind else -1  # TIMESTAMP_NOT_AVAILABLE is 0


_FIELDS: dict[str, Formatter] = {
    "t": lambda m: m.topic().encode(),
    "p": lambda m: b"%d" % m.partition(),
    "o": lambda m: b"%d" % m.offset(),
    "T": lambda m: b"%d" % _timestamp(m),
    "k": lambda m: m.key() or b"",
    "K": lambda m: _length(m.key()),
    "s": lambda m: m.value() or b"",
    "S": lambda m: _length(m.value()),
    "h": _headers,
}


def compile_format(text: str) -> Formatter:
    """The function printing a record as the kcat format string ``text`` says."""
    parts: list[bytes | Formatter] = []
    position = 0
    for match in _TOKEN.finditer(text):
        parts.append(text[position : match.start()].encode())
        position = match.end()
        field, hex_byte, escape = match.groups()
        if hex_byte is not None:
            parts.append(bytes([int(hex_byte, 16)]))
        elif field == "%":
            parts.append(b"%")
        elif field is not None:
            if field not in _FIELDS:
                raise FormatError(f"format token %{field} is not one of %t %p %o %T %k %K %s %S %h %% (kcat's -f)")
            parts.append(_FIELDS[field])
        elif escape is not None:
            if escape not in _ESCAPES:
                raise FormatError(f"format escape \\{escape} is not one of \\n \\r \\t \\\\ \\xHH")
            parts.append(_ESCAPES[escape])
        else:
            raise FormatError(f"format string {text!r} ends in a lone {match.group(0)!r}")
    parts.append(text[position:].encode())
    # Adjacent literals merged, so a record costs one call per field and one join.
    merged: list[bytes | Formatter] = []
    for part in parts:
        if isinstance(part, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += part
        elif part != b"":
            merged.append(part)
    getters = [part if callable(part) else (lambda m, literal=part: literal) for part in merged]
    if len(getters) == 1:
        return getters[0]
    return lambda message: b"".join([getter(message) for getter in getters])


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "surrogateescape")


def json_line(message: Any) -> bytes:
    """One record as a JSON object on one line (ending in a newline)."""
    record = {
        "topic": message.topic(),
        "partition": message.partition(),
        "offset": message.offset(),
        "timestamp": _timestamp(message) if message.timestamp()[0] else None,
        "key": _text(message.key()),
        "value": _text(message.value()),
        "headers": {name: _text(value) for name, value in message.headers() or ()},
    }
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"
