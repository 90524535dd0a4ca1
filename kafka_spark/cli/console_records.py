"""Record batches (Kafka's v2 format, as a Fetch response carries them) -> what ``pylog consume``
prints, a batch at a time.

The console consumer's fast path (kafka_spark.cli.console_fetch) hands this module the raw bytes of
a partition's part of a Fetch response. :func:`scan` walks the batch headers (one ``struct`` call
per batch); :func:`lines` makes the default output of a batch's records (each value and a
newline) as one ``bytes`` object, in C where kafka_spark/cli/_console_values.c is built, else through
:func:`values`, its Python twin; :func:`records` makes a :class:`Record` per record, with the
accessors of confluent-kafka's ``Message`` that kafka_spark.cli.record_format's format strings and
JSON lines call, so the fast path prints through the same code as the librdkafka path and its
output is the same byte for byte.

Why C: the Python walk costs ~0.13 s per 200,000 records by itself, as much as confluent-kafka's
whole path, and numpy or numba cost more to import than kcat spends on the whole read
(bench/cli_throughput.py). Anything this module does not read (message formats before v2, a
compression codec whose library is missing, a record that does not parse) raises
:class:`Unreadable` or ValueError, and the caller hands that partition's reading from that batch
to librdkafka.
"""

from __future__ import annotations

from typing import Any

from kafka_spark.common.record_batch import (
    COMPRESSION_MASK,
    CONTROL_ABORT,
    CONTROL_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    RECORD_ATTRIBUTES_SIZE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    control_type,
)
from kafka_spark.common.record_batch import read_varint as _varint
from kafka_spark.errors import PylogError

try:
    from kafka_spark.cli._console_values import values as _c_values
except ImportError:  # built without a C compiler: the Python walk below
    _c_values = None
#: Whether the default output's walk is compiled (kafka_spark/cli/_console_values.c).
C_VALUES = _c_values is not None

__all__ = [
    "Batch",
    "Record",
    "Transactions",
    "Unreadable",
    "lines",
    "records",
    "scan",
    "values",
]

#: confluent-kafka's timestamp types (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME)
_CREATE_TIME, _LOG_APPEND_TIME = 1, 2


class Unreadable(PylogError):
    """A batch this module does not read; ``offset`` is where librdkafka should take over."""

    def __init__(self, offset: int, why: str):
        super().__init__(f"offset {offset}: {why}")
        self.offset = offset
        self.why = why


class Batch:
    """One record batch of a fetched buffer: where it lies and its header fields."""

    __slots__ = (
        "position",
        "end",
        "base_offset",
        "last_offset",
        "attributes",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "count",
    )

    def __init__(self, position: int, end: int, header: tuple) -> None:
        self.position = position
        self.end = end
        self.base_offset = header[0]
        self.attributes = header[5]
        self.last_offset = header[0] + header[6]
        self.base_timestamp = header[7]
        self.max_timestamp = header[8]
        self.producer_id = header[9]
        self.count = header[12]

    @property
    def control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


def scan(data: bytes | memoryview) -> list[Batch]:
    """The complete batches of ``data`` (a Fetch may cut the last one short: it is left out)."""
    batches = []
    position, size = 0, len(data)
    unpack = HEADER.unpack_from  # the fields of kafka_spark.common.record_batch.FIELDS, in order
    while position + HEADER_SIZE <= size:
        header = unpack(data, position)
        end = position + LOG_OVERHEAD + header[1]
        if end > size:
            break
        if header[3] != MAGIC:
            raise Unreadable(header[0], f"a message set of format v{header[3]} (this reader takes v2, Kafka 0.11+)")
        if header[1] < HEADER_SIZE - LOG_OVERHEAD:
            raise Unreadable(header[0], f"a batch length of {header[1]} bytes")
        batches.append(Batch(position, end, header))
        position = end
    return batches


def records_section(data: bytes, batch: Batch) -> tuple[bytes, int, int]:
    """``(buffer, start, end)`` of a batch's records, decompressed if the batch is compressed."""
    start = batch.position + HEADER_SIZE
    codec = batch.attributes & COMPRESSION_MASK
    if not codec:
        return data, start, batch.end
    from kafka_spark.common.compression import decompress  # cramjam: loaded only for compressed batches

    section = decompress(codec, memoryview(data)[start : batch.end])
    if section is None:
        raise Unreadable(batch.base_offset, f"compression codec {codec} cannot be decompressed here")
    section = bytes(section)
    return section, 0, len(section)


