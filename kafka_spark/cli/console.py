"""``pylog produce`` and ``pylog consume``: the console producer and consumer, with the options of
kcat and of Kafka's kafka-console-producer / kafka-console-consumer.

    pylog produce [TOPIC] [--topic T] [-K SEP | --property parse.key=true --property key.separator=SEP]
                  [-H NAME=VALUE ...] [-p PARTITION]                    one record per stdin line
    pylog consume [TOPIC] [--topic T] [--group G] [--from-beginning] [-e] [-c N]
                  [-f FORMAT | -J]                                      records to stdout

Both move records in batches: stdin is read in blocks and split in C, a delivery report is asked
for failures only, the consumer takes up to 10,000 records per call and stdout is written a batch
at a time. That keeps the Python work per record to a few calls (bench/cli_throughput.py
measures the tools against kcat). The default output (values) without ``--group`` does without
a Python object per record: pylog's own Fetch client reads the record batches and a compiled
walk prints a batch's values at once (kafka_spark.cli.console_fetch; ``--fetcher`` chooses).

Without ``--group`` the consumer assigns itself the topic's partitions and commits nothing; with
``--group G`` it joins the group (subscribe), starts from the group's committed offsets (where
there are none: the beginning with ``--from-beginning``, else the end) and commits the offsets of
the records it has written, as Kafka's console consumer does.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import time
from collections.abc import Callable
from itertools import islice
from typing import Any

from kafka_spark.cli.record_format import FormatError, compile_format, json_line

_BLOCK_BYTES = 1 << 20
_BATCH_RECORDS = 10_000


def register(
    commands: Any,
    client: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
    client_config: Callable[..., dict[str, Any]],
    error: type[Exception],
    progress: Callable[..., Any],
) -> None:
    """Add ``produce`` and ``consume`` to the ``pylog`` command line (see :mod:`kafka_spark.cli.acls`
    for the arguments; ``progress`` makes the progress bar of a command)."""
    produce = client(commands.add_parser("produce", help="produce stdin lines as records"))
    _topic_arguments(produce)
    produce.add_argument("-K", "--key-separator", help="split each line into KEY<SEP>VALUE (kcat -K)")
    produce.add_argument(
        "--property",
        action="append",
        metavar="NAME=VALUE",
        default=[],
        help="kafka-console-producer's parse.key=true and key.separator=SEP",
    )
    produce.add_argument(
        "-H",
        "--header",
        action="append",
        metavar="NAME=VALUE",
        default=[],
        help="a header of every record (repeat for more)",
    )
    produce.add_argument(
        "-p", "--partition", type=int, help="the partition (default: by key, as the client partitions)"
    )
    produce.add_argument("--progress", action="store_true", help="show progress and rate even when not on a terminal")
    produce.set_defaults(func=lambda args: _produce(args, client_config, error, progress))

    consume = client(commands.add_parser("consume", help="print records to stdout"))
    _topic_arguments(consume)
    consume.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the beginning (with --group: where the group has no committed offset)",
    )
    consume.add_argument("-c", "--max-messages", type=int, help="exit after this many records")
    consume.add_argument(
        "-e",
        "--exit-at-end",
        action="store_true",
        help="exit once every partition is read to its end (kcat -e); with --group, every partition "
        "assigned to this consumer (none assigned: exit once the group says so)",
    )
    consume.add_argument("-p", "--partition", type=int, help="read this partition only (not with --group)")
    consume.add_argument(
        "--group", help="join this consumer group: resume from its committed offsets, commit as it goes"
    )
    consume.add_argument("--timeout-ms", type=int, help="exit after this long without a message")
    shape = consume.add_mutually_exclusive_group()
    shape.add_argument(
        "-f",
        "--format",
        help="kcat's format string: %%t topic, %%p partition, %%o offset, %%T timestamp, "
        "%%k key, %%K key length, %%s value, %%S value length, %%h headers, "
        "\\n \\t; e.g. '%%p:%%o %%k=%%s\\n'",
    )
    shape.add_argument(
        "-J",
        "--json",
        action="store_true",
        help="one JSON object per record: topic, partition, offset, timestamp, key, value, headers",
    )
    shape.add_argument("--print-key", action="store_true", help="print KEY<key-separator>VALUE (null for no key)")
    consume.add_argument("--key-separator", default="\t", help="with --print-key (default: a tab)")
    consume.add_argument("--progress", action="store_true", help="show progress and rate even when not on a terminal")
    consume.add_argument(
        "--fetcher",
        choices=("auto", "wire", "librdkafka"),
        default="auto",
        help="how records are read: pylog's own Fetch client (wire) or confluent-kafka's "
        "consumer (librdkafka); auto (the default) takes wire for the default output "
        "without --group or --command-config, and wire hands over to librdkafka where "
        "it cannot read on (a leader change, an old message format)",
    )
    consume.set_defaults(func=lambda args: _consume(args, client_config, error, progress))


def _topic_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("topic", nargs="?", help="the topic (or --topic)")
    command.add_argument(
        "-t",
        "--topic",
        dest="topic_option",
        metavar="TOPIC",
        help="the topic, as Kafka's console tools and kcat take it",
    )


def _topic(args: argparse.Namespace, error: type[Exception]) -> str:
    if args.topic and args.topic_option and args.topic != args.topic_option:
        raise error(f"two topics given ({args.topic!r} and --topic {args.topic_option!r}); give one")
    topic = args.topic or args.topic_option
    if not topic:
        raise error("no topic given: pass it as TOPIC or --topic TOPIC")
    return topic


# --- produce --------------------------------------------------------------------------------


def _key_separator(args: argparse.Namespace, error: type[Exception]) -> bytes | None:
    """``-K SEP``, or kafka-console-producer's ``--property parse.key=true --property key.separator=SEP``."""
    properties: dict[str, str] = {}
    for item in args.property:
        name, sep, value = item.partition("=")
        if not sep or name not in ("parse.key", "key.separator"):
            raise error(f"--property takes parse.key=true or key.separator=SEP, got {item!r}")
        properties[name] = value
    separator = args.key_separator
    if properties.get("parse.key", "false").lower() == "true":
        separator = separator or properties.get("key.separator", "\t")  # kafka-console-producer's default
    return separator.encode() if separator else None


