"""`pylog` as a user runs it: broker start in the foreground, topics, produce, consume."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

from tests.support.cli_run import pylog
from tests.support.paths import BENCH


def test_topics_produce_consume_round_trip_through_the_cli(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    assert (
        b"Created topic events"
        in pylog("topics", "create", "events", "--partitions", "3", "--bootstrap-server", bootstrap, env=env).stdout
    )
    assert b"events" in pylog("topics", "list", "--bootstrap-server", bootstrap, env=env).stdout.split()
    lines = b"".join(b"user-%d:clicked-%d\n" % (i % 5, i) for i in range(200))
    pylog("produce", "events", "--key-separator", ":", "--bootstrap-server", bootstrap, env=env, stdin=lines)
    out = pylog(
        "consume",
        "events",
        "--from-beginning",
        "--max-messages",
        "200",
        "--print-key",
        "--key-separator",
        ":",
        "--bootstrap-server",
        bootstrap,
        env=env,
    )
    assert sorted(out.stdout.splitlines()) == sorted(lines.splitlines())
    assert b"Processed a total of 200 messages" in out.stderr
    described = pylog("topics", "describe", "events", "--bootstrap-server", bootstrap, env=env).stdout.decode()
    assert "PartitionCount: 3" in described
    end_offsets = [int(n) for n in re.findall(r"LogEndOffset: (\d+)", described)]
    assert len(end_offsets) == 3 and sum(end_offsets) == 200
    pylog("topics", "delete", "events", "--bootstrap-server", bootstrap, env=env)
    assert b"events" not in pylog("topics", "list", "--bootstrap-server", bootstrap, env=env).stdout.split()


def test_client_commands_find_the_local_broker_without_bootstrap_server(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    status = pylog("broker", "status", env=env)
    assert bootstrap in status.stdout.decode()
    pylog("topics", "create", "local", env=env)
    assert b"local" in pylog("topics", "list", env=env).stdout.split()


def test_errors_are_one_clear_line(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    result = pylog("topics", "describe", "missing", "--bootstrap-server", bootstrap, env=env, check=False)
    assert result.returncode == 1
    assert b"does not exist" in result.stderr
    result = pylog("topics", "create", "dup", "--bootstrap-server", bootstrap, env=env)
    result = pylog("topics", "create", "dup", "--bootstrap-server", bootstrap, env=env, check=False)
    assert result.returncode == 1 and b"already exists" in result.stderr.lower()


def test_broker_shuts_down_cleanly_on_sigterm(running_broker):
    process, env = running_broker.process, running_broker.env
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    assert "broker stopped" in running_broker.stderr_text()
    status = pylog("broker", "status", env=env, check=False)
    assert status.returncode == 1  # unregistered on shutdown


def test_no_broker_and_no_bootstrap_server_is_explained(tmp_path):
    env = dict(os.environ, PYLOG_HOME=str(tmp_path / "empty-home"))
    result = pylog("topics", "list", env=env, check=False)
    assert result.returncode == 1
    assert b"pylog broker start" in result.stderr and b"--bootstrap-server" in result.stderr


def test_produce_and_consume_show_progress_and_end_with_rates(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    lines = b"".join(b"event-%d\n" % i for i in range(3000))
    produced = pylog("produce", "rated", "--progress", "--bootstrap-server", bootstrap, env=env, stdin=lines)
    assert re.search(rb"producing: .*3000.*msg", produced.stderr)
    assert re.search(rb"Produced 3000 messages to rated in [\d.]+s \([\d,]+ msg/s\)", produced.stderr)
    consumed = pylog(
        "consume",
        "rated",
        "--from-beginning",
        "--max-messages",
        "3000",
        "--progress",
        "--bootstrap-server",
        bootstrap,
        env=env,
    )
    assert re.search(rb"consuming: 100%.*3000/3000", consumed.stderr)
    assert re.search(rb"Processed a total of 3000 messages in [\d.]+s \([\d,]+ msg/s\)", consumed.stderr)


def test_topics_alter_adds_partitions_and_changes_configs(running_broker):
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    pylog(
        "topics",
        "create",
        "grow",
        "--partitions",
        "2",
        "--config",
        "retention.ms=3600000",
        "--bootstrap-server",
        bootstrap,
        env=env,
    )
    described = pylog("topics", "describe", "grow", "--bootstrap-server", bootstrap, env=env).stdout.decode()
    assert "PartitionCount: 2\tConfigs: retention.ms=3600000" in described
    out = pylog(
        "topics",
        "alter",
        "grow",
        "--partitions",
        "4",
        "--config",
        "cleanup.policy=compact",
        "--delete-config",
        "retention.ms",
        "--bootstrap-server",
        bootstrap,
        env=env,
    ).stdout.decode()
    assert "has 4 partitions now" in out and "Altered the configs" in out
    described = pylog("topics", "describe", "grow", "--bootstrap-server", bootstrap, env=env).stdout.decode()
    assert "PartitionCount: 4\tConfigs: cleanup.policy=compact" in described
    assert len(re.findall(r"Partition: \d", described)) == 4
    result = pylog(
        "topics", "alter", "grow", "--partitions", "3", "--bootstrap-server", bootstrap, env=env, check=False
    )
    assert result.returncode == 1 and b"must be above" in result.stderr
    result = pylog(
        "topics",
        "alter",
        "grow",
        "--config",
        "retention.ms=soon",
        "--bootstrap-server",
        bootstrap,
        env=env,
        check=False,
    )
    assert result.returncode == 1 and b"retention.ms" in result.stderr


def test_describe_works_against_a_cluster_that_does_not_describe_configs(tmp_path):
    """librdkafka's mock cluster never answers DescribeConfigs: the partitions are still
    described, and the configs are marked unavailable, after the 10 s request timeout."""
    sys.path.insert(0, str(BENCH))
    from _harness import mock_cluster
    from confluent_kafka import Producer

    env = dict(os.environ, PYLOG_HOME=str(tmp_path / "home"))
    with mock_cluster() as mock:
        producer = Producer({"bootstrap.servers": mock})
        producer.produce("elsewhere", b"x", partition=0)
        assert producer.flush(10) == 0
        described = pylog("topics", "describe", "elsewhere", "--bootstrap-server", mock, env=env).stdout.decode()
    assert "Configs: (not available: " in described
    assert "Partition: 0" in described and "LogEndOffset: 1" in described


def test_if_exists_and_if_not_exists_make_scripts_idempotent(running_broker):
    """kafka-topics' --if-not-exists / --if-exists: setup and teardown scripts that run twice."""
    bootstrap, env = running_broker.bootstrap_servers, running_broker.env
    target = ("--bootstrap-server", bootstrap)
    assert b"Created topic setup" in pylog("topics", "create", "setup", "--partitions", "2", *target, env=env).stdout
    again = pylog("topics", "create", "setup", "--partitions", "2", "--if-not-exists", *target, env=env)
    assert again.returncode == 0 and again.stdout == b""
    refused = pylog("topics", "create", "setup", *target, env=env, check=False)
    assert refused.returncode == 1 and b"already exists" in refused.stderr.lower()

    assert b"Deleted topic setup" in pylog("topics", "delete", "setup", *target, env=env).stdout
    for command in (["delete", "setup"], ["describe", "setup"], ["alter", "setup", "--partitions", "3"]):
        quiet = pylog("topics", *command, "--if-exists", *target, env=env)
        assert quiet.returncode == 0 and quiet.stdout == b"", command
        loud = pylog("topics", *command, *target, env=env, check=False)
        assert loud.returncode == 1 and b"setup" in loud.stderr, command
    assert b"setup" not in pylog("topics", "list", *target, env=env).stdout.split()  # --if-exists created nothing


