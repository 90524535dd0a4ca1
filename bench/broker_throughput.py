"""pylog's broker against Apache Kafka on the same machine, in the same run, with the same clients.

Clients: kcat (librdkafka) and Kafka's own kafka-producer-perf-test / kafka-consumer-perf-test
(Java, each in a fresh JVM; their own records/s figures, which leave out the JVM start).
Messages of 100 bytes into 4-partition topics; N per kcat run, and 10,000,000 per run of the Java
tools (``--java-messages``): in a run of 2,000,000 the client JVM's JIT compilation takes much of
the 2 cores and hides the broker. Each broker runs in its own session, as one started on its own
does (Linux's autogroup scheduling then treats broker and client as separate programs).

Two flush policies, each paired like for like (ratios pylog/Kafka, >= 1.0 means pylog is at least
as fast):
- "os-flush": Kafka's default (the operating system writes data out; no fsync before an
  acknowledgement) against pylog with ``log.flush.on.ack.all=false`` (a second pylog broker);
- "fsync-each": a flush before every acknowledgement: Kafka with the topic config
  ``flush.messages=1`` against pylog's default (an acks=all produce is answered once fsynced).
Consume (kcat -C with fetch.wait.max.ms=10 so the end-of-log long poll does not dominate, and
kafka-consumer-perf-test's fetch rate) reads the os-flush topics of both, in a phase of its own
once both have been written each round: every topic is read once untimed (checking every message
is there), then the two brokers alternate, A B B A A B (the round's first broker alternates too),
``--consume-runs`` (7) kcat reads and ``--java-consume-runs`` (3) Java runs of each. One Java
run a broker a round, each right after its broker's produce runs (the method up to commit
9dddd9c), left the pairing to the machine's drift and the client's spread: the Java consumer's
run-to-run spread on either broker is +-10%, more than the difference measured. A broker's
figures for the round are the median of its kcat reads and the median of its Java runs.

kcat's rate is set by kcat: librdkafka allocates every message in its fetch thread and frees it
in the application thread, so the two contend on the fetch thread's glibc malloc arena (under
``perf trace``, ~18,000 futex calls of each thread a read, all on one address, the mutex at the
start of a glibc thread heap; with jemalloc preloaded, kcat read ~1.6x faster from either
broker, still level). A read of 2,000,000 messages takes ~0.75 s, in which pylog's broker spends
~0.1 s of CPU, Kafka's 0.15-0.5 s and kcat ~1.1 s, and up to a third of reads, with either
broker and in spells of several seconds, run ~1.8x slower with kcat making 11,000-24,000
voluntary context switches instead of 1,500-4,000. Over 63 interleaved reads of each broker (commit 178bd05) the
fast reads averaged 2.666M msg/s from both. The median of 7 reads replaced the best of 3: in
blocks of that data, the median's per-block ratio varied less (sd 0.039 against 0.050 for the best).

The broker's own part of a fetch is printed beside it ("fetch answer"): one connection sends a
Fetch of 1 MiB from each partition at offsets stepping through the kcat topic and reads the
whole answer into memory, nothing parsed but the error codes and sizes; the median time from
request to last byte over ``--fetch-requests`` (200) requests, two runs of each broker a round.
Kafka's answers are ~5% larger: it sends each partition's full 1 MiB, the last batch cut where
the limit falls; pylog sends whole batches. kcat's rate did not move when this time doubled
(pylog with a 100 KiB send buffer against 512 KiB; a likely reason: while kcat's fetch thread
waits for an answer, its application thread frees without contention).

The Java produce runs also print the CPU seconds of the broker and of the client JVM per run:
the machine is saturated during them (~95% of both cores), so the client's CPU, which depends on
how the broker batches its answers, sets the pairing as much as the broker's own.

Every produce run is followed by a ``sync`` outside its timing, so no run carries the write-back
of an earlier run's data: Kafka removes a deleted topic's files a minute later
(``file.delete.delay.ms``), so its data used to be written back ~30 s after its run (Linux's
``dirty_expire_centisecs``), during another broker's run (1.1 GB measured during one), while
pylog removes them at once and never had its data written back.

A warm-up round runs first and is not counted (``--warmup``; Kafka's broker compiles its hot
paths in its first runs, as the sink benchmark found). Rounds are interleaved (each round runs
every broker back to back, so the machine's drift hits both) and the ratio printed is the median
of the per-round ratios with their range. The old anchor, librdkafka's in-memory mock cluster
(which keeps only ~5 MB per partition), stays as a secondary kcat line. Apache Kafka runs from
.cache/kafka (scripts/fetch_references.sh) with Kafka's JVM settings and a 1 GiB heap, as
kafka-server-start.sh gives it.

``--json PATH`` also writes every round's figures (bench/_results.py; bench/plot.py draws them):
"broker-os-flush" (produce and consume, kcat and Java), "broker-fsync-each" (produce) and
"broker-fetch-answer", each pylog against Apache Kafka; the librdkafka mock's line stays printed only.

Usage: python bench/broker_throughput.py [--messages 2000000] [--java-messages 10000000] [--rounds 3]
       [--warmup 1] [--consume-runs 7] [--java-consume-runs 3] [--fetch-requests 200] [--json PATH]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import io
import os
import platform
import re
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
from _harness import (  # noqa: E402
    children_cpu_seconds,
    make_input,
    mock_cluster,
    process_cpu_seconds,
    pylog_broker_process,
    remove_scratch_dir,
    scratch_dir,
    timed,
)
from _results import Comparison, Results  # noqa: E402
from kio.schema.types import BrokerId, TopicName  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402
from kio.static.primitive import i8, i32, i64  # noqa: E402

from tests.interop.references import ApacheKafka, kafka_tool  # noqa: E402

PARTITIONS = 4
KCAT_CONSUME = ("kcat", "-C", "-e", "-q", "-o", "beginning", "-X", "fetch.wait.max.ms=10")


def create_topic(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, config=config or {})])[topic].result(timeout=60)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures resolve
    for future in admin.delete_topics(topics).values():
        future.result(timeout=60)


def kcat_produce(bootstrap: str, topic: str, path: str, messages: int) -> float:
    return messages / timed(["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", "linger.ms=5"], stdin_path=path)


def kcat_count(bootstrap: str, topic: str, expected: int) -> None:
    """Reads the whole topic once (untimed) and checks every message is there."""
    command = [*KCAT_CONSUME, "-b", bootstrap, "-t", topic, "-f", "x"]
    count = subprocess.run(command, check=True, capture_output=True).stdout.count(b"x")
    if count != expected:
        raise RuntimeError(f"{bootstrap} {topic}: consumed {count}, expected {expected}")


def kcat_read(bootstrap: str, topic: str, messages: int) -> float:
    """One timed read of the whole topic: its rate."""
    return messages / timed([*KCAT_CONSUME, "-b", bootstrap, "-t", topic])


def kcat_consume(bootstrap: str, topic: str, expected: int) -> float:
    """A checked read, then one timed read (the librdkafka mock's line)."""
    kcat_count(bootstrap, topic, expected)
    return kcat_read(bootstrap, topic, expected)


#: The Java producer's own figures printed beside each produce run (``--print-metrics``).
PRODUCER_METRICS = ("request-total", "records-per-request-avg", "request-latency-avg")


def java_produce(bootstrap: str, topic: str, messages: int, metrics: dict[str, float] | None = None) -> float:
    """kafka-producer-perf-test (acks=all, the Java producer's default) in a fresh JVM: its rate.
    ``metrics`` receives the client's :data:`PRODUCER_METRICS`."""
    result = kafka_tool(
        "kafka-producer-perf-test",
        "--topic",
        topic,
        "--num-records",
        str(messages),
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--command-property",
        f"bootstrap.servers={bootstrap}",
        "linger.ms=5",
        "--print-metrics",
        fast_start=False,
        timeout=900,
    )
    match = re.search(rf"^{messages} records sent, ([\d.]+) records/sec", result.stdout, re.MULTILINE)
    if not match:
        raise RuntimeError(f"kafka-producer-perf-test printed no summary: {result.stdout[-500:]}")
    if metrics is not None:
        for name in PRODUCER_METRICS:  # the client-wide line, not the per-node ones
            found = re.search(rf"^producer-metrics:{name}:\{{client-id=[^,}}]*\}}\s*:\s*([\d.]+)", result.stdout, re.M)
            if not found:
                raise RuntimeError(f"kafka-producer-perf-test printed no {name}: {result.stdout[-500:]}")
            metrics[name] = float(found.group(1))
    return float(match.group(1))


def java_consume(bootstrap: str, topic: str, messages: int) -> float:
    """kafka-consumer-perf-test in a fresh JVM: its fetch rate (messages/s after joining the group)."""
    result = kafka_tool(
        "kafka-consumer-perf-test",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--messages",
        str(messages),
        "--timeout",
        "120000",
        fast_start=False,
        timeout=900,
    )
    header, values = result.stdout.strip().splitlines()[-2:]
    stats = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in values.split(",")), strict=False))
    if int(stats["data.consumed.in.nMsg"]) != messages:
        raise RuntimeError(f"kafka-consumer-perf-test read {stats['data.consumed.in.nMsg']} of {messages}")
    return float(stats["fetch.nMsg.sec"])


