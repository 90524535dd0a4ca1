"""Fetch responses v4-v18 written by hand, as parts: the record sets go to the socket as the log
returned them (bytes or memoryviews of segment data), never copied into an encoding buffer.

The handler's dict, in Kafka's field order: throttle time; v7+ error code and session id; per
topic its name (v4-v12) or id (v13+); per partition index, error, high watermark, last stable
offset, v5+ log start offset, aborted transactions, v11+ preferred read replica, records.
v12+ are flexible (KIP-482): compact lengths, a tagged-field buffer closing every struct and the
response header (v1). The broker sends none of the tagged fields (diverging epoch, current leader,
snapshot id, node endpoints: a single node has nothing to say in them). Tested byte for byte
against kio's encoding of the same dict, version by version.
"""

from __future__ import annotations

import struct
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.file_region import FileRegion, materialize
from kafka_spark.broker.protocol.primitives import NO_TAGS, array_length, string, uuid_bytes, uvarint

VERSIONS = range(4, 19)
FIRST_FLEXIBLE = 12
FIRST_WITH_TOPIC_IDS = 13

_PARTITION = struct.Struct(">ihqqq")
_PRODUCER = struct.Struct(">qq")
_I32 = struct.Struct(">i")
_NO_ABORTED = {False: _I32.pack(0), True: b"\x01"}  # an empty array, classic and compact
#: Record sets above this go out as a part of their own; smaller ones are cheaper joined.
_SEPARATE_PART_BYTES = 4096


def encode(correlation_id: int, version: int, response: dict[str, Any]) -> list[bytes | memoryview | FileRegion]:
    """The framed response, as parts to write in order (a partition's records as the handler gave
    them: bytes, a memoryview, or a FileRegion of a segment file for the connection to send)."""
    flexible = version >= FIRST_FLEXIBLE
    by_id = version >= FIRST_WITH_TOPIC_IDS
    head = bytearray(struct.pack(">ii", 0, correlation_id))
    if flexible:
        head += NO_TAGS  # response header v1
    head += _I32.pack(response.get("throttle_time", 0))
    if version >= 7:
        head += struct.pack(">hi", response.get("error_code", ErrorCode.none), response.get("session_id", 0))
    parts: list[bytes | memoryview | FileRegion] = []
    topics = response.get("responses", ())
    head += array_length(len(topics), flexible)
    partition_width = 30 if version >= 5 else 22
    for topic in topics:
        head += uuid_bytes(topic.get("topic_id")) if by_id else string(topic["topic"], flexible)
        partitions = topic["partitions"]
        head += array_length(len(partitions), flexible)
        for entry in partitions:
            head += _PARTITION.pack(
                entry["partition_index"],
                entry.get("error_code", ErrorCode.none),
                entry.get("high_watermark", -1),
                entry.get("last_stable_offset", -1),
                entry.get("log_start_offset", -1),
            )[:partition_width]
            aborted = entry.get("aborted_transactions", ())
            if aborted:
                head += array_length(len(aborted), flexible)
                for txn in aborted:
                    head += _PRODUCER.pack(txn["producer_id"], txn["first_offset"])
                    if flexible:
                        head += NO_TAGS
            else:  # the usual case, spared a call per partition
                head += _NO_ABORTED[flexible]
            if version >= 11:
                head += _I32.pack(entry.get("preferred_read_replica", -1))
            records = entry.get("records", b"")
            head += uvarint(len(records) + 1) if flexible else _I32.pack(len(records))
            if len(records) > _SEPARATE_PART_BYTES:
                parts.append(bytes(head))
                parts.append(records)
                head = bytearray()
            else:
                head += materialize(records)
            if flexible:
                head += NO_TAGS  # partition
        if flexible:
            head += NO_TAGS  # topic
    if flexible:
        head += NO_TAGS  # response
    parts.append(bytes(head))
    size = sum(len(part) for part in parts) - 4
    first = parts[0]
    assert isinstance(first, bytes)  # the head, never records
    parts[0] = _I32.pack(size) + first[4:]
    return parts
