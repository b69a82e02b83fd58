"""Long-lived tasks that never die of a bug: supervised, restarted with backoff, logged; run
together as a ``Group``; and one lock per key for work that may run concurrently except on the
same object.

Each loop of hub and agent handles its expected errors itself; ``supervise`` is the last line,
so an unexpected exception costs a log line and a restart, never the process. ``Group`` is the
one way tasks are run together: named, added and removed by name, stopped together (cancelled,
then waited for), so no task outlives what started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Hashable
from typing import Any

from common import backoff

log = logging.getLogger(__name__)


async def supervise(name: str, run: Callable[[], Awaitable[None]], *, max_backoff: float = 30.0) -> None:
    failures = 0
    while True:
        try:
            await run()
            log.warning("%s returned; restarting it", name)
            failures = 0
        except asyncio.CancelledError:
            raise
        except Exception:
            failures += 1
            log.exception("%s crashed (%d in a row); restarting it", name, failures)
        await asyncio.sleep(backoff.delay(failures + 1, base=0.5, cap=max_backoff))


class Group:
    """Named tasks run together: each supervised (restarted after a crash) or, with ``spawn``,
    left to handle its own errors. ``run`` waits for them and stops them all when it ends;
    ``stop`` cancels every one and waits until each has ended."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._ending: set[asyncio.Task[None]] = set()
        """Tasks cancelled by name and not yet ended: ``stop`` waits for them too."""

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def names(self) -> set[str]:
        return set(self._tasks)

    def supervise(self, name: str, run: Callable[[], Awaitable[None]], *, max_backoff: float = 30.0) -> None:
        """Start ``run`` as task ``name``, restarted with backoff whenever it crashes or returns."""
        self._add(name, supervise(name, run, max_backoff=max_backoff))

    def spawn(self, name: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Start ``run`` as task ``name``, not restarted: it handles its own errors."""
        self._add(name, run())

    def _add(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        if name in self._tasks:
            coro.close()
            raise ValueError(f"a task named {name!r} runs already")
        self._tasks[name] = asyncio.create_task(coro, name=name)

    def cancel(self, name: str) -> None:
        """Cancel task ``name``; it ends on its own time (``stop`` waits for it too)."""
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)

    async def run(self) -> None:
        """Until the caller is cancelled or a task fails (its error is raised here); a task that
        returns or is cancelled by name just leaves the group. Then every task is stopped."""
        try:
            while self._tasks:
                await asyncio.wait(set(self._tasks.values()), return_when=asyncio.FIRST_COMPLETED)
                for name, task in list(self._tasks.items()):
                    if task.done():
                        del self._tasks[name]
                        if not task.cancelled() and (error := task.exception()) is not None:
                            raise error
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Cancel every task and wait until each has ended; a second ``stop`` meanwhile waits
        for the same tasks."""
        for name in list(self._tasks):
            self.cancel(name)
        while self._ending:
            await asyncio.gather(*self._ending, return_exceptions=True)


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds pass (None: forever); True if set.

    Not ``asyncio.wait_for(event.wait(), timeout)``: on Python 3.11 it swallows a cancellation
    that arrives just as the event is set (CPython gh-86296, fixed in 3.12), so a cancelled loop
    runs on and whatever stops it by cancel-and-wait hangs. ``asyncio.timeout`` tells the two
    apart.
    """
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True


class KeyedLocks:
    """One lock per key, held by whoever works on that key; kept only while held or awaited."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
