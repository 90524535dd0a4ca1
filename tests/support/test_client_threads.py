"""The suite's guard against clients outliving their test (client_threads.py): a client kept
alive only by a reference cycle is destroyed by it, and one still referenced is left alone."""

from __future__ import annotations

import gc
import socket

from confluent_kafka import Producer

from tests.support.client_threads import free_clients_left_behind, librdkafka_threads


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_client_only_a_reference_cycle_keeps_is_destroyed_and_a_referenced_one_is_not():
    before = librdkafka_threads()
    config = {"bootstrap.servers": f"127.0.0.1:{_closed_port()}", "log_level": 0}
    gc.disable()  # the collector must not run on its own while the cycle is built and checked
    try:
        kept = Producer(config)
        cycle: list = [Producer(config)]
        cycle.append(cycle)
        del cycle
        left = librdkafka_threads()
        assert left > before  # both clients' threads still run: the cycle kept its client
        free_clients_left_behind(before)
        remaining = librdkafka_threads()
        assert before < remaining < left  # the cycle's client is gone, the referenced one is not
        del kept
        assert librdkafka_threads() == before  # destroyed at once: its threads end with it
        free_clients_left_behind(before)  # nothing left to do
    finally:
        gc.enable()
