"""The wire primitives the hand-written hot-path codecs use: Kafka's unsigned varints (lengths
and counts of flexible versions, KIP-482), compact strings, tagged-field buffers and UUIDs.

kio encodes every other message; only the Produce request reader, the Produce response writer and
the Fetch response writer are written by hand (see protocol/__init__.py), and they share these.
"""

from __future__ import annotations

import struct
import uuid

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

#: An empty tagged-field buffer: no tagged fields (what every struct of a flexible version ends with
#: when the broker has none to send).
NO_TAGS = b"\x00"


class MalformedField(ValueError):
    """Bytes that do not parse as the field they should be."""


def uvarint(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint: 7 bits per byte, least significant first. The
    lengths of fetched record sets (up to 2 MiB) take the straight branches."""
    if value < 0x80:
        return bytes((value,))
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """``(value, position after it)``; MalformedField past the end or beyond 32 bits."""
    value = shift = 0
    while True:
        if position >= len(data) or shift > 28:
            raise MalformedField(f"malformed unsigned varint at byte {position}")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def skip_tagged_fields(data: bytes | memoryview, position: int) -> int:
    """The position after a tagged-field buffer (tags this broker does not read are skipped)."""
    count, position = read_uvarint(data, position)
    for _ in range(count):
        _tag, position = read_uvarint(data, position)
        size, position = read_uvarint(data, position)
        position += size
    if position > len(data):
        raise MalformedField("tagged fields run past the end of the message")
    return position


def array_length(count: int, flexible: bool) -> bytes:
    """An ARRAY's count: int32 (classic) or uvarint count + 1 (compact)."""
    return uvarint(count + 1) if flexible else _I32.pack(count)


def string(value: str, flexible: bool) -> bytes:
    """A STRING: int16 length (classic) or uvarint length + 1 (compact)."""
    encoded = value.encode("utf-8")
    return (uvarint(len(encoded) + 1) if flexible else _I16.pack(len(encoded))) + encoded


def nullable_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else b"\xff\xff"
    return string(value, flexible)


def uuid_bytes(value: uuid.UUID | None) -> bytes:
    """A UUID field: 16 bytes, all zero for "none" (Kafka's Uuid.ZERO_UUID)."""
    return value.bytes if value is not None else bytes(16)
