"""Produce requests v3-v13 read by hand, records left in place.

kio's reader copies every partition's record set out of the frame into a new ``bytes``; on the
produce path that is a copy of every megabyte a producer sends, made only to be written to the log
file. This reader returns the record sets as memoryviews over the received frame instead, so the
bytes go from the socket buffer to ``pwritev`` without a copy in between. The body has kio's field
names and values (``timeout`` a ``timedelta``, as kio's), so the handler cannot tell them apart;
tests compare the two readers on the same frames, version by version.

Layout: transactional_id nullable string, acks int16, timeout_ms int32, topic_data array of
{name string (v3-v12) | topic_id uuid (v13+), partition_data array of {index int32, records
nullable bytes}}. v3-v8 are classic (int16 string lengths, int32 array counts and byte lengths);
v9+ are flexible (KIP-482): uvarint lengths and counts stored as N+1 (0 = null), and a tagged-field
buffer closing each struct and the body (Produce has no tagged fields; any sent are skipped).
"""

from __future__ import annotations

import datetime
import struct
import uuid
from dataclasses import dataclass

from kafka_spark.broker.protocol.primitives import read_uvarint, skip_tagged_fields

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")

#: The versions this reader handles: every Produce version the broker serves.
VERSIONS = range(3, 14)
FIRST_FLEXIBLE = 9
FIRST_WITH_TOPIC_IDS = 13


@dataclass(frozen=True, slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class TopicProduceData:
    name: str | None  # None from v13, which names topics by id
    partition_data: tuple[PartitionProduceData, ...]
    topic_id: uuid.UUID | None = None  # v13+


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout: datetime.timedelta
    topic_data: tuple[TopicProduceData, ...]


class _Reader:
    __slots__ = ("view", "position", "flexible")

    def __init__(self, view: memoryview, position: int, flexible: bool) -> None:
        self.view = view
        self.position = position
        self.flexible = flexible

    def take(self, size: int, what: str) -> int:
        start = self.position
        if size < 0 or start + size > len(self.view):
            raise ValueError(f"{what} needs {size} bytes at byte {start}, the frame has {len(self.view) - start}")
        self.position = start + size
        return start

    def int32(self, what: str) -> int:
        return _I32.unpack_from(self.view, self.take(4, what))[0]

    def length(self, what: str, classic: struct.Struct = _I32) -> int:
        """A string (classic: int16), bytes or array length (int32); -1 for null."""
        if self.flexible:
            value, self.position = read_uvarint(self.view, self.position)
            return value - 1
        return classic.unpack_from(self.view, self.take(classic.size, what))[0]

    def string(self, what: str, nullable: bool = False) -> str | None:
        length = self.length(what, _I16)
        if length == -1 and nullable:
            return None
        if length < 0:
            raise ValueError(f"{what} has length {length}")
        start = self.take(length, what)
        return str(self.view[start : start + length], "utf-8")

    def count(self, what: str, smallest_item: int) -> int:
        count = self.length(what)
        if count < 0 or count * smallest_item > len(self.view) - self.position:
            raise ValueError(f"{what} declares {count} entries, more than the frame holds")
        return count

    def end_of_struct(self) -> None:
        if self.flexible:
            self.position = skip_tagged_fields(self.view, self.position)


def read_produce_request(frame: bytes | bytearray | memoryview, position: int,
                         version: int = 7) -> tuple[ProduceRequest, int]:
    """``(body, bytes read)`` for the ``version`` body at ``position``; ValueError when it does
    not parse."""
    reader = _Reader(memoryview(frame), position, version >= FIRST_FLEXIBLE)
    by_id = version >= FIRST_WITH_TOPIC_IDS
    transactional_id = reader.string("transactional_id", nullable=True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(reader.view, reader.take(_ACKS_TIMEOUT.size, "acks and timeout"))
    topics = []
    for _ in range(reader.count("topic_data", smallest_item=3 if reader.flexible else 6)):
        name = topic_id = None
        if by_id:
            start = reader.take(16, "topic id")
            raw = bytes(reader.view[start : start + 16])
            topic_id = uuid.UUID(bytes=raw) if any(raw) else None  # all zero: no id, as kio reads it
        else:
            name = reader.string("topic name")
        partitions = []
        for _ in range(reader.count("partition_data", smallest_item=6 if reader.flexible else 8)):
            index = reader.int32("partition index")
            size = reader.length("records")
            records = None
            if size != -1:
                start = reader.take(size, "records")
                records = reader.view[start : start + size]
            reader.end_of_struct()
            partitions.append(PartitionProduceData(index, records))
        reader.end_of_struct()
        topics.append(TopicProduceData(name, tuple(partitions), topic_id))
    reader.end_of_struct()
    body = ProduceRequest(transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms), tuple(topics))
    return body, reader.position - position
