"""Deciding what one intent means for the site: pure, no I/O, no clock.

``intake`` turns the raw bytes of a delivery into a verified Intent or a ``Refusal`` that names
the specific reason (too large, not JSON, another schema, invalid, unsigned, untrusted key, bad
signature, another site, another subject); a refused message is terminated. ``decide`` maps
(intent, its stream sequence, what the site has) to one ``Decision``: an action on the TCP
(create, patch, delete), a Status to report, and how to settle the message (ack, nak with a
delay, term). ``after_error`` maps the API's answer to an action that failed onto the same
shape, so every outcome of an intent is decided here and tested by tables.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import msgspec
import nacl.signing

from agent import tcps
from common import backoff
from common.kube import errors as kerrors
from protocol import errors as protocol_errors
from protocol import messages, signing, subjects

Settle = Literal["ack", "nak", "term"]

MAX_INTENT_BYTES: Final = 256 * 1024
"""Bytes: larger intents are refused before decoding. A TCP spec is a few kB; Kubernetes objects
stay well below this too, and the server's 1 MB default would let anyone with the hub's NATS
credentials make every agent parse megabytes."""

_SHOWN: Final = 300
"""Characters of a refusal message kept for logs: the message may quote what the sender wrote."""

# The coarse result label of kb_agent_intents_total, kept from before the specific reasons.
_RESULTS: Final[Mapping[str, str]] = {
    "oversized": "undecodable",
    "undecodable": "undecodable",
    "unsupported_schema": "undecodable",
    "invalid": "undecodable",
    "unsigned": "bad_signature",
    "untrusted_key": "bad_signature",
    "retired_key": "retired_key",
    "bad_signature": "bad_signature",
    "wrong_site": "wrong_subject",
    "wrong_subject": "wrong_subject",
}


@dataclass(frozen=True)
class Refusal:
    """Why the bytes of a delivery are not an intent this agent may act on."""

    reason: str
    """Label of kb_agent_intents_rejected_total: one of ``_RESULTS``' keys."""
    message: str
    """For the log: names fields, key ids and coordinates (quoted), never more than ``_SHOWN``."""

    @property
    def result(self) -> str:
        return _RESULTS[self.reason]


def _refused(reason: str, message: str) -> Refusal:
    if len(message) > _SHOWN:
        message = message[:_SHOWN] + "..."
    return Refusal(reason, message)


def _undecodable_reason(data: bytes) -> str:
    """Which way bytes that are not an Intent fail: not JSON at all, another schema, or invalid."""
    try:
        document = msgspec.json.decode(data)
    except (msgspec.MsgspecError, RecursionError, ValueError, UnicodeError):
        return "undecodable"
    if isinstance(document, dict) and document.get("schema", messages.SCHEMA) != messages.SCHEMA:
        return "unsupported_schema"
    return "invalid"


def intake(
    data: bytes,
    subject: str,
    *,
    trusted: Mapping[str, nacl.signing.VerifyKey],
    retired: Collection[str] = (),
    ctx: Context,
    prefix: str = subjects.DEFAULT_PREFIX,
) -> messages.Intent | Refusal:
    """The verified intent in ``data`` delivered on ``subject``, or why it is refused.

    Authenticity first (nothing of an unverified body is believed), then where it is for: the
    signature covers the body's coordinates, the subject does not, so a genuine intent moved to
    another subject or site is refused too.
    """
    if len(data) > MAX_INTENT_BYTES:
        return _refused(
            "oversized", f"{len(data)} bytes, more than the {MAX_INTENT_BYTES} an intent may have"
        )
    try:
        intent = messages.decode_intent(data)
    except protocol_errors.DecodeError as exc:
        return _refused(_undecodable_reason(data), str(exc))
    if not intent.signature or not intent.key_id:
        return _refused("unsigned", "intent is not signed (no signature or no key id)")
    if intent.key_id in retired:
        # Before "untrusted": a stale key file may still list it, and the operator must see why.
        return _refused("retired_key", f"intent signed by retired key id {intent.key_id[:32]!r}")
    if intent.key_id not in trusted:
        return _refused("untrusted_key", f"intent signed by untrusted key id {intent.key_id[:32]!r}")
    try:
        signing.verify(data, trusted, retired=retired)
    except (protocol_errors.DecodeError, protocol_errors.SignatureError) as exc:
        return _refused("bad_signature", str(exc))
    claimed = f"{intent.site!r}/{intent.namespace!r}/{intent.name!r}"
    if intent.site != ctx.site:
        return _refused(
            "wrong_site", f"intent for site {intent.site!r} ({claimed}), this is site {ctx.site!r}"
        )
    try:
        where = subjects.parse(subject, prefix=prefix)
    except protocol_errors.SubjectError as exc:
        return _refused("wrong_subject", str(exc))
    if (where.site, where.namespace, where.name) != (intent.site, intent.namespace, intent.name):
        return _refused("wrong_subject", f"intent for {claimed} arrived on another subject")
    return intent


