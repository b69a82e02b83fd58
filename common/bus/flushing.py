"""Round trips to the server that nats-py never cancels: waited for, never ended early.

nats-py keeps the future of each flush (a PING) in its list of PONGs awaited and takes the first
one off for each PONG. A flush that timed out or was cancelled leaves its cancelled future there,
and when that PONG does come, late, as over a slow or briefly cut link, setting its result fails
and nats-py's reader stops for good: the connection then hears nothing more (no answer, no
message, no PONG that would count it stale) while it still says it is connected.

So ``Flushes.start`` starts a flush with a patience no live connection reaches (nats-py counts a
silent connection stale and reconnects long before, which starts its list anew) and keeps it
running on its own; ``round_trip`` waits for it as long as its caller wants and gives up without
cancelling it. What is left running is counted (``running``) and ends with its PONG, when the
connection is closed (``end``), or with that patience on a connection that has been replaced.

One such flush remains out of reach: nats-py's own, when it reconnects (10 s). Should that one
time out, nats-py gives the attempt up and connects again, starting its list anew.
"""

from __future__ import annotations

import asyncio
from typing import Final

import nats.errors
from nats.aio.client import Client

__all__ = ["PATIENCE", "Flushes", "round_trip"]

PATIENCE: Final = 3600
"""Seconds a flush may wait for its PONG before nats-py itself gives up on it: more than a silent
connection lasts before it counts as stale (four PINGs, at most 10 minutes apart)."""


class Flushes:
    """The flushes of one connection still waiting for their PONG."""

    def __init__(self) -> None:
        self._waiting: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> int:
        return len(self._waiting)

    def start(self, nc: Client) -> asyncio.Task[None]:
        task = asyncio.ensure_future(nc.flush(timeout=PATIENCE))
        self._waiting.add(task)
        task.add_done_callback(self._settled)
        return task

    def end(self) -> None:
        """The connection is closed: its reader is gone, so no PONG will come and nothing can
        fail on one; what still waits ends now."""
        for task in list(self._waiting):
            task.cancel()

    def _settled(self, task: asyncio.Task[None]) -> None:
        self._waiting.discard(task)
        if not task.cancelled():
            task.exception()  # read: a flush nobody waits for any more must not log its end


async def round_trip(nc: Client, flushes: Flushes, ended: asyncio.Event, *, timeout: float) -> None:
    """Return once the server answered a PING sent now; nats-py's FlushTimeoutError after
    ``timeout`` seconds (the flush goes on), its ConnectionClosedError as soon as the connection
    ends (nats-py leaves a flush of a closed connection waiting for its PONG)."""
    if nc.is_closed:  # nothing to wait for: say so without a task
        raise nats.errors.ConnectionClosedError
    flush = flushes.start(nc)
    closed = asyncio.ensure_future(ended.wait())
    try:
        await asyncio.wait((flush, closed), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        closed.cancel()
    # A flush whose client closed meanwhile may also have returned (its loops stopped, nats-py
    # skips the PING): the closing is said then too.
    if nc.is_closed:
        raise nats.errors.ConnectionClosedError
    if not flush.done():
        raise nats.errors.FlushTimeoutError
    failed = None if flush.cancelled() else flush.exception()
    if failed is not None:
        raise failed