def _headers(args: argparse.Namespace, error: type[Exception]) -> list[tuple[str, bytes]] | None:
    headers = []
    for item in args.header:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise error(f"-H/--header takes NAME=VALUE, got {item!r}")
        headers.append((name, value.encode()))
    return headers or None


def _lines(stream: Any) -> Any:
    """The lines of a binary stream without their line ends (``\\n`` or ``\\r\\n``), a block at a time."""
    rest = b""
    while True:
        block = stream.read1(_BLOCK_BYTES) if hasattr(stream, "read1") else stream.read(_BLOCK_BYTES)
        if not block:
            break
        lines = (rest + block).split(b"\n")
        rest = lines.pop()
        if b"\r" in block:  # Windows line ends
            lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
        yield lines
    if rest:
        yield [rest.rstrip(b"\r")]


def _produce(
    args: argparse.Namespace,
    client_config: Callable[..., dict[str, Any]],
    error: type[Exception],
    progress_bar: Callable[..., Any],
) -> int:
    from confluent_kafka import KafkaException, Producer

    topic = _topic(args, error)
    separator = _key_separator(args, error)
    headers = _headers(args, error)
    failures: list[str] = []

    def on_delivery(failure: Any, message: Any) -> None:  # failures only: delivery.report.only.error
        if failure is not None:
            failures.append(failure.str())

    config = client_config(args, **{"delivery.report.only.error": True, "on_delivery": on_delivery})
    # acks=all (librdkafka's default) without idempotence, as kcat: an idempotent librdkafka
    # producer waits for its producer id on a 500 ms retry timer before sending anything, which
    # costs every short `produce` half a second or more. --command-config enable.idempotence=true
    # turns it on (no duplicates when a send is retried).
    config.setdefault("enable.idempotence", False)
    config.setdefault("linger.ms", 5)
    producer = Producer(config)
    poll = producer.poll
    partition = -1 if args.partition is None else args.partition  # -1: the partitioner chooses
    count = 0
    malformed = None
    started = time.perf_counter()
    progress = progress_bar(args, "producing", unit="msg")
    interrupted = False
    try:
        for lines in _lines(sys.stdin.buffer):
            sent, problem = _send(producer, topic, lines, separator, partition, headers, KafkaException)
            count += sent
            progress.update(sent)
            if problem:
                malformed = f"line {count + 1} {problem}"
                break
            poll(0)  # serves failed delivery reports
    except KeyboardInterrupt:  # Ctrl-C at a terminal: the lines given so far are still delivered
        interrupted = True
    remaining = producer.flush(60)
    progress.close()
    if failures:
        raise error(
            f"{remaining + len(failures)} of {count} messages not delivered: {'; '.join(map(str, failures[:3]))}"
        )
    if remaining:
        raise error(
            f"{remaining} of {count} messages not delivered: no answer from {config['bootstrap.servers']} "
            "within 60 s; check that the broker runs and answers"
        )
    elapsed = time.perf_counter() - started
    print(
        f"Produced {count} messages to {topic} in {elapsed:.2f}s ({count / max(elapsed, 1e-9):,.0f} msg/s).",
        file=sys.stderr,
    )
    if malformed:
        raise error(f"{malformed}; the {count} line(s) before it were produced, nothing after it")
    return 130 if interrupted else 0


