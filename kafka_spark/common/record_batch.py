"""Kafka's record batch v2 (magic 2): the one description of its layout in pylog.

The broker's storage (kafka_spark.broker.storage.batch), the executors' numba decoder
(kafka_spark.read.record_decoder, kafka_spark.read.arrow) and ``pylog consume``
(kafka_spark.cli.console_records, and its C walk through the generated ``_record_layout.h``) all
read batches with the names defined here. Layout (Kafka ``docs/implementation.html`` §5.3; all
integers big endian)::

    0  base_offset int64             rewritten by the broker, outside the CRC
    8  batch_length int32            bytes after this field (size - 12)
    12 partition_leader_epoch int32  rewritten by the broker, outside the CRC
    16 magic int8 (2)
    17 crc uint32                    CRC-32C (Castagnoli) of bytes [21, end)
    21 attributes int16              bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                     6 delete horizon (KIP-534)
    23 last_offset_delta int32
    27 base_timestamp int64
    35 max_timestamp int64
    43 producer_id int64
    51 producer_epoch int16
    53 base_sequence int32
    57 records_count int32
    61 records (one compressed blob when codec != 0)

Each record (§5.3.2; varints zigzag-encoded)::

    length varint, attributes int8, timestamp_delta varlong, offset_delta varint,
    key_length varint (-1 = null), key, value_length varint (-1 = null), value,
    headers_count varint, headers (key_length varint, key, value_length varint, value)

A control batch (a transaction marker) holds one record whose key is ``version int16, type
int16`` (0 ABORT, 1 COMMIT) and whose value is ``version int16, coordinator_epoch int32``.

The header's field offsets are computed from :data:`FIELDS`, the table the ``struct`` format is
built from, so the two cannot disagree. Everything here is a constant or a pure function of
bytes: no I/O, nothing imported beyond ``struct`` (the executors' read path imports it).
"""

from __future__ import annotations

import struct
from itertools import accumulate

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BASE_OFFSET_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "BATCH_LENGTH_OFFSET",
    "COMPRESSION_MASK",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "CONTROL_KEY",
    "CONTROL_MASK",
    "CONTROL_VALUE",
    "CRC_OFFSET",
    "CRC_START",
    "CREATE_TIME",
    "DELETE_HORIZON_MASK",
    "FIELDS",
    "HEADER",
    "HEADER_SIZE",
    "LAST_OFFSET_DELTA_OFFSET",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "MIN_RECORD_BODY",
    "MIN_RECORD_SIZE",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "PRODUCER_EPOCH_OFFSET",
    "PRODUCER_ID_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORD_ATTRIBUTES_SIZE",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "c_header",
    "control_key_position",
    "control_type",
    "read_varint",
]

#: The batch header, field by field: (name, ``struct`` code). HEADER and the offsets below are
#: built from it.
FIELDS: tuple[tuple[str, str], ...] = (
    ("base_offset", "q"),
    ("batch_length", "i"),
    ("partition_leader_epoch", "i"),
    ("magic", "b"),
    ("crc", "I"),
    ("attributes", "h"),
    ("last_offset_delta", "i"),
    ("base_timestamp", "q"),
    ("max_timestamp", "q"),
    ("producer_id", "q"),
    ("producer_epoch", "h"),
    ("base_sequence", "i"),
    ("records_count", "i"),
)

#: The whole 61-byte header, unpacked into the fields of :data:`FIELDS` in order.
HEADER = struct.Struct(">" + "".join(code for _, code in FIELDS))
HEADER_SIZE: int = HEADER.size  # 61

_OFFSETS = dict(
    zip(
        (name for name, _ in FIELDS),
        accumulate((struct.calcsize(">" + code) for _, code in FIELDS[:-1]), initial=0),
        strict=True,
    )
)
BASE_OFFSET_OFFSET: int = _OFFSETS["base_offset"]  # 0
BATCH_LENGTH_OFFSET: int = _OFFSETS["batch_length"]  # 8
PARTITION_LEADER_EPOCH_OFFSET: int = _OFFSETS["partition_leader_epoch"]  # 12
MAGIC_OFFSET: int = _OFFSETS["magic"]  # 16
CRC_OFFSET: int = _OFFSETS["crc"]  # 17
ATTRIBUTES_OFFSET: int = _OFFSETS["attributes"]  # 21
LAST_OFFSET_DELTA_OFFSET: int = _OFFSETS["last_offset_delta"]  # 23
BASE_TIMESTAMP_OFFSET: int = _OFFSETS["base_timestamp"]  # 27
MAX_TIMESTAMP_OFFSET: int = _OFFSETS["max_timestamp"]  # 35
PRODUCER_ID_OFFSET: int = _OFFSETS["producer_id"]  # 43
PRODUCER_EPOCH_OFFSET: int = _OFFSETS["producer_epoch"]  # 51
BASE_SEQUENCE_OFFSET: int = _OFFSETS["base_sequence"]  # 53
RECORDS_COUNT_OFFSET: int = _OFFSETS["records_count"]  # 57

