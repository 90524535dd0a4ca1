"""The suite's one polling loop (waiting.py): it returns the condition's first true value, and
fails naming what it waited for, with the state a callable description shows at that moment."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.support.waiting import async_wait_until, wait_until


def test_wait_until_returns_the_first_true_value_of_the_condition():
    calls = itertools.count()
    assert wait_until(lambda: [n for n in [next(calls)] if n >= 3], "the third call", interval=0) == [3]


def test_wait_until_fails_naming_what_it_waited_for_with_the_state_at_the_deadline():
    state = {"polled": 0}

    def never() -> bool:
        state["polled"] += 1
        return False

    with pytest.raises(AssertionError, match=r"not within 0\.2 s: the impossible, polled \d+ times") as failure:
        wait_until(never, lambda: f"the impossible, polled {state['polled']} times", timeout=0.2, interval=0.01)
    assert f"polled {state['polled']} times" in str(failure.value)  # described after the last call
    assert state["polled"] > 2


def test_async_wait_until_awaits_a_coroutine_condition_and_lets_the_loop_run():
    async def run() -> int:
        ticks: list[int] = []

        async def ticker() -> None:
            for n in range(5):
                ticks.append(n)
                await asyncio.sleep(0)

        task = asyncio.get_running_loop().create_task(ticker())

        async def ticked() -> int:
            return len(ticks) if len(ticks) == 5 else 0

        found = await async_wait_until(ticked, "five ticks", timeout=10, interval=0.01)
        await task
        return found

    assert asyncio.run(run()) == 5