def _fetch_request(correlation_id: int, topic: str, offsets: list[int]) -> bytes:
    """A Fetch v4 request frame (a version both a Kafka 4 broker and pylog's answer) for
    ``offsets[p]`` of each partition p, 1 MiB a partition (the Java and librdkafka consumers'
    default), no wait; written with kio, as bench/protocol_versions.py writes its frames."""
    from kio.schema.fetch.v4 import request as fetch

    body = fetch.FetchRequest(
        replica_id=BrokerId(-1),
        max_wait=datetime.timedelta(0),
        min_bytes=i32(1),
        max_bytes=i32(52_428_800),
        isolation_level=i8(0),
        topics=(
            fetch.FetchTopic(
                topic=TopicName(topic),
                partitions=tuple(
                    fetch.FetchPartition(partition=i32(p), fetch_offset=i64(offset), partition_max_bytes=i32(1_048_576))
                    for p, offset in enumerate(offsets)
                ),
            ),
        ),
    )
    out = io.BytesIO()
    out.write(struct.pack(">hhih", 1, 4, correlation_id, 5) + b"bench")  # request header v1
    entity_writer(fetch.FetchRequest)(out, body)
    return struct.pack(">i", out.tell()) + out.getvalue()


def _records_bytes(answer: memoryview, correlation_id: int, partitions: int) -> list[int]:
    """The record bytes of each partition in a Fetch v4 answer (read with kio); raises on any
    error code."""
    from kio.schema.errors import ErrorCode
    from kio.schema.fetch.v4.response import FetchResponse

    (got,) = struct.unpack_from(">i", answer, 0)
    if got != correlation_id:
        raise RuntimeError(f"fetch answer for correlation id {got}, expected {correlation_id}")
    response, _ = entity_reader(FetchResponse)(answer.toreadonly(), 4)
    data = [partition for topic in response.responses for partition in topic.partitions]
    for partition in data:
        if partition.error_code != ErrorCode.none:
            raise RuntimeError(f"fetch answer: partition {partition.partition_index} {partition.error_code.name}")
    if len(data) != partitions:
        raise RuntimeError(f"fetch answer for {len(data)} partitions, expected {partitions}")
    return [len(partition.records or b"") for partition in sorted(data, key=lambda d: d.partition_index)]


