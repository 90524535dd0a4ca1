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
import functools
import struct
import uuid
from dataclasses import dataclass
from typing import NamedTuple

from kafka_spark.broker.protocol.primitives import read_uvarint, skip_tagged_fields

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_ACKS_TIMEOUT_COUNT = struct.Struct(">hii")
_INDEX_SIZE = struct.Struct(">ii")

#: The versions this reader handles: every Produce version the broker serves.
VERSIONS = range(3, 14)
FIRST_FLEXIBLE = 9
FIRST_WITH_TOPIC_IDS = 13


# Made for every partition of every produce: a frozen dataclass's __init__ costs twice a plain one's,
# and a named tuple's ``index`` field would hide tuple.index.
@dataclass(slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None


class TopicProduceData(NamedTuple):  # named tuples, for the same reason
    name: str | None  # None from v13, which names topics by id
    partition_data: tuple[PartitionProduceData, ...]
    topic_id: uuid.UUID | None = None  # v13+


class ProduceRequest(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout: datetime.timedelta
    topic_data: tuple[TopicProduceData, ...]


@functools.lru_cache(maxsize=4096)
def _topic_id(raw: bytes) -> uuid.UUID | None:
    """The topic id of 16 bytes (all zero: none, as kio reads it); cached, as a producer names the
    same few topics in every request and building a UUID is a good part of reading one."""
    return uuid.UUID(bytes=raw) if any(raw) else None


def _short(what: str, size: int, position: int, end: int) -> ValueError:
    return ValueError(f"{what} needs {size} bytes at byte {position}, the frame has {end - position}")


def _too_many(what: str, count: int) -> ValueError:
    return ValueError(f"{what} declares {count} entries, more than the frame holds")


def read_produce_request(
    frame: bytes | bytearray | memoryview, position: int, version: int = 7
) -> tuple[ProduceRequest, int]:
    """``(body, bytes read)`` for the ``version`` body at ``position``; ValueError when it does
    not parse.

    One straight function per encoding, with the buffer and position in locals: this runs for every
    produce request, and a method call per field cost a third of the time of a small request."""
    view = memoryview(frame)
    try:
        if version >= FIRST_FLEXIBLE:
            body, end = _read_flexible(view, position, version >= FIRST_WITH_TOPIC_IDS)
        else:
            body, end = _read_classic(view, position)
    except (IndexError, struct.error):
        raise ValueError(f"produce request v{version} is truncated") from None
    return body, end - position


def _read_classic(view: memoryview, pos: int) -> tuple[ProduceRequest, int]:
    """v3-v8: int16 string lengths, int32 array counts and record-set lengths."""
    end = len(view)
    length = _I16.unpack_from(view, pos)[0]
    pos += 2
    transactional_id = None
    if length >= 0:
        if pos + length > end:
            raise _short("transactional_id", length, pos, end)
        transactional_id = str(view[pos : pos + length], "utf-8")
        pos += length
    elif length != -1:
        raise ValueError(f"transactional_id has length {length}")
    if pos + 10 > end:
        raise _short("acks, timeout and topic count", 10, pos, end)
    acks, timeout_ms, topic_count = _ACKS_TIMEOUT_COUNT.unpack_from(view, pos)
    pos += 10
    if topic_count < 0 or topic_count * 6 > end - pos:
        raise _too_many("topic_data", topic_count)
    topics = []
    for _ in range(topic_count):
        length = _I16.unpack_from(view, pos)[0]
        pos += 2
        if length < 0 or pos + length > end:
            raise _short("topic name", length, pos, end)
        name = str(view[pos : pos + length], "utf-8")
        pos += length
        count = _I32.unpack_from(view, pos)[0]
        pos += 4
        if count < 0 or count * 8 > end - pos:
            raise _too_many("partition_data", count)
        partitions = []
        for _ in range(count):
            index, size = _INDEX_SIZE.unpack_from(view, pos)
            pos += 8
            records = None
            if size != -1:
                if size < 0 or pos + size > end:
                    raise _short("records", size, pos, end)
                records = view[pos : pos + size]
                pos += size
            partitions.append(PartitionProduceData(index, records))
        topics.append(TopicProduceData(name, tuple(partitions)))
    return ProduceRequest(transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms), tuple(topics)), pos


def _read_flexible(view: memoryview, pos: int, by_id: bool) -> tuple[ProduceRequest, int]:
    """v9+: unsigned varint lengths and counts stored as N+1 (0 = null), a tagged-field buffer
    closing every struct (skipped: Produce has none); v13+ names topics by id."""
    end = len(view)
    length = view[pos]  # the varints below take their one-byte form inline, the rest by read_uvarint
    if length < 0x80:
        pos += 1
    else:
        length, pos = read_uvarint(view, pos)
    transactional_id = None
    if length:
        length -= 1
        if pos + length > end:
            raise _short("transactional_id", length, pos, end)
        transactional_id = str(view[pos : pos + length], "utf-8")
        pos += length
    if pos + 6 > end:
        raise _short("acks and timeout", 6, pos, end)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(view, pos)
    pos += 6
    topic_count = view[pos]
    if topic_count < 0x80:
        pos += 1
    else:
        topic_count, pos = read_uvarint(view, pos)
    topic_count -= 1
    if topic_count < 0 or topic_count * 3 > end - pos:
        raise _too_many("topic_data", topic_count)
    topics = []
    for _ in range(topic_count):
        name = topic_id = None
        if by_id:
            if pos + 16 > end:
                raise _short("topic id", 16, pos, end)
            topic_id = _topic_id(bytes(view[pos : pos + 16]))
            pos += 16
        else:
            length = view[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = read_uvarint(view, pos)
            length -= 1
            if length < 0 or pos + length > end:
                raise _short("topic name", length, pos, end)
            name = str(view[pos : pos + length], "utf-8")
            pos += length
        count = view[pos]
        if count < 0x80:
            pos += 1
        else:
            count, pos = read_uvarint(view, pos)
        count -= 1
        if count < 0 or count * 6 > end - pos:
            raise _too_many("partition_data", count)
        partitions = []
        for _ in range(count):
            index = _I32.unpack_from(view, pos)[0]
            pos += 4
            size = view[pos]  # record sets up to 2 MiB take one to three varint bytes: inline too
            if size < 0x80:
                pos += 1
            elif view[pos + 1] < 0x80:
                size = (size & 0x7F) | view[pos + 1] << 7
                pos += 2
            elif view[pos + 2] < 0x80:
                size = (size & 0x7F) | (view[pos + 1] & 0x7F) << 7 | view[pos + 2] << 14
                pos += 3
            else:
                size, pos = read_uvarint(view, pos)
            records = None
            if size:
                size -= 1
                if pos + size > end:
                    raise _short("records", size, pos, end)
                records = view[pos : pos + size]
                pos += size
            pos = pos + 1 if view[pos] == 0 else skip_tagged_fields(view, pos)
            partitions.append(PartitionProduceData(index, records))
        pos = pos + 1 if view[pos] == 0 else skip_tagged_fields(view, pos)
        topics.append(TopicProduceData(name, tuple(partitions), topic_id))
    pos = pos + 1 if view[pos] == 0 else skip_tagged_fields(view, pos)
    return ProduceRequest(transactional_id, acks, datetime.timedelta(milliseconds=timeout_ms), tuple(topics)), pos
