"""Publishing to JetStream: de-duplicated, optionally fenced, retried when the outcome is unknown.

A timeout after a publish is ambiguous: the server may have stored the message. We retry with
the same ``Nats-Msg-Id`` so the server's duplicate window drops a second copy; a fenced publish
(``Nats-Expected-Last-Subject-Sequence``) fails with ``WrongLastSequence`` when another writer
got there first, which is how two hub replicas cannot race. A message the server refuses to
store over a limit (a message too big, a site's stream at its quota) is ``QuotaExceeded``,
naming the limit, and never retried.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import nats.errors
import nats.js.api as api
import nats.js.errors
from nats.js.client import JetStreamContext

from common import logs
from common.bus import errors
from common.bus.connection import Connection

log = logging.getLogger(__name__)

_WRONG_LAST_SEQUENCE = 10071
"""JetStream err_code for a failed Nats-Expected-Last-Subject-Sequence check."""
_MESSAGE_TOO_BIG = 10054
"""JetStream err_code: "message size exceeds maximum allowed" (the stream's max_msg_size)."""
_STORE_FAILED = 10077
"""JetStream err_code of a store failure; "maximum messages exceeded" / "maximum bytes exceeded"
when a stream with discard new is at its max_msgs / max_bytes (a site's quota)."""
_QUOTA_DESCRIPTIONS = {"maximum messages exceeded": "max_msgs", "maximum bytes exceeded": "max_bytes"}


@dataclass(frozen=True)
class Ack:
    stream: str
    seq: int
    duplicate: bool


async def publish(
    conn: Connection,
    subject: str,
    payload: bytes,
    *,
    msg_id: str,
    expected_last_subject_seq: int | None = None,
    stream: str | None = None,
    attempts: int = 5,
    retry_wait: float = 0.5,
) -> Ack:
    """Publish and wait for the stream's acknowledgement.

    ``expected_last_subject_seq=0`` means "no message on this subject yet". Retries only
    outcomes that are unknown or transient (timeout, no stream answering), with the same id.
    """
    headers: dict[str, str] = {api.Header.MSG_ID.value: msg_id}
    if expected_last_subject_seq is not None:
        headers[api.Header.EXPECTED_LAST_SUBJECT_SEQUENCE.value] = str(expected_last_subject_seq)
    for attempt in range(1, attempts + 1):
        try:
            ack = await conn.jetstream(
                lambda js: _publish(js, conn, subject, payload, headers=headers, stream=stream),
                subjects=[subject],
                what=f"publish to {subject}",
            )
            return Ack(stream=ack.stream, seq=ack.seq, duplicate=bool(ack.duplicate))
        except (errors.BusTimeout, errors.Unavailable) as exc:
            if attempt == attempts:
                raise
            log.warning(
                "publish to %s: %s; retrying (%d/%d) with the same Nats-Msg-Id",
                subject,
                exc,
                attempt,
                attempts,
                extra=logs.about_subject(subject),
            )
            await asyncio.sleep(retry_wait * attempt)
    raise AssertionError("unreachable")  # pragma: no cover


async def _publish(
    js: JetStreamContext,
    conn: Connection,
    subject: str,
    payload: bytes,
    *,
    headers: dict[str, str],
    stream: str | None,
) -> api.PubAck:
    # JetStream's publish mutates the headers dict it gets; give it a copy per attempt.
    try:
        return await js.publish(subject, payload, headers=dict(headers), stream=stream)
    except nats.errors.MaxPayloadError:
        # nats-py checks the server's advertised max_payload before sending (the server would
        # close the connection otherwise).
        raise errors.QuotaExceeded(
            subject, "max_payload", f"{len(payload)} bytes, the server takes at most {conn.max_payload}"
        ) from None
    except nats.js.errors.APIError as exc:
        description = exc.description or ""
        if exc.err_code == _MESSAGE_TOO_BIG:
            raise errors.QuotaExceeded(
                subject, "max_msg_size", f"{len(payload)} bytes: {description}"
            ) from None
        if exc.err_code == _STORE_FAILED and description in _QUOTA_DESCRIPTIONS:
            raise errors.QuotaExceeded(subject, _QUOTA_DESCRIPTIONS[description], description) from None
        if exc.err_code == _WRONG_LAST_SEQUENCE:
            expected = int(headers[api.Header.EXPECTED_LAST_SUBJECT_SEQUENCE.value])
            raise errors.WrongLastSequence(
                subject, expected, exc.description or "wrong last sequence"
            ) from None
        raise
