"""Record batches (Kafka's v2 format, as fetched) -> Arrow columns of Spark's Kafka schema.

The executor's hot path. A Fetch response carries each partition's data as concatenated record
batches; this module turns them into one ``pyarrow.RecordBatch`` with no Python code per record:

1. :func:`scan_batches` walks the batch headers (one compiled loop) into arrays: where each batch
   lies, its base offset, last offset, attributes, timestamps, producer id and record count. A
   truncated batch at the end (a fetch may cut the last one) is left out.
2. The caller chooses batches with array operations (control batches, aborted transactions,
   offsets below the read position); compressed batches are decompressed, one call per batch.
3. :func:`decode_records` walks the records of the chosen batches (one compiled loop) straight
   into Arrow buffers: offsets, timestamps, key and value data with their offsets and validity,
   headers when asked for. :func:`to_arrow` wraps those buffers without copying.

The loops are compiled by numba (``cache=True``: compiled once per installation, then loaded
from ``__pycache__``). A malformed record (a length running past its batch) stops the decode
with :class:`CorruptRecordBatch` naming the offset, never a wrong row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa
from numba.core import cgutils, types
from numba.extending import intrinsic

from kafka_spark.common.record_batch import (
    ATTRIBUTES_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    BATCH_LENGTH_OFFSET,
    HEADER_SIZE,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_RECORD_SIZE,
    PRODUCER_ID_OFFSET,
    RECORD_ATTRIBUTES_SIZE,
    RECORDS_COUNT_OFFSET,
    TIMESTAMP_TYPE_MASK,
)
from kafka_spark.errors import PylogError
from kafka_spark.read.arrow_columns import HEADER_STRUCT, TIMESTAMP_US, constant_string

__all__ = [
    "HEADER_SIZE",
    "BatchIndex",
    "CorruptRecordBatch",
    "Decoded",
    "decode_records",
    "scan_batches",
    "to_arrow",
]


class CorruptRecordBatch(PylogError, ValueError):
    """A record batch whose records do not parse (lengths past the batch, bad magic)."""


# ----------------------------------------------------------------------------------------------
# Compiled kernels. Big-endian reads are spelled out byte by byte: numba compiles them to a load
# and a byte swap. The layout's offsets (kafka_spark.common.record_batch) are module globals,
# which numba compiles in as constants.


@numba.njit(cache=True, nogil=True)
def _be64(buf, p):  # pragma: no cover - compiled
    v = np.int64(0)
    for i in range(8):
        v = (v << 8) | np.int64(buf[p + i])
    return v


@numba.njit(cache=True, nogil=True)
def _be32(buf, p):  # pragma: no cover - compiled
    v = (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])
    return v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v


@numba.njit(cache=True, nogil=True)
def _scan(buf):  # pragma: no cover - compiled
    n = buf.shape[0]
    count = 0
    p = 0
    while p + HEADER_SIZE <= n:
        length = _be32(buf, p + BATCH_LENGTH_OFFSET)
        if length < HEADER_SIZE - LOG_OVERHEAD or p + LOG_OVERHEAD + length > n:
            break
        count += 1
        p += LOG_OVERHEAD + length
    position = np.empty(count, np.int64)
    size = np.empty(count, np.int64)
    base_offset = np.empty(count, np.int64)
    last_offset = np.empty(count, np.int64)
    attributes = np.empty(count, np.int32)
    base_timestamp = np.empty(count, np.int64)
    max_timestamp = np.empty(count, np.int64)
    producer_id = np.empty(count, np.int64)
    records = np.empty(count, np.int64)
    magic = np.empty(count, np.int32)
    p = 0
    for i in range(count):
        length = _be32(buf, p + BATCH_LENGTH_OFFSET)
        position[i] = p
        size[i] = LOG_OVERHEAD + length
        base_offset[i] = _be64(buf, p)
        magic[i] = buf[p + MAGIC_OFFSET]
        attributes[i] = (np.int32(buf[p + ATTRIBUTES_OFFSET]) << 8) | np.int32(buf[p + ATTRIBUTES_OFFSET + 1])
        last_offset[i] = base_offset[i] + _be32(buf, p + LAST_OFFSET_DELTA_OFFSET)
        base_timestamp[i] = _be64(buf, p + BASE_TIMESTAMP_OFFSET)
        max_timestamp[i] = _be64(buf, p + MAX_TIMESTAMP_OFFSET)
        producer_id[i] = _be64(buf, p + PRODUCER_ID_OFFSET)
        records[i] = _be32(buf, p + RECORDS_COUNT_OFFSET)
        p += LOG_OVERHEAD + length
    return (
        position,
        size,
        base_offset,
        last_offset,
        attributes,
        base_timestamp,
        max_timestamp,
        producer_id,
        records,
        magic,
    )


@numba.njit(cache=True, nogil=True)
def _varint(buf, p, end):  # pragma: no cover - compiled
    """(zigzag-decoded value, next position); next position -1 when it runs past ``end``."""
    result = np.int64(0)
    shift = 0
    while True:
        if p >= end or shift > 63:
            return np.int64(0), -1
        b = np.int64(buf[p])
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), p


@intrinsic
def _copy_bytes(typingctx, src, src_pos, size, dst, dst_pos):  # pragma: no cover - compiled
    """memcpy of ``size`` bytes from ``src[src_pos:]`` to ``dst[dst_pos:]`` (callers check the
    bounds). numba's slice assignment copies element by element, several times slower."""
    sig = types.void(src, types.intp, types.intp, dst, types.intp)

    def codegen(context, builder, signature, args):
        src_array, src_at, count, dst_array, dst_at = args
        source = context.make_array(signature.args[0])(context, builder, src_array)
        target = context.make_array(signature.args[3])(context, builder, dst_array)
        cgutils.raw_memcpy(builder, builder.gep(target.data, [dst_at]), builder.gep(source.data, [src_at]), count, 1)
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(cache=True, nogil=True)
def _append(buf, p, size, valid, i, data, at):  # pragma: no cover - compiled
    """Element ``i`` of a nullable binary column: ``size`` bytes at ``buf[p]`` (-1: null)
    appended to ``data`` at ``at``; returns the new end of ``data``."""
    valid[i] = size >= 0
    if size > 0:
        _copy_bytes(buf, p, size, data, at)
        return at + size
    return at


