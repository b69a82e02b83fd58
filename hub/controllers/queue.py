"""A work queue of object keys with de-duplication and delayed requeues (client-go's workqueue).

A key is never handed to two workers at once: one added while it is being processed is held
back and queued again when ``done`` is called. ``add(key, delay)`` keeps the earliest due time.
``get`` lets the event loop turn before it hands out a key, so workers never starve the rest.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Hashable
from typing import Generic, TypeVar

from common import aiotasks

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self) -> None:
        self._due: dict[K, float] = {}
        self._heap: list[tuple[float, int, K]] = []
        self._active: set[K] = set()
        self._held: dict[K, float] = {}
        """Keys added while active, with their delay."""
        self._counter = 0
        self._wake = asyncio.Event()

    def __len__(self) -> int:
        return len(self._due)

    def add(self, key: K, delay: float = 0.0) -> None:
        if key in self._active:
            self._held[key] = min(delay, self._held.get(key, delay))
            return
        when = asyncio.get_running_loop().time() + max(0.0, delay)
        if key in self._due and self._due[key] <= when:
            return
        self._due[key] = when
        self._counter += 1
        heapq.heappush(self._heap, (when, self._counter, key))
        self._wake.set()

    async def get(self) -> K:
        # A turn of the event loop first, even with a key due: a reconcile with nothing to write
        # never waits, and a worker taking key after key would keep everything else (heartbeats
        # delivered, watch events) waiting for as long as the queue is full.
        await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        while True:
            # Drop heap entries superseded by an earlier add of the same key.
            while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
                heapq.heappop(self._heap)
            if self._heap and self._heap[0][0] <= loop.time():
                _, _, key = heapq.heappop(self._heap)
                del self._due[key]
                self._active.add(key)
                return key
            self._wake.clear()
            timeout = self._heap[0][0] - loop.time() if self._heap else None
            await aiotasks.wait_event(self._wake, timeout)

    def done(self, key: K) -> None:
        self._active.discard(key)
        if key in self._held:
            self.add(key, self._held.pop(key))
