"""The one shape of a Python worker's client pools: consumers, offset readers, producers.

PySpark reuses its Python workers across tasks, micro-batches and queries, so a client a task
made is still connected when the next task in that worker needs the same one: the executors
keep their consumers (kafka_spark.client.consumer_pool) and the at-least-once topic sink its
producers (kafka_spark.topics.task), and the planner worker its offset reader
(kafka_spark.client.offset_reader), as Spark's own ``KafkaDataConsumer`` and
``InternalKafkaProducerPool`` do. :class:`ClientPool` is what the three share:

- **borrowed and returned**: :meth:`ClientPool.acquire` hands a client out for a key (the
  settings that make two clients interchangeable), :meth:`ClientPool.release` gives it back.
  An *exclusive* pool (consumers: a consumer's position belongs to one reader) holds any number
  of idle clients per key and hands each to one borrower at a time; a *shared* pool (producers,
  offset readers) holds one client per key, which several borrowers may hold at once. A client
  given back with ``reusable=False`` (its task failed: a librdkafka producer with a fatal error
  fails every later produce) leaves the pool and is closed once nobody borrows it.
- **eviction**: a client nobody has borrowed for the pool's idle timeout is closed by the
  pool's evictor thread (kafka_spark.client.evictor, once a minute), as Spark's
  ``spark.kafka.consumer.cache.timeout``; an exclusive pool also closes its oldest idle clients
  past its capacity (``spark.kafka.consumer.cache.capacity``). A worker that no longer reads
  thus frees its clients' threads and connections.
- **close at exit**: the idle clients are closed when the worker exits, instead of leaving
  librdkafka's threads to die mid-request.
- **fork safety**: a child forked from a process whose pool holds clients forgets them (it does
  not close them: their threads and sockets are the parent's) and starts empty, with a lock of
  its own and its own evictor thread.

Thread-safe; clients are created and closed outside the pool's lock.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kafka_spark.client.evictor import INTERVAL_S, Evictor

__all__ = ["ClientPool"]

C = TypeVar("C")


@dataclass(eq=False)
class _Entry(Generic[C]):
    key: Hashable
    client: C
    borrowed: int = 0
    last_used: float = field(default_factory=time.monotonic)
    pooled: bool = True  # False once taken out (not reusable): closed when nobody borrows it


class ClientPool(Generic[C]):
    """Clients of one kind kept between uses in this process (see the module docstring).

    ``close`` closes one client; ``idle_timeout_s`` (seconds, or a function giving them at each
    eviction) is how long an unborrowed client is kept; ``capacity`` caps the idle clients of an
    exclusive pool; ``evict_interval_s`` is how often the evictor thread looks.
    """

    def __init__(
        self,
        name: str,
        close: Callable[[C], object],
        *,
        exclusive: bool,
        idle_timeout_s: float | Callable[[], float],
        capacity: int | Callable[[], int] | None = None,
        evict_interval_s: float = INTERVAL_S,
    ) -> None:
        self.name = name
        self.exclusive = exclusive
        self.evict_interval_s = evict_interval_s
        self._close = close
        self._idle_timeout_s = idle_timeout_s
        self._capacity = capacity
        self._lock = threading.Lock()
        self._idle: dict[Hashable, list[_Entry[C]]] = {}  # exclusive: unborrowed clients per key
        self._shared: dict[Hashable, _Entry[C]] = {}  # shared: the one client per key
        self._out: dict[int, _Entry[C]] = {}  # id(client) -> entry, while borrowed
        self.evictor = Evictor(f"pylog-{name}-evictor")
        #: When :meth:`evict_idle` last looked (``time.monotonic()``; 0 before the first time).
        self.last_eviction = 0.0
        reference = weakref.ref(self)
        atexit.register(_close_at_exit, reference)
        os.register_at_fork(after_in_child=lambda: _forget_after_fork(reference))

    # -- borrowing -------------------------------------------------------------------------------

    def acquire(self, key: Hashable, create: Callable[[], C], *, fresh: bool = False) -> C:
        """A client for ``key``: a pooled one if there is one, else ``create()``. ``fresh``
        closes the idle clients of ``key`` first (Spark's rule for a task retry: whatever
        failed the first attempt may live in them)."""
        self.evictor.ensure_running(weakref.WeakMethod(self.evict_idle), self.evict_interval_s)
        with self._lock:
            stale = self._expired_locked(time.monotonic())
            if fresh:
                stale += self._drop_key_locked(key)
            entry = self._take_locked(key)
        self._close_all(stale)
        if entry is None:
            client = create()
            with self._lock:
                entry = self._take_locked(key)  # another thread may have made one meanwhile
                if entry is None:
                    entry = _Entry(key, client)
                    if not self.exclusive:
                        self._shared[key] = entry
                    entry.borrowed = 1
                    self._out[id(client)] = entry
                    return client
            self._close_all([client])
        return entry.client

    def _take_locked(self, key: Hashable) -> _Entry[C] | None:
        if self.exclusive:
            idle = self._idle.get(key)
            if not idle:
                return None
            entry = idle.pop()
            if not idle:
                del self._idle[key]
        else:
            shared = self._shared.get(key)
            if shared is None:
                return None
            entry = shared
        entry.borrowed += 1
        self._out[id(entry.client)] = entry
        return entry

    def release(self, client: C, *, reusable: bool) -> None:
        """Give ``client`` back. ``reusable=False`` takes it out of the pool (its task failed);
        it is closed as soon as nobody borrows it. A client this pool did not hand out is
        ignored."""
        with self._lock:
            entry = self._out.get(id(client))
            if entry is None or entry.client is not client:
                return
            entry.borrowed -= 1
            entry.last_used = time.monotonic()
            if entry.borrowed == 0:
                del self._out[id(client)]
            if not reusable and entry.pooled:
                entry.pooled = False
                if not self.exclusive:
                    del self._shared[entry.key]
            closing = entry.borrowed == 0 and not entry.pooled
            if entry.borrowed == 0 and entry.pooled and self.exclusive:
                self._idle.setdefault(entry.key, []).append(entry)
        if closing:
            self._close_all([client])

    # -- eviction and closing --------------------------------------------------------------------

    def evict_idle(self) -> int:
        """Close the clients nobody has borrowed for the idle timeout (and, in an exclusive
        pool, the oldest idle ones past the capacity); how many were closed. The evictor thread
        calls it every ``evict_interval_s``."""
        with self._lock:
            self.last_eviction = now = time.monotonic()
            stale = self._expired_locked(now)
        self._close_all(stale)
        return len(stale)

    def close_idle(self) -> int:
        """Close every client nobody borrows (at the worker's exit, and in tests); how many."""
        with self._lock:
            idle = [e.client for entries in self._idle.values() for e in entries]
            idle += [e.client for e in self._shared.values() if e.borrowed == 0]
            self._idle.clear()
            self._shared = {key: e for key, e in self._shared.items() if e.borrowed > 0}
        self._close_all(idle)
        return len(idle)

    def __len__(self) -> int:
        """Clients the pool holds: an exclusive pool's idle ones, a shared pool's (borrowed or not)."""
        with self._lock:
            if self.exclusive:
                return sum(len(entries) for entries in self._idle.values())
            return len(self._shared)

    def _expired_locked(self, now: float) -> list[C]:
        timeout = self._idle_timeout_s() if callable(self._idle_timeout_s) else self._idle_timeout_s
        if not self.exclusive:
            expired = [e for e in self._shared.values() if e.borrowed == 0 and now - e.last_used > timeout]
            for entry in expired:
                del self._shared[entry.key]
            return [entry.client for entry in expired]
        stale: list[C] = []
        for key in list(self._idle):
            keep = [e for e in self._idle[key] if now - e.last_used <= timeout]
            stale += [e.client for e in self._idle[key] if now - e.last_used > timeout]
            if keep:
                self._idle[key] = keep
            else:
                del self._idle[key]
        capacity = self._capacity() if callable(self._capacity) else self._capacity
        if capacity is not None:
            pooled = sorted((e for entries in self._idle.values() for e in entries), key=lambda e: e.last_used)
            for entry in pooled[: max(0, len(pooled) - capacity)]:
                self._idle[entry.key].remove(entry)
                if not self._idle[entry.key]:
                    del self._idle[entry.key]
                stale.append(entry.client)
        return stale

    def _drop_key_locked(self, key: Hashable) -> list[C]:
        if self.exclusive:
            return [e.client for e in self._idle.pop(key, [])]
        entry = self._shared.get(key)
        if entry is None or entry.borrowed:
            return []
        del self._shared[key]
        return [entry.client]

    def _close_all(self, clients: list[C]) -> None:
        for client in clients:
            self._close(client)

    def _forget(self) -> None:
        """In a forked child: start empty, with a lock of its own (the parent's may have been
        held by another thread at the fork); the inherited clients are the parent's."""
        self._lock = threading.Lock()
        self._idle, self._shared, self._out = {}, {}, {}


def _close_at_exit(reference: weakref.ref[ClientPool]) -> None:
    pool = reference()
    if pool is not None:
        pool.close_idle()


def _forget_after_fork(reference: weakref.ref[ClientPool]) -> None:
    pool = reference()
    if pool is not None:
        pool._forget()