def fetch_answer_seconds(bootstrap: str, topic: str, requests: int = 200, warmup: int = 20) -> tuple[float, float]:
    """The broker's own part of a consumer's fetch, without a client's parsing: one connection
    sends a Fetch for every partition (1 MiB each, at offsets stepping through the topic) and
    reads the whole answer into memory, one request at a time. Returns the median seconds from
    sending a request to the last byte of its answer, and the median answer size in bytes. Every
    answer is checked: no error code, records for every partition that has some past the offset."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-fetch-answer"})
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)]
    finally:
        consumer.close()
    steps = 8
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    buffer = bytearray(PARTITIONS * 1_048_576 + (1 << 20))
    view = memoryview(buffer)
    times, sizes = [], []
    with socket.create_connection((host, int(port)), timeout=60) as connection:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for index in range(warmup + requests):
            offsets = [(index % steps) * (end // steps) for end in ends]
            request = _fetch_request(index, topic, offsets)
            start = time.perf_counter()
            connection.sendall(request)
            got = 0
            while got < 4:
                got += connection.recv_into(view[got:4]) or _closed()
            total = 4 + struct.unpack_from(">i", buffer, 0)[0]
            if total > len(buffer):
                raise RuntimeError(f"fetch answer of {total} bytes, more than {PARTITIONS} partitions of 1 MiB")
            while got < total:
                got += connection.recv_into(view[got:total]) or _closed()
            elapsed = time.perf_counter() - start
            sizes_now = _records_bytes(view[4:total], index, PARTITIONS)
            if any(size <= 0 for size, offset, end in zip(sizes_now, offsets, ends, strict=True) if offset < end):
                raise RuntimeError(f"fetch answer at offsets {offsets} (ends {ends}): a partition without records")
            if index >= warmup:
                times.append(elapsed)
                sizes.append(total)
    return statistics.median(times), statistics.median(sizes)


def _closed() -> int:
    raise RuntimeError("the broker closed the connection during a fetch answer")


# (name, what it is) of the brokers measured each round, in the order they run.
BROKERS = ("pylog-fsync", "kafka-fsync", "pylog-os", "kafka-os")
PRODUCE = ("produce kcat", "produce java")
PAIRS = (("os-flush", "pylog-os", "kafka-os"), ("fsync-each", "pylog-fsync", "kafka-fsync"))


def measure(
    name: str,
    bootstrap: str,
    broker_pid: int,
    round_index: int,
    args: argparse.Namespace,
    path: str,
    results: dict[str, dict[str, list[float]]],
    cpu: dict[str, list[tuple[float, float]]],
    client: dict[str, list[dict[str, float]]],
) -> tuple[str, str]:
    """One broker's produce runs; returns its (kcat, Java) topics. Appends the (broker, client) CPU
    seconds of its Java produce run to ``cpu[name]`` and the client's request figures to
    ``client[name]``."""
    config = {"flush.messages": "1"} if name == "kafka-fsync" else None
    kcat_topic, java_topic = f"kcat-{name}-{round_index}", f"java-{name}-{round_index}"
    create_topic(bootstrap, kcat_topic, config)
    create_topic(bootstrap, java_topic, config)
    results[name]["produce kcat"].append(kcat_produce(bootstrap, kcat_topic, path, args.messages))
    os.sync()  # outside the timing: no later run writes this run's data back (see the docstring)
    broker_before, client_before = process_cpu_seconds(broker_pid), children_cpu_seconds()
    metrics: dict[str, float] = {}
    results[name]["produce java"].append(java_produce(bootstrap, java_topic, args.java_messages, metrics))
    cpu[name].append((process_cpu_seconds(broker_pid) - broker_before, children_cpu_seconds() - client_before))
    client[name].append(metrics)
    os.sync()
    return kcat_topic, java_topic


def alternating(first: tuple[str, str], runs: int) -> list[str]:
    """A B B A A B ...: ``runs`` turns of each, the pair's order flipped every turn."""
    return [name for turn in range(runs) for name in (first if turn % 2 == 0 else first[::-1])]


