"""Executor side, Arrow fetch path: one offset range read with kafka_spark.client.fetch_client and decoded by
kafka_spark.read.record_decoder, with the contract of kafka_spark.read.partition.read_partition.

Per fetch response, all work is per batch or vectorized: the batch headers are scanned into
arrays, batches are chosen with array masks (control batches out; under ``read_committed`` the
batches of aborted transactions out, from the response's aborted-transaction list and the abort
markers, as Kafka's consumer does), and the chosen batches' records are decoded into one Arrow
record batch by a compiled loop. The next Fetch is sent before the current response is decoded,
so the broker reads and sends while this worker decodes and Spark converts.

Positions follow the batches, not the records: after a response the read position is one past
the last offset of its last batch, whatever the batch held (records, a marker, aborted or
compacted-away offsets), so such gaps are never mistaken for loss and a range ends exactly when
the log's batches reach ``until``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from kafka_spark.client import fetch_client as kf
from kafka_spark.common.compression import decompress
from kafka_spark.common.kafka_errors import ErrorCode
from kafka_spark.common.record_batch import (
    COMPRESSION_MASK,
    CONTROL_ABORT,
    CONTROL_MASK,
    HEADER_SIZE,
    TRANSACTIONAL_MASK,
    control_type,
)
from kafka_spark.errors import PylogReadTimeout
from kafka_spark.offsets import OffsetRange, out_of_range_position
from kafka_spark.read import record_decoder as rd

if TYPE_CHECKING:  # pragma: no cover
    from kafka_spark.planning import KafkaInputPartition

__all__ = ["ArrowRangeReader", "ArrowTaskReader", "fetch_settings"]

_INDEX_FIELDS = tuple(rd.BatchIndex.__dataclass_fields__)


#: Per-partition bytes per Fetch unless ``kafka.max.partition.fetch.bytes`` says otherwise: 4 MiB
#: rather than the clients' 1 MiB, a quarter of the requests for the same data (measured on
#: bench/source_throughput.py: ~20% less broker CPU); larger made the broker's socket writes
#: spill into its transport buffer and cost more.
DEFAULT_PARTITION_FETCH_BYTES = 4 << 20


def fetch_settings(config: dict[str, str]) -> dict[str, int]:
    """Fetch limits from the client config: librdkafka names first, then the Java client's."""

    def pick(*names: str, default: int) -> int:
        for name in names:
            if name in config:
                return int(config[name])
        return default

    return {
        "max_wait_ms": pick("fetch.wait.max.ms", "fetch.max.wait.ms", default=500),
        "min_bytes": pick("fetch.min.bytes", default=1),
        "max_bytes": pick("fetch.max.bytes", default=52_428_800),
        "partition_max_bytes": pick(
            "max.partition.fetch.bytes", "fetch.message.max.bytes", default=DEFAULT_PARTITION_FETCH_BYTES
        ),
        "isolation": 1 if config.get("isolation.level", "read_uncommitted") == "read_committed" else 0,
    }


