"""common.aiotasks.wait_event: a cancellation is never swallowed (CPython gh-86296 in 3.11's
``asyncio.wait_for``: the Kamaji simulator's workers ran on after ``stop()`` cancelled them when a
watch event woke them at the same moment, and the test teardown waiting for them hung)."""

from __future__ import annotations

import asyncio

import pytest

from common import aiotasks


async def _waiting(event: asyncio.Event, timeout: float | None) -> asyncio.Task[bool]:
    task = asyncio.create_task(aiotasks.wait_event(event, timeout))
    await asyncio.sleep(0)  # one turn of the loop: the task is now awaiting the event (no timing)
    return task


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_a_cancellation_as_the_event_is_set_is_not_swallowed(timeout: float | None) -> None:
    event = asyncio.Event()
    task = await _waiting(event, timeout)
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_set_returns_true_and_a_timeout_false() -> None:
    event = asyncio.Event()
    assert await aiotasks.wait_event(event, 0.01) is False
    task = await _waiting(event, 30.0)
    event.set()
    assert await task is True


async def test_keyed_locks_serialise_one_key_and_let_others_run() -> None:
    locks = aiotasks.KeyedLocks()
    order: list[str] = []
    a_inside = asyncio.Event()
    release_a = asyncio.Event()

    async def first_a() -> None:
        async with locks.hold("a"):
            order.append("a1 in")
            a_inside.set()
            await release_a.wait()
            order.append("a1 out")

    async def second(key: str) -> None:
        async with locks.hold(key):
            order.append(f"{key}2 in")

    holder = asyncio.create_task(first_a())
    await a_inside.wait()
    waiting_a = asyncio.create_task(second("a"))
    await second("b")  # another key is not held up by "a"
    assert order == ["a1 in", "b2 in"]
    assert len(locks) == 1  # "b" dropped once released; "a" held and awaited
    release_a.set()
    await asyncio.gather(holder, waiting_a)
    assert order == ["a1 in", "b2 in", "a1 out", "a2 in"]
    assert len(locks) == 0
