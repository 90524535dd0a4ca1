"""``pylog consume`` through pylog's own Fetch client: record batches in, printed bytes out.

confluent-kafka's ``consume()`` builds a Python ``Message`` per record, and importing it with its
librdkafka costs a third of what kcat spends on a whole 200,000-record read. This path asks each
partition leader for record batches itself (kafka_spark.client.fetch_client: Fetch v11, read_committed as
librdkafka's default isolation level), keeps one Fetch in flight per broker while it prints the
previous one, and turns a response into output a batch at a time (kafka_spark.cli.console_records):
for the default output one ``bytes`` object per batch, made by a compiled walk, and one write
per response.

It reads what the console consumer without ``--group`` reads: a topic's partitions (or one)
from their beginning or their end, up to ``--max-messages``, to their ends (``--exit-at-end``)
or until ``--timeout-ms`` passes without a record. It prints through the same formatters as the
librdkafka path (the records carry ``Message``'s accessors), so both print the same bytes.
Where it cannot go on — a broker too old for Fetch v11, a partition without a leader or that moved,
a connection lost, a message format before v2, a codec that cannot be decompressed here — it
raises :class:`Handover` with each partition's next offset, and the caller reads on from there
through confluent-kafka, which retries, follows leaders and reads every format.
"""

from __future__ import annotations

import gc
import struct
import time
from collections.abc import Callable
from typing import Any

from kafka_spark.cli import console_records as cr
from kafka_spark.client import fetch_client as kf
from kafka_spark.common.kafka_errors import ErrorCode
from kafka_spark.errors import PylogError

__all__ = ["Handover", "consume"]

_READ_COMMITTED = 1  # librdkafka's default isolation.level, which the librdkafka path reads with
_EARLIEST, _LATEST = -2, -1
_PARTITION_MAX_BYTES = 2 << 20  # per partition and Fetch (librdkafka: 1 MiB): fewer round trips
_MAX_BYTES = 8 << 20  # small enough that the broker sends the next while this one is printed
_MIN_BYTES = 64 << 10
_CLIENT_ID = "pylog-console-consumer"
_TIMEOUT_S = 30.0


class Handover(PylogError):
    """The fast path stops; confluent-kafka reads on. ``positions``: each partition's next offset
    (None: nothing was read yet, start as asked); ``count``: the records already printed."""

    def __init__(self, why: str, positions: dict[int, int] | None, count: int) -> None:
        super().__init__(why)
        self.why = why
        self.positions = positions
        self.count = count


class _Partition:
    __slots__ = ("index", "position", "at_end", "max_bytes")

    def __init__(self, index: int, position: int) -> None:
        self.index = index
        self.position = position
        self.at_end = False
        self.max_bytes = _PARTITION_MAX_BYTES


def _metadata(client: kf.FetchClient, topic: str) -> dict[int, tuple[str, int] | None] | None:
    """The topic's partitions and their leaders (None: no leader now), None if the topic does
    not exist. Asks for all topics, as librdkafka's list_topics does: a Metadata request naming
    the topic would create it on a broker that auto-creates topics."""
    conn = client._any_broker()
    try:
        r = kf._Reader(conn.request(kf.API_METADATA, 1, kf._I32.pack(-1)))
    except (OSError, kf.KafkaProtocolError):
        client.discard(conn)
        raise
    for error, name, partitions in kf.parse_metadata(r):
        if name == topic and not error:
            return partitions
    return None


