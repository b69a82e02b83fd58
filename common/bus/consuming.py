"""Reading JetStream: bind a durable pull consumer, fetch batches, settle each delivery.

Also the stream reads that are not consumer-based: the last message on a subject, consumer
info (pending and ack-pending counts for backlogs) and purging a subject.

Settling (ack, nak, term, in-progress) goes through the same permission guard as everything
else; ``ack`` waits for the server's confirmation so "acked" means the server recorded it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js.client import JetStreamContext

from common.bus import errors
from common.bus.connection import Connection
from protocol import streams


@dataclass(frozen=True)
class ConsumerState:
    stream: str
    name: str
    filter_subject: str
    num_pending: int
    """Messages not yet delivered."""
    num_ack_pending: int
    """Delivered, not yet acknowledged."""
    delivered_stream_seq: int
    ack_floor_stream_seq: int
    ack_wait: float = streams.ACK_WAIT_SECONDS
    """Seconds the server waits for an ack (or an in-progress) before it redelivers."""


@dataclass(frozen=True)
class StoredMessage:
    subject: str
    seq: int
    data: bytes
    headers: dict[str, str]
    time: dt.datetime | None


def _consumer_subjects(stream: str, consumer: str) -> list[str]:
    return [f"$JS.API.CONSUMER.INFO.{stream}.{consumer}", f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"]


async def consumer_info(conn: Connection, stream: str, consumer: str) -> ConsumerState:
    try:
        info = await conn.call(
            conn.js.consumer_info(stream, consumer),
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
        ack_wait=float(config.ack_wait) if config.ack_wait else streams.ACK_WAIT_SECONDS,
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
        sub: JetStreamContext.PullSubscription,
        *,
        ack_wait: float = streams.ACK_WAIT_SECONDS,
    ):
        self._conn = conn
        self.definition = definition
        self._sub = sub
        self.ack_wait = ack_wait
        """The ack wait the server has for this consumer (read at bind): what in-progress
        acks must beat, whatever the definition says (the hub owns the consumer)."""

    async def fetch(self, batch: int = 10, *, timeout: float = 5.0) -> list[Delivery]:
        """Up to ``batch`` messages, waiting at most ``timeout`` seconds; [] when none came."""
        d = self.definition
        try:
            msgs = await self._conn.call(
                self._sub.fetch(batch, timeout=timeout),
                subjects=_consumer_subjects(d.stream, d.durable_name),
                what=f"fetch from {d.stream}/{d.durable_name}",
            )
        except errors.BusTimeout:
            return []
        return [Delivery(self._conn, m) for m in msgs]

    async def info(self) -> ConsumerState:
        return await consumer_info(self._conn, self.definition.stream, self.definition.durable_name)

    async def unsubscribe(self) -> None:
        # A closed connection has nothing left to release.
        with contextlib.suppress(nats.errors.Error):
            await self._sub.unsubscribe()


async def bind(conn: Connection, definition: streams.ConsumerDef) -> Consumer:
    """Bind to an existing durable consumer; ConsumerNotFound when the hub has not created it."""
    state = await consumer_info(conn, definition.stream, definition.durable_name)
    sub = await conn.call(
        conn.js.pull_subscribe_bind(
            durable=definition.durable_name,
            stream=definition.stream,
            inbox_prefix=(conn.options.inbox_prefix + ".").encode(),
        ),
        subjects=[],
        what=f"bind {definition.stream}/{definition.durable_name}",
    )
    return Consumer(conn, definition, sub, ack_wait=state.ack_wait)


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
    response = await conn.call(
        conn.js._api_request(subject, json.dumps({"seq": 1}).encode()),
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


async def last_message(
    conn: Connection, stream: str, subject: str, *, direct: bool = False
) -> StoredMessage | None:
    """The latest message on ``subject`` (streams keep one per subject), or None.

    ``direct`` uses the Direct Get API with the subject inside the API subject
    (``$JS.API.DIRECT.GET.<stream>.<subject>``), which a site may be granted for its own
    subjects only; the plain form is a stream-wide API the hub uses.
    """
    api_subject = f"$JS.API.DIRECT.GET.{stream}.{subject}" if direct else f"$JS.API.STREAM.MSG.GET.{stream}"
    try:
        raw = await conn.call(
            conn.js.get_last_msg(stream, subject, direct=direct),
            subjects=[api_subject],
            what=f"last message on {subject}",
        )
    except errors.NotFound:
        return None
    except errors.BusError as exc:
        if "no message found" in str(exc).lower():
            return None
        raise
    return StoredMessage(
        subject=raw.subject or subject,
        seq=raw.seq or 0,
        data=raw.data or b"",
        headers=dict(raw.headers or {}),
        time=None,
    )


async def purge_subject(conn: Connection, stream: str, subject: str, *, up_to: int | None = None) -> None:
    """Remove every message on ``subject`` (a deleted control plane's intent, status, secrets).

    ``up_to``: only the messages with a sequence up to and including it, so a message published
    on the subject after the caller read it (a new owner's) stays.
    """
    await conn.call(
        conn.js.purge_stream(stream, subject=subject, seq=None if up_to is None else up_to + 1),
        subjects=[f"$JS.API.STREAM.PURGE.{stream}"],
        what=f"purge {subject} from {stream}",
    )


async def subjects_of(conn: Connection, stream: str, pattern: str) -> dict[str, int]:
    """The subjects of ``stream`` matching ``pattern`` that hold messages, with their counts."""
    info = await conn.call(
        conn.js.stream_info(stream, subjects_filter=pattern),
        subjects=[f"$JS.API.STREAM.INFO.{stream}"],
        what=f"subjects of {stream}",
    )
    return dict(info.state.subjects or {})


async def subscribe_check(conn: Connection, subject: str) -> None:
    """Subscribe to ``subject`` and unsubscribe at once; PermissionDenied if the server refuses.

    Used to check a credential's reach (and by tests); the flush makes the server answer the
    subscription before we return.
    """

    async def sub_and_flush() -> None:
        sub = await conn.nc.subscribe(subject)
        try:
            await conn.sync()
        finally:
            await sub.unsubscribe()

    await conn.call(sub_and_flush(), subjects=[subject], what=f"subscribe to {subject}")
