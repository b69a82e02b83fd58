"""Deciding what one verified intent means for the site: pure, no I/O, no clock.

``decide`` maps (intent, its stream sequence, what the site has) to one ``Decision``: an action
on the TCP (create, apply, delete), a Status to report, and how to settle the message (ack, nak
with a delay, term), tested by tables; so is whether the TCP must be read first at all
(``observes_first``). What the API's refusal of an action means is ``failures``'; turning bytes
into a verified intent is ``intake``'s; the words of an outcome are ``outcomes``'.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.apply import intake
from agent.apply.outcomes import Result, Settle
from agent.tcp import legacy, managed, propagation
from protocol import messages


@dataclass(frozen=True)
class Create:
    body: dict[str, Any]
    """Refused (AlreadyExists) when a TCP of that name exists after all, else applied."""


@dataclass(frozen=True)
class Apply:
    """Server-side apply of every field we own (``managed.desired``) to the TCP observed: its uid
    is in the body, so another TCP of that name is never written."""

    body: dict[str, Any]
    handover: dict[str, Any] | None = None
    """Patched first when an older agent wrote the TCP (``agent.tcp.legacy``)."""


@dataclass(frozen=True)
class Delete:
    uid: str
    """Precondition: delete only this object, never a newer one of the same name."""
    replacing: bool = False
    """The TCP of an earlier owner the intent names in ``replaces``, deleted to make room for
    the intent's owner: no Deleted is owed for it (the apply loop settles with a nak, and the
    redelivery creates the new owner's TCP)."""


Action = Create | Apply | Delete


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
    result: Result
    """Metric label and log word."""
    action: Action | None = None
    report: Report | None = None
    """The Status owed. With a (non-replacing) ``Delete`` it is the Deleted the status loop sends
    once the TCP is gone (the apply loop tells it first); otherwise the apply loop sends it."""
    settle: Settle = Settle.ACK
    delay: float | None = None
    """For ``nak``: seconds before redelivery."""
    why: str = ""
    """For a retry: what refused or what is awaited, for the log."""


_BEING_DELETED = Decision(
    Result.RETRY,
    settle=Settle.NAK,
    delay=2.0,
    why="it is being deleted (finalizers); it is made anew once gone",
)


@dataclass(frozen=True)
class Context:
    site: str
    namespaces: tuple[str, ...]
    """Target namespaces; empty means all."""
    namespace_retry: float


def new_status(intent: messages.Intent, seq: int, report: Report, *, now: dt.datetime) -> messages.Status:
    """The Status ``report`` says for ``intent`` (stream sequence ``seq``)."""
    return messages.Status(
        site=intent.site,
        namespace=intent.namespace,
        name=intent.name,
        owner_uid=intent.owner.uid,
        observed_generation=(
            intent.generation if report.observed_generation is None else report.observed_generation
        ),
        intent_seq=seq,
        phase=report.phase,
        reason=report.reason,
        message=report.message,
        observed_at=now,
    )


def observes_first(intent: messages.Intent, known: bool | None) -> bool:
    """Whether the TCP is read from the API before deciding, given what the status loop's cache
    says of it (``known``: None while that cache is not complete yet).

    A provision the complete cache has no managed TCP for is decided as absent, without a GET:
    for a first provision that GET was always a 404 and a large share of the agent's cost per
    control plane. The create that follows is the check: ``failures.exists_after_all`` sends
    the intent back through the GET. A delete is always read first: what it deletes, if
    anything, depends on whose TCP is there, and its precondition is that TCP's uid.
    """
    return intent.op == "delete" or known is not False


def decide(
    intent: messages.Intent, seq: int, observed: Mapping[str, Any] | None, *, ctx: Context
) -> Decision:
    decided = decide_unobserved(intent, ctx=ctx)
    if decided is not None:
        return decided
    if intent.op == "delete":
        return _decide_delete(intent, seq, observed)
    return _decide_provision(intent, seq, observed)


def decide_unobserved(intent: messages.Intent, *, ctx: Context) -> Decision | None:
    """The decision that needs no look at the site: another site's intent, or one for a
    namespace the agent does not serve. Made before anything is read, since the agent's RBAC
    reaches only the namespaces it serves: a GET there would be refused (403), not answered."""
    if intake.misplaced(intent, site=ctx.site) is not None:
        return Decision(Result.WRONG_SITE, settle=Settle.TERM)
    if ctx.namespaces and intent.namespace not in ctx.namespaces:
        if intent.op == "delete":
            # Nothing to delete means deleted: this agent never creates a TCP in a
            # namespace it does not serve, so the owner's TCP does not exist here. Refusing it
            # too would leave the RKCP the site refused waiting for a Deleted forever.
            return Decision(Result.DELETED, report=_gone(intent))
        return Decision(
            Result.REJECTED,
            report=Report(
                "Rejected",
                "NamespaceNotAllowed",
                f"namespace {intent.namespace!r} is not a target namespace of the agent at site {ctx.site!r}",
            ),
        )
    return None


