"""`pylog produce` and `pylog consume` against kcat, side by side on the same broker and topic.

A `pylog broker start` process (4 partitions, data on disk, as bench/broker_throughput.py runs
it); N lines of 100 bytes produced by each tool into one topic (kcat -P, then `pylog produce`,
both with librdkafka's defaults: acks=all, linger.ms=5), then the topic's first N records read
from the beginning by each (kcat -C -c N, then `pylog consume --from-beginning --max-messages N`),
output to /dev/null. Wall time of each command, start-up included: that is what a user waits for.
Rounds alternate which tool goes first; ratio = pylog msg/s / kcat msg/s (target >= 0.5), the
median of the per-round ratios with their range.

Usage: python bench/cli_throughput.py [--messages 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import make_input, pylog_broker_process, timed  # noqa: E402

PARTITIONS = 4
TOPIC = "cli-bench"


def pylog_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "kafka_spark.cli", *args]


def commands(bootstrap: str, messages: int) -> dict[str, dict[str, list[str]]]:
    """The command lines of each tool, by phase."""
    return {
        "produce": {
            "kcat": ["kcat", "-P", "-b", bootstrap, "-t", TOPIC],
            "pylog": pylog_command("produce", TOPIC, "--bootstrap-server", bootstrap),
        },
        "consume": {
            "kcat": ["kcat", "-C", "-b", bootstrap, "-t", TOPIC, "-o", "beginning", "-c", str(messages), "-q"],
            "pylog": pylog_command("consume", TOPIC, "--from-beginning", "--max-messages", str(messages),
                                   "--bootstrap-server", bootstrap),
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
    workdir = tempfile.mkdtemp(prefix="pylog-bench-cli-")
    path = os.path.join(workdir, "input.txt")
    make_input(path, args.messages)
    rates: dict[str, dict[str, list[float]]] = {phase: {"kcat": [], "pylog": []} for phase in ("produce", "consume")}
    try:
        with pylog_broker_process(partitions=PARTITIONS) as bootstrap:
            subprocess.run(pylog_command("topics", "create", TOPIC, "--partitions", str(PARTITIONS),
                                         "--bootstrap-server", bootstrap), check=True, capture_output=True)
            lines = commands(bootstrap, args.messages)
            for round_index in range(args.rounds):
                order = ("kcat", "pylog") if round_index % 2 == 0 else ("pylog", "kcat")
                for tool in order:
                    rates["produce"][tool].append(args.messages / timed(lines["produce"][tool], stdin_path=path))
                for tool in order:
                    rates["consume"][tool].append(args.messages / timed(lines["consume"][tool]))
                print(f"round {round_index + 1}  " + "  ".join(
                    f"{phase} {tool} {values[tool][-1]:10,.0f} msg/s" for phase, values in rates.items()
                    for tool in ("kcat", "pylog")), flush=True)
            for tool in ("kcat", "pylog"):  # both read what they were timed reading
                count = consumed_count(lines["consume"][tool])
                if count != args.messages:
                    raise RuntimeError(f"{tool} consumed {count} records, expected {args.messages}")
    finally:
        subprocess.run(["rm", "-rf", workdir], check=False)

    median = statistics.median
    print(f"100-byte messages, {args.messages:,} per run, {PARTITIONS} partitions; median of {args.rounds} "
          "rounds; ratio = pylog / kcat (range over rounds)")
    for phase, values in rates.items():
        ratios = [p / k for p, k in zip(values["pylog"], values["kcat"])]
        print(f"{phase:8s} pylog {median(values['pylog']):10,.0f} msg/s   kcat {median(values['kcat']):10,.0f} msg/s   "
              f"ratio pylog/kcat {median(ratios):5.2f}   (rounds {min(ratios):.2f} to {max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
