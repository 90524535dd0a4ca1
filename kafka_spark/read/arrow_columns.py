"""The Arrow form of Spark's Kafka source schema, shared by both executor read paths."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["HEADERS", "SCHEMAS", "TIMESTAMP_US", "constant_string"]

TIMESTAMP_US = pa.timestamp("us", tz="UTC")
HEADER_STRUCT = pa.struct([("key", pa.string()), ("value", pa.binary())])
HEADERS = pa.list_(HEADER_STRUCT)


def _arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TIMESTAMP_US),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS))
    return pa.schema(fields)


#: includeHeaders -> the Arrow schema of the rows read.
SCHEMAS = {flag: _arrow_schema(flag) for flag in (False, True)}


def constant_string(text: str, n: int) -> pa.Array:
    """``n`` copies of ``text`` as a string array, built from buffers (``pa.repeat`` appends
    value by value: a hundred times slower for a topic column)."""
    data = text.encode()
    offsets = np.arange(0, len(data) * (n + 1), len(data), dtype=np.int32) if data else np.zeros(n + 1, np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])