def _decide_provision(intent: messages.Intent, seq: int, observed: Mapping[str, Any] | None) -> Decision:
    if (why := propagation.problem(intent.labels, intent.annotations)) is not None:
        # Before anything else: the TCP is left as it is, whoever owns it.
        return Decision(
            Result.REJECTED,
            report=Report(
                "Rejected",
                "InvalidMetadata",
                f"intent for TenantControlPlane {intent.namespace}/{intent.name}: {why}",
            ),
        )
    if observed is None:
        return Decision(Result.APPLIED, action=Create(managed.desired(intent, seq=seq)))
    ours = managed.applied(observed, site=intent.site)
    where = f"TenantControlPlane {intent.namespace}/{intent.name}"
    if ours is None:
        return Decision(
            Result.CONFLICT,
            report=Report(
                "Rejected", "Conflict", f"{where} exists and is not managed by kamaji-broker for this site"
            ),
        )
    if ours.owner_uid != intent.owner.uid and ours.owner_uid in intent.replaces:
        return _replace(intent, observed, ours, where=where)
    if ours.owner_uid != intent.owner.uid:
        return Decision(
            Result.CONFLICT,
            report=Report("Rejected", "Conflict", f"{where} belongs to another owner (uid {ours.owner_uid})"),
        )
    if ours.intent_seq > seq:
        return Decision(Result.STALE)
    if (refused := _older_generation(intent, ours, where=where)) is not None:
        return refused
    if managed.deleting(observed):
        # Being deleted (Kamaji's finalizers): wait until it is gone, then create it anew.
        return _BEING_DELETED
    if (
        ours.intent_seq == seq
        and not managed.drift(intent.spec, observed)
        and not propagation.differs(intent.labels, intent.annotations, observed)
    ):
        return Decision(Result.UNCHANGED)
    body = managed.desired(intent, seq=seq, observed=observed)
    # To the TCP observed only: if it was replaced meanwhile by another of the same name (or
    # deleted), the apply is refused and the redelivery decides again on what is there.
    body["metadata"]["uid"] = managed.uid(observed)
    return Decision(Result.APPLIED, action=Apply(body, handover=legacy.handover(observed)))


def _replace(
    intent: messages.Intent, observed: Mapping[str, Any], ours: managed.Applied, *, where: str
) -> Decision:
    """Delete the TCP of an earlier owner the hub released, then apply the intent.

    Only an owner the signed intent names in ``replaces``: the hub lists the owners whose
    deletion it released and the site never applied, nobody else. Settled with an immediate
    ``nak``: once the old TCP is gone (Kamaji's finalizers), the redelivery creates the new one.
    """
    uid = managed.uid(observed)
    return Decision(
        Result.REPLACING,
        action=Delete(uid=uid, replacing=True),
        report=Report(
            "Provisioning",
            "ReplacingPreviousOwner",
            f"deleting {where} of the previous owner (uid {ours.owner_uid}), released by the hub, "
            "before creating it for this owner",
        ),
        settle=Settle.NAK,
    )


def _gone(intent: messages.Intent) -> Report:
    return Report("Deleted", "Deleted", f"TenantControlPlane {intent.namespace}/{intent.name} is gone")


def _decide_delete(intent: messages.Intent, seq: int, observed: Mapping[str, Any] | None) -> Decision:
    gone = _gone(intent)
    if observed is None:
        return Decision(Result.DELETED, report=gone)
    ours = managed.applied(observed, site=intent.site)
    if ours is not None and ours.owner_uid != intent.owner.uid and ours.owner_uid in intent.replaces:
        # An earlier owner's TCP the hub released and names: it goes too (the status loop's
        # Deleted for it answers this intent, which the hub accepts for the owner it replaced).
        uid = managed.uid(observed)
        return Decision(Result.DELETED, action=Delete(uid=uid), report=gone)
    if ours is None or ours.owner_uid != intent.owner.uid:
        # Not the intent owner's TCP (never ours, or a newer owner's): leave it alone. The
        # owner's TCP does not exist here, which is what the hub waits to hear.
        return Decision(Result.STALE, report=gone)
    if ours.intent_seq > seq:
        return Decision(Result.STALE)
    where = f"TenantControlPlane {intent.namespace}/{intent.name}"
    if (refused := _older_generation(intent, ours, where=where)) is not None:
        return refused
    uid = managed.uid(observed)
    return Decision(Result.DELETED, action=Delete(uid=uid), report=gone)


def _older_generation(intent: messages.Intent, ours: managed.Applied, *, where: str) -> Decision | None:
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
        Result.STALE_GENERATION,
        report=Report(
            "Rejected",
            "StaleGeneration",
            f"intent generation {intent.generation} is older than generation {ours.generation} "
            f"applied to {where}: refused, the TenantControlPlane is left as it is",
            observed_generation=ours.generation,
        ),
        settle=Settle.TERM,
    )
