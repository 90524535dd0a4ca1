"""Produce responses v3-v13 written by hand: one per produce request, so the hot path's most
frequent response, and cheaper built directly than through kio's dataclasses.

Per topic its name (v3-v12) or id (v13+); per partition index, error, base offset, log append time
(-1 unless the topic stamps LogAppendTime), v5+ log start offset, v8+ the record errors (KIP-467:
index and message of each record that made the batch fail) and an error message; then the
throttle time. v9+ are flexible (KIP-482; compact encodings, tagged-field buffers, response header
v1); the v10+ tagged fields (current leader, node endpoints) only matter for NOT_LEADER errors, which
a single node never answers, and are not sent. Tested byte for byte against kio's encoding.
"""

from __future__ import annotations

import datetime
import struct
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.protocol.primitives import NO_TAGS, array_length, nullable_string, string, uuid_bytes

VERSIONS = range(3, 14)
FIRST_FLEXIBLE = 9
FIRST_WITH_TOPIC_IDS = 13

_PARTITION = struct.Struct(">ihqqq")
_I32 = struct.Struct(">i")
_MILLISECOND = datetime.timedelta(milliseconds=1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def encode(correlation_id: int, version: int, response: dict[str, Any]) -> bytes:
    flexible = version >= FIRST_FLEXIBLE
    by_id = version >= FIRST_WITH_TOPIC_IDS
    out = bytearray(struct.pack(">ii", 0, correlation_id))
    if flexible:
        out += NO_TAGS  # response header v1
    topics = response.get("responses", ())
    out += array_length(len(topics), flexible)
    width = 30 if version >= 5 else 22
    for topic in topics:
        out += uuid_bytes(topic.get("topic_id")) if by_id else string(topic["name"], flexible)
        partitions = topic.get("partition_responses", ())
        out += array_length(len(partitions), flexible)
        for entry in partitions:
            append_time = entry.get("log_append_time")
            if isinstance(append_time, datetime.datetime):
                append_time = (append_time - _EPOCH) // _MILLISECOND  # exact, unlike timestamp() * 1000
            out += _PARTITION.pack(
                entry["index"],
                int(entry.get("error_code", ErrorCode.none)),
                entry["base_offset"],
                -1 if append_time is None else append_time,
                entry.get("log_start_offset", -1),
            )[:width]
            if version >= 8:
                record_errors = entry.get("record_errors", ())
                out += array_length(len(record_errors), flexible)
                for record_error in record_errors:
                    out += _I32.pack(record_error["batch_index"])
                    out += nullable_string(record_error.get("batch_index_error_message"), flexible)
                    if flexible:
                        out += NO_TAGS
                out += nullable_string(entry.get("error_message"), flexible)
            if flexible:
                out += NO_TAGS  # partition
        if flexible:
            out += NO_TAGS  # topic
    throttle = response.get("throttle_time", 0)
    if isinstance(throttle, datetime.timedelta):
        throttle = int(throttle / _MILLISECOND)
    out += _I32.pack(throttle)
    if flexible:
        out += NO_TAGS  # response
    struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)