@numba.njit(cache=True, nogil=True)
def _decode(
    buf, starts, ends, base_offsets, base_timestamps, log_append, max_timestamps, counts, low, high, headers, out
):  # pragma: no cover - compiled
    (
        offsets,
        timestamps,
        types,
        key_offsets,
        key_valid,
        key_data,
        value_offsets,
        value_valid,
        value_data,
        list_offsets,
        hkey_offsets,
        hkey_data,
        hvalue_offsets,
        hvalue_valid,
        hvalue_data,
    ) = out
    key_offsets[0] = 0
    value_offsets[0] = 0
    list_offsets[0] = 0
    hkey_offsets[0] = 0
    hvalue_offsets[0] = 0
    n = 0
    nh = 0
    key_pos = 0
    value_pos = 0
    hkey_pos = 0
    hvalue_pos = 0
    status = 0
    for b in range(starts.shape[0]):
        p = starts[b]
        end = ends[b]
        for _ in range(counts[b]):
            length, p = _varint(buf, p, end)
            if p < 0 or length < 0 or p + length > end:
                status = -1 - b
                break
            record_end = p + length
            ts_delta, p = _varint(buf, p + RECORD_ATTRIBUTES_SIZE, record_end)
            offset_delta, p = _varint(buf, p, record_end) if p >= 0 else (np.int64(0), -1)
            klen, p = _varint(buf, p, record_end) if p >= 0 else (np.int64(0), -1)
            if p < 0 or p + max(klen, 0) > record_end:
                status = -1 - b
                break
            offset = base_offsets[b] + offset_delta
            keep = low <= offset < high
            if keep:
                key_pos = _append(buf, p, klen, key_valid, n, key_data, key_pos)
                key_offsets[n + 1] = key_pos
            p += max(klen, 0)
            vlen, p = _varint(buf, p, record_end)
            if p < 0 or p + max(vlen, 0) > record_end:
                status = -1 - b
                break
            if not keep:
                p = record_end
                continue
            value_pos = _append(buf, p, vlen, value_valid, n, value_data, value_pos)
            value_offsets[n + 1] = value_pos
            p += max(vlen, 0)
            if headers:
                hcount, p = _varint(buf, p, record_end)
                if p < 0 or hcount < 0:
                    status = -1 - b
                    break
                hbad = False
                for _h in range(hcount):
                    hk, p = _varint(buf, p, record_end)
                    if p < 0 or hk < 0 or p + hk > record_end:
                        hbad = True
                        break
                    _copy_bytes(buf, p, hk, hkey_data, hkey_pos)
                    hkey_pos += hk
                    hv, p = _varint(buf, p + hk, record_end)
                    if p < 0 or p + max(hv, 0) > record_end:
                        hbad = True
                        break
                    hvalue_pos = _append(buf, p, hv, hvalue_valid, nh, hvalue_data, hvalue_pos)
                    p += max(hv, 0)
                    nh += 1
                    hkey_offsets[nh] = hkey_pos
                    hvalue_offsets[nh] = hvalue_pos
                if hbad:
                    status = -1 - b
                    break
                list_offsets[n + 1] = nh
            offsets[n] = offset
            timestamps[n] = max_timestamps[b] if log_append[b] else base_timestamps[b] + ts_delta
            types[n] = 1 if log_append[b] else 0
            n += 1
            p = record_end
        if status != 0:
            break
    return status, n, nh


# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchIndex:
    """The complete record batches of a buffer, one array entry per batch (from :func:`scan_batches`)."""

    position: np.ndarray
    size: np.ndarray
    base_offset: np.ndarray
    last_offset: np.ndarray
    attributes: np.ndarray
    base_timestamp: np.ndarray
    max_timestamp: np.ndarray
    producer_id: np.ndarray
    records: np.ndarray
    magic: np.ndarray

    def __len__(self) -> int:
        return int(self.position.shape[0])


def scan_batches(buf: np.ndarray) -> BatchIndex:
    """The complete batches of ``buf`` (uint8), in order; a cut-off last batch is left out."""
    return BatchIndex(*_scan(buf))


@dataclass(frozen=True)
class Decoded:
    """Columns of the records decoded by :func:`decode_records` (Arrow-layout numpy buffers)."""

    rows: int
    offsets: np.ndarray
    timestamps_ms: np.ndarray
    timestamp_types: np.ndarray  # Spark's timestampType: 0 create time, 1 log append time
    key_offsets: np.ndarray
    key_valid: np.ndarray
    key_data: np.ndarray
    value_offsets: np.ndarray
    value_valid: np.ndarray
    value_data: np.ndarray
    header_lists: np.ndarray | None
    header_count: int
    header_key_offsets: np.ndarray
    header_key_data: np.ndarray
    header_value_offsets: np.ndarray
    header_value_valid: np.ndarray
    header_value_data: np.ndarray


def _empty(count: int, dtype) -> np.ndarray:  # noqa: ANN001
    """An uninitialised array from Arrow's memory pool, which keeps freed memory for the next
    batch (the system allocator hands large blocks back to the kernel, and every page of the next
    one faults again)."""
    dtype = np.dtype(dtype)
    return np.frombuffer(pa.allocate_buffer(max(count, 1) * dtype.itemsize), dtype)[:count]


def _outputs(total: int, data_bound: int, headers: bool) -> tuple:
    """The column buffers :func:`_decode` fills, sized for ``total`` records whose keys, values and
    headers fit in ``data_bound`` bytes (the size of their records sections)."""
    header_bound = data_bound // 2 + 1 if headers else 0
    header_data = data_bound if headers else 0
    return (
        _empty(total, np.int64),
        _empty(total, np.int64),
        _empty(total, np.int32),
        _empty(total + 1, np.int32),
        _empty(total, np.uint8),
        _empty(data_bound, np.uint8),
        _empty(total + 1, np.int32),
        _empty(total, np.uint8),
        _empty(data_bound, np.uint8),
        _empty(total + 1 if headers else 1, np.int32),
        _empty(header_bound + 1, np.int32),
        _empty(header_data, np.uint8),
        _empty(header_bound + 1, np.int32),
        _empty(header_bound, np.uint8),
        _empty(header_data, np.uint8),
    )


