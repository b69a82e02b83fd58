"""common.aiotasks: ``Group`` runs tasks together and stops every one, waiting for each;
``wait_event`` never swallows a cancellation (CPython gh-86296 in 3.11's ``asyncio.wait_for``:
the Kamaji simulator's workers ran on after ``stop()`` cancelled them when a watch event woke
them at the same moment, and the test teardown waiting for them hung)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

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


class Recorder:
    """Tasks that say when they start, and when they end by cancellation."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[str] = []
        self.crashes = 0
        self.all_started = asyncio.Event()
        self.one_ended = asyncio.Event()

    def forever(self, name: str, *, expected: int) -> Callable[[], Coroutine[Any, Any, None]]:
        async def run() -> None:
            self.started.append(name)
            if len(self.started) >= expected:
                self.all_started.set()
            try:
                await asyncio.Event().wait()
            finally:
                self.ended.append(name)
                self.one_ended.set()

        return run

    def crashing_once(self, name: str) -> Callable[[], Coroutine[Any, Any, None]]:
        async def run() -> None:
            self.started.append(name)
            if self.crashes == 0:
                self.crashes += 1
                raise RuntimeError("a bug")
            self.all_started.set()
            await asyncio.Event().wait()

        return run


async def test_a_group_stops_every_task_and_waits_for_it() -> None:
    r = Recorder()
    group = aiotasks.Group()
    group.supervise("a", r.forever("a", expected=2))
    group.spawn("b", r.forever("b", expected=2))
    await asyncio.wait_for(r.all_started.wait(), 10)
    assert group.names() == {"a", "b"}
    await group.stop()
    assert sorted(r.ended) == ["a", "b"] and group.names() == set()


async def test_a_task_cancelled_by_name_is_waited_for_by_stop() -> None:
    r = Recorder()
    group = aiotasks.Group()
    group.supervise("a", r.forever("a", expected=2))
    group.supervise("b", r.forever("b", expected=2))
    await asyncio.wait_for(r.all_started.wait(), 10)
    group.cancel("a")
    assert "a" not in group and "b" in group
    await group.stop()
    assert sorted(r.ended) == ["a", "b"]


async def test_a_supervised_task_that_crashes_starts_again() -> None:
    r = Recorder()
    group = aiotasks.Group()
    group.supervise("c", r.crashing_once("c"), max_backoff=0.01)
    await asyncio.wait_for(r.all_started.wait(), 10)
    assert r.started == ["c", "c"]
    await group.stop()


async def test_run_stops_every_task_when_its_caller_is_cancelled() -> None:
    r = Recorder()
    group = aiotasks.Group()
    group.supervise("a", r.forever("a", expected=1))
    running = asyncio.create_task(group.run())
    await asyncio.wait_for(r.all_started.wait(), 10)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert r.ended == ["a"] and group.names() == set()


async def idle() -> None:
    await asyncio.Event().wait()


def test_a_name_runs_once() -> None:
    async def main() -> None:
        group = aiotasks.Group()
        group.supervise("a", idle)
        with pytest.raises(ValueError, match="a task named 'a' runs already"):
            group.supervise("a", idle)
        await group.stop()

    asyncio.run(main())


async def test_a_task_cancelled_by_name_leaves_a_running_group_running() -> None:
    r = Recorder()
    group = aiotasks.Group()
    group.supervise("a", r.forever("a", expected=2))
    group.supervise("b", r.forever("b", expected=2))
    running = asyncio.create_task(group.run())
    await asyncio.wait_for(r.all_started.wait(), 10)
    group.cancel("a")
    await asyncio.wait_for(r.one_ended.wait(), 10)
    assert r.ended == ["a"]
    assert not running.done() and group.names() == {"b"}
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert r.ended == ["a", "b"]


async def test_two_stops_at_once_both_wait_for_every_task() -> None:
    r = Recorder()
    group = aiotasks.Group()
    group.supervise("a", r.forever("a", expected=1))
    await asyncio.wait_for(r.all_started.wait(), 10)
    first = asyncio.create_task(group.stop())
    await asyncio.sleep(0)  # the first stop has cancelled "a" and waits for it
    await group.stop()
    assert r.ended == ["a"]  # the second returned only once "a" had ended
    await first


async def test_run_raises_a_failing_task_s_error_and_stops_the_others() -> None:
    r = Recorder()
    group = aiotasks.Group()
    group.supervise("a", r.forever("a", expected=1))

    async def failing() -> None:
        await r.all_started.wait()
        raise RuntimeError("broken")

    group.spawn("b", failing)
    with pytest.raises(RuntimeError, match="broken"):
        await asyncio.wait_for(group.run(), 10)
    assert r.ended == ["a"] and group.names() == set()
