"""Taking an intent in: the raw bytes of a delivery → a verified Intent, or why not. Pure.

``intake`` refuses with the specific ``outcomes.Reason`` (too large, not JSON, another schema,
invalid, unsigned, untrusted or retired key, bad signature, another site, another subject); a
refused message is terminated by the loop. ``misplaced`` is the one check that a body names the
site and subject it came from: the apply loop's intake, ``intents.decide`` and the cleanup
loop's Direct Get all ask it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Final

import msgspec
import nacl.signing

from agent.apply.outcomes import Reason, Result
from protocol import errors as protocol_errors
from protocol import messages, signing, subjects
from protocol.coordinates import Coordinates

MAX_INTENT_BYTES: Final = 256 * 1024
"""Bytes: larger intents are refused before decoding. A TCP spec is a few kB; Kubernetes objects
stay well below this too, and the server's 1 MB default would let anyone with the hub's NATS
credentials make every agent parse megabytes."""

_SHOWN: Final = 300
"""Characters of a refusal message kept for logs: the message may quote what the sender wrote."""


@dataclass(frozen=True)
class Refusal:
    """Why the bytes of a delivery are not an intent this agent may act on."""

    reason: Reason
    """Label of kb_agent_intents_rejected_total."""
    message: str
    """For the log: names fields, key ids and coordinates (quoted), never more than ``_SHOWN``."""

    @property
    def result(self) -> Result:
        return self.reason.result


def _refused(reason: Reason, message: str) -> Refusal:
    if len(message) > _SHOWN:
        message = message[:_SHOWN] + "..."
    return Refusal(reason, message)


def _undecodable_reason(data: bytes) -> Reason:
    """Which way bytes that are not an Intent fail: not JSON at all, another schema, or invalid."""
    try:
        document = msgspec.json.decode(data)
    except (msgspec.MsgspecError, RecursionError, ValueError, UnicodeError):
        return Reason.UNDECODABLE
    if isinstance(document, dict) and document.get("schema", messages.SCHEMA) != messages.SCHEMA:
        return Reason.UNSUPPORTED_SCHEMA
    return Reason.INVALID


def misplaced(
    intent: messages.Intent,
    *,
    site: str,
    subject: str | None = None,
    prefix: str = subjects.DEFAULT_PREFIX,
) -> Refusal | None:
    """Why the body of ``intent`` is not for this ``site`` and the ``subject`` it came on, or None.

    The signature covers the body's coordinates, the subject does not: a genuine intent moved to
    another subject or site is refused here. The site first (the more telling reason); without
    ``subject`` only the site is checked.
    """
    body = Coordinates.of(intent)
    claimed = f"{intent.site!r}/{intent.namespace!r}/{intent.name!r}"
    if body.site != site:
        return _refused(
            Reason.WRONG_SITE, f"intent for site {intent.site!r} ({claimed}), this is site {site!r}"
        )
    if subject is None:
        return None
    try:
        where = subjects.parse(subject, prefix=prefix)
    except protocol_errors.SubjectError as exc:
        return _refused(Reason.WRONG_SUBJECT, str(exc))
    if Coordinates.of(where) != body:
        return _refused(Reason.WRONG_SUBJECT, f"intent for {claimed} arrived on another subject")
    return None


def intake(
    data: bytes,
    subject: str,
    *,
    trusted: Mapping[str, nacl.signing.VerifyKey],
    retired: Collection[str] = (),
    site: str,
    prefix: str = subjects.DEFAULT_PREFIX,
) -> messages.Intent | Refusal:
    """The verified intent in ``data`` delivered on ``subject``, or why it is refused.

    Authenticity first (nothing of an unverified body is believed), then where it is for.
    """
    if len(data) > MAX_INTENT_BYTES:
        return _refused(
            Reason.OVERSIZED, f"{len(data)} bytes, more than the {MAX_INTENT_BYTES} an intent may have"
        )
    try:
        intent = messages.decode_intent(data)
    except protocol_errors.DecodeError as exc:
        return _refused(_undecodable_reason(data), str(exc))
    if not intent.signature or not intent.key_id:
        return _refused(Reason.UNSIGNED, "intent is not signed (no signature or no key id)")
    if intent.key_id in retired:
        # Before "untrusted": a stale key file may still list it, and the operator must see why.
        return _refused(Reason.RETIRED_KEY, f"intent signed by retired key id {intent.key_id[:32]!r}")
    if intent.key_id not in trusted:
        return _refused(Reason.UNTRUSTED_KEY, f"intent signed by untrusted key id {intent.key_id[:32]!r}")
    try:
        signing.verify(data, trusted, retired=retired)
    except (protocol_errors.DecodeError, protocol_errors.SignatureError) as exc:
        return _refused(Reason.BAD_SIGNATURE, str(exc))
    return misplaced(intent, site=site, subject=subject, prefix=prefix) or intent
