"""`pylog produce` and `pylog consume` as kcat and Kafka's console tools are used: keys, headers,
format strings, JSON lines, exit at end, consumer groups that resume, malformed input, Ctrl-C and
closed pipes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable

from confluent_kafka import Consumer

from tests.support.cli_run import pylog
from tests.support.waiting import wait_until


def test_consume_prints_every_field_through_a_kcat_format_string(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    pylog("topics", "create", "fields", "--partitions", "2", *target, env=env)
    pylog(
        "produce",
        "fields",
        "-K",
        ":",
        "-H",
        "source=cli",
        "-H",
        "trace=7",
        "-p",
        "1",
        *target,
        env=env,
        stdin=b"alice:clicked\nbob:bought something\n",
    )
    pylog("produce", "--topic", "fields", "-p", "0", *target, env=env, stdin=b"no key here\n")
    out = pylog(
        "consume",
        "--topic",
        "fields",
        "--from-beginning",
        "-e",
        "-f",
        r"%t|%p|%o|%k|%K|%s|%S|%h|%T\t%%\n",
        *target,
        env=env,
    ).stdout.decode()
    rows = sorted(line.split("|") for line in out.splitlines())
    assert [row[:8] for row in rows] == [
        ["fields", "0", "0", "", "-1", "no key here", "11", ""],
        ["fields", "1", "0", "alice", "5", "clicked", "7", "source=cli,trace=7"],
        ["fields", "1", "1", "bob", "3", "bought something", "16", "source=cli,trace=7"],
    ]
    for row in rows:
        timestamp, percent = row[8].split("\t")
        assert int(timestamp) > 1_600_000_000_000 and percent == "%"


def test_consume_json_lines_carry_topic_partition_offset_timestamp_key_value_and_headers(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    pylog(
        "produce",
        "json",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator==",
        "-H",
        "kind=test",
        *target,
        env=env,
        stdin=b'k1=v1\nk2={"nested": true}\n',
    )
    out = pylog("consume", "json", "--from-beginning", "-e", "--json", *target, env=env).stdout
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["key"], r["value"], r["headers"], r["offset"]) for r in records] == [
        ("k1", "v1", {"kind": "test"}, 0),
        ("k2", '{"nested": true}', {"kind": "test"}, 1),
    ]
    assert all(r["topic"] == "json" and r["partition"] == 0 and r["timestamp"] > 1_600_000_000_000 for r in records)


def test_exit_at_end_stops_once_every_partition_is_read_even_empty_ones(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    pylog("topics", "create", "ends", "--partitions", "3", *target, env=env)
    pylog("produce", "ends", "-p", "1", *target, env=env, stdin=b"".join(b"r%d\n" % i for i in range(50)))
    result = pylog("consume", "ends", "--from-beginning", "--exit-at-end", *target, env=env)
    assert result.stdout.splitlines() == [b"r%d" % i for i in range(50)]
    assert b"Processed a total of 50 messages" in result.stderr


def test_group_resumes_from_its_committed_offsets_and_commits_as_it_goes(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    pylog("topics", "create", "resume", "--partitions", "2", *target, env=env)
    lines = [b"m%d" % i for i in range(40)]
    # Keyed, so both partitions get records whatever the timing (keyless records stick to one
    # partition for librdkafka's sticky.partitioning.linger.ms, and 40 lines fit in that window).
    keyed = [b"k%d:%s" % (i, line) for i, line in enumerate(lines)]
    pylog("produce", "resume", "-K", ":", *target, env=env, stdin=b"\n".join(keyed) + b"\n")
    first = pylog(
        "consume", "resume", "--group", "readers", "--from-beginning", "--max-messages", "15", *target, env=env
    ).stdout.splitlines()
    rest = pylog(
        "consume", "resume", "--group", "readers", "--from-beginning", "-e", *target, env=env
    ).stdout.splitlines()
    assert len(first) == 15 and sorted(first + rest) == sorted(lines)  # each record once, none lost
    described = pylog("groups", "describe", "readers", *target, env=env).stdout.decode()
    lags = [line.split()[5] for line in described.splitlines() if line.startswith("readers")]
    assert lags == ["0", "0"], described
    again = pylog("consume", "resume", "--group", "readers", "--from-beginning", "-e", *target, env=env)
    assert again.stdout == b""  # all committed: --from-beginning applies only to a group without offsets


def test_exit_at_end_with_a_group_exits_when_this_member_is_assigned_no_partition(running_broker):
    """More members than partitions: the member left without a partition has nothing to read to
    its end, and exits once the group has told it so (as soon as its empty assignment is known)."""
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    pylog("topics", "create", "crowded", "--partitions", "1", *target, env=env)
    pylog("produce", "crowded", *target, env=env, stdin=b"one\ntwo\n")
    # The range assignor gives the partition to the member whose id sorts first; the broker
    # begins member ids with the client id, and the CLI's is librdkafka's "rdkafka".
    holder = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "crowd",
            "client.id": "a-holder",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    holder.subscribe(["crowded"])

    def assigned() -> bool:
        if holder.assignment():
            return True
        holder.poll(0.1)
        return False

    wait_until(assigned, "an assignment for the holder", interval=0)
    assert [tp.partition for tp in holder.assignment()] == [0]
    stop = threading.Event()

    def keep_polling():  # takes part in the rebalance the CLI's join starts
        while not stop.is_set():
            holder.poll(0.1)

    polling = threading.Thread(target=keep_polling)
    polling.start()
    try:
        result = pylog("consume", "crowded", "--group", "crowd", "--from-beginning", "-e", *target, env=env)
    finally:
        stop.set()
        polling.join()
        holder.close()
    assert result.stdout == b""  # both records are the holder's to read
    assert b"Processed a total of 0 messages" in result.stderr


def test_malformed_line_is_reported_by_number_after_delivering_the_lines_before_it(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    result = pylog(
        "produce",
        "strict",
        "--key-separator",
        ":",
        *target,
        env=env,
        check=False,
        stdin=b"a:1\nb:2\nno separator\nc:3\n",
    )
    assert result.returncode == 1
    assert b"line 3 has no key separator ':'" in result.stderr
    assert b"the 2 line(s) before it were produced" in result.stderr
    out = pylog("consume", "strict", "--from-beginning", "-e", "--print-key", "--key-separator", ":", *target, env=env)
    assert out.stdout.splitlines() == [b"a:1", b"b:2"]

    too_large = b"x" * 2_000_000  # above the client's message.max.bytes (1,000,000)
    result = pylog("produce", "strict", *target, env=env, check=False, stdin=b"ok\n" + too_large + b"\nlater\n")
    assert result.returncode == 1 and b"line 2 was refused: " in result.stderr, result.stderr
    out = pylog("consume", "strict", "--from-beginning", "-e", *target, env=env)
    assert out.stdout.splitlines() == [b"1", b"2", b"ok"]


def test_bad_options_are_refused_with_what_to_do(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    cases = [
        (("consume", "one", "--topic", "two"), b"two topics given"),
        (("consume", "--from-beginning"), b"no topic given"),
        (("consume", "one", "-f", "%x"), b"%x is not one of"),
        (("consume", "one", "--group", "g", "--partition", "0"), b"--partition"),
        (("produce", "one", "-H", "novalue"), b"NAME=VALUE"),
        (("produce", "one", "--property", "ignore.error=true"), b"parse.key=true or key.separator"),
    ]
    for args, message in cases:
        result = pylog(*args, *target, env=env, check=False, stdin=b"")
        assert result.returncode == 1 and message in result.stderr, (args, result.stderr)


def test_describe_commands_leave_stderr_empty(running_broker):
    """No librdkafka teardown chatter ("Purging N unserved events") among the tools' output."""
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    pylog("produce", "quiet", *target, env=env, stdin=b"x\ny\n")
    pylog("consume", "quiet", "--group", "quiet-readers", "--from-beginning", "-e", *target, env=env)
    for _ in range(3):  # the line came from a race at client teardown: several tries
        topics = pylog("topics", "describe", "quiet", *target, env=env)
        groups = pylog("groups", "describe", "quiet-readers", *target, env=env)
        assert b"LogEndOffset: 2" in topics.stdout and b"quiet-readers" in groups.stdout
        assert topics.stderr == b"" and groups.stderr == b"", (topics.stderr, groups.stderr)


