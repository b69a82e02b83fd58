"""hub.controllers.queue: a worker that takes key after key lets the rest of the event loop run."""

from __future__ import annotations

import asyncio

from hub.controllers.queue import WorkQueue


async def test_a_worker_taking_due_keys_lets_the_rest_of_the_loop_run() -> None:
    queue: WorkQueue[int] = WorkQueue()
    for key in range(100):
        queue.add(key)
    turns = 0

    async def elsewhere() -> None:  # a heartbeat delivered, a watch event: anything else waiting
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(elsewhere())
    try:
        for _ in range(100):
            key = await queue.get()
            queue.done(key)  # a reconcile with nothing to write: it never waits
        assert len(queue) == 0
        assert turns >= 99  # one turn of the rest per key taken, not none until the queue is empty
    finally:
        other.cancel()
        await asyncio.gather(other, return_exceptions=True)
