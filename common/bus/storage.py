"""What a stream stores, read without a durable consumer: its state, the last message on a
subject, the message at a sequence, the subjects that hold messages, the subjects written since a
sequence (``subjects_since``: an ephemeral consumer that sends no payload); and purging a subject.

The hub reads the latest intent, status and sealed secrets of a control plane here (streams keep
one message per subject) and purges a deleted control plane's subjects; an agent reads its own
subjects through the Direct Get API. Results are our own types, never nats-py's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import nats.js.api as api
from nats.js import JetStreamContext

from common.bus import errors
from common.bus.connection import Connection
from protocol import streams


@dataclass(frozen=True)
class StoredMessage:
    subject: str
    seq: int
    data: bytes
    headers: dict[str, str]
    time: dt.datetime | None


@dataclass(frozen=True)
class StreamState:
    """A stream as the server has it: its configuration and what it holds."""

    config: streams.StreamDef
    """The server's configuration of the stream, in ``protocol.streams``' shape."""
    messages: int
    bytes: int
    first_seq: int
    last_seq: int


def _definition(c: api.StreamConfig) -> streams.StreamDef:
    def unset(value: int | None) -> int:
        return -1 if value is None else value

    return streams.StreamDef(
        name=c.name or "",
        subjects=tuple(c.subjects or ()),
        replicas=c.num_replicas or 1,
        max_msgs_per_subject=unset(c.max_msgs_per_subject),
        storage=str(getattr(c.storage, "value", c.storage)),
        retention=str(getattr(c.retention, "value", c.retention)),
        duplicate_window=c.duplicate_window or 0.0,
        max_consumers=unset(c.max_consumers),
        allow_direct=bool(c.allow_direct),
        max_msg_size=unset(c.max_msg_size),
        max_msgs=unset(c.max_msgs),
        max_bytes=unset(c.max_bytes),
        discard=str(getattr(c.discard, "value", c.discard)),
    )


async def stream_info(conn: Connection, stream: str) -> StreamState:
    """The configuration and state of ``stream``; NotFound when it does not exist."""
    info = await conn.jetstream(
        lambda js: js.stream_info(stream),
        subjects=[f"$JS.API.STREAM.INFO.{stream}"],
        what=f"stream info {stream}",
    )
    s = info.state
    return StreamState(
        config=_definition(info.config),
        messages=s.messages or 0,
        bytes=s.bytes or 0,
        first_seq=s.first_seq or 0,
        last_seq=s.last_seq or 0,
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
    raw = await _get(
        conn,
        lambda js: js.get_last_msg(stream, subject, direct=direct),
        api_subject=api_subject,
        what=f"last message on {subject}",
    )
    return None if raw is None else _stored(raw, subject=subject, seq=0)


async def message_at(conn: Connection, stream: str, seq: int) -> StoredMessage | None:
    """The message stored at sequence ``seq``, or None when there is none (never written, or
    replaced or purged since)."""
    raw = await _get(
        conn,
        lambda js: js.get_msg(stream, seq=seq),
        api_subject=f"$JS.API.STREAM.MSG.GET.{stream}",
        what=f"message {seq} of {stream}",
    )
    return None if raw is None else _stored(raw, subject="", seq=seq)


async def _get(
    conn: Connection,
    call: Callable[[JetStreamContext], Awaitable[api.RawStreamMsg]],
    *,
    api_subject: str,
    what: str,
) -> api.RawStreamMsg | None:
    """One stored message, or None when the server has none there."""
    try:
        return await conn.jetstream(call, subjects=[api_subject], what=what)
    except errors.NotFound:
        return None
    except errors.BusError as exc:
        if "no message found" in str(exc).lower():
            return None
        raise


def _stored(raw: api.RawStreamMsg, *, subject: str, seq: int) -> StoredMessage:
    return StoredMessage(
        subject=raw.subject or subject,
        seq=raw.seq or seq,
        data=raw.data or b"",
        headers=dict(raw.headers or {}),
        time=raw.time,
    )


async def purge_subject(conn: Connection, stream: str, subject: str, *, up_to: int | None = None) -> None:
    """Remove every message on ``subject`` (a deleted control plane's intent, status, secrets).

    ``up_to``: only the messages with a sequence up to and including it, so a message published
    on the subject after the caller read it (a new owner's) stays.
    """
    await conn.jetstream(
        lambda js: js.purge_stream(stream, subject=subject, seq=None if up_to is None else up_to + 1),
        subjects=[f"$JS.API.STREAM.PURGE.{stream}"],
        what=f"purge {subject} from {stream}",
    )


async def subjects_of(conn: Connection, stream: str, pattern: str) -> dict[str, int]:
    """The subjects of ``stream`` matching ``pattern`` that hold messages, with their counts."""
    info = await conn.jetstream(
        lambda js: js.stream_info(stream, subjects_filter=pattern),
        subjects=[f"$JS.API.STREAM.INFO.{stream}"],
        what=f"subjects of {stream}",
    )
    return dict(info.state.subjects or {})


SINCE_BATCH = 256
"""Messages per fetch of ``subjects_since``."""


async def subjects_since(
    conn: Connection, stream: str, start: int, filters: Sequence[str], *, limit: int
) -> list[tuple[int, str]] | None:
    """The sequence and subject of each message of ``stream`` at ``start`` or later whose subject
    matches one of ``filters``, read through an ephemeral consumer that sends headers only (no
    payload); None when there are more than ``limit``."""
    if not filters:
        return []
    config = api.ConsumerConfig(
        deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=max(1, start),
        ack_policy=api.AckPolicy.NONE,
        filter_subjects=list(filters),
        headers_only=True,
        inactive_threshold=60.0,
        mem_storage=True,
        num_replicas=1,
    )

    async def read(js: JetStreamContext) -> list[tuple[int, str]] | None:
        sub = await js.pull_subscribe("", stream=stream, config=config)
        try:
            info = await sub.consumer_info()
            pending = info.num_pending or 0
            if pending > limit:
                return None
            found: list[tuple[int, str]] = []
            while len(found) < pending:
                try:
                    batch = await sub.fetch(min(SINCE_BATCH, pending - len(found)), timeout=10.0)
                except TimeoutError:
                    break  # fewer than counted: some were purged meanwhile
                found += [(m.metadata.sequence.stream or 0, m.subject) for m in batch]
            return found
        finally:
            with contextlib.suppress(Exception):  # else it goes by itself once inactive
                await js.delete_consumer(stream, config.name or "")
            await sub.unsubscribe()

    what = f"reading the subjects written to {stream} since sequence {start}"
    return await conn.jetstream(read, subjects=[f"$JS.API.CONSUMER.CREATE.{stream}.>"], what=what)
