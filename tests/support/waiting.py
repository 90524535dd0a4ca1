"""Waiting for a condition in a test: the suite's one polling loop.

Tests never sleep a fixed time for something to happen, and never assert how long it took: they
poll for the condition with a generous deadline, so a run on a machine at ten times the load
takes longer instead of failing. The deadline is a liveness bound (something that should happen
in milliseconds has not happened in a minute), not a performance figure.

``condition`` may do work on each call (consume a batch, send a request): whatever it returns is
judged by its truth, and the first true value is returned, so a loop that collects until it has
enough is written as a condition that collects and says whether it has enough.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["async_wait_until", "wait_until"]

T = TypeVar("T")

#: What a test waits for by default: a minute, for things that take milliseconds on a quiet machine.
TIMEOUT_S = 60.0


def _describe(what: str | Callable[[], object]) -> str:
    return str(what() if callable(what) else what)


def wait_until(
    condition: Callable[[], T],
    what: str | Callable[[], object],
    timeout: float = TIMEOUT_S,
    interval: float = 0.05,
) -> T:
    """Call ``condition`` until it returns a true value, and return that value.

    Fails the test with an AssertionError naming ``what`` (a string, or a callable evaluated only
    then, to show the state that did not converge) if ``timeout`` seconds pass first. The
    condition is always called once more after the last sleep, so a state reached while the
    poller slept past the deadline still counts.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout:g} s: {_describe(what)}")
        time.sleep(interval)


async def async_wait_until(
    condition: Callable[[], T | Awaitable[T]],
    what: str | Callable[[], object],
    timeout: float = TIMEOUT_S,
    interval: float = 0.05,
) -> T:
    """:func:`wait_until` for a coroutine: sleeps with ``asyncio.sleep``, so the event loop (an
    aiokafka client's) keeps running while it waits. ``condition`` may return an awaitable."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return value  # type: ignore[return-value]  # the awaited value, no longer an Awaitable
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout:g} s: {_describe(what)}")
        await asyncio.sleep(interval)