@dataclass(frozen=True)
class Create:
    body: dict[str, Any]


@dataclass(frozen=True)
class Patch:
    patch: dict[str, Any]


@dataclass(frozen=True)
class Delete:
    uid: str
    """Precondition: delete only this object, never a newer one of the same name."""
    replacing: bool = False
    """The TCP of an earlier owner the intent names in ``replaces``, deleted to make room for
    the intent's owner: no Deleted is owed for it (the apply loop settles with a nak, and the
    redelivery creates the new owner's TCP)."""


Action = Create | Patch | Delete


@dataclass(frozen=True)
class Report:
    phase: messages.Phase
    reason: str
    message: str
    observed_generation: int | None = None
    """The generation the Status names; None: the intent's. A refusal of an older intent names
    the generation the site still runs, so the hub sees the site is ahead of the subject."""


@dataclass(frozen=True)
class Decision:
    result: str
    """Metric label and log word: applied, unchanged, stale, deleted, rejected, retry, ..."""
    action: Action | None = None
    report: Report | None = None
    settle: Settle = "ack"
    delay: float | None = None
    """For ``nak``: seconds before redelivery."""


@dataclass(frozen=True)
class Context:
    site: str
    namespaces: tuple[str, ...]
    """Target namespaces; empty means all."""
    namespace_retry: float


def redelivery_delay(num_delivered: int, *, cap: float = 60.0) -> float:
    """Redelivery delay for a transient failure: 0.5 s doubling per delivery, capped."""
    return backoff.delay(max(1, num_delivered), base=0.5, cap=cap, jitter=False)


def decide(
    intent: messages.Intent, seq: int, observed: Mapping[str, Any] | None, *, ctx: Context
) -> Decision:
    if intent.site != ctx.site:
        return Decision("wrong_site", settle="term")
    if ctx.namespaces and intent.namespace not in ctx.namespaces:
        if intent.op == "delete":
            # Nothing to delete means deleted (issue 11 §4): this agent never creates a TCP in a
            # namespace it does not serve, so the owner's TCP does not exist here. Refusing it
            # too would leave the RKCP the site refused waiting for a Deleted forever.
            return Decision("deleted", report=_gone(intent))
        return Decision(
            "rejected",
            report=Report(
                "Rejected",
                "NamespaceNotAllowed",
                f"namespace {intent.namespace!r} is not a target namespace of the agent at site {ctx.site!r}",
            ),
        )
    if intent.op == "delete":
        return _decide_delete(intent, seq, observed)
    return _decide_provision(intent, seq, observed)


def _decide_provision(intent: messages.Intent, seq: int, observed: Mapping[str, Any] | None) -> Decision:
    if observed is None:
        return Decision("applied", action=Create(tcps.desired(intent, seq=seq)))
    ours = tcps.applied(observed, site=intent.site)
    where = f"TenantControlPlane {intent.namespace}/{intent.name}"
    if ours is None:
        return Decision(
            "conflict",
            report=Report(
                "Rejected", "Conflict", f"{where} exists and is not managed by kamaji-broker for this site"
            ),
        )
    if ours.owner_uid != intent.owner.uid and ours.owner_uid in intent.replaces:
        return _replace(intent, observed, ours, where=where)
    if ours.owner_uid != intent.owner.uid:
        return Decision(
            "conflict",
            report=Report("Rejected", "Conflict", f"{where} belongs to another owner (uid {ours.owner_uid})"),
        )
    if ours.intent_seq > seq:
        return Decision("stale")
    if (refused := _older_generation(intent, ours, where=where)) is not None:
        return refused
    if tcps.deleting(observed):
        # Being deleted (Kamaji's finalizers): wait until it is gone, then create it anew.
        return Decision("retry", settle="nak", delay=2.0)
    if ours.intent_seq == seq and not tcps.drift(intent.spec, observed):
        return Decision("unchanged")
    return Decision("applied", action=Patch(tcps.patch_for(intent, seq=seq, observed=observed)))