def consume(
    round_index: int,
    topics: dict[str, tuple[str, str]],
    bootstrap: dict[str, str],
    pids: dict[str, int],
    args: argparse.Namespace,
    results: dict[str, dict[str, list[float]]],
    cpu: dict[str, list[tuple[float, float]]],
) -> dict[str, dict[str, list[float]]]:
    """The consume phase of a round over the os-flush brokers (see the docstring): appends each
    broker's round figures (the median kcat read, the median Java run, the median fetch answer
    time and size) to ``results`` and the (broker, client)
    CPU seconds of every Java run to ``cpu[name + " consume"]``; returns every run's rate."""
    first = ("pylog-os", "kafka-os") if round_index % 2 == 0 else ("kafka-os", "pylog-os")
    runs: dict[str, dict[str, list[float]]] = {name: collections.defaultdict(list) for name in first}
    for name in first:
        kcat_count(bootstrap[name], topics[name][0], args.messages)
    for name in alternating(first, 2):
        seconds, size = fetch_answer_seconds(bootstrap[name], topics[name][0], args.fetch_requests)
        runs[name]["fetch"].append(seconds)
        runs[name]["fetch size"].append(size)
    for name in alternating(first, args.consume_runs):
        runs[name]["kcat"].append(kcat_read(bootstrap[name], topics[name][0], args.messages))
    for name in alternating(first, args.java_consume_runs):
        broker_before, client_before = process_cpu_seconds(pids[name]), children_cpu_seconds()
        runs[name]["java"].append(java_consume(bootstrap[name], topics[name][1], args.java_messages))
        cpu[f"{name} consume"].append(
            (process_cpu_seconds(pids[name]) - broker_before, children_cpu_seconds() - client_before)
        )
    for name in first:
        results[name]["consume kcat"].append(statistics.median(runs[name]["kcat"]))
        results[name]["fetch answer"].append(statistics.median(runs[name]["fetch"]))
        results[name]["fetch size"].append(statistics.median(runs[name]["fetch size"]))
        results[name]["consume java"].append(statistics.median(runs[name]["java"]))
    return runs