def _send(
    producer: Any,
    topic: str,
    lines: list[bytes],
    separator: bytes | None,
    partition: int,
    headers: list[tuple[str, bytes]] | None,
    refused: type[Exception],
) -> tuple[int, str | None]:
    """Produce ``lines``; returns how many were sent and, when one could not be, what is wrong with
    it (the lines after it are not sent). Lines without keys or headers take a loop of one call."""
    produce = producer.produce
    sent = 0
    while True:
        try:
            if separator is None and headers is None:
                for value in islice(lines, sent, None):
                    produce(topic, value, None, partition)
                    sent += 1
            else:
                for line in islice(lines, sent, None):
                    key = None
                    if separator is not None:
                        key, found, line = line.partition(separator)
                        if not found:
                            return sent, f"has no key separator {separator.decode()!r}"
                    produce(topic, line, key, partition, headers=headers)
                    sent += 1
            return sent, None
        except BufferError:  # the client's queue is full: let it send. Briefly: with failure-only
            producer.poll(0.005)  # delivery reports, poll has nothing to return early for
        except refused as failure:  # e.g. a record larger than message.max.bytes
            return sent, f"was refused: {failure.args[0].str()}"


# --- consume --------------------------------------------------------------------------------


def _formatter(args: argparse.Namespace, error: type[Exception]) -> Callable[[Any], bytes] | None:
    """How a record is printed; None for the default (its value and a newline), which is written
    without a call per record."""
    if args.json:
        return json_line
    if args.format is not None:
        try:
            return compile_format(args.format)
        except FormatError as failure:
            raise error(str(failure)) from None
    if args.print_key:
        separator = args.key_separator.encode()
        return lambda m: (m.key() or b"null") + separator + (m.value() or b"") + b"\n"
    return None


class _Stop:
    """SIGINT and SIGTERM, while installed, ask the copy loop to stop after the batch at hand
    instead of interrupting it: a batch is written and its offsets stored as one step, so a
    consumer stopped with Ctrl-C has committed exactly what it printed."""

    def __init__(self) -> None:
        self.signum = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Stop:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._request)
        return self

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _request(self, signum: int, frame: Any) -> None:
        self.signum = signum


class _EndOfPartitions:
    """Which assigned partitions are read to their end, for ``--exit-at-end``.

    All are read once the assignment is known (given by ``assign``, not yet taken back by
    ``revoke``) and each of its partitions has reported its end. An empty assignment (a group
    member with nothing to read: more members than partitions) is read as soon as it is known,
    so ``--group G -e`` exits then instead of waiting for a partition that never comes."""

    def __init__(self) -> None:
        self.known = False
        self.assigned: set[int] = set()
        self.at_end: set[int] = set()

    def assign(self, partitions: list[int]) -> None:
        self.known = True
        self.assigned.update(partitions)

    def revoke(self, partitions: list[int]) -> None:
        self.known = False  # a rebalance: the next assignment follows
        self.assigned.difference_update(partitions)
        self.at_end.difference_update(partitions)

    def reached(self, partition: int) -> None:
        self.at_end.add(partition)

    def more(self, partitions: Any) -> None:
        """Records arrived from ``partitions``: they are not at their end (any more)."""
        self.at_end.difference_update(partitions)

    def all_read(self) -> bool:
        return self.known and self.at_end >= self.assigned


