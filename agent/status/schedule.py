"""The status loop's schedule: which TCPs are due for a sync, from when, and a pause for a failing bus.

Owns the due times (loop time) and the event that wakes the publishing task. A TCP is synced
at most once per ``min_interval`` after its last publish; a TCP already scheduled is not moved
(its sync reads the cache when it runs, so it sees the news). While the bus fails, every sync
pauses, not only the failing TCP's. Talks to nothing but the event loop's clock.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator

from common import aiotasks, backoff
from common.objects import Key

_BACKOFF_BASE = 0.5
_BACKOFF_CAP = 30.0


def retry_delay(failures: int) -> float:
    """Seconds before a failed sync is tried again, after ``failures`` failures in a row."""
    # Jitter, so that many agents that lost NATS together do not come back in step.
    return backoff.delay(failures, base=_BACKOFF_BASE, cap=_BACKOFF_CAP)


class Schedule:
    """The due TCPs and the bus pause; the publishing task waits on it (``wait``) and takes from it."""

    def __init__(self, min_interval: float) -> None:
        self.min_interval = min_interval
        """Seconds: at most one publish per TCP per window; the last state goes out after it."""
        self.due: dict[Key, float] = {}
        """TCPs to sync, with the loop time from which they may be synced."""
        self.wake = asyncio.Event()
        self.failures = 0
        """Rounds of syncs the bus failed in a row (``StatusLoop._sync_many`` counts them, once per
        round however many of its syncs failed): the pause grows with them."""
        self.paused_until = 0.0

    def add(self, key: Key, *, last_publish: float) -> None:
        """Sync ``key`` as soon as its window allows; an already scheduled sync will see the news."""
        if key in self.due:
            return
        self.due[key] = max(_now(), last_publish + self.min_interval)
        self.wake.set()

    def retry(self, key: Key, delay: float) -> None:
        """Sync ``key`` again ``delay`` seconds from now (it failed)."""
        self.due[key] = _now() + delay

    def pause(self, delay: float) -> None:
        """Sync nothing for ``delay`` seconds (the bus is failing)."""
        self.paused_until = _now() + delay

    def take(self) -> Iterator[Key]:
        """The TCPs due now (none while paused), each unscheduled as it is taken: a caller that
        stops early leaves the rest scheduled."""
        # Cleared before the scan: anything scheduled meanwhile sets it and ends the next wait.
        self.wake.clear()
        now = _now()
        if now < self.paused_until:
            return
        for key in [k for k, at in self.due.items() if at <= now]:
            self.due.pop(key, None)
            yield key

    async def wait(self) -> None:
        """Until the next TCP is due, the pause ends, or something is scheduled."""
        now = _now()
        wake_at = min(self.due.values(), default=math.inf)
        if self.paused_until > now:
            wake_at = max(wake_at, self.paused_until)
        timeout = None if wake_at == math.inf else max(0.0, wake_at - now)
        await aiotasks.wait_event(self.wake, timeout)


def _now() -> float:
    return asyncio.get_running_loop().time()
