"""Soak: sustained acks=all load on every partition of a `pylog broker start` process, then every
acknowledged record must be stored exactly once and the broker must still answer.

    python scripts/soak_acks_all.py --minutes 11 --producers 2
    python scripts/soak_acks_all.py --seconds 20 --override log.flush.io.uring.entries=2

Each producer (confluent-kafka, acks=all; the odd-numbered ones with enable.idempotence=true,
the others without) writes sequenced records round-robin over the topic's partitions as fast as
the broker acknowledges them, for the given time. Then a last acks=all produce to each
partition must be answered (the broker still serves every partition), a consumer reads
everything back from the start, and each acknowledged record must be there once: a wedged
fsync shows as deliveries that fail or never finish, retries that wrote a record twice, or
records missing.

Prints one line,
``soak: seconds=... producers=... partitions=... produced=N acked=N failed=N pending=N
duplicates=N missing=N max_ack_latency_ms=X broker_answering=True fsyncs=N longest_fsync_ms=N
overflows=N overflow_completions=N dropped_completions=N stuck_fsyncs=N OK`` (FAILED, and exit
status 1, when a delivery failed or never finished, a record was lost or duplicated, the broker
stopped answering or an fsync got stuck). The fsync figures are the broker's own, printed by
`pylog broker start` when it stops (durability.FsyncStats): ``overflows`` counts the times
completions were reaped from the kernel's overflow list of the fsync ring (make it overflow with
a tiny ring: ``--override log.flush.io.uring.entries=2``); they are -1 where the broker fsynced
on threads (no io_uring here).
"""

from __future__ import annotations

import argparse
import os
import re
import struct
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
from _harness import pylog_broker_process  # noqa: E402

TOPIC = "soak"
_ID = struct.Struct(">IQ")  # producer number, sequence number: the start of every value

#: The broker's summary of its fsyncs, printed by `pylog broker start` when it stops (FsyncStats).
_FSYNC_SUMMARY = re.compile(
    r"fsyncs \((io_uring|\d+ threads)[^)]*\): (\d+) done, (\d+) completion queue overflows, "
    r"(\d+) completions reaped from the overflow list, (\d+) dropped, (\d+) stuck, "
    r"longest (\d+) ms"
)


@dataclass
class ProducerRun:
    """What one producer sent: ``status[seq]`` is 0 while pending, 1 once acknowledged, 2 failed."""

    number: int
    idempotent: bool
    status: bytearray = field(default_factory=bytearray)
    max_latency_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)


@dataclass
class SoakResult:
    seconds: float
    producers: int
    partitions: int
    produced: int = 0
    acked: int = 0
    failed: int = 0
    pending: int = 0
    duplicates: int = 0
    missing: int = 0
    max_ack_latency_ms: float = 0.0
    broker_answering: bool = False
    fsyncs: int = -1
    longest_fsync_ms: int = -1
    overflows: int = -1
    overflow_completions: int = -1
    dropped_completions: int = -1
    stuck_fsyncs: int = -1
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (
            self.acked > 0
            and self.failed == 0
            and self.pending == 0
            and self.duplicates == 0
            and self.missing == 0
            and self.broker_answering
            and self.stuck_fsyncs <= 0
            and self.dropped_completions <= 0
        )

    def line(self) -> str:
        errors = f" errors={self.errors}" if self.errors else ""
        return (
            f"soak: seconds={self.seconds:.0f} producers={self.producers} partitions={self.partitions} "
            f"produced={self.produced} acked={self.acked} failed={self.failed} pending={self.pending} "
            f"duplicates={self.duplicates} missing={self.missing} "
            f"max_ack_latency_ms={self.max_ack_latency_ms:.0f} broker_answering={self.broker_answering} "
            f"fsyncs={self.fsyncs} longest_fsync_ms={self.longest_fsync_ms} overflows={self.overflows} "
            f"overflow_completions={self.overflow_completions} dropped_completions={self.dropped_completions} "
            f"stuck_fsyncs={self.stuck_fsyncs}{errors} {'OK' if self.ok else 'FAILED'}"
        )


def produce_for(bootstrap: str, run: ProducerRun, partitions: int, seconds: float, value_bytes: int) -> None:
    """Write sequenced records round-robin over the partitions for ``seconds``, then wait for
    every delivery report (librdkafka retries within message.timeout.ms, as a client would)."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": run.idempotent,
            "linger.ms": 2,
            "queue.buffering.max.messages": 20_000,
            "request.timeout.ms": 60_000,
            "message.timeout.ms": 300_000,
        }
    )
    padding = b"." * max(0, value_bytes - _ID.size)

    def delivered(error, message) -> None:  # noqa: ANN001
        seq = _ID.unpack_from(message.value())[1]
        if error is None:
            run.status[seq] = 1
            run.max_latency_s = max(run.max_latency_s, message.latency() or 0.0)
        else:
            run.status[seq] = 2
            name = error.name()
            run.errors[name] = run.errors.get(name, 0) + 1

    deadline = time.monotonic() + seconds
    seq = 0
    while time.monotonic() < deadline:
        for _ in range(200):
            value = _ID.pack(run.number, seq) + padding
            try:
                producer.produce(TOPIC, value=value, partition=seq % partitions, on_delivery=delivered)
            except BufferError:  # the local queue is full: the broker is behind
                producer.poll(0.05)
                break
            run.status.append(0)
            seq += 1
        producer.poll(0)
    remaining = producer.flush(360)
    if remaining:
        raise KafkaException(f"producer {run.number}: {remaining} deliveries unfinished after 360 s")


def last_produce_answered(bootstrap: str, partitions: int) -> bool:
    """One acks=all record to every partition, each acknowledged within 60 s."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60_000})
    answered: list[bool] = []
    for partition in range(partitions):
        producer.produce(
            TOPIC,
            value=b"probe",
            partition=partition,
            on_delivery=lambda error, _message: answered.append(error is None),
        )
    producer.flush(90)
    return len(answered) == partitions and all(answered)


