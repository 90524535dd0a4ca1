"""Wakes long-polling fetches when data arrives (Fetch max_wait_ms / min_bytes)."""

from __future__ import annotations

import asyncio
import threading


class DataNotifier:
    """A broker-wide "something was appended" signal for parked fetches.

    Waiters re-check their own partitions after every wake-up, so one signal for all partitions
    is correct; it is also cheap at this broker's scale (tens of parked fetches). ``notify`` may
    be called from any thread; waiting happens on the broker's event loop.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._loop_thread: int | None = None
        self._waiters: set[asyncio.Future[None]] = set()

    def bind_thread(self) -> None:
        self._loop_thread = threading.get_ident()

    def notify(self) -> None:
        if threading.get_ident() == self._loop_thread:
            self._wake()
        else:
            self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, timeout: float) -> None:
        """Return when data is appended anywhere or ``timeout`` seconds pass."""
        if timeout <= 0:
            return
        waiter = self._loop.create_future()
        self._waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            pass
        finally:
            self._waiters.discard(waiter)