def _list_offsets(
    client: kf.FetchClient, topic: str, leader: tuple[str, int], partitions: list[int], spec: int
) -> dict[int, int]:
    """Each partition's offset for ``spec`` (earliest or latest), read_committed (latest: the last
    stable offset, where librdkafka starts a read_committed consumer at the end). ListOffsets v2."""
    body = b"".join(
        (
            struct.pack(">ib", -1, _READ_COMMITTED),
            kf._I32.pack(1),
            kf._string(topic),
            kf._I32.pack(len(partitions)),
            *(struct.pack(">iq", p, spec) for p in partitions),
        )
    )
    conn = client.connection(leader)
    try:
        r = kf._Reader(conn.request(kf.API_LIST_OFFSETS, 2, body))
    except (OSError, kf.KafkaProtocolError):
        client.discard(conn)
        raise
    r.i32()  # throttle_time_ms
    offsets = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            index, code = r.i32(), r.i16()
            r.i64()  # timestamp
            offset = r.i64()
            if code:
                raise kf.KafkaProtocolError(f"ListOffsets for {topic}-{index} failed with error code {code}", code)
            offsets[index] = offset
    return offsets


def consume(
    args: Any,
    topic: str,
    bootstrap: str,
    formatter: Callable[[Any], bytes] | None,
    emit: Callable[[list[bytes]], bool],
    stop: Any,
    progress: Any,
    error: type[Exception],
) -> int:
    """Print the records ``args`` asks for (see the module docstring); returns how many.
    ``emit`` writes a list of bytes to stdout and says False once its reader has gone."""
    client = kf.FetchClient(
        bootstrap, _CLIENT_ID, _TIMEOUT_S, librdkafka_advice="read with --fetcher librdkafka (or drop --fetcher)"
    )
    # A response's records form no reference cycles: the cyclic collector would only rescan them.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _Reading(args, topic, client, formatter, emit, stop, progress, error).run()
    finally:
        client.close()
        if collecting:
            gc.enable()


