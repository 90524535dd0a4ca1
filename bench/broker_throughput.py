"""kcat against the pylog broker and against librdkafka's mock cluster, side by side in one run.

Produce: kcat -P writes N messages of 100 bytes into a 4-partition topic of each broker
(pylog persists to disk with its default flush policy: fsync per acks=all produce).
Consume: kcat -C -e reads a data set the mock can hold in full (it keeps only about the newest
5 MB per partition): 4 partitions x 40k messages. Two figures:
- "consume": kcat as it comes. About 0.5 s of its ~0.6 s is one idle long poll at the end: kcat
  learns it has reached the end of a partition from a Fetch at the high watermark, which any
  broker (Kafka too) holds for fetch.wait.max.ms (500 ms) when no data arrives. That wait is
  the same for both brokers, so this ratio sits near 1.0 whatever either broker does.
- "consume-data": the same reads with -X fetch.wait.max.ms=10, done three times per round, so
  the time measured is the brokers serving data rather than the wait.

Where produce time goes: a second pylog broker started with `--override log.flush.on.ack.all=false`
(Kafka's own flush policy: the operating system writes the data out, no fsync before the answer)
is measured in the same rounds ("produce-no-fsync"), and the CPU seconds of kcat and of each broker
during the produce runs are printed. kcat needs well over one of the machine's cores for itself,
so a broker's own CPU time competes with the producer it serves.

Prints messages/s for both and the ratio pylog/mock (>= 1.0 means pylog is at least as fast): the
median of the per-round ratios, each round running both brokers back to back, so that the machine's
speed drifting between rounds (it does, by a third at times on shared machines) cancels out; the
range of the per-round ratios follows it.
Usage: python bench/broker_throughput.py [--messages 2000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from _harness import (  # noqa: E402
    children_cpu_seconds,
    mock_cluster,
    process_cpu_seconds,
    pylog_broker_process,
    timed,
)


def make_input(path: str, count: int) -> None:
    line = b"x" * 100 + b"\n"
    with open(path, "wb") as out:
        chunk = line * 10_000
        for _ in range(count // 10_000):
            out.write(chunk)
        out.write(line * (count % 10_000))


def kcat_produce(bootstrap: str, topic: str, path: str, partition: int | None = None) -> float:
    command = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", "linger.ms=5"]
    if partition is not None:
        command += ["-p", str(partition)]
    return timed(command, stdin_path=path)


def kcat_consume(bootstrap: str, topic: str, expected: int, *options: str) -> float:
    seconds = timed(["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-o", "beginning", *options])
    count = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-o", "beginning", "-f", "x"],
        check=True, capture_output=True,
    ).stdout.count(b"x")
    if count != expected:
        raise RuntimeError(f"{bootstrap} {topic}: consumed {count}, expected {expected}")
    return seconds


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=30)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics(topics).values():
        future.result(timeout=30)


def measure_produce(bootstrap: str, topic: str, path: str, messages: int, broker_pid: int | None,
                    results: dict[str, list[float]], phase: str) -> None:
    """kcat -P of ``path`` into ``topic``: messages/s, and the CPU seconds of kcat and of the
    broker (``broker_pid``, or the mock inside this process) while it ran."""
    kcat_before, broker_before = children_cpu_seconds(), process_cpu_seconds(broker_pid)
    results[phase].append(messages / kcat_produce(bootstrap, topic, path))
    results[f"{phase} cpu kcat"].append(children_cpu_seconds() - kcat_before)
    results[f"{phase} cpu broker"].append(process_cpu_seconds(broker_pid) - broker_before)


def measure_round(name: str, bootstrap: str, round_index: int, messages: int, produce_input: str,
                  consume_input: str, consume_total: int, results: dict[str, list[float]]) -> None:
    produce_topic = f"produce-{round_index}"
    consume_topic = f"consume-{round_index}"
    if name == "pylog":  # the mock auto-creates topics with 4 partitions
        create_topic(bootstrap, produce_topic, 4)
        create_topic(bootstrap, consume_topic, 4)
    measure_produce(bootstrap, produce_topic, produce_input, messages, getattr(bootstrap, "pid", None), results,
                    "produce")
    for partition in range(4):  # exactly 40k per partition: within the mock's window
        kcat_produce(bootstrap, consume_topic, consume_input, partition)
    results["consume"].append(consume_total / kcat_consume(bootstrap, consume_topic, consume_total))
    seconds = sum(kcat_consume(bootstrap, consume_topic, consume_total, "-X", "fetch.wait.max.ms=10")
                  for _ in range(3))
    results["consume-data"].append(3 * consume_total / seconds)
    if name == "pylog":  # each round starts from an empty disk, not 200 MB of dirty pages
        delete_topics(bootstrap, [produce_topic, consume_topic])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--consume-per-partition", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="pylog-bench-input-")
    produce_input = os.path.join(workdir, "produce.txt")
    consume_input = os.path.join(workdir, "consume.txt")
    consume_total = 4 * args.consume_per_partition
    make_input(produce_input, args.messages)
    make_input(consume_input, args.consume_per_partition)

    phases = ("produce", "consume", "consume-data")
    results: dict[str, dict[str, list[float]]] = {
        name: collections.defaultdict(list) for name in ("pylog", "mock")}
    with pylog_broker_process(partitions=4) as pylog, \
            pylog_broker_process(partitions=4, overrides=("log.flush.on.ack.all=false",)) as pylog_no_fsync:
        for round_index in range(args.rounds):
            # A new mock cluster every round: it cannot delete topics, and one that has kept every
            # earlier round's topics grows slower round after round, which would flatter pylog.
            with mock_cluster() as mock:
                for name, bootstrap in (("pylog", pylog), ("mock", mock)):  # interleaved: drift hits both
                    measure_round(name, bootstrap, round_index, args.messages, produce_input, consume_input,
                                  consume_total, results[name])
                    print(f"round {round_index + 1} {name:5s} " + "  ".join(
                        f"{phase} {results[name][phase][-1]:12,.0f} msg/s" for phase in phases), flush=True)
                    if name == "pylog":  # the same data into pylog without fsync, between the two
                        topic = f"no-fsync-{round_index}"
                        create_topic(pylog_no_fsync, topic, 4)
                        measure_produce(pylog_no_fsync, topic, produce_input, args.messages, pylog_no_fsync.pid,
                                        results["pylog"], "produce-no-fsync")
                        delete_topics(pylog_no_fsync, [topic])
                        print(f"round {round_index + 1} pylog produce without fsync "
                              f"{results['pylog']['produce-no-fsync'][-1]:12,.0f} msg/s", flush=True)
    subprocess.run(["rm", "-rf", workdir], check=False)
    results["mock"]["produce-no-fsync"] = results["mock"]["produce"]  # the mock never fsyncs

    print(f"kcat, 100-byte messages; produce {args.messages:,} msgs, consume {consume_total:,} msgs; "
          f"median of {args.rounds} interleaved rounds")
    for phase in ("produce", "consume", "consume-data", "produce-no-fsync"):
        pylog_rate = statistics.median(results["pylog"][phase])
        mock_rate = statistics.median(results["mock"][phase])
        ratios = [p / m for p, m in zip(results["pylog"][phase], results["mock"][phase])]
        print(f"{phase:12s} pylog {pylog_rate:12,.0f} msg/s   mock {mock_rate:12,.0f} msg/s   "
              f"ratio pylog/mock {statistics.median(ratios):5.2f}   (rounds {min(ratios):.2f} to {max(ratios):.2f})")
    print("(produce-no-fsync: pylog with log.flush.on.ack.all=false, not its default; for where the time goes)")
    median = statistics.median
    print(f"CPU seconds per produce run (median): kcat {median(results['pylog']['produce cpu kcat']):.2f} "
          f"into pylog, {median(results['mock']['produce cpu kcat']):.2f} into the mock; "
          f"brokers: pylog {median(results['pylog']['produce cpu broker']):.2f}, "
          f"pylog without fsync {median(results['pylog']['produce-no-fsync cpu broker']):.2f}, "
          f"mock {median(results['mock']['produce cpu broker']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