def _consume(
    args: argparse.Namespace,
    client_config: Callable[..., dict[str, Any]],
    error: type[Exception],
    progress_bar: Callable[..., Any],
) -> int:
    topic = _topic(args, error)
    formatter = _formatter(args, error)
    if args.group and args.partition is not None:
        raise error("--partition reads one partition without a group; with --group the group assigns partitions")
    if args.fetcher == "wire" and (args.group or args.command_config):
        raise error(
            "--fetcher wire reads without --group over plaintext connections (no --command-config); "
            "drop --fetcher or set it to librdkafka"
        )
    progress = progress_bar(args, "consuming", unit="msg", total=args.max_messages)
    started = time.perf_counter()
    resume, done = None, 0
    if args.fetcher == "wire" or (args.fetcher == "auto" and _wire_is_faster(args, formatter)):
        from kafka_spark.cli.console_fetch import Handover, consume

        bootstrap = client_config(args)["bootstrap.servers"]
        with _Stop() as stop:
            handed_over = False
            try:
                done = consume(args, topic, bootstrap, formatter, _emit, stop, progress, error)
            except Handover as handover:  # confluent-kafka reads on from where this stopped
                if args.fetcher == "wire":
                    _flush_stdout()
                    raise error(
                        f"--fetcher wire cannot read on ({handover.why}); drop --fetcher to hand over to librdkafka"
                    ) from None
                handed_over, resume, done = True, handover.positions, handover.count
            if not handed_over or stop.signum:  # done, or Ctrl-C came before the handover
                stop_signum = stop.signum
                _flush_stdout()
                progress.close()
                _processed(done, time.perf_counter() - started)
                return 128 + stop_signum if stop_signum else 0
    if args.max_messages is not None:
        args.max_messages -= done
        if args.max_messages <= 0:
            progress.close()
            _processed(done, time.perf_counter() - started)
            return 0
    count, signum = _consume_librdkafka(args, topic, formatter, resume, client_config, error, progress)
    _processed(done + count, time.perf_counter() - started)
    return 128 + signum if signum else 0  # 130 after Ctrl-C, as a shell reports it


def _wire_is_faster(args: argparse.Namespace, formatter: Callable[[Any], bytes] | None) -> bool:
    """Whether ``--fetcher auto`` reads through pylog's Fetch client: for the default output
    (values) where its walk is compiled, reading without a group over plaintext. There it takes a
    third of confluent-kafka's CPU time; a format string or JSON lines makes a Python object per
    record either way, which confluent-kafka's C builds faster (bench/cli_throughput.py)."""
    from kafka_spark.cli.console_records import C_VALUES

    return formatter is None and C_VALUES and not args.group and not args.command_config


def _processed(count: int, elapsed: float) -> None:
    print(
        f"Processed a total of {count} messages in {elapsed:.2f}s ({count / max(elapsed, 1e-9):,.0f} msg/s)",
        file=sys.stderr,
    )


def _emit(data: list[bytes]) -> bool:
    """Write to stdout, flushed (a reader following the topic sees each response as it comes);
    False once its reader has gone (``| head``)."""
    try:
        sys.stdout.buffer.writelines(data)
        sys.stdout.buffer.flush()
        return True
    except BrokenPipeError:
        _discard_stdout()
        return False


def _flush_stdout() -> None:
    try:
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        _discard_stdout()