class _Reading:
    """One run of :func:`consume`: the partitions' positions, the Fetch loop, the printing."""

    def __init__(
        self,
        args: Any,
        topic: str,
        client: kf.FetchClient,
        formatter: Callable[[Any], bytes] | None,
        emit: Callable[[list[bytes]], bool],
        stop: Any,
        progress: Any,
        error: type[Exception],
    ) -> None:
        self.args, self.topic, self.client = args, topic, client
        self.formatter, self.emit, self.stop, self.progress, self.error = formatter, emit, stop, progress, error
        self.count = 0
        self.partitions: dict[int, _Partition] = {}
        self.fetched_bytes = self.fetched_records = 0  # what a record costs, to fetch no more than -c needs

    def _handover(self, why: str) -> Handover:
        positions = {p.index: p.position for p in self.partitions.values()} if self.partitions else None
        return Handover(why, positions, self.count)

    def _start(self) -> dict[tuple[str, int], list[int]]:
        """Partitions by leader, each at its start offset."""
        args, topic = self.args, self.topic
        try:
            leaders = _metadata(self.client, topic)
        except (OSError, kf.KafkaProtocolError) as failure:
            raise self._handover(f"metadata: {failure}") from None
        if leaders is None:
            raise self.error(f"topic {topic!r} does not exist (list topics with `pylog topics list`)")
        if args.partition is not None and args.partition not in leaders:
            raise self.error(f"topic {topic!r} has no partition {args.partition}")
        chosen = sorted(leaders) if args.partition is None else [args.partition]
        by_leader: dict[tuple[str, int], list[int]] = {}
        for index in chosen:
            leader = leaders[index]
            if leader is None:
                raise self._handover(f"{topic}-{index} has no leader at the moment")
            by_leader.setdefault(leader, []).append(index)
        spec = _EARLIEST if args.from_beginning else _LATEST
        try:
            for leader, indexes in by_leader.items():
                for index, offset in _list_offsets(self.client, topic, leader, indexes, spec).items():
                    self.partitions[index] = _Partition(index, offset)
        except (OSError, kf.KafkaProtocolError) as failure:
            self.partitions.clear()
            raise self._handover(f"start offsets: {failure}") from None
        return by_leader

    def run(self) -> int:
        args = self.args
        by_leader = self._start()
        wait_ms = 100 if args.exit_at_end else 500  # as the librdkafka path's fetch.wait.max.ms
        if args.timeout_ms is not None:
            wait_ms = max(min(wait_ms, args.timeout_ms), 1)
        self.wait_ms = wait_ms
        in_flight: dict[tuple[str, int], tuple[kf.BrokerConnection, int]] = {}
        idle_since = time.monotonic()
        try:
            while not self.stop.signum and (args.max_messages is None or self.count < args.max_messages):
                got = 0
                for leader, indexes in by_leader.items():
                    try:
                        if leader not in in_flight:
                            in_flight[leader] = self._send(leader, indexes)
                        conn, correlation = in_flight.pop(leader)
                        parts = self.client.receive_fetch_many(conn, correlation, [(self.topic, i) for i in indexes])
                    except (OSError, kf.KafkaProtocolError) as failure:
                        raise self._handover(f"fetch from {leader[0]}:{leader[1]}: {failure}") from None
                    written = self._response(leader, indexes, parts, in_flight)
                    if written is None:  # the reader of stdout has gone
                        return self.count
                    got += written
                if got:
                    idle_since = time.monotonic()
                elif args.timeout_ms is not None and (time.monotonic() - idle_since) * 1000 >= args.timeout_ms:
                    break
                if args.exit_at_end and all(p.at_end for p in self.partitions.values()):
                    break
        finally:
            for conn, _ in in_flight.values():  # an answer never read: the connection cannot be reused
                self.client.discard(conn)
        return self.count

    def _send(self, leader: tuple[str, int], indexes: list[int], ahead: int = 0) -> tuple[kf.BrokerConnection, int]:
        """Send the next Fetch to ``leader``; ``ahead``: records fetched but not yet printed."""
        conn = self.client.connection(leader)
        wanted = [(self.topic, i, self.partitions[i].position, self.partitions[i].max_bytes) for i in indexes]
        max_bytes = _MAX_BYTES
        if self.args.max_messages is not None and self.fetched_records:
            left = self.args.max_messages - self.count - ahead
            max_bytes = min(max(int(left * 1.25 * self.fetched_bytes / self.fetched_records), _MIN_BYTES), _MAX_BYTES)
        correlation = self.client.send_fetch_many(
            conn, wanted, max_wait_ms=self.wait_ms, min_bytes=1, max_bytes=max_bytes, isolation=_READ_COMMITTED
        )
        return conn, correlation

    def _response(
        self, leader: tuple[str, int], indexes: list[int], parts: list[kf.FetchedPartition], in_flight: dict
    ) -> int | None:
        """Print one Fetch response's records (the next Fetch sent first); how many, None when
        stdout's reader has gone."""
        chosen = []  # (partition, buffer, batches, Transactions or None, low)
        unreadable = None
        expected = 0
        for index, part in zip(indexes, parts, strict=False):
            partition = self.partitions[index]
            if part.error == ErrorCode.offset_out_of_range:  # auto.offset.reset, as librdkafka does
                spec = _EARLIEST if self.args.from_beginning else _LATEST
                try:
                    partition.position = _list_offsets(self.client, self.topic, leader, [index], spec)[index]
                except (OSError, kf.KafkaProtocolError) as failure:
                    raise self._handover(f"offset reset: {failure}") from None
                continue
            if part.error:
                unreadable = unreadable or f"{self.topic}-{index}: Kafka error code {part.error}"
                continue
            # The default output walks the response where it lies (in C); Records need bytes.
            data = part.records if self.formatter is None and cr.C_VALUES else bytes(part.records)
            try:
                batches = cr.scan(data)
            except cr.Unreadable as failure:
                unreadable = unreadable or f"{self.topic}-{index} at {failure}"
                continue
            low = partition.position
            if batches:
                partition.position = max(low, batches[-1].last_offset + 1)
                expected += sum(b.count for b in batches)
                self.fetched_bytes += batches[-1].end
                self.fetched_records += sum(b.count for b in batches)
            elif len(data) >= partition.max_bytes:  # a batch larger than the limit (brokers before KIP-74)
                partition.max_bytes *= 2
            end = part.last_stable_offset if part.last_stable_offset >= 0 else part.high_watermark
            partition.at_end = partition.position >= end
            if batches:
                chosen.append((partition, data, batches, cr.Transactions(part.aborted) if part.aborted else None, low))
        more = self.args.max_messages is None or self.count + expected < self.args.max_messages
        if unreadable is None and more and not self.stop.signum:
            try:  # the broker reads the next while this one is printed
                in_flight[leader] = self._send(leader, indexes, expected)
            except (OSError, kf.KafkaProtocolError):
                pass  # the next round's send reports it
        written = self._print(chosen)
        if written is None:
            return None
        if unreadable is not None:
            raise self._handover(unreadable)
        return written

    def _print(self, chosen: list) -> int | None:
        """Print the records of ``chosen`` (up to --max-messages); how many, None when stdout's
        reader has gone. The default output takes a bytes object per batch; a format string or
        JSON lines, a :class:`~kafka_spark.cli.console_records.Record` per record."""
        remaining = -1 if self.args.max_messages is None else self.args.max_messages - self.count
        out: list[Any] = []
        taken = 0
        formatter = self.formatter
        for at, (partition, data, batches, transactions, low) in enumerate(chosen):
            for batch in batches:
                # (markers too go through Transactions: an ABORT marker ends its transaction)
                if (transactions and transactions.aborted(data, batch)) or batch.control or batch.last_offset < low:
                    continue
                if 0 <= remaining <= taken:
                    break
                mark = len(out)
                try:
                    buf, start, end = cr.records_section(data, batch)
                    if formatter is None and batch.base_offset >= low:
                        limit = -1 if remaining < 0 else remaining - taken
                        blob, n = cr.lines(buf, start, end, limit)
                        if n != batch.count and n != limit:
                            raise ValueError(f"{n} records where its header says {batch.count}")
                        out.append(blob)
                    else:
                        if isinstance(buf, memoryview):  # Records hold bytes
                            buf, start, end = bytes(buf[start:end]), 0, end - start
                        cr.records(buf, start, end, batch, self.topic, partition.index, low, out)
                        if batch.base_offset >= low and len(out) - mark != batch.count:
                            raise ValueError(f"{len(out) - mark} records where its header says {batch.count}")
                        if 0 <= remaining < taken + len(out) - mark:
                            del out[mark + remaining - taken :]
                        n = len(out) - mark
                        if formatter is None:
                            out[mark:] = [b"".join([r.value() or b"", b"\n"]) for r in out[mark:]]
                        else:
                            out[mark:] = [formatter(r) for r in out[mark:]]
                except (cr.Unreadable, ValueError, IndexError, struct.error) as failure:
                    del out[mark:]
                    why = (
                        failure.why
                        if isinstance(failure, cr.Unreadable)
                        else f"a record that does not parse ({failure})"
                    )
                    return self._stop_at(chosen, at, batch, out, taken, why)
                taken += n
        return self._write(out, taken)

    def _stop_at(self, chosen: list, at: int, batch: cr.Batch, out: list, taken: int, why: str) -> int | None:
        """Print what came before ``batch`` of ``chosen[at]``, then hand over from there: that
        partition from the batch, the partitions after it from where this response began."""
        partition, low = chosen[at][0], chosen[at][4]
        partition.position = max(low, batch.base_offset)
        partition.at_end = False
        for later, _, _, _, later_low in chosen[at + 1 :]:
            later.position = later_low
            later.at_end = False
        if self._write(out, taken) is None:
            return None
        raise self._handover(f"{self.topic}-{partition.index} at offset {batch.base_offset}: {why}")

    def _write(self, out: list[bytes], taken: int) -> int | None:
        if not taken:
            return 0
        if not self.emit(out):
            return None
        self.count += taken
        self.progress.update(taken)
        return taken
