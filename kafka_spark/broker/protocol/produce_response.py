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

_PARTITION = struct.Struct(">ihqqq")  # v5+: with the log start offset
_PARTITION_V3 = struct.Struct(">ihqq")
# v8+ for a partition without record errors or message: an empty record_errors array and a null
# error_message (classic, flexible): what nearly every answer carries.
_NO_RECORD_ERRORS = (b"\x00\x00\x00\x00\xff\xff", b"\x01\x00")
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
    pack = _PARTITION.pack if version >= 5 else _PARTITION_V3.pack
    no_record_errors = _NO_RECORD_ERRORS[flexible]
    for topic in topics:
        out += uuid_bytes(topic.get("topic_id")) if by_id else string(topic["name"], flexible)
        partitions = topic.get("partition_responses", ())
        out += array_length(len(partitions), flexible)
        for entry in partitions:
            append_time = entry.get("log_append_time")
            if append_time is None:
                append_time = -1
            elif isinstance(append_time, datetime.datetime):
                append_time = (append_time - _EPOCH) // _MILLISECOND  # exact, unlike timestamp() * 1000
            fields = (entry["index"], int(entry.get("error_code", ErrorCode.none)), entry["base_offset"], append_time)
            out += pack(*fields, entry.get("log_start_offset", -1)) if version >= 5 else pack(*fields)
            if version >= 8:
                record_errors = entry.get("record_errors")
                error_message = entry.get("error_message")
                if not record_errors and error_message is None:
                    out += no_record_errors
                else:
                    record_errors = record_errors or ()
                    out += array_length(len(record_errors), flexible)
                    for record_error in record_errors:
                        out += _I32.pack(record_error["batch_index"])
                        out += nullable_string(record_error.get("batch_index_error_message"), flexible)
                        if flexible:
                            out += NO_TAGS
                    out += nullable_string(error_message, flexible)
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