def lines(buf: bytes, start: int, end: int, limit: int) -> tuple[bytes | bytearray, int]:
    """The default output of the records in ``buf[start:end]``: each value and a newline (a null
    value: an empty line), at most ``limit`` records (-1: all); returns it and how many records.
    In C where kafka_spark.cli._console_values is built (a bytearray), else :func:`values`."""
    if _c_values is not None:
        output, count, _ = _c_values(buf, start, end, limit)
        return output, count
    out: list[bytes] = []
    values(buf, start, end, out)
    if 0 <= limit < len(out):
        del out[limit:]
    out.append(b"")
    return b"\n".join(out), len(out) - 1


def values(buf: bytes, p: int, end: int, out: list[bytes]) -> int:
    """Append the values of the records in ``buf[p:end]`` to ``out`` (``b""`` for a null value);
    returns how many. The Python twin of kafka_spark/cli/_console_values.c."""
    before = len(out)
    while p < end:
        length, p = _varint(buf, p)
        if length < 0:
            raise ValueError("a negative record length")
        record_end = p + length
        _, q = _varint(buf, p + RECORD_ATTRIBUTES_SIZE)  # the timestamp delta
        _, q = _varint(buf, q)  # offset delta
        key_length, q = _varint(buf, q)
        value, q = _field(buf, q + max(key_length, 0))
        if q >= record_end:  # the header count is still to come
            raise ValueError("a record runs past its length")
        out.append(value or b"")
        p = record_end
    return len(out) - before


class Record:
    """A record with the accessors of confluent-kafka's ``Message`` that printing uses."""

    __slots__ = ("_topic", "_partition", "_offset", "_timestamp", "_key", "_value", "_headers")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: tuple[int, int],
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._timestamp = timestamp
        self._key = key
        self._value = value
        self._headers = headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def error(self) -> None:
        return None


def _field(buf: bytes, p: int) -> tuple[bytes | None, int]:
    n, p = _varint(buf, p)
    if n < 0:
        return None, p
    return buf[p : p + n], p + n


def records(buf: bytes, p: int, end: int, batch: Batch, topic: str, partition: int, low: int, out: list[Any]) -> None:
    """Append a :class:`Record` for each record of ``buf[p:end]`` at offset ``low`` or later."""
    append = out.append
    log_append = bool(batch.attributes & TIMESTAMP_TYPE_MASK)
    kind = _LOG_APPEND_TIME if log_append else _CREATE_TIME
    base_offset, base_timestamp = batch.base_offset, batch.base_timestamp
    while p < end:
        length, p = _varint(buf, p)
        if length < 0:
            raise ValueError("a negative record length")
        record_end = p + length
        delta, q = _varint(buf, p + RECORD_ATTRIBUTES_SIZE)
        offset_delta, q = _varint(buf, q)
        key, q = _field(buf, q)
        value, q = _field(buf, q)
        count, q = _varint(buf, q)
        headers = None
        if count > 0:
            headers = []
            for _ in range(count):
                name, q = _field(buf, q)
                header_value, q = _field(buf, q)
                headers.append(((name or b"").decode("utf-8", "replace"), header_value))
        if q > record_end:
            raise ValueError("a record runs past its length")
        p = record_end
        offset = base_offset + offset_delta
        if offset >= low:
            timestamp = batch.max_timestamp if log_append else base_timestamp + delta
            append(Record(topic, partition, offset, (kind, timestamp), key, value, headers))


class Transactions:
    """read_committed over one partition's part of a Fetch response: which batches belong to
    aborted transactions (the Kafka consumer's rule: a producer's transaction listed as aborted
    from its first offset until its ABORT marker)."""

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self.pending = sorted(aborted, key=lambda entry: entry[1])  # (producer_id, first_offset)
        self.active: set[int] = set()

    def aborted(self, buf: bytes, batch: Batch) -> bool:
        """Whether ``batch`` (taken in offset order) is part of an aborted transaction."""
        if not batch.attributes & TRANSACTIONAL_MASK:
            return False
        pending = self.pending
        while pending and pending[0][1] <= batch.last_offset:
            self.active.add(pending.pop(0)[0])
        producer = batch.producer_id
        if batch.attributes & CONTROL_MASK:
            if producer in self.active and control_type(buf, batch.position) == CONTROL_ABORT:
                self.active.discard(producer)
            return False
        return producer in self.active
