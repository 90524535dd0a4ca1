"""Produce requests v3-v8 read by hand, records left in place.

kio's reader copies every partition's record set out of the frame into a new ``bytes``; on the
produce path that is a copy of every megabyte a producer sends, made only to be written to the log
file. This reader returns the record sets as memoryviews over the received frame instead, so the
bytes go from the socket buffer to ``pwritev`` without a copy in between. The body has kio's field
names and values (``timeout`` a ``timedelta``, as kio's), so the handler cannot tell them apart;
tests compare the two readers on the same frames.

Layout (v3-v8, non-flexible): transactional_id nullable string (int16 length), acks int16,
timeout_ms int32, topic_data array (int32 count) of {name string, partition_data array of
{index int32, records nullable bytes (int32 length)}}.
"""

from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")

#: The versions this reader handles (v9+ is flexible and goes to kio).
VERSIONS = range(3, 9)


@dataclass(frozen=True, slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None


@dataclass(frozen=True, slots=True)
class TopicProduceData:
    name: str
    partition_data: tuple[PartitionProduceData, ...]


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout: datetime.timedelta
    topic_data: tuple[TopicProduceData, ...]


class _Reader:
    __slots__ = ("view", "position")

    def __init__(self, view: memoryview, position: int) -> None:
        self.view = view
        self.position = position

    def take(self, size: int, what: str) -> int:
        start = self.position
        if size < 0 or start + size > len(self.view):
            raise ValueError(f"{what} needs {size} bytes at byte {start}, the frame has {len(self.view) - start}")
        self.position = start + size
        return start

    def int16(self, what: str) -> int:
        return _I16.unpack_from(self.view, self.take(2, what))[0]

    def int32(self, what: str) -> int:
        return _I32.unpack_from(self.view, self.take(4, what))[0]

    def string(self, what: str, nullable: bool = False) -> str | None:
        length = self.int16(what)
        if length == -1 and nullable:
            return None
        if length < 0:
            raise ValueError(f"{what} has length {length}")
        start = self.take(length, what)
        return str(self.view[start : start + length], "utf-8")

    def count(self, what: str, smallest_item: int) -> int:
        count = self.int32(what)
        if count < 0 or count * smallest_item > len(self.view) - self.position:
            raise ValueError(f"{what} declares {count} entries, more than the frame holds")
        return count


def read_produce_request(frame: bytes | bytearray | memoryview, position: int) -> tuple[ProduceRequest, int]:
    """``(body, bytes read)`` for the body at ``position``; ValueError when it does not parse."""
    reader = _Reader(memoryview(frame), position)
    transactional_id = reader.string("transactional_id", nullable=True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(reader.view, reader.take(_ACKS_TIMEOUT.size, "acks and timeout"))
    topics = []
    for _ in range(reader.count("topic_data", smallest_item=6)):
        name = reader.string("topic name")
        assert name is not None
        partitions = []
        for _ in range(reader.count("partition_data", smallest_item=8)):
            index = reader.int32("partition index")
            size = reader.int32("records length")
            records = None
            if size != -1:
                start = reader.take(size, "records")
                records = reader.view[start : start + size]
            partitions.append(PartitionProduceData(index, records))
        topics.append(TopicProduceData(name, tuple(partitions)))
    body = ProduceRequest(transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms), tuple(topics))
    return body, reader.position - position
