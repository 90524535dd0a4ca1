"""The suite's check that nothing outlives its test (leaks.py), run on tests of its own in a
pytest of their own: it fails each test that leaves a librdkafka client, a thread, a listening
socket or a child process running, naming what was left, and passes the tests that close what
they started; a client that only a reference cycle keeps is freed, not reported."""

from __future__ import annotations

import re
import textwrap

from tests.support.paths import ROOT

TESTS = """
    import gc
    import os
    import socket
    import subprocess
    import sys
    import threading

    import pytest
    from confluent_kafka import Producer

    CONFIG = {"bootstrap.servers": "127.0.0.1:9", "log_level": 0}
    kept = []  # what the leaking tests leave behind, alive until the run ends

    def test_closes_its_client_thread_server_and_process():
        producer = Producer(CONFIG)
        producer.flush(0)
        del producer
        stop = threading.Event()
        thread = threading.Thread(target=stop.wait, name="worker")
        thread.start()
        stop.set()
        thread.join()
        with socket.create_server(("127.0.0.1", 0)):
            pass
        subprocess.run([sys.executable, "-c", "pass"], check=True)

    def test_leaves_a_client_in_a_reference_cycle_which_the_check_frees():
        gc.disable()  # only the check may collect it
        cycle = [Producer(CONFIG)]
        cycle.append(cycle)

    def test_the_cycles_client_is_gone():
        gc.enable()
        tasks = os.listdir("/proc/self/task")
        assert not [t for t in tasks if open(f"/proc/self/task/{t}/comm").read().startswith("rdk:")]

    def test_leaves_a_client():
        kept.append(Producer(CONFIG))

    def test_leaves_a_thread():
        stop = threading.Event()
        kept.append(stop)
        threading.Thread(target=stop.wait, name="forgotten-worker", daemon=True).start()

    def test_leaves_a_listening_socket():
        server = socket.create_server(("127.0.0.1", 0))
        kept.append(server)

    def test_leaves_a_child_process():
        kept.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]))

    def test_zz_cleans_up():  # the leftovers go, so that the run itself ends cleanly
        for item in kept:
            for end in ("set", "close", "kill"):
                if hasattr(item, end):
                    getattr(item, end)()
            if hasattr(item, "wait"):
                item.wait()
        kept.clear()
"""


def test_the_leak_check_fails_each_test_that_leaves_something_running_and_passes_a_clean_one(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    pytester.makeconftest(
        "from tests.support import leaks\n"
        "from tests.support.leaks import no_leaks  # noqa: F401\n"
        "leaks.SETTLE_S = 0.5  # what these tests leave never ends: no need to wait long\n"
    )
    pytester.makepyfile(test_leaky=textwrap.dedent(TESTS))
    result = pytester.runpytest_subprocess("-ra", "-p", "no:cacheprovider", "-p", "no:pylog", timeout=300)
    result.assert_outcomes(passed=8, errors=4)
    # each error's own section (the "-ra" summary repeats it, cut or not to the terminal's width)
    failed = re.compile(r"^test_leaky\.py::(\w+) left running after it ended: ")
    errors = {match.group(1): line for line in result.outlines if (match := failed.match(line))}
    assert set(errors) == {
        "test_leaves_a_client",
        "test_leaves_a_thread",
        "test_leaves_a_listening_socket",
        "test_leaves_a_child_process",
    }, result.outlines
    assert "librdkafka client thread(s) (a client not closed)" in errors["test_leaves_a_client"]
    assert "thread(s) 'forgotten-worker'" in errors["test_leaves_a_thread"]
    assert "listening socket(s) 127.0.0.1:" in errors["test_leaves_a_listening_socket"]
    assert "child process(es)" in errors["test_leaves_a_child_process"]