#: How long the read back may go without a single record before it gives up.
STALL_S = 120.0


def read_back(bootstrap: str, partitions: int, runs: list[ProducerRun]) -> list[bytearray]:
    """How often each (producer, seq) is stored (saturating at 255), read from the start of
    every partition to its end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    counts = [bytearray(len(run.status)) for run in runs]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "soak-read-back",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 16 << 20,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
    at_end: set[int] = set()
    # An 11-minute soak stores tens of millions of records: no fixed deadline for reading them
    # all, but one for progress, so that a broker that stops serving fetches is still reported.
    read, last_progress = 0, time.monotonic()
    try:
        while len(at_end) < partitions:
            if time.monotonic() - last_progress > STALL_S:
                raise TimeoutError(
                    f"read back stalled: no record for {STALL_S:.0f} s after {read:,} records, at the "
                    f"end of {len(at_end)} of {partitions} partitions"
                )
            batch = consumer.consume(10_000, timeout=1.0)
            if batch:
                read += len(batch)
                last_progress = time.monotonic()
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"read back failed: {error}")
                    at_end.add(message.partition())
                    continue
                value = message.value()
                if value == b"probe":
                    continue
                number, seq = _ID.unpack_from(value)
                if counts[number][seq] < 255:
                    counts[number][seq] += 1
    finally:
        consumer.close()
    return counts


def fsync_summary(broker_log: str, result: SoakResult) -> None:
    """Fill ``result``'s fsync figures from the broker's summary (the ring's figures stay -1
    where the broker fsynced on threads: no io_uring here)."""
    with open(broker_log, encoding="utf-8", errors="replace") as handle:
        found = _FSYNC_SUMMARY.findall(handle.read())
    if not found:
        return
    method, done, overflows, reaped, dropped, stuck, longest = found[-1]
    result.fsyncs, result.stuck_fsyncs, result.longest_fsync_ms = int(done), int(stuck), int(longest)
    if method == "io_uring":
        result.overflows, result.overflow_completions = int(overflows), int(reaped)
        result.dropped_completions = int(dropped)


def soak(
    seconds: float,
    producers: int = 2,
    partitions: int = 8,
    value_bytes: int = 100,
    overrides: tuple[str, ...] = (),
    broker_log: str | None = None,
) -> SoakResult:
    """The whole run against a fresh `pylog broker start` process (its log in ``broker_log``)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    broker_log = broker_log or tempfile.mkstemp(prefix="pylog-soak-", suffix=".log")[1]
    result = SoakResult(seconds=seconds, producers=producers, partitions=partitions)
    runs = [ProducerRun(number, idempotent=number % 2 == 1) for number in range(producers)]
    with pylog_broker_process(partitions=partitions, overrides=overrides, stderr_path=broker_log) as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=partitions)])[TOPIC].result(timeout=60)
        failures: list[BaseException] = []

        def produce(run: ProducerRun) -> None:
            try:
                produce_for(bootstrap, run, partitions, seconds, value_bytes)
            except BaseException as error:  # noqa: BLE001 reported below, with the figures
                failures.append(error)

        threads = [threading.Thread(target=produce, args=(run,), name=f"soak-producer-{run.number}") for run in runs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        del admin
        result.broker_answering = not failures and last_produce_answered(bootstrap, partitions)
        counts = read_back(bootstrap, partitions, runs)
        for failure in failures:
            print(f"soak: {failure}", file=sys.stderr)
    for run, stored in zip(runs, counts, strict=False):
        result.produced += len(run.status)
        result.max_ack_latency_ms = max(result.max_ack_latency_ms, run.max_latency_s * 1000)
        for name, count in run.errors.items():
            result.errors[name] = result.errors.get(name, 0) + count
        for status, count in zip(run.status, stored, strict=False):
            if status == 1:
                result.acked += 1
                if count == 0:
                    result.missing += 1
                elif count > 1:
                    result.duplicates += 1
            elif status == 2:
                result.failed += 1
            else:
                result.pending += 1
    fsync_summary(broker_log, result)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    duration = parser.add_mutually_exclusive_group()
    duration.add_argument("--minutes", type=float, help="how long the producers write (default 11)")
    duration.add_argument("--seconds", type=float, help="the same in seconds")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting, e.g. log.flush.io.uring.entries=2 (repeatable)",
    )
    parser.add_argument("--broker-log", help="keep the broker's log in this file")
    args = parser.parse_args()
    seconds = args.seconds if args.seconds is not None else 60 * (args.minutes if args.minutes is not None else 11)
    result = soak(seconds, args.producers, args.partitions, args.value_bytes, tuple(args.override), args.broker_log)
    print(result.line(), flush=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
