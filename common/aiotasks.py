"""Long-lived tasks that never die of a bug: supervised, restarted with backoff, logged; and
one lock per key for work that may run concurrently except on the same object.

Each loop of hub and agent handles its expected errors itself; ``supervise`` is the last line,
so an unexpected exception costs a log line and a restart, never the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable

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
