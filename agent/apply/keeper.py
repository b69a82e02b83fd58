"""Keeping the intents the apply loop holds its own: in-progress acks before the ack wait ends.

The agent's consumer has a short ack wait (``protocol.streams.AGENT_ACK_WAIT_SECONDS``) so that
intents an agent fetched and never settled, because it died, reach its successor within
seconds. A live agent holds intents longer than that: a batch is fetched at once
and waits in per-TCP queues, behind the API server or behind a delete that waits for Kamaji's
finalizers. The keeper sends an in-progress (``+WPI``) for every held delivery that was not
touched for a third of the ack wait, all in one round trip, so the server never redelivers an
intent that is still being worked on.

``due`` and ``interval`` are the pure part (tested by tables); ``Keeper`` holds the deliveries
and runs the loop. Talks to NATS only through ``common.bus.in_progress``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Final, TypeVar

from common import bus
from common.bus import errors as bus_errors

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

SHARE: Final = 3.0
"""A held delivery is touched once a ``1/SHARE`` of the ack wait has passed since its delivery
or its last touch: two more touches could be lost or late before the server redelivers."""
MIN_INTERVAL: Final = 0.1
"""Seconds: the floor of the touch interval, whatever ack wait a consumer has."""


def interval(ack_wait: float) -> float:
    """Seconds after which a held delivery needs an in-progress, for the consumer's ack wait."""
    return max(MIN_INTERVAL, ack_wait / SHARE)


def due(touched: Mapping[K, float], *, now: float, every: float) -> list[K]:
    """The held deliveries whose last delivery or touch is ``every`` seconds old or older."""
    return [k for k, t in touched.items() if now - t >= every]


class Keeper:
    """The deliveries the apply loop holds, and the loop that keeps them from being redelivered."""

    def __init__(self, conn: bus.Connection, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.conn = conn
        self.clock = clock
        self.ack_wait = 0.0
        """The bound consumer's ack wait (set on every bind); 0 before the first: nothing to keep."""
        self._touched: dict[bus.Delivery, float] = {}
        self.touches = 0
        """In-progress acks sent (for tests and the log)."""

    @property
    def held(self) -> int:
        return len(self._touched)

    def hold(self, delivery: bus.Delivery) -> None:
        """From now on until ``release``: the server just delivered it, so its timer is fresh."""
        self._touched[delivery] = self.clock()

    def release(self, delivery: bus.Delivery) -> None:
        """Settled (or given up): no more in-progress for it."""
        self._touched.pop(delivery, None)

    async def touch_due(self) -> int:
        """Send an in-progress for every held delivery that needs one; how many were sent.

        Raises BusError when the server could not be told (the connection is down): the
        deliveries stay held and are tried again; if the ack wait ends meanwhile the server
        redelivers them, and applying is idempotent.
        """
        if self.ack_wait <= 0:
            return 0
        now = self.clock()
        batch = due(self._touched, now=now, every=interval(self.ack_wait))
        if not batch:
            return 0
        await bus.in_progress(self.conn, batch)
        for d in batch:
            if d in self._touched:  # not released while we waited for the server
                self._touched[d] = now
        self.touches += len(batch)
        return len(batch)

    async def run(self) -> None:
        """Forever: wake twice per touch interval and touch what is due."""
        while True:
            every = interval(self.ack_wait) if self.ack_wait > 0 else 1.0
            await asyncio.sleep(every / 2)
            try:
                await self.touch_due()
            except bus_errors.BusError as exc:
                log.warning(
                    "in-progress for %d held intent(s) failed: %s; they may be redelivered "
                    "(applying is idempotent)",
                    self.held,
                    exc,
                )