def _consume_librdkafka(
    args: argparse.Namespace,
    topic: str,
    formatter: Callable[[Any], bytes] | None,
    resume: dict[int, int] | None,
    client_config: Callable[..., dict[str, Any]],
    error: type[Exception],
    progress: Any,
) -> tuple[int, int]:
    """Read through confluent-kafka's consumer: from where the wire path stopped (``resume``:
    partition -> next offset), else as the options say. Returns how many records and the signal
    that stopped it (0: none)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        client_config(
            args,
            **{
                "group.id": args.group or "pylog-console-consumer",
                "enable.auto.commit": bool(args.group),
                "enable.auto.offset.store": False,  # offsets are stored once their records are written
                "enable.partition.eof": args.exit_at_end,
                # librdkafka pauses a partition's fetching this long once its queue is over its
                # thresholds (1 s by default), which a consumer writing to a terminal or a pipe reaches
                # often: 10 ms keeps the queue fed without holding more records in memory.
                "fetch.queue.backoff.ms": 10,
                # A fetch at the end of a partition waits this long for new records before the broker
                # answers (and librdkafka reports the end): --exit-at-end should not wait 500 ms for it.
                "fetch.wait.max.ms": 100 if args.exit_at_end else 500,
                "auto.offset.reset": "earliest" if args.from_beginning else "latest",
            },
        )
    )
    ends = _EndOfPartitions()
    try:
        metadata = consumer.list_topics(timeout=30)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            raise error(f"topic {topic!r} does not exist (list topics with `pylog topics list`)")
        if args.group:
            consumer.subscribe(
                [topic],
                on_assign=lambda _, tps: ends.assign([tp.partition for tp in tps]),
                on_revoke=lambda _, tps: ends.revoke([tp.partition for tp in tps]),
            )
        else:
            if args.partition is not None and args.partition not in found.partitions:
                raise error(f"topic {topic!r} has no partition {args.partition}")
            start = OFFSET_BEGINNING if args.from_beginning else OFFSET_END
            partitions = sorted(found.partitions) if args.partition is None else [args.partition]
            if resume is not None:
                partitions = sorted(resume)
            consumer.assign([TopicPartition(topic, p, start if resume is None else resume[p]) for p in partitions])
            ends.assign(partitions)
        with _Stop() as stop:
            count, _ = _copy_records(args, consumer, formatter, ends, stop, KafkaError._PARTITION_EOF, error, progress)
    finally:
        consumer.close()  # with --group: commits the stored offsets and leaves the group
    return count, stop.signum


def _copy_records(
    args: argparse.Namespace,
    consumer: Any,
    formatter: Callable[[Any], bytes] | None,
    ends: _EndOfPartitions,
    stop: _Stop,
    eof_code: int,
    error: type[Exception],
    progress: Any,
) -> tuple[int, float]:
    """Write records to stdout a batch at a time until --max-messages, --exit-at-end,
    --timeout-ms or a signal says stop; returns how many and the seconds it took."""
    from confluent_kafka import TopicPartition

    out = sys.stdout.buffer
    count = 0
    idle_since = time.monotonic()
    started = time.perf_counter()
    # Records form no reference cycles, so the cyclic collector would only rescan each batch's
    # tens of thousands of objects while they are alive: a third of this loop's time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        while not stop.signum and (args.max_messages is None or count < args.max_messages):
            wanted = _BATCH_RECORDS if args.max_messages is None else min(_BATCH_RECORDS, args.max_messages - count)
            # What has arrived, without waiting for a whole batch; when nothing has, wait for one.
            batch = consumer.consume(wanted, 0)
            if not batch:
                message = consumer.poll(0.2)
                batch = [] if message is None else [message]
            records = [m for m in batch if m.error() is None]
            if len(records) < len(batch):
                for message in batch:
                    failure = message.error()
                    if failure is None:
                        ends.more((message.partition(),))
                    elif failure.code() == eof_code:
                        ends.reached(message.partition())
                    else:
                        raise error(f"consume failed: {failure.str()}")
            elif ends.at_end:  # records after an end (rare: only then is each record's partition looked at)
                ends.more({m.partition() for m in records})
            if records:
                idle_since = time.monotonic()
                try:
                    if formatter is None:
                        out.write(b"\n".join([m.value() or b"" for m in records]) + b"\n")
                    else:
                        out.write(b"".join([formatter(m) for m in records]))
                    if args.group:
                        out.flush()  # written before it counts as consumed
                except BrokenPipeError:  # the reader is gone (`| head`): what it did not take stays unread
                    _discard_stdout()
                    break
                count += len(records)
                progress.update(len(records))
                if args.group:
                    last = {m.partition(): m.offset() for m in records}
                    consumer.store_offsets(
                        offsets=[TopicPartition(records[0].topic(), p, o + 1) for p, o in last.items()]
                    )
            elif args.timeout_ms is not None and (time.monotonic() - idle_since) * 1000 >= args.timeout_ms:
                break
            if args.exit_at_end and ends.all_read():
                break
    finally:
        if collecting:
            gc.enable()
        try:
            out.flush()
        except BrokenPipeError:
            _discard_stdout()
        progress.close()
    return count, time.perf_counter() - started


def _discard_stdout() -> None:
    """Point stdout at /dev/null once its reader has gone, so that nothing, the interpreter's
    last flush included, fails on it again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