class ArrowRangeReader:
    """Reads one ``[from, until)`` range of one topic-partition into Arrow record batches."""

    def __init__(
        self,
        client: kf.FetchClient,
        r: OffsetRange,
        p: KafkaInputPartition,
        schema: pa.Schema,
        settings: dict[str, int],
        lose,
    ):  # noqa: ANN001
        self.client = client
        self.tp = r.topic_partition
        self.range = r
        self.position = r.from_offset
        self.until = r.until_offset
        self.partition = p
        self.schema = schema
        self.settings = dict(settings)
        self.read_committed = settings["isolation"] == 1
        self.timeout_s = p.poll_timeout_ms / 1000.0
        self.lose = lose
        self.out_of_range_retries = 0
        # Read as part of a task (ArrowTaskReader): when the wait for data ends, the retries of
        # the current failure, and the response that last brought records.
        self.deadline = time.monotonic() + self.timeout_s
        self.attempt = 0
        self.served = 0

    # -- the loop ------------------------------------------------------------------------------

    def batches(self) -> Iterator[pa.RecordBatch]:
        topic, partition = self.tp.topic, self.tp.partition
        conn: kf.BrokerConnection | None = None
        pending: int | None = None
        attempt = 0
        deadline = time.monotonic() + self.timeout_s
        try:
            while self.position < self.until:
                try:
                    if pending is None:
                        conn = self.client.connection(self.client.leader(topic, partition, refresh=attempt > 0))
                        pending = self._send(conn, self.position)
                    assert conn is not None  # pending is a request sent on conn
                    fetched = self.client.receive_fetch(conn, pending, topic, partition)
                    pending = None
                except kf.KafkaProtocolError as error:
                    if error.code == ErrorCode.unknown_topic_or_partition:
                        self._gone(str(error))
                        continue
                    if error.code == ErrorCode.leader_not_available:
                        pending, attempt = None, attempt + 1
                        self._check_deadline(deadline, str(error))
                        kf.backoff(attempt)
                        continue
                    raise
                except OSError as error:  # connection refused, reset, timed out
                    if conn is not None:
                        self.client.discard(conn)
                    pending, attempt = None, attempt + 1
                    self._check_deadline(deadline, f"the broker connection failed: {error}")
                    kf.backoff(attempt)
                    continue
                if fetched.error:
                    attempt += 1
                    self._on_error(fetched.error, deadline, attempt)
                    continue
                scanned = self._index(fetched, deadline)
                if scanned is None:
                    continue
                buf, index = scanned
                attempt = 0
                deadline = time.monotonic() + self.timeout_s
                next_position = int(index.last_offset[-1]) + 1
                if next_position < self.until:
                    pending = self._send(conn, next_position)  # the broker works while we decode
                batch = self._decode(fetched.records, buf, index, fetched.aborted, self.position)
                if next_position > self.position:
                    self.position = min(next_position, self.until)
                if batch is not None and batch.num_rows:
                    yield batch
        finally:
            if pending is not None and conn is not None:
                self.client.discard(conn)  # a response in flight must never meet another request

    def _send(self, conn: kf.BrokerConnection, offset: int) -> int:
        s = self.settings
        return self.client.send_fetch(
            conn,
            self.tp.topic,
            self.tp.partition,
            offset,
            max_wait_ms=s["max_wait_ms"],
            min_bytes=s["min_bytes"],
            max_bytes=s["max_bytes"],
            partition_max_bytes=s["partition_max_bytes"],
            isolation=s["isolation"],
        )

    # -- one response --------------------------------------------------------------------------

    def _index(self, fetched: kf.FetchedPartition, deadline: float) -> tuple[np.ndarray, rd.BatchIndex] | None:
        """The complete batches of this partition's part of a response, or None when it holds
        none (then handled: the per-partition limit raised, a truncated log reported, or the wait
        checked against ``deadline``)."""
        records = fetched.records
        buf = np.frombuffer(records, np.uint8)
        index = rd.scan_batches(buf)
        if len(index):
            return buf, index
        if len(records) and len(records) >= self.settings["partition_max_bytes"]:
            # A batch larger than the limit (brokers before KIP-74): ask for more.
            self.settings["partition_max_bytes"] *= 2
            return None
        self._nothing_fetched(fetched, deadline)
        return None

    def _decode(
        self, records: memoryview, buf: np.ndarray, index: rd.BatchIndex, aborted: list[tuple[int, int]], low: int
    ) -> pa.RecordBatch | None:
        """The records of ``index``'s batches at offsets in ``[low, until)`` (``low``: the read
        position the response answered)."""
        return self._decode_chosen(records, buf, index, self._choose(records, index, aborted, low), low)

    def _choose(
        self, records: memoryview, index: rd.BatchIndex, aborted: list[tuple[int, int]], low: int
    ) -> np.ndarray:
        """The indexes of the batches that hold records to read: data batches (not control ones)
        reaching ``[low, until)``, under ``read_committed`` not of an aborted transaction."""
        if (index.magic != 2).any():
            raise kf.KafkaProtocolError(
                f"{self.tp} holds record batches of message format v{int(index.magic.min())}; the "
                f"Arrow fetch path reads v2 (Kafka 0.11 and newer): set the source option "
                f"fetcher=librdkafka to read older formats"
            )
        keep = ((index.attributes & CONTROL_MASK) == 0) & (index.last_offset >= low)
        keep &= index.base_offset < self.until
        if self.read_committed and aborted:
            keep &= ~self._aborted(records, index, aborted)
        return np.flatnonzero(keep)

    def _decode_chosen(
        self, records: memoryview, buf: np.ndarray, index: rd.BatchIndex, chosen: np.ndarray, low: int
    ) -> pa.RecordBatch | None:
        if not len(chosen):
            return None
        codecs = index.attributes[chosen] & COMPRESSION_MASK
        if not codecs.any():
            data = buf
            starts = index.position[chosen] + HEADER_SIZE
            ends = index.position[chosen] + index.size[chosen]
        else:
            data, starts, ends = self._decompressed(records, index, chosen, codecs)
        decoded = rd.decode_records(data, starts, ends, index, chosen, low, self.until, self.partition.include_headers)
        return rd.to_arrow(decoded, self.tp.topic, self.tp.partition, self.schema)

    def _decompressed(
        self, records: memoryview, index: rd.BatchIndex, chosen: np.ndarray, codecs: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        parts, starts, ends, at = [], [], [], 0
        for i, codec in zip(chosen.tolist(), codecs.tolist(), strict=True):
            begin = int(index.position[i])
            section: bytes | memoryview = records[begin + HEADER_SIZE : begin + int(index.size[i])]
            if codec:
                plain = decompress(codec, memoryview(section))
                if plain is None:
                    raise rd.CorruptRecordBatch(
                        f"{self.tp}: the batch at offset {int(index.base_offset[i])} uses compression "
                        f"codec {codec}, which cannot be decompressed here (unknown codec or bad data)"
                    )
                section = plain
            parts.append(section)
            starts.append(at)
            at += len(section)
            ends.append(at)
        data = np.frombuffer(b"".join(parts), np.uint8)
        return data, np.array(starts, np.int64), np.array(ends, np.int64)

    def _aborted(self, records: memoryview, index: rd.BatchIndex, aborted: list[tuple[int, int]]) -> np.ndarray:
        """Mask of the batches of aborted transactions (Kafka consumer's rule: a producer's
        transaction is aborted from its listed first offset until its ABORT marker)."""
        mask = np.zeros(len(index), bool)
        transactional = np.flatnonzero((index.attributes & TRANSACTIONAL_MASK) != 0)
        pending = sorted(aborted, key=lambda entry: entry[1])
        active: set[int] = set()
        j = 0
        for i in transactional.tolist():
            last = int(index.last_offset[i])
            while j < len(pending) and pending[j][1] <= last:
                active.add(pending[j][0])
                j += 1
            producer = int(index.producer_id[i])
            if index.attributes[i] & CONTROL_MASK:
                if producer in active and control_type(records, int(index.position[i])) == CONTROL_ABORT:
                    active.discard(producer)
            elif producer in active:
                mask[i] = True
        return mask

    # -- errors and ends -----------------------------------------------------------------------

    def _on_error(self, code: int, deadline: float, attempt: int, *, wait: bool = True) -> None:
        """A partition's error code in a Fetch response. ``wait=False``: no backoff for a
        retriable error (the caller waits once for all its partitions)."""
        if code == ErrorCode.offset_out_of_range:
            self._out_of_range()
        elif code == ErrorCode.unknown_topic_or_partition:
            self._gone("the broker reports it unknown")
        elif code in kf.RETRIABLE_ERRORS:
            self._check_deadline(deadline, f"the broker keeps answering {kf.RETRIABLE_ERRORS[code]}")
            if wait:
                kf.backoff(attempt)
        else:
            raise kf.KafkaProtocolError(
                f"fetching {self.tp} at offset {self.position} failed with Kafka error code {code}", code
            )

    def _gone(self, why: str) -> None:
        self.lose(f"{self.tp} no longer exists ({why}): offsets [{self.position}, {self.until}) cannot be read")
        self.position = self.until

    def _nothing_fetched(self, fetched: kf.FetchedPartition, deadline: float) -> None:
        end = fetched.high_watermark
        if 0 <= end <= self.position < self.until:
            self.lose(
                f"{self.tp}: offsets [{self.position}, {self.until}) are not in the log any more (its "
                f"end offset is {end}; it was truncated or the topic recreated)"
            )
            self.position = self.until
            return
        # Not visible yet (an open transaction under read_committed): the next Fetch long-polls.
        self._check_deadline(deadline, "no record arrived")

    def _out_of_range(self) -> None:
        low, high = self.client.list_offsets(self.tp.topic, self.tp.partition)
        new_position = out_of_range_position(
            self.tp, self.position, self.until, low, high, "OFFSET_OUT_OF_RANGE", self.lose, self.out_of_range_retries
        )
        if new_position is None:
            self.out_of_range_retries += 1
        else:
            self.position = new_position

    def _check_deadline(self, deadline: float, why: str) -> None:
        if time.monotonic() < deadline:
            return
        raise PylogReadTimeout(
            f"Cannot fetch record for offset {self.position} of {self.tp} in "
            f"{int(self.timeout_s * 1000)} milliseconds ({why}; the range to read is "
            f"[{self.range.from_offset}, {self.until})). Check that the broker is reachable from "
            f"executors; kafkaConsumer.pollTimeoutMs sets how long to wait."
        )


class ArrowTaskReader:
    """Reads the ranges of many topic-partitions (one task's) with shared Fetch requests.

    Each range is read by an :class:`ArrowRangeReader` (its position, limits, errors, data loss
    and deadline are that reader's, as when it reads alone); this class only batches their
    fetches: one Fetch names every partition being read that the same broker leads, each at its
    own position and with its own ``partition_max_bytes``, ``max_bytes`` bounding the whole
    answer. Each partition's part of the response is chosen by its reader; the parts read whole
    (a partition read from the middle of its range) are decoded together by one compiled call,
    the others by their readers, and the parts of one response are yielded together. A
    partition continues from where its last part ended until its range is read, then its next
    range (ranges of one partition are read in order) starts.

    One request is in flight at a time (the next one is sent before the current response is
    decoded, as the single-range loop does). Partitions are named least recently served first,
    so a partition left out of one answer by ``max_bytes`` (KIP-74 fills partitions in request
    order, always giving the first at least one batch) leads the next request and is never
    starved. Work that talks to a broker besides the Fetch itself (a leader lookup, an
    out-of-range check) is done only when no response is waiting to be decoded, since it would
    reuse the connection's buffer the response lies in.
    """

    def __init__(
        self,
        client: kf.FetchClient,
        ranges: tuple[OffsetRange, ...],
        p: KafkaInputPartition,
        schema: pa.Schema,
        settings: dict[str, int],
        lose,
    ):  # noqa: ANN001
        self.client = client
        self.partition = p
        self.schema = schema
        self.settings = settings
        self.lose = lose
        self.queued: dict = {}  # TopicPartition -> its ranges still to start, in order
        for r in ranges:
            if r.size > 0:
                self.queued.setdefault(r.topic_partition, []).append(r)
        self.active: dict = {}  # TopicPartition -> the ArrowRangeReader of its current range
        self.round = 0
        for tp in list(self.queued):
            self._start(tp)

    def _start(self, tp) -> None:  # noqa: ANN001
        ranges = self.queued.get(tp)
        if not ranges:
            self.queued.pop(tp, None)
            self.active.pop(tp, None)
            return
        reader = ArrowRangeReader(self.client, ranges.pop(0), self.partition, self.schema, self.settings, self.lose)
        reader.served = self.round
        self.active[tp] = reader

    def _retire(self) -> None:
        """Readers whose range is read make way for their partition's next range."""
        for tp, reader in list(self.active.items()):
            if reader.position >= reader.until:
                self._start(tp)

    # -- the loop ------------------------------------------------------------------------------

    def parts(self) -> Iterator[list[tuple[object, pa.RecordBatch]]]:
        """Per response, its non-empty ``(topic_partition, batch)`` parts."""
        pending = None  # (connection, correlation, readers): the request in flight
        try:
            while self.active:
                if pending is None:
                    pending = self._send_next()
                    if pending is None:
                        if self.active:  # every partition left waits for its leader
                            kf.backoff(max(r.attempt for r in self.active.values()))
                        continue
                conn, correlation, readers = pending
                try:
                    entries = self.client.receive_fetch_many(
                        conn, correlation, [(r.tp.topic, r.tp.partition) for r in readers]
                    )
                except OSError as error:  # connection refused, reset, timed out
                    pending = None
                    self.client.discard(conn)
                    self._failed(readers, f"the broker connection failed: {error}")
                    kf.backoff(max(r.attempt for r in readers))
                    continue
                pending = None
                self.round += 1
                work, deferred, wait = self._take(readers, entries)
                self._retire()
                if self.active and not deferred and not wait and self._leaders_known():
                    pending = self._send_next()  # the broker works while we decode
                parts = self._decode_parts(work)
                # The response is decoded: its buffer may be reused by the broker requests these need.
                for reader, code in deferred:
                    reader._on_error(code, reader.deadline, reader.attempt, wait=False)
                self._retire()
                if wait:
                    kf.backoff(wait)
                if parts:
                    yield parts
        finally:
            if pending is not None:
                self.client.discard(pending[0])  # a response in flight must never meet another request

    def _decode_parts(self, work: list) -> list[tuple[object, pa.RecordBatch]]:
        """The non-empty ``(topic_partition, batch)`` parts of one response. Parts whose chosen
        batches are all kept whole (uncompressed, no record before the position nor at or past the
        range's end: a partition read from the middle of its range) are decoded together, by one
        compiled call into one Arrow batch (topic_partition None), so that many partitions of a
        few records each cost about what one partition of as many records does; the others (and
        every part when Avro columns are decoded, per partition) one by one."""
        whole, parts = [], []
        for reader, entry, buf, index, low in work:
            chosen = reader._choose(entry.records, index, entry.aborted, low)
            if not len(chosen):
                continue
            if (
                not self.partition.avro
                and not (index.attributes[chosen] & COMPRESSION_MASK).any()
                and index.base_offset[chosen[0]] >= low
                and index.last_offset[chosen[-1]] < reader.until
            ):
                whole.append((reader, entry, buf, index, chosen, low))
                continue
            batch = reader._decode_chosen(entry.records, buf, index, chosen, low)
            if batch is not None and batch.num_rows:
                parts.append((reader.tp, batch))
        together = self._decode_together(whole) if len(whole) > 1 else None
        if together is not None:
            parts.append((None, together))
        else:
            for reader, entry, buf, index, chosen, low in whole:
                batch = reader._decode_chosen(entry.records, buf, index, chosen, low)
                if batch is not None and batch.num_rows:
                    parts.append((reader.tp, batch))
        return parts

    def _decode_together(self, whole: list) -> pa.RecordBatch | None:
        """The records of every chosen batch of ``whole`` (parts of one response, all kept whole)
        as one Arrow batch, decoded in one call over the response's buffer; None when the parts do
        not lie in one buffer (then they are decoded one by one)."""
        owner = whole[0][1].records.obj
        base = np.frombuffer(owner, np.uint8)
        at, end = base.ctypes.data, base.ctypes.data + base.shape[0]
        starts, ends, rows = [], [], []
        fields: dict[str, list[np.ndarray]] = {name: [] for name in _INDEX_FIELDS}
        for _, entry, buf, index, chosen, _ in whole:
            shift = buf.ctypes.data - at
            if entry.records.obj is not owner or shift < 0 or buf.ctypes.data + buf.shape[0] > end:
                return None
            position = index.position[chosen] + shift
            starts.append(position + HEADER_SIZE)
            ends.append(position + index.size[chosen])
            rows.append(int(index.records[chosen].sum()))
            for name, values in fields.items():
                values.append(getattr(index, name)[chosen])
        merged = rd.BatchIndex(**{name: np.concatenate(values) for name, values in fields.items()})
        decoded = rd.decode_records(
            base,
            np.concatenate(starts),
            np.concatenate(ends),
            merged,
            np.arange(len(merged)),
            0,
            np.iinfo(np.int64).max,
            self.partition.include_headers,
        )
        if decoded.rows != sum(rows):  # every record of a batch kept whole is read: never expected
            return None
        tps = [reader.tp for reader, *_ in whole]
        counts = np.array(rows, np.int64)
        partitions = np.repeat(np.array([tp.partition for tp in tps], np.int32), counts)
        topics = {tp.topic for tp in tps}
        if len(topics) == 1:
            topic: str | pa.Array = tps[0].topic
        else:
            topic = pa.array([tp.topic for tp in tps], pa.string()).take(
                pa.array(np.repeat(np.arange(len(tps), dtype=np.int32), counts))
            )
        return rd.to_arrow(decoded, topic, partitions, self.schema)

    def _take(self, readers: list, entries: list[kf.FetchedPartition]) -> tuple[list, list, int]:
        """Each reader's part of a response: positions advanced past its batches; returns the
        parts to decode ``(reader, part, buf, index, position it was read from)``, the errors that
        need the broker (out of range) and the backoff attempt for retriable errors (0: none)."""
        work, deferred, wait = [], [], 0
        for reader, entry in zip(readers, entries, strict=True):
            if entry.error:
                reader.attempt += 1
                if entry.error == ErrorCode.offset_out_of_range:
                    deferred.append((reader, entry.error))
                else:
                    reader._on_error(entry.error, reader.deadline, reader.attempt, wait=False)
                    if entry.error in kf.RETRIABLE_ERRORS:
                        wait = max(wait, reader.attempt)
                continue
            scanned = reader._index(entry, reader.deadline)
            if scanned is None:
                continue
            buf, index = scanned
            reader.attempt = 0
            reader.deadline = time.monotonic() + reader.timeout_s
            reader.served = self.round
            low = reader.position
            next_position = int(index.last_offset[-1]) + 1
            if next_position > reader.position:
                reader.position = min(next_position, reader.until)
            work.append((reader, entry, buf, index, low))
        return work, deferred, wait

    def _leaders_known(self) -> bool:
        """Whether the next request can be sent without asking a broker anything else."""
        leaders = self.client.leaders
        return all(r.attempt == 0 and (r.tp.topic, r.tp.partition) in leaders for r in self.active.values())

    def _send_next(self):  # noqa: ANN202
        """Send one Fetch for the partitions led by the broker of the least recently served
        partition; None when no partition can be fetched now (no leader: deadlines checked)."""
        order = sorted(self.active.values(), key=lambda r: r.served)
        groups: dict[tuple[str, int], list[ArrowRangeReader]] = {}
        refreshed: set[str] = set()
        for at, reader in enumerate(order):
            topic, partition = reader.tp.topic, reader.tp.partition
            refresh = reader.attempt > 0 and topic not in refreshed
            try:
                address = self.client.leader(topic, partition, refresh=refresh)
            except kf.KafkaProtocolError as error:
                if error.code == ErrorCode.unknown_topic_or_partition:
                    reader._gone(str(error))
                    continue
                if error.code == ErrorCode.leader_not_available:
                    reader.attempt += 1
                    reader._check_deadline(reader.deadline, str(error))
                    continue
                raise
            except OSError as error:  # no broker reachable for the metadata: none for the rest either
                self._failed(order[at:], f"the broker connection failed: {error}")
                break
            finally:
                if refresh:
                    refreshed.add(topic)
            groups.setdefault(address, []).append(reader)
        self._retire()
        if not groups:
            return None
        address, readers = next(iter(groups.items()))
        s = self.settings
        try:
            conn = self.client.connection(address)
            correlation = self.client.send_fetch_many(
                conn,
                [(r.tp.topic, r.tp.partition, r.position, r.settings["partition_max_bytes"]) for r in readers],
                max_wait_ms=s["max_wait_ms"],
                min_bytes=s["min_bytes"],
                max_bytes=s["max_bytes"],
                isolation=s["isolation"],
            )
        except OSError as error:
            conn = self.client.connections.get(address)
            if conn is not None:
                self.client.discard(conn)
            self._failed(readers, f"the broker connection failed: {error}")
            return None
        return conn, correlation, readers

    def _failed(self, readers: list, why: str) -> None:
        for reader in readers:
            reader.attempt += 1
            reader._check_deadline(reader.deadline, why)
