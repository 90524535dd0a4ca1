"""Kafka's record-batch compression codecs: one table for the broker's storage and the executors.

A record batch's ``attributes`` bits 0-2 name the codec of its records section (Kafka's
``CompressionType``). The broker decompresses to validate and to index timestamps
(kafka_spark.broker.storage.batch / records), and compresses when it rewrites a compacted batch;
the executors' Arrow read path (kafka_spark.read.arrow) decompresses what it fetched. Both use
these functions, so Spark tasks never import the broker. No I/O; cramjam is imported on first use.
"""

from __future__ import annotations

import struct

__all__ = [
    "CODEC_GZIP",
    "CODEC_LZ4",
    "CODEC_NAMES",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_ZSTD",
    "XERIAL_MAGIC",
    "decompress",
    "xerial_snappy",
]

CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = range(5)
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"


def decompress(codec: int, data: memoryview) -> bytes | memoryview | None:
    """The records section, decompressed; None when the codec is unavailable or the data is bad."""
    if codec == CODEC_NONE:
        return data
    try:
        import cramjam
    except ImportError:
        return None
    try:
        if codec == CODEC_GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == CODEC_SNAPPY:
            if bytes(data[:8]) == XERIAL_MAGIC:
                return xerial_snappy(cramjam, data)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == CODEC_LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == CODEC_ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (cramjam.DecompressionError, ValueError, struct.error):
        return None
    return None


def xerial_snappy(cramjam: object, data: memoryview) -> bytes:
    """Snappy in xerial framing (snappy-java, what Java producers write): 8-byte magic, int32
    version, int32 min-compatible version, then blocks of int32 length + raw snappy. No library
    decodes it, hence this loop."""
    out = bytearray()
    position = 16
    while position < len(data):
        (length,) = struct.unpack_from(">i", data, position)
        position += 4
        out += cramjam.snappy.decompress_raw(data[position : position + length])  # type: ignore[attr-defined]
        position += length
    return bytes(out)
