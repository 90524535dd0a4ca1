"""The one pool shape (kafka_spark.client.pool.ClientPool) behind the consumers, offset readers
and producers a Python worker keeps: exclusive and shared borrowing, no reuse after a failure,
eviction by idle time and capacity, closing at exit, and a forked child that starts empty.

The clients here are plain objects that record their closing: what is tested is the pool's
bookkeeping. The pools with real clients are tested in tests/read/test_partition.py (consumers),
tests/client/test_offset_reader_pool.py and tests/topics/test_producer_pool.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from kafka_spark.client.pool import ClientPool
from tests.support.paths import ROOT
from tests.support.waiting import wait_until


class Client:
    made = 0

    def __init__(self) -> None:
        Client.made += 1
        self.number = Client.made
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def pool(exclusive: bool, **options) -> ClientPool[Client]:
    options.setdefault("idle_timeout_s", 600.0)
    return ClientPool("test", Client.close, exclusive=exclusive, **options)


def test_an_exclusive_pool_hands_each_client_to_one_borrower_and_keeps_it_for_the_next():
    consumers = pool(exclusive=True)
    first = consumers.acquire("orders-0", Client)
    second = consumers.acquire("orders-0", Client)  # the first is out: another one
    assert first is not second and len(consumers) == 0  # only idle clients count
    consumers.release(first, reusable=True)
    consumers.release(second, reusable=True)
    assert len(consumers) == 2
    assert consumers.acquire("orders-0", Client) in (first, second)
    assert consumers.acquire("orders-1", Client) not in (first, second)  # another key


def test_a_shared_pool_hands_its_one_client_to_every_borrower():
    producers = pool(exclusive=False)
    first = producers.acquire("config", Client)
    assert producers.acquire("config", Client) is first and len(producers) == 1
    producers.release(first, reusable=True)
    producers.release(first, reusable=True)
    assert producers.acquire("config", Client) is first


def test_a_client_given_back_after_a_failure_is_closed_once_nobody_borrows_it_and_not_reused():
    producers = pool(exclusive=False)
    failed = producers.acquire("config", Client)
    producers.acquire("config", Client)  # a second task holds it too
    producers.release(failed, reusable=False)
    assert len(producers) == 0 and failed.closed == 0  # still borrowed by the other task
    fresh = producers.acquire("config", Client)
    assert fresh is not failed
    producers.release(failed, reusable=True)  # the other task is done with it
    assert failed.closed == 1
    consumers = pool(exclusive=True)
    broken = consumers.acquire("orders-0", Client)
    consumers.release(broken, reusable=False)
    assert broken.closed == 1 and len(consumers) == 0


def test_eviction_closes_the_unborrowed_clients_idle_past_the_timeout_and_the_oldest_past_the_capacity():
    timeout = [600.0]
    consumers = pool(exclusive=True, idle_timeout_s=lambda: timeout[0], capacity=2)
    clients = [consumers.acquire(f"orders-{n}", Client) for n in range(3)]
    for client in clients:
        consumers.release(client, reusable=True)
    assert consumers.evict_idle() == 1 and clients[0].closed == 1  # the oldest, past the capacity of 2
    borrowed = consumers.acquire("orders-9", Client)
    timeout[0] = 0.0
    time.sleep(0.01)
    assert consumers.evict_idle() == 2 and len(consumers) == 0
    assert borrowed.closed == 0  # borrowed: never evicted
    shared = pool(exclusive=False, idle_timeout_s=0.0)
    held = shared.acquire("config", Client)
    assert shared.evict_idle() == 0 and held.closed == 0
    shared.release(held, reusable=True)
    time.sleep(0.01)
    assert shared.evict_idle() == 1 and held.closed == 1 and len(shared) == 0


def test_a_retry_closes_the_idle_clients_of_its_key_first():
    consumers = pool(exclusive=True)
    old = consumers.acquire("orders-0", Client)
    consumers.release(old, reusable=True)
    retried = consumers.acquire("orders-0", Client, fresh=True)
    assert retried is not old and old.closed == 1


def test_the_evictor_thread_evicts_without_a_next_use():
    consumers = pool(exclusive=True, idle_timeout_s=0.0, evict_interval_s=0.05)
    client = consumers.acquire("orders-0", Client)
    consumers.release(client, reusable=True)
    assert consumers.evictor.running()
    wait_until(lambda: client.closed, "the evictor to close the idle client", interval=0.01)
    assert len(consumers) == 0


def test_a_forked_child_starts_with_an_empty_pool_and_leaves_the_parents_clients_alone():
    consumers = pool(exclusive=True)
    client = consumers.acquire("orders-0", Client)
    consumers.release(client, reusable=True)
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status
        fine = len(consumers) == 0 and consumers.acquire("orders-0", Client) is not client and client.closed == 0
        os._exit(0 if fine else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(consumers) == 1 and client.closed == 0  # the parent's pool is untouched


def test_the_idle_clients_are_closed_when_the_process_exits(tmp_path):
    closed = tmp_path / "closed"
    script = f"""
from kafka_spark.client.pool import ClientPool

class Client:
    def close(self):
        with open({str(closed)!r}, "a") as out:
            out.write("closed\\n")

pool = ClientPool("exit", Client.close, exclusive=True, idle_timeout_s=600.0)
idle = pool.acquire("k", Client)
pool.release(idle, reusable=True)
pool.acquire("k2", Client)  # borrowed at exit: its task still runs it, nobody closes it here
"""
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, timeout=60)
    assert closed.read_text() == "closed\n"