def decode_records(
    buf: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    batches: BatchIndex,
    chosen: np.ndarray,
    low: int,
    high: int,
    headers: bool,
) -> Decoded:
    """Decode the records of the ``chosen`` batches (indexes into ``batches``), whose records
    sections are ``buf[starts[i]:ends[i]]`` (uncompressed), keeping offsets in ``[low, high)``."""
    starts = np.ascontiguousarray(starts, np.int64)
    ends = np.ascontiguousarray(ends, np.int64)
    counts = batches.records[chosen]
    sizes = ends - starts
    bad = np.flatnonzero((counts < 0) | (counts * MIN_RECORD_SIZE > sizes))
    if len(bad):
        raise CorruptRecordBatch(
            f"the record batch at offset {int(batches.base_offset[chosen[bad[0]]])} claims "
            f"{int(counts[bad[0]])} records in {int(sizes[bad[0]])} bytes: the log is corrupt"
        )
    data_bound = int(sizes.sum())
    if data_bound >= 1 << 31:
        raise ValueError(
            f"one fetch holds {data_bound} bytes of records, more than an Arrow binary column takes "
            f"(2 GiB): lower kafka.fetch.max.bytes / kafka.max.partition.fetch.bytes"
        )
    out = _outputs(int(counts.sum()), data_bound, headers)
    status, n, nh = _decode(
        buf,
        starts,
        ends,
        batches.base_offset[chosen],
        batches.base_timestamp[chosen],
        (batches.attributes[chosen] & TIMESTAMP_TYPE_MASK) != 0,
        batches.max_timestamp[chosen],
        counts,
        np.int64(low),
        np.int64(high),
        headers,
        out,
    )
    if status != 0:
        bad_batch = int(chosen[-1 - status])
        raise CorruptRecordBatch(
            f"the record batch at offset {int(batches.base_offset[bad_batch])} does not parse (a record "
            f"length runs past the batch): the log is corrupt or the batch was cut in transit"
        )
    (
        offsets,
        timestamps,
        types,
        key_offsets,
        key_valid,
        key_data,
        value_offsets,
        value_valid,
        value_data,
        list_offsets,
        hkey_offsets,
        hkey_data,
        hvalue_offsets,
        hvalue_valid,
        hvalue_data,
    ) = out
    return Decoded(
        rows=n,
        offsets=offsets[:n],
        timestamps_ms=timestamps[:n],
        timestamp_types=types[:n],
        key_offsets=key_offsets[: n + 1],
        key_valid=key_valid[:n],
        key_data=key_data[: key_offsets[n]],
        value_offsets=value_offsets[: n + 1],
        value_valid=value_valid[:n],
        value_data=value_data[: value_offsets[n]],
        header_lists=list_offsets[: n + 1] if headers else None,
        header_count=nh,
        header_key_offsets=hkey_offsets[: nh + 1],
        header_key_data=hkey_data[: hkey_offsets[nh]] if headers else hkey_data[:0],
        header_value_offsets=hvalue_offsets[: nh + 1],
        header_value_valid=hvalue_valid[:nh],
        header_value_data=hvalue_data[: hvalue_offsets[nh]] if headers else hvalue_data[:0],
    )


def _validity(valid: np.ndarray) -> tuple[pa.Buffer | None, int]:
    nulls = int(valid.shape[0] - np.count_nonzero(valid))
    if not nulls:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), nulls


def _variable(kind: pa.DataType, n: int, valid: np.ndarray | None, offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    bitmap, nulls = _validity(valid) if valid is not None else (None, 0)
    return pa.Array.from_buffers(kind, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)


def to_arrow(decoded: Decoded, topic: str | pa.Array, partition: int | np.ndarray, schema: pa.Schema) -> pa.RecordBatch:
    """The Arrow record batch of Spark's Kafka schema (``schema``: with or without headers).
    ``topic`` and ``partition`` are the records' own, or (records of several partitions) a
    string array and an int32 array with one entry per record."""
    n = decoded.rows
    partitions = partition if isinstance(partition, np.ndarray) else np.full(n, partition, np.int32)
    columns = [
        _variable(pa.binary(), n, decoded.key_valid, decoded.key_offsets, decoded.key_data),
        _variable(pa.binary(), n, decoded.value_valid, decoded.value_offsets, decoded.value_data),
        topic if isinstance(topic, pa.Array) else constant_string(topic, n),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(partitions)]),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(decoded.offsets)]),
        pa.Array.from_buffers(TIMESTAMP_US, n, [None, pa.py_buffer(decoded.timestamps_ms * 1000)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(decoded.timestamp_types)]),
    ]
    if decoded.header_lists is not None:
        nh = decoded.header_count
        keys = _variable(pa.string(), nh, None, decoded.header_key_offsets, decoded.header_key_data)
        values = _variable(
            pa.binary(), nh, decoded.header_value_valid, decoded.header_value_offsets, decoded.header_value_data
        )
        keys.validate(full=True)  # header keys are strings: reject bytes that are not UTF-8
        entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_STRUCT))
        has_headers = np.diff(decoded.header_lists) > 0
        bitmap, nulls = _validity(has_headers.astype(np.uint8))
        columns.append(
            pa.Array.from_buffers(
                pa.list_(HEADER_STRUCT),
                n,
                [bitmap, pa.py_buffer(decoded.header_lists)],
                null_count=nulls,
                children=[entries],
            )
        )
    return pa.RecordBatch.from_arrays(columns, schema=schema)