def test_an_address_where_nothing_listens_fails_fast_in_one_line(tmp_path):
    env = dict(os.environ, PYLOG_HOME=str(tmp_path / "home"))
    commands = [
        ["topics", "list"],
        ["topics", "describe", "t"],
        ["topics", "create", "t"],
        ["groups", "list"],
        ["groups", "describe", "g"],
        ["produce", "t"],
        ["consume", "t"],
        ["acls", "list"],
    ]
    started = time.monotonic()
    running = [
        subprocess.Popen(
            [sys.executable, "-m", "kafka_spark.cli", *command, "--bootstrap-server", "127.0.0.1:1"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        for command in commands
    ]  # side by side: each mostly waits for the address to answer
    for command, process in zip(commands, running, strict=True):
        _, stderr_bytes = process.communicate(b"a record\n", timeout=120)
        stderr = stderr_bytes.decode()
        assert process.returncode == 1, (command, stderr)
        assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, (command, stderr)
        assert "127.0.0.1:1" in stderr and "connection refused" in stderr and "--bootstrap-server" in stderr, stderr
    elapsed = time.monotonic() - started
    assert elapsed < 25, f"took {elapsed:.0f}s"  # a sanity bound only; each command gives up after about 5 s


def test_an_address_that_accepts_connections_but_never_answers_fails_as_fast_in_one_line(tmp_path):
    env = dict(os.environ, PYLOG_HOME=str(tmp_path / "home"))
    commands = [["topics", "list"], ["produce", "t"], ["consume", "t"], ["groups", "list"]]
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; nothing ever answers
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        running = [
            subprocess.Popen(
                [sys.executable, "-m", "kafka_spark.cli", *command, "--bootstrap-server", address],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
            for command in commands
        ]
        for command, process in zip(commands, running, strict=True):
            _, stderr_bytes = process.communicate(b"a record\n", timeout=120)
            stderr = stderr_bytes.decode()
            assert process.returncode == 1, (command, stderr)
            assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, (command, stderr)
            assert f"no Kafka broker reachable at {address}" in stderr and "no answer to a Kafka request" in stderr, (
                stderr
            )
            assert "--bootstrap-server" in stderr, stderr
        elapsed = time.monotonic() - started
    assert elapsed < 25, f"took {elapsed:.0f}s"  # a sanity bound only (librdkafka's own wait is 30 s per request)