def _replace(
    intent: messages.Intent, observed: Mapping[str, Any], ours: tcps.Applied, *, where: str
) -> Decision:
    """Delete the TCP of an earlier owner the hub released (issue 11 §3), then apply the intent.

    Only an owner the signed intent names in ``replaces``: the hub lists the owners whose
    deletion it released and the site never applied, nobody else. Settled with an immediate
    ``nak``: once the old TCP is gone (Kamaji's finalizers), the redelivery creates the new one.
    """
    uid = str(tcps.meta(observed).get("uid") or "")
    return Decision(
        "replacing",
        action=Delete(uid=uid, replacing=True),
        report=Report(
            "Provisioning",
            "ReplacingPreviousOwner",
            f"deleting {where} of the previous owner (uid {ours.owner_uid}), released by the hub, "
            "before creating it for this owner",
        ),
        settle="nak",
    )


def _gone(intent: messages.Intent) -> Report:
    return Report("Deleted", "Deleted", f"TenantControlPlane {intent.namespace}/{intent.name} is gone")


def _decide_delete(intent: messages.Intent, seq: int, observed: Mapping[str, Any] | None) -> Decision:
    gone = _gone(intent)
    if observed is None:
        return Decision("deleted", report=gone)
    ours = tcps.applied(observed, site=intent.site)
    if ours is not None and ours.owner_uid != intent.owner.uid and ours.owner_uid in intent.replaces:
        # An earlier owner's TCP the hub released and names: it goes too (the status loop's
        # Deleted for it answers this intent, which the hub accepts for the owner it replaced).
        uid = str(tcps.meta(observed).get("uid") or "")
        return Decision("deleted", action=Delete(uid=uid), report=gone)
    if ours is None or ours.owner_uid != intent.owner.uid:
        # Not the intent owner's TCP (never ours, or a newer owner's): leave it alone. The
        # owner's TCP does not exist here, which is what the hub waits to hear.
        return Decision("stale", report=gone)
    if ours.intent_seq > seq:
        return Decision("stale")
    where = f"TenantControlPlane {intent.namespace}/{intent.name}"
    if (refused := _older_generation(intent, ours, where=where)) is not None:
        return refused
    uid = str(tcps.meta(observed).get("uid") or "")
    return Decision("deleted", action=Delete(uid=uid), report=gone)


def _older_generation(intent: messages.Intent, ours: tcps.Applied, *, where: str) -> Decision | None:
    """Refuse an intent of the TCP's owner older (lower generation) than the one applied.

    The stream-sequence fence cannot catch this: an old, genuinely signed intent published
    again (a replay) gets a new, higher sequence. The owner's generations only grow, so a lower
    one is never the hub's current wish. Settled with ``term``: it is refused, not applied, and
    redelivering it can never change that; the server's MSG_TERMINATED advisory records it. The
    Rejected Status tells the hub, which publishes its current intent again.
    """
    if intent.generation >= ours.generation:
        return None
    return Decision(
        "stale_generation",
        report=Report(
            "Rejected",
            "StaleGeneration",
            f"intent generation {intent.generation} is older than generation {ours.generation} "
            f"applied to {where}: refused, the TenantControlPlane is left as it is",
            observed_generation=ours.generation,
        ),
        settle="term",
    )


def after_error(
    intent: messages.Intent, error: kerrors.KubeError, *, num_delivered: int, ctx: Context
) -> Decision:
    """The decision once the API refused the action; transient failures are retried with backoff."""
    if isinstance(error, kerrors.Invalid):
        return Decision("rejected", report=Report("Rejected", "Invalid", error.message or str(error)))
    if isinstance(error, kerrors.NotFound) and error.kind == "namespaces":
        return Decision(
            "rejected",
            report=Report(
                "Rejected",
                "NamespaceNotFound",
                f"namespace {intent.namespace!r} does not exist at site {ctx.site!r}",
            ),
            settle="nak",
            delay=ctx.namespace_retry,
        )
    # Anything else is transient or raced (a failed uid precondition, AlreadyExists, 5xx, no
    # answer): decide again on redelivery, after a backoff.
    return Decision("retry", settle="nak", delay=redelivery_delay(num_delivered))
