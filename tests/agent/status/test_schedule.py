"""agent.status.schedule: due times, the coalescing window, the bus pause. No I/O, no sleeps."""

from __future__ import annotations

import asyncio
import math

from agent.status.schedule import Schedule

A, B, C = ("ns", "a"), ("ns", "b"), ("ns", "c")


async def test_a_tcp_is_due_at_once_or_after_its_window_and_is_not_moved_once_scheduled() -> None:
    s = Schedule(min_interval=60.0)
    now = asyncio.get_running_loop().time()
    s.add(A, last_publish=-math.inf)
    s.add(B, last_publish=now)
    assert s.wake.is_set()
    assert list(s.take()) == [A]
    assert not s.wake.is_set()  # cleared by the scan
    due_b = s.due[B]
    s.add(B, last_publish=-math.inf)
    assert s.due[B] == due_b and list(s.take()) == []


async def test_nothing_is_taken_while_paused_and_a_caller_stopping_early_leaves_the_rest() -> None:
    s = Schedule(min_interval=0.0)
    for key in (A, B, C):
        s.add(key, last_publish=-math.inf)
    s.pause(60.0)
    assert list(s.take()) == []
    s.paused_until = 0.0
    for key in s.take():
        assert key == A
        break
    assert sorted(s.due) == [B, C]


async def test_wait_ends_when_something_is_scheduled() -> None:
    s = Schedule(min_interval=0.0)
    list(s.take())
    waiting = asyncio.create_task(s.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    s.add(A, last_publish=-math.inf)
    await asyncio.wait_for(waiting, 5)
