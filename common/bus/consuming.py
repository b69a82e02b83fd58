"""Reading JetStream through a durable pull consumer: bind, fetch batches, settle each delivery.

Also consumer info (pending and ack-pending counts for backlogs) and replay (a consumer reset).
The stream reads that are not consumer-based live in ``common.bus.storage``.

Settling (ack, nak, term, in-progress) goes through the same permission guard as everything
else; ``ack`` waits for the server's confirmation so "acked" means the server recorded it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg

from common.bus import errors, pulling
from common.bus.connection import Connection
from protocol import streams


@dataclass(frozen=True)
class ConsumerState:
    stream: str
    name: str
    filter_subject: str
    """The one filter subject; empty for a consumer with several (``filter_subjects``)."""
    num_pending: int
    """Messages not yet delivered."""
    num_ack_pending: int
    """Delivered, not yet acknowledged."""
    delivered_stream_seq: int
    ack_floor_stream_seq: int
    delivered_consumer_seq: int = 0
    """The consumer sequence of the last message delivered: the next delivery is this plus one."""
    ack_wait: float = streams.ACK_WAIT_SECONDS
    """Seconds the server waits for an ack (or an in-progress) before it redelivers."""
    filter_subjects: tuple[str, ...] = ()
    """The filter subjects of a consumer with several (the hub's on a site's stream)."""


def _consumer_subjects(stream: str, consumer: str) -> list[str]:
    return [f"$JS.API.CONSUMER.INFO.{stream}.{consumer}", f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"]


async def consumer_info(conn: Connection, stream: str, consumer: str) -> ConsumerState:
    try:
        info = await conn.jetstream(
            lambda js: js.consumer_info(stream, consumer),
            subjects=_consumer_subjects(stream, consumer),
            what=f"consumer info {stream}/{consumer}",
        )
    except errors.NotFound:
        raise errors.ConsumerNotFound(stream, consumer) from None
    config = info.config
    return ConsumerState(
        stream=stream,
        name=consumer,
        filter_subject=config.filter_subject or "",
        num_pending=info.num_pending or 0,
        num_ack_pending=info.num_ack_pending or 0,
        delivered_stream_seq=(info.delivered.stream_seq or 0) if info.delivered else 0,
        ack_floor_stream_seq=(info.ack_floor.stream_seq or 0) if info.ack_floor else 0,
        delivered_consumer_seq=(info.delivered.consumer_seq or 0) if info.delivered else 0,
        ack_wait=float(config.ack_wait) if config.ack_wait else streams.ACK_WAIT_SECONDS,
        filter_subjects=tuple(config.filter_subjects or ()),
    )


class Delivery:
    """One message delivered by a pull consumer, with its JetStream metadata."""

    def __init__(self, conn: Connection, msg: Msg) -> None:
        self._conn = conn
        self._msg = msg
        meta = msg.metadata
        self.subject: str = msg.subject
        self.data: bytes = msg.data
        self.headers: dict[str, str] = dict(msg.headers or {})
        self.stream: str = meta.stream
        self.consumer: str = meta.consumer
        self.stream_seq: int = meta.sequence.stream
        self.consumer_seq: int = meta.sequence.consumer
        self.num_delivered: int = meta.num_delivered
        self.num_pending: int = meta.num_pending
        self.timestamp: dt.datetime = meta.timestamp

    def __repr__(self) -> str:
        return f"Delivery({self.subject!r}, stream_seq={self.stream_seq}, delivered={self.num_delivered})"

    @property
    def reply(self) -> str:
        """The ack subject of this delivery (where ack, nak, term and in-progress go)."""
        return self._msg.reply

    def _ack_subjects(self) -> list[str]:
        return [self._msg.reply]

    async def ack(self, *, timeout: float = 5.0) -> None:
        """Acknowledge and wait until the server confirms it."""
        await self._conn.call(
            self._msg.ack_sync(timeout=timeout), subjects=self._ack_subjects(), what=f"ack {self.subject}"
        )

    async def nak(self, *, delay: float | None = None) -> None:
        """Ask for redelivery, after ``delay`` seconds (backoff for transient failures)."""
        await self._settle(self._msg.nak(delay=delay), what=f"nak {self.subject}")

    async def term(self) -> None:
        """Never redeliver (undecodable, unverifiable, not ours)."""
        await self._settle(self._msg.term(), what=f"term {self.subject}")

    async def in_progress(self) -> None:
        """Still working: reset the ack-wait timer."""
        await self._settle(self._msg.in_progress(), what=f"in-progress {self.subject}")

    async def queue_in_progress(self) -> None:
        """Hand an in-progress to the client's buffer without waiting for the server: for
        ``in_progress`` (the batch), which flushes once and translates errors for them all."""
        await self._msg.in_progress()

    async def _settle(self, call: Any, *, what: str) -> None:
        # A plain publish gets no answer; the flush round-trip makes a denial arrive before we return.
        async def settle_and_flush() -> None:
            await call
            await self._conn.sync()

        await self._conn.call(settle_and_flush(), subjects=self._ack_subjects(), what=what)


class Consumer:
    """A bound durable pull consumer."""

    def __init__(
        self,
        conn: Connection,
        definition: streams.ConsumerDef,
        puller: pulling.Puller,
        *,
        ack_wait: float = streams.ACK_WAIT_SECONDS,
        delivered: int = 0,
    ):
        self._conn = conn
        self.definition = definition
        self._puller = puller
        self.ack_wait = ack_wait
        """The ack wait the server has for this consumer (read at bind): what in-progress
        acks must beat, whatever the definition says (the hub owns the consumer)."""
        self.delivered = delivered
        """The consumer sequence delivered before the bind (read at bind; 0 for ``attach``):
        the first delivery to this binding is this plus one unless a message went elsewhere."""

    async def fetch(self, batch: int = 10, *, timeout: float = 5.0) -> list[Delivery]:
        """Up to ``batch`` messages, waiting at most ``timeout`` seconds; [] when none came.

        ConsumerNotFound when the server says the consumer was deleted meanwhile."""
        d = self.definition
        msgs = await self._conn.call(
            self._puller.next(batch, timeout=timeout),
            subjects=_consumer_subjects(d.stream, d.durable_name),
            what=f"fetch from {d.stream}/{d.durable_name}",
        )
        return [Delivery(self._conn, m) for m in msgs]

    async def info(self) -> ConsumerState:
        return await consumer_info(self._conn, self.definition.stream, self.definition.durable_name)

    async def unsubscribe(self) -> None:
        await self._puller.stop()


async def bind(conn: Connection, definition: streams.ConsumerDef) -> Consumer:
    """Bind to an existing durable consumer; ConsumerNotFound when the hub has not created it."""
    state = await consumer_info(conn, definition.stream, definition.durable_name)
    return await attach(conn, definition, ack_wait=state.ack_wait, delivered=state.delivered_consumer_seq)


async def attach(
    conn: Connection,
    definition: streams.ConsumerDef,
    *,
    ack_wait: float = streams.ACK_WAIT_SECONDS,
    delivered: int = 0,
) -> Consumer:
    """The pull side of ``bind``, without asking the server about the consumer first."""
    puller = pulling.Puller(conn, definition.stream, definition.durable_name)
    try:
        await conn.call(
            puller.start(),
            subjects=[puller.inbox],
            what=f"bind {definition.stream}/{definition.durable_name}",
        )
    except BaseException:
        await puller.stop()
        raise
    return Consumer(conn, definition, puller, ack_wait=ack_wait, delivered=delivered)


def reset_subject(stream: str, consumer: str) -> str:
    return f"$JS.API.CONSUMER.RESET.{stream}.{consumer}"


async def replay(conn: Connection, definition: streams.ConsumerDef) -> int:
    """Deliver again, from the start of the stream, every message the consumer's filter holds
    (nats-server 2.14+ consumer reset, ADR-60); returns the sequence it was reset to.

    An agent that starts cannot know what changed at its site while it was down (a TCP deleted
    by hand sends no event to a process that does not run), and it reads intents only through
    its own consumer: replaying the consumer's current intents (the stream keeps the latest per
    subject) is its relist. nats-py has no call for it, so the request goes through the
    JetStream API helper nats-py uses for its own calls (its error mapping included).
    """
    subject = reset_subject(definition.stream, definition.durable_name)
    response = await conn.jetstream(
        lambda js: js._api_request(subject, json.dumps({"seq": 1}).encode()),
        subjects=[subject],
        what=f"replay {definition.stream}/{definition.durable_name}",
    )
    return int(response.get("reset_seq") or 0)


async def in_progress(conn: Connection, deliveries: Sequence[Delivery]) -> None:
    """Reset the ack-wait timer of every delivery, with one round trip for them all.

    What a consumer with a short ack wait needs for the messages it holds: each in-progress is
    a plain publish, so hundreds cost one flush, not hundreds.
    """
    if not deliveries:
        return

    async def send_and_flush() -> None:
        for d in deliveries:
            await d.queue_in_progress()
        await conn.sync()

    await conn.call(
        send_and_flush(),
        subjects=sorted({d.reply for d in deliveries}),
        what=f"in-progress of {len(deliveries)} message(s)",
    )
