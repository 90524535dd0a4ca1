"""`pylog produce` and `pylog consume` against kcat, side by side on the same broker and topic.

A `pylog broker start` process (4 partitions, data on disk, as bench/broker_throughput.py runs
it); each round, N lines of 100 bytes produced by each tool into a new topic (kcat -P and `pylog
produce`, both with librdkafka's defaults: acks=all, linger.ms=5), then the topic's first N
records read from the beginning by each (kcat -C -c N, `pylog consume --from-beginning
--max-messages N`), then the whole topic, 2N records, to its end ("consume -e": kcat -C -e,
`pylog consume --from-beginning --exit-at-end`, each with its own default wait at the end of a
partition: librdkafka's 500 ms for kcat, 100 ms for pylog's --exit-at-end), output to /dev/null.
Wall time of each command, start-up included: that is what a user waits for (the package's
bytecode compiled first, as an installed package has it). Rounds alternate which tool goes
first; ratio = pylog msg/s / kcat msg/s (target >= 0.5), the median of the per-round ratios with
their range. The CPU seconds of each command (user + system) are printed beside it: on a busy
machine the wall time follows them.

Usage: python bench/cli_throughput.py [--messages 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import (  # noqa: E402
    children_cpu_seconds,
    make_input,
    pylog_broker_process,
    remove_scratch_dir,
    scratch_dir,
    timed,
)

PARTITIONS = 4
PHASES = ("produce", "consume", "consume -e")


def pylog_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "kafka_spark.cli", *args]


def commands(bootstrap: str, topic: str, messages: int) -> dict[str, dict[str, list[str]]]:
    """The command lines of each tool, by phase."""
    return {
        "produce": {
            "kcat": ["kcat", "-P", "-b", bootstrap, "-t", topic],
            "pylog": pylog_command("produce", topic, "--bootstrap-server", bootstrap),
        },
        "consume": {
            "kcat": ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-c", str(messages), "-q"],
            "pylog": pylog_command(
                "consume", topic, "--from-beginning", "--max-messages", str(messages), "--bootstrap-server", bootstrap
            ),
        },
        "consume -e": {
            "kcat": ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q"],
            "pylog": pylog_command(
                "consume", topic, "--from-beginning", "--exit-at-end", "--bootstrap-server", bootstrap
            ),
        },
    }


def consumed_count(command: list[str]) -> int:
    """Records the consume ``command`` prints (one line each: their values hold no newline)."""
    return subprocess.run(command, check=True, capture_output=True, timeout=600).stdout.count(b"\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    # Bytecode of the package, as an installed one has it (pip compiles on install): a checkout
    # run with PYTHONDONTWRITEBYTECODE would otherwise compile the CLI's modules on every start.
    compileall.compile_dir(os.path.join(HERE, "..", "kafka_spark"), quiet=1)
    from kafka_spark.cli.console_records import C_VALUES

    print(
        "pylog consume reads through its own Fetch client, values walked in C"
        if C_VALUES
        else "kafka_spark.cli._console_values is not built (python setup.py build_ext --inplace): pylog consume "
        "reads through confluent-kafka",
        flush=True,
    )
    workdir = scratch_dir("pylog-bench-cli-")
    path = os.path.join(workdir, "input.txt")
    make_input(path, args.messages)
    rates: dict[str, dict[str, list[float]]] = {phase: {"kcat": [], "pylog": []} for phase in PHASES}
    cpu: dict[str, dict[str, list[float]]] = {phase: {"kcat": [], "pylog": []} for phase in PHASES}
    # What each phase reads or writes: both tools produce into the round's topic, so it holds 2N.
    counts = {"produce": args.messages, "consume": args.messages, "consume -e": 2 * args.messages}
    try:
        with pylog_broker_process(partitions=PARTITIONS) as bootstrap:
            for round_index in range(args.rounds):
                topic = f"cli-bench-{round_index}"
                subprocess.run(
                    pylog_command(
                        "topics", "create", topic, "--partitions", str(PARTITIONS), "--bootstrap-server", bootstrap
                    ),
                    check=True,
                    capture_output=True,
                )
                lines = commands(bootstrap, topic, args.messages)
                order = ("kcat", "pylog") if round_index % 2 == 0 else ("pylog", "kcat")
                for phase in PHASES:
                    for tool in order:
                        stdin = path if phase == "produce" else None
                        cpu_before = children_cpu_seconds()
                        rates[phase][tool].append(counts[phase] / timed(lines[phase][tool], stdin_path=stdin))
                        cpu[phase][tool].append(children_cpu_seconds() - cpu_before)
                print(
                    f"round {round_index + 1}  "
                    + "  ".join(
                        f"{phase} {tool} {values[tool][-1]:10,.0f} msg/s"
                        for phase, values in rates.items()
                        for tool in ("kcat", "pylog")
                    ),
                    flush=True,
                )
                for phase in ("consume", "consume -e"):  # both read what they were timed reading
                    for tool in ("kcat", "pylog"):
                        count = consumed_count(lines[phase][tool])
                        if count != counts[phase]:
                            raise RuntimeError(f"{phase} by {tool} read {count} records, expected {counts[phase]}")
    finally:
        remove_scratch_dir(workdir)

    median = statistics.median
    print(
        f"100-byte messages, {args.messages:,} per run, {PARTITIONS} partitions; median of {args.rounds} "
        "rounds; ratio = pylog / kcat (range over rounds)"
    )
    for phase, values in rates.items():
        ratios = [p / k for p, k in zip(values["pylog"], values["kcat"], strict=False)]
        print(
            f"{phase:10s} pylog {median(values['pylog']):10,.0f} msg/s   kcat {median(values['kcat']):10,.0f} msg/s   "
            f"ratio pylog/kcat {median(ratios):5.2f}   (rounds {min(ratios):.2f} to {max(ratios):.2f})   "
            f"CPU s pylog {median(cpu[phase]['pylog']):.2f} kcat {median(cpu[phase]['kcat']):.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