def test_windows_line_ends_are_not_part_of_the_record(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    pylog("produce", "crlf", "-K", ":", *target, env=env, stdin=b"a:1\r\nb:2\r\nc:3")
    out = pylog("consume", "crlf", "--from-beginning", "-e", "-f", "%k=%s|", *target, env=env)
    assert out.stdout == b"a=1|b=2|c=3|"


def interrupted(
    args: list[str], lines: int, env: dict, meanwhile: Callable[[], None] | None = None, after: int = 0
) -> tuple[list[bytes], int, bytes]:
    """Run ``pylog ARGS``, read ``lines`` lines of its output (calling ``meanwhile`` once
    ``after`` of them are read), then Ctrl-C it: the lines, its exit status and its stderr."""
    process = subprocess.Popen(
        [sys.executable, "-m", "kafka_spark.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    watchdog = threading.Timer(90, process.kill)  # a consumer that never prints fails the test, not hangs it
    watchdog.start()
    try:
        printed = [process.stdout.readline() for _ in range(after)]
        if meanwhile is not None:
            meanwhile()
        printed += [process.stdout.readline() for _ in range(lines - after)]
        process.send_signal(signal.SIGINT)
        status = process.wait(60)
        return printed, status, process.stderr.read()
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()


def test_interrupted_group_consumer_keeps_what_it_printed_committed(running_broker):
    """Ctrl-C on a `consume --group` that runs until stopped: the records it printed count as read."""
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    pylog("produce", "tail", *target, env=env, stdin=b"".join(b"t%d\n" % i for i in range(20)))
    printed, status, _ = interrupted(["consume", "tail", "--group", "tailers", "--from-beginning", *target], 20, env)
    assert status == 130
    assert sorted(printed) == sorted(b"t%d\n" % i for i in range(20))
    described = pylog("groups", "describe", "tailers", *target, env=env).stdout.decode()
    assert [line.split()[3:6] for line in described.splitlines() if line.startswith("tailers")] == [["20", "20", "0"]]


def test_consumer_piped_into_a_reader_that_stops_early_exits_quietly(running_broker):
    """`pylog consume ... | head -3`: no traceback when the pipe closes."""
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    pylog("produce", "long", *target, env=env, stdin=b"".join(b"%0100d\n" % i for i in range(20_000)))
    process = subprocess.Popen(
        [sys.executable, "-m", "kafka_spark.cli", "consume", "long", "--from-beginning", "-e", *target],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    first = [process.stdout.readline() for _ in range(3)]
    process.stdout.close()  # 2 MB of records do not fit a pipe: the consumer is still writing
    _, stderr = process.communicate(timeout=60)
    assert first == [b"%0100d\n" % i for i in range(3)]  # one partition (the broker default): in order
    assert process.returncode == 0 and b"Traceback" not in stderr, stderr