#: The plotted phases: (key in the results, label on the plot).
PHASES = (
    ("produce kcat", "produce\nkcat"),
    ("produce java", "produce\nJava perf test"),
    ("consume kcat", "consume\nkcat"),
    ("consume java", "consume\nJava perf test"),
)


def comparisons(results: dict[str, dict[str, list[float]]], args: argparse.Namespace) -> list[Comparison]:
    """The round-by-round figures as comparisons, pylog first (ratios pylog/Kafka): one a flush
    policy over its phases, and the fetch answer time."""
    sizes = f"{args.messages:,} msgs a kcat run, {args.java_messages:,} a Java run"
    found = []
    for pair, pylog_name, kafka_name in PAIRS:
        phases = [(key, label) for key, label in PHASES if results[pylog_name].get(key)]
        found.append(
            Comparison(
                id=f"broker-{pair}",
                title=f"pylog's broker and Apache Kafka 4.3.1, {pair}: 100-byte messages, {PARTITIONS} partitions, "
                f"{sizes}",
                unit="msg/s",
                better="higher",
                groups=[label for _, label in phases],
                series={
                    "pylog": [results[pylog_name][key] for key, _ in phases],
                    "Apache Kafka": [results[kafka_name][key] for key, _ in phases],
                },
                ratio_label="pylog / Kafka",
            )
        )
    found.append(
        Comparison(
            id="broker-fetch-answer",
            title=f"the broker's answer to a Fetch of 1 MiB from each of {PARTITIONS} partitions "
            "(median over a run's requests)",
            unit="ms",
            better="lower",
            groups=["fetch answer"],
            series={
                "pylog": [[seconds * 1000 for seconds in results["pylog-os"]["fetch answer"]]],
                "Apache Kafka": [[seconds * 1000 for seconds in results["kafka-os"]["fetch answer"]]],
            },
            ratio_label="pylog / Kafka (time)",
        )
    )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--java-messages",
        type=int,
        default=10_000_000,
        help="messages a run of Kafka's Java perf tools (default 10,000,000: a run of 2,000,000 is "
        "mostly the client JVM compiling its own code, ~2.6 s of its CPU, which hides the broker)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="rounds run first and not counted (default 1): Kafka's broker compiles its hot paths in "
        "its first runs, and a broker in service is warm",
    )
    parser.add_argument(
        "--consume-runs",
        type=int,
        default=7,
        help="kcat reads of each consume topic per round, their median counted (default 7; see the docstring)",
    )
    parser.add_argument(
        "--fetch-requests",
        type=int,
        default=200,
        help="timed Fetch requests of each of the 2 fetch-answer runs per broker per round (default 200)",
    )
    parser.add_argument(
        "--java-consume-runs",
        type=int,
        default=3,
        help="kafka-consumer-perf-test runs on each consume topic per round, their median counted (default 3)",
    )
    parser.add_argument("--kafka-heap", default="1g")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON (bench/plot.py draws them)")
    args = parser.parse_args()
    record = Results("broker_throughput", {key: value for key, value in vars(args).items() if key != "json"})
    workdir = scratch_dir("pylog-bench-input-")
    kafka_dir = scratch_dir("apache-kafka-")  # Kafka's data, which ApacheKafka removes at its end
    path = os.path.join(workdir, "input.txt")
    make_input(path, args.messages)
    # pylog's brokers run on this interpreter: its build sets their speed (README, "Which Python
    # runs the broker").
    print(f"pylog's brokers run on {os.path.realpath(sys.executable)} (Python {platform.python_version()})", flush=True)
    results: dict[str, dict[str, list[float]]] = {name: collections.defaultdict(list) for name in (*BROKERS, "mock")}
    with (
        pylog_broker_process(partitions=PARTITIONS) as pylog_fsync,
        pylog_broker_process(partitions=PARTITIONS, overrides=("log.flush.on.ack.all=false",)) as pylog_os,
        ApacheKafka(heap=args.kafka_heap, workdir=Path(kafka_dir)) as kafka,
    ):
        bootstrap = {
            "pylog-fsync": pylog_fsync,
            "pylog-os": pylog_os,
            "kafka-fsync": kafka.bootstrap_servers,
            "kafka-os": kafka.bootstrap_servers,
        }
        assert kafka.process is not None
        pids = {"pylog-fsync": pylog_fsync.pid, "pylog-os": pylog_os.pid}
        pids["kafka-fsync"] = pids["kafka-os"] = kafka.process.pid
        cpu: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
        client: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
        for warmup_index in range(args.warmup):  # every broker and client path run once, not counted
            scratch: dict[str, dict[str, list[float]]] = {name: collections.defaultdict(list) for name in BROKERS}
            topics: dict[str, tuple[str, str]] = {}
            for name in BROKERS:
                topics[name] = measure(
                    name,
                    bootstrap[name],
                    pids[name],
                    -1 - warmup_index,
                    args,
                    path,
                    scratch,
                    collections.defaultdict(list),
                    collections.defaultdict(list),
                )
                if not name.endswith("-os"):
                    delete_topics(bootstrap[name], list(topics[name]))
            consume(-1 - warmup_index, topics, bootstrap, pids, args, scratch, collections.defaultdict(list))
            for name in BROKERS:
                if name.endswith("-os"):
                    delete_topics(bootstrap[name], list(topics[name]))
                print(f"warm-up {warmup_index + 1} {name:12s} done", flush=True)
        for round_index in range(args.rounds):
            topics = {}
            for name in BROKERS:
                topics[name] = measure(name, bootstrap[name], pids[name], round_index, args, path, results, cpu, client)
                broker_cpu, client_cpu = cpu[name][-1]
                figures = client[name][-1]
                print(
                    f"round {round_index + 1} {name:12s} "
                    + "  ".join(f"{phase} {results[name][phase][-1]:12,.0f} msg/s" for phase in PRODUCE)
                    + f"  (java produce: CPU broker {broker_cpu:.1f} s, client {client_cpu:.1f} s; "
                    f"{figures['request-total']:,.0f} requests of {figures['records-per-request-avg']:.0f} records, "
                    f"{figures['request-latency-avg']:.2f} ms each)",
                    flush=True,
                )
                if not name.endswith("-os"):  # each produce run starts from a disk without its broker's data
                    delete_topics(bootstrap[name], list(topics[name]))
            runs = consume(round_index, topics, bootstrap, pids, args, results, cpu)
            for name, rates in runs.items():
                print(
                    f"round {round_index + 1} {name:12s} "
                    + "  ".join(
                        f"consume {kind} {results[name]['consume ' + kind][-1]:12,.0f} msg/s "
                        f"(runs {', '.join(f'{rate:,.0f}' for rate in rates[kind])})"
                        for kind in ("kcat", "java")
                    )
                    + f"  fetch answer {results[name]['fetch answer'][-1] * 1000:.3f} ms "
                    f"(runs {', '.join(f'{seconds * 1000:.3f}' for seconds in rates['fetch'])}; "
                    f"{results[name]['fetch size'][-1]:,.0f} bytes)",
                    flush=True,
                )
            for name in BROKERS:
                if name.endswith("-os"):
                    delete_topics(bootstrap[name], list(topics[name]))
            with mock_cluster() as mock:  # the old anchor: kcat only, data within its window
                # The consume data first, into a mock that holds nothing else (~2.5 MB a
                # partition, inside the ~5 MB it keeps), then the produce run.
                mock_messages = min(args.messages, 100_000)
                kcat_topic = f"mock-consume-{round_index}"
                with open(path, "rb") as source, open(os.path.join(workdir, "mock.txt"), "wb") as out:
                    out.write(source.read(101 * mock_messages))
                kcat_produce(mock, kcat_topic, os.path.join(workdir, "mock.txt"), mock_messages)
                try:
                    consumed: float | None = kcat_consume(mock, kcat_topic, mock_messages)
                except RuntimeError as error:  # the mock's in-memory log is no broker: it loses records
                    print(f"round {round_index + 1} librdkafka mock: {error}; no mock consume figure", flush=True)
                    consumed = None
                results["mock"]["consume kcat"].append(consumed)  # type: ignore[arg-type]
                results["mock"]["produce kcat"].append(kcat_produce(mock, f"mock-{round_index}", path, args.messages))
    remove_scratch_dir(workdir)
    remove_scratch_dir(kafka_dir)

    median = statistics.median
    print(
        f"100-byte messages, {args.messages:,} per kcat run, {args.java_messages:,} per Java perf tool run, "
        f"{PARTITIONS} partitions; median of {args.rounds} "
        f"interleaved rounds; ratio = pylog / Apache Kafka (range over rounds)"
    )
    for pair, pylog_name, kafka_name in PAIRS:
        for phase in ("produce kcat", "produce java", "consume kcat", "consume java"):
            if phase not in results[pylog_name]:
                continue
            ratios = [p / k for p, k in zip(results[pylog_name][phase], results[kafka_name][phase], strict=False)]
            print(
                f"{pair:10s} {phase:12s} pylog {median(results[pylog_name][phase]):12,.0f} msg/s   "
                f"kafka {median(results[kafka_name][phase]):12,.0f} msg/s   ratio pylog/kafka "
                f"{median(ratios):5.2f}   (rounds {min(ratios):.2f} to {max(ratios):.2f})"
            )
    answer = results["pylog-os"]["fetch answer"], results["kafka-os"]["fetch answer"]
    speed = [k / p for p, k in zip(*answer, strict=False)]
    sizes = median(results["pylog-os"]["fetch size"]), median(results["kafka-os"]["fetch size"])
    print(
        f"os-flush   fetch answer pylog {median(answer[0]) * 1000:6.3f} ms ({sizes[0]:,.0f} bytes)   "
        f"kafka {median(answer[1]) * 1000:6.3f} ms ({sizes[1]:,.0f} bytes)   "
        f"ratio kafka/pylog time {median(speed):5.2f}   (rounds {min(speed):.2f} to {max(speed):.2f})"
    )
    if args.json:
        for comparison in comparisons(results, args):
            record.add(comparison)
        record.write(args.json)
        print(f"results: {args.json}")
    for name in BROKERS:
        print(
            f"java produce CPU {name:12s} broker {median(b for b, _ in cpu[name]):5.1f} s   "
            f"client JVM {median(c for _, c in cpu[name]):5.1f} s   "
            f"requests {median(f['request-total'] for f in client[name]):9,.0f}   "
            f"latency {median(f['request-latency-avg'] for f in client[name]):5.2f} ms   "
            f"(medians per run of {args.java_messages:,})"
        )
    for name in BROKERS:
        if cpu[f"{name} consume"]:
            print(
                f"java consume CPU {name:12s} broker {median(b for b, _ in cpu[f'{name} consume']):5.1f} s   "
                f"client JVM {median(c for _, c in cpu[f'{name} consume']):5.1f} s   "
                f"(medians per run of {args.java_messages:,})"
            )
    for phase in ("produce kcat", "consume kcat"):
        pylog_name = "pylog-os"
        # Rounds where the mock lost records have no figure (None): left out of both medians.
        paired = [(p, m) for p, m in zip(results[pylog_name][phase], results["mock"][phase], strict=False) if m]
        if not paired:
            print(f"secondary  {phase:12s} no round of the librdkafka mock kept its records")
            continue
        ratios = [p / m for p, m in paired]
        print(
            f"secondary  {phase:12s} pylog {median(p for p, _ in paired):12,.0f} msg/s   "
            f"librdkafka mock {median(m for _, m in paired):12,.0f} msg/s   ratio pylog/mock {median(ratios):5.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
