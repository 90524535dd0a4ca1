"""The client-suites runner end to end at a small size: a two-test "kafka-python suite" (a git
repository made here, tagged as a release) run against pylog's broker and Apache Kafka, one test
passing on both and one passing on Kafka only. The full run is `python bench/client_suites.py
--source aiokafka=... --source kafka-python=... --source confluent-kafka-python=...`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.support.paths import BENCH

SCRIPT = BENCH / "client_suites.py"

# Tests the runner exports and runs as kafka-python's: they reach the broker through KAFKA_URI,
# as kafka-python's own integration tests do, and ask it for its API versions.
FAKE_TESTS = """
import os
import socket
import struct


def api_keys():
    host, port = os.environ["KAFKA_URI"].split("//")[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), 10) as sock:
        client = b"suite"
        body = struct.pack(">hhih", 18, 0, 1, len(client)) + client  # ApiVersions v0
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        frame = sock.recv(size, socket.MSG_WAITALL)
    _, error, count = struct.unpack_from(">ihi", frame)
    return {struct.unpack_from(">hhh", frame, 10 + 6 * i)[0] for i in range(count)}


def test_the_broker_serves_metadata():
    assert 3 in api_keys()


def test_the_broker_serves_delegation_tokens():
    assert 38 in api_keys()  # CreateDelegationToken: Kafka serves it, pylog does not
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_a_suite_runs_on_both_brokers_and_the_difference_is_named(tmp_path: Path):
    repo = tmp_path / "kafka-python"
    (repo / "test" / "integration").mkdir(parents=True)
    (repo / "test" / "integration" / "test_fake.py").write_text(FAKE_TESTS)
    (repo / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (repo / "kafka").mkdir()  # the client's package, which is never exported
    (repo / "kafka" / "__init__.py").write_text("raise ImportError('the installed client must be tested')\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "suite")
    git(repo, "tag", "1.0.0")
    work = tmp_path / "work"
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--source",
            f"kafka-python={repo}",
            "--work",
            str(work),
            "--no-install",
            "--repeat",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert re.search(r"^kafka-python [\d.]+ \(tests at 1\.0\.0\):$", out, re.MULTILINE), out
    assert re.search(r"^  pylog  1 passed, 1 failed, 0 error, 0 skipped", out, re.MULTILINE), out
    assert re.search(r"^  kafka  2 passed, 0 failed, 0 error, 0 skipped", out, re.MULTILINE), out
    assert "  1 test(s) differ:" in out
    assert (
        "    test.integration.test_fake::test_the_broker_serves_delegation_tokens: pylog failed, kafka passed"
        " | passed again: pylog 0/1, kafka 1/1"
    ) in out, out
    assert "      pylog: assert 38 in" in out, out
    report = json.loads((work / "report.json").read_text())
    assert report["kafka-python"]["differences"] == [
        "test.integration.test_fake::test_the_broker_serves_delegation_tokens"
    ]
    assert not (work / "kafka-python-1.0.0" / "kafka").exists()  # only the tests were exported