#: What precedes the length-counted part of a batch: base_offset and batch_length.
LOG_OVERHEAD: int = BATCH_LENGTH_OFFSET + 4  # 12
#: The CRC covers the batch from the attributes to its end.
CRC_START: int = ATTRIBUTES_OFFSET  # 21
MAGIC = 2

# Attribute bits (Kafka's DefaultRecordBatch).
COMPRESSION_MASK = 0x07  # the codec: kafka_spark.common.compression
TIMESTAMP_TYPE_MASK = 0x08  # set: LogAppendTime (every record's timestamp is max_timestamp)
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40  # KIP-534: base_timestamp holds the delete horizon of the batch's tombstones
#: The timestamp type, as the attribute bit says it (Kafka's TimestampType ids).
CREATE_TIME, LOG_APPEND_TIME = 0, 1

#: A record's attributes: one byte, always 0 (unused since magic 2).
RECORD_ATTRIBUTES_SIZE = 1
#: The shortest record after its length varint: attributes, timestamp delta, offset delta, key
#: length, value length and header count, one byte each (null key and value, no headers).
MIN_RECORD_BODY = RECORD_ATTRIBUTES_SIZE + 5
#: The shortest record, its one-byte length varint included.
MIN_RECORD_SIZE = MIN_RECORD_BODY + 1

#: A control record's key and value (a transaction marker's).
CONTROL_KEY = struct.Struct(">hh")  # version, type
CONTROL_VALUE = struct.Struct(">hi")  # version, coordinator_epoch
CONTROL_ABORT, CONTROL_COMMIT = 0, 1


def read_varint(buf: bytes | bytearray | memoryview, position: int) -> tuple[int, int]:
    """A zigzag varint at ``position``: ``(value, next position)``. Raises IndexError past the
    end of ``buf`` and ValueError for a varint longer than 10 bytes."""
    shift = result = 0
    while True:
        byte = buf[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def control_key_position(buf: bytes | bytearray | memoryview, batch_position: int = 0) -> tuple[int, int]:
    """``(key length, key position)`` of the first record of the (uncompressed) control batch at
    ``batch_position``: past its length, attributes, timestamp delta and offset delta."""
    _length, position = read_varint(buf, batch_position + HEADER_SIZE)
    _timestamp_delta, position = read_varint(buf, position + RECORD_ATTRIBUTES_SIZE)
    _offset_delta, position = read_varint(buf, position)
    return read_varint(buf, position)


def control_type(buf: bytes | bytearray | memoryview, batch_position: int = 0) -> int:
    """The marker type (:data:`CONTROL_ABORT`, :data:`CONTROL_COMMIT`) of the control batch at
    ``batch_position``, from its record's key; ValueError if the key is not a marker's."""
    key_length, position = control_key_position(buf, batch_position)
    if key_length < CONTROL_KEY.size:
        raise ValueError(f"control record key of {key_length} bytes; a marker key has {CONTROL_KEY.size}")
    _version, kind = CONTROL_KEY.unpack_from(buf, position)
    return int(kind)


def c_header() -> str:
    """The C header of these constants, for kafka_spark/cli/_console_values.c:
    ``python -m kafka_spark.common.record_batch > kafka_spark/cli/_record_layout.h`` writes it,
    and tests/common/test_record_batch.py fails when the committed one differs."""
    names = {
        "RECORD_BATCH_HEADER_SIZE": HEADER_SIZE,
        "RECORD_BATCH_LOG_OVERHEAD": LOG_OVERHEAD,
        "RECORD_BATCH_MAGIC": MAGIC,
        "RECORD_BATCH_MAGIC_OFFSET": MAGIC_OFFSET,
        "RECORD_BATCH_ATTRIBUTES_OFFSET": ATTRIBUTES_OFFSET,
        "RECORD_BATCH_RECORDS_COUNT_OFFSET": RECORDS_COUNT_OFFSET,
        "RECORD_BATCH_COMPRESSION_MASK": COMPRESSION_MASK,
        "RECORD_BATCH_CONTROL_MASK": CONTROL_MASK,
        "RECORD_ATTRIBUTES_SIZE": RECORD_ATTRIBUTES_SIZE,
        "RECORD_MIN_BODY": MIN_RECORD_BODY,
    }
    lines = [
        "/* Generated from kafka_spark/common/record_batch.py: do not edit. Regenerate with",
        " *     python -m kafka_spark.common.record_batch > kafka_spark/cli/_record_layout.h",
        " * (tests/common/test_record_batch.py fails when this file and the module disagree). */",
        "#ifndef PYLOG_RECORD_LAYOUT_H",
        "#define PYLOG_RECORD_LAYOUT_H",
        "",
        *(
            f"#define {name} {value:#04x}" if name.endswith("_MASK") else f"#define {name} {value}"
            for name, value in names.items()
        ),
        "",
        "#endif",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(c_header(), end="")
