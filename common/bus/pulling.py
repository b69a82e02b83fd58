"""Pulling from a durable consumer with a request left open: fewer requests than messages.

nats-py's ``fetch`` sends two pull requests whenever nothing is waiting (a ``no_wait`` probe,
then a lingering one) and returns at the first message, so a consumer whose messages trickle in
sends about two requests per message; a profile of the hub and the agents counted them among
the largest share of the bus's messages. Here one request for up to ``batch`` messages stays
open across ``Puller.next`` calls and serves them all until it is used up or expires; a new one
goes out only when the open one is (nearly) used up, has expired, or the connection came back
(the server forgets the requests of a client it lost; a ``next`` waiting then returns at once,
so a long timeout costs no delay after a reconnect).

Bounds are unchanged: at most ``batch`` messages are asked for at a time (two requests overlap
only around a top-up), and what arrived but was not taken yet waits here, counted in the ack
wait like any delivered message. Talks to NATS through the connection's client (publish and
subscribe on the consumer's reply inbox); ``common.bus.consuming.Consumer`` is its only user.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from dataclasses import dataclass

import nats.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from common.bus import errors
from common.bus.connection import Connection

STATUS = "Status"
DESCRIPTION = "Description"
PENDING_MESSAGES = "Nats-Pending-Messages"
_CONSUMER_DELETED = "consumer deleted"
_REQUEST_ENDED = ("404", "408")
"""No messages (a no-wait request), request expired: what it still owed is in its headers."""
_HEARTBEAT = "100"
_ASK_AGAIN = ("leadership change", "server shutdown")
"""409s that end one request but not the next (asked of the new leader, or the next server)."""
GRACE = 0.5
"""Seconds past a request's expiry after which it counts as over without the server's 408."""
MIN_EXPIRES = 1.0
"""Seconds a request stays open at least (a short one would be renewed over and over)."""


@dataclass
class Open:
    """The messages the open requests may still deliver, and when the newest one expires."""

    owed: int = 0
    expires_at: float = 0.0
    reconnects: int = 0

    def wants(self, batch: int, *, now: float, reconnects: int) -> int:
        """How many to ask for now: ``batch`` minus what is owed once fewer than half are, all of
        it when the requests are over (expired, or the connection came back since), else 0."""
        if now >= self.expires_at or reconnects != self.reconnects or self.owed <= 0:
            return batch
        return batch - self.owed if self.owed * 2 <= batch else 0


def next_subject(stream: str, consumer: str) -> str:
    return f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"


class Puller:
    """The pull side of one bound consumer: its reply inbox, the open request, what arrived."""

    def __init__(self, conn: Connection, stream: str, consumer: str) -> None:
        self._conn = conn
        self.stream = stream
        self.consumer = consumer
        self.subject = next_subject(stream, consumer)
        self.inbox = f"{conn.options.inbox_prefix}.{secrets.token_hex(11)}"
        self._arrived: asyncio.Queue[Msg | None] = asyncio.Queue()
        """What the server sent the inbox; None: the connection came back (ask again now)."""
        self._open = Open()
        self._sub: Subscription | None = None

    async def start(self) -> None:
        """Subscribe the reply inbox; returns once the server has taken the subscription."""

        async def arrived(msg: Msg) -> None:
            self._arrived.put_nowait(msg)

        self._sub = await self._conn._nc.subscribe(self.inbox, cb=arrived)
        self._conn.on_reconnect.append(self._reconnected)
        await self._conn.sync()

    async def _reconnected(self) -> None:
        """The server forgot the open request with the connection: a ``next`` waiting on it
        wakes and asks again, rather than waiting out its timeout for nothing."""
        self._arrived.put_nowait(None)

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self._conn.on_reconnect.remove(self._reconnected)
        if self._sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await self._sub.unsubscribe()

    async def next(self, batch: int, *, timeout: float) -> list[Msg]:
        """Up to ``batch`` messages: those waiting at once, else the first to arrive within
        ``timeout`` seconds and whatever came with it; [] when none came, or at once when the
        connection came back meanwhile (the caller may check what a reconnect can lose)."""
        deadline = time.monotonic() + timeout
        taken = self._take(batch)
        while not taken:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            await self._request(batch, expires=max(remaining, MIN_EXPIRES))
            try:
                first = await asyncio.wait_for(self._arrived.get(), remaining)
            except TimeoutError:
                return []
            if first is None:
                return self._take(batch)
            taken = self._accept(first) + self._take(batch - 1)
        return taken

    def _take(self, batch: int) -> list[Msg]:
        msgs: list[Msg] = []
        while len(msgs) < batch and not self._arrived.empty():
            msgs.extend(self._accept(self._arrived.get_nowait()))
        return msgs

    def _accept(self, msg: Msg | None) -> list[Msg]:
        """``[msg]`` for a message; ``[]`` for a status, which updates the open request's count,
        or raises when the server would answer every request so (no point asking again); ``[]``
        for a reconnect (the next ``_request`` asks anew)."""
        if msg is None:
            return []
        headers = msg.headers or {}
        status = headers.get(STATUS)
        if not status:
            self._open.owed -= 1
            return [msg]
        if status in _REQUEST_ENDED:
            pending = headers.get(PENDING_MESSAGES, "")
            self._open.owed = self._open.owed - int(pending) if pending.isdigit() else 0
        elif status != _HEARTBEAT:
            self._refused(status, headers.get(DESCRIPTION, ""))
        return []

    def _refused(self, status: str, description: str) -> None:
        """A request the server ended at once: a leader change or a server stopping ends it (ask
        again); anything else would end the next one the same way."""
        what = f"fetch from {self.stream}/{self.consumer}"
        if status == "409" and description.lower() in _ASK_AGAIN:
            self._open.owed = 0
            return
        if status == "409" and description.lower() == _CONSUMER_DELETED:
            raise errors.ConsumerNotFound(self.stream, self.consumer)
        if status == "503":
            raise errors.Unavailable(f"{what}: no responders (the consumer has no leader, or is gone)")
        raise errors.BusError(f"{what}: the server ended the pull request: {status} {description}")

    async def _request(self, batch: int, *, expires: float) -> None:
        now = time.monotonic()
        reconnects = self._conn.reconnects
        want = self._open.wants(batch, now=now, reconnects=reconnects)
        if want <= 0:
            return
        if now >= self._open.expires_at or reconnects != self._open.reconnects:
            self._open = Open(reconnects=reconnects)
        body = {"batch": want, "expires": int(expires * 1_000_000_000)}
        await self._conn._nc.publish(self.subject, json.dumps(body).encode(), reply=self.inbox)
        self._open.owed += want
        self._open.expires_at = max(self._open.expires_at, now + expires + GRACE)
