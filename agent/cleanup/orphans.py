"""Deciding anti-entropy for this site's managed TCPs: pure, no I/O, ``now`` passed in.

For each managed TCP the shell observes the object and the latest intent on its subject (the
intent stream keeps one message per subject, so that is the hub's current desire), and
``decide`` answers with actions:

- ``Reapply`` when the latest intent is the provision already applied (same stream sequence as
  the TCP's annotation) and applying it would change the TCP (``managed.drift``: a site admin
  edited a field we own, or the TCP was never applied by this agent, as an older agent's, whose
  fields are handed over first: ``agent.tcp.legacy``).
- Nothing when the latest intent is newer (the apply loop owns it) or a delete (likewise).
- ``DeleteOrphan`` / ``ReportOrphan`` when the subject has had no message for longer than the
  grace period **and** the consumer is caught up. A TCP can look orphaned while its fresh
  intent is still in flight (or the hub purged and re-published), so pending intents veto it.

- ``recreate`` when a managed TCP vanished that no delete intent removed (a site admin deleted
  it): the TCP body to create again while the latest intent still says provision for its owner.

The orphan clock (first time a TCP was seen without an intent) and the set of orphans already
reported are state the shell keeps between passes; ``decide`` takes them and returns the next
ones, so a pass is a function of its inputs and tested by tables. ``new_event`` is the Warning
Event the shell records for an orphan it deletes or reports.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from agent.tcp import legacy, managed, propagation
from common import objects
from common.kube import events
from protocol import messages

Policy = Literal["delete", "report"]

COMPONENT: Final = "kamaji-broker-agent"
"""Events' source/reportingComponent: what a site admin sees in ``kubectl get events``."""
REASON_DELETED: Final = "OrphanDeleted"
REASON_ORPHANED: Final = "Orphaned"

Key = tuple[str, str, str]
"""(namespace, name, uid) of a TCP. The uid is part of it: a TCP deleted and created anew under
the same name is another object and starts its own orphan clock."""


@dataclass(frozen=True)
class Latest:
    """The verified latest intent on the TCP's subject and its stream sequence."""

    intent: messages.Intent
    seq: int


@dataclass(frozen=True)
class Unverifiable:
    """The subject holds a message that does not verify (or is not for this TCP): never act on it."""

    reason: str


Found = Latest | Unverifiable | None
"""What the subject holds; None when it has no message."""


@dataclass(frozen=True)
class Observed:
    tcp: Mapping[str, Any]
    latest: Found


@dataclass(frozen=True)
class Clocks:
    """State carried from one pass to the next (only for TCPs that still exist)."""

    since: Mapping[Key, float] = field(default_factory=dict)
    """When each TCP was first seen with no message on its subject."""
    reported: frozenset[Key] = frozenset()
    """Orphans already reported (policy ``report``): reported once, not on every pass."""


@dataclass(frozen=True)
class Reapply:
    namespace: str
    name: str
    body: dict[str, Any]
    """What to apply: every field we own, with the observed resourceVersion as a precondition."""
    fields: tuple[str, ...]
    """Paths that drifted (never their values: a spec may hold anything)."""
    seq: int
    handover: dict[str, Any] | None = None
    """Patched first when an older agent wrote the TCP (``agent.tcp.legacy``): its fields become
    the apply's, which then needs the resourceVersion the patch answers."""


@dataclass(frozen=True)
class DeleteOrphan:
    namespace: str
    name: str
    uid: str
    """Delete precondition: only this object, never a newer one of the same name."""
    message: str


@dataclass(frozen=True)
class ReportOrphan:
    namespace: str
    name: str
    uid: str
    message: str


Action = Reapply | DeleteOrphan | ReportOrphan


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...]
    clocks: Clocks
    waiting: int = 0
    """Orphans seen but not acted on yet (grace running, or intents pending): for the log."""


def key_of(tcp: Mapping[str, Any]) -> Key:
    return *objects.key(tcp), managed.uid(tcp)


def decide(
    observed: Iterable[Observed],
    *,
    site: str,
    caught_up: bool,
    clocks: Clocks,
    now: float,
    grace: float,
    policy: Policy,
) -> Plan:
    actions: list[Action] = []
    since: dict[Key, float] = {}
    reported: set[Key] = set()
    waiting = 0
    for item in observed:
        ours = managed.applied(item.tcp, site=site)
        if ours is None:
            continue  # not this site's (the label selector should have kept it out)
        key = key_of(item.tcp)
        if item.latest is not None:
            # Any message on the subject (even one we cannot verify) means the hub still
            # speaks about this TCP: not an orphan, and the clock starts over if it empties again.
            if isinstance(item.latest, Latest) and not managed.deleting(item.tcp):
                reapply = _reapply(item.tcp, item.latest, ours)
                if reapply is not None:
                    actions.append(reapply)
            continue
        first = clocks.since.get(key, now)
        since[key] = first
        if key in clocks.reported:
            reported.add(key)
        if managed.deleting(item.tcp):
            continue  # already going (our delete, or a site admin's): only keep the clock
        if not caught_up or now - first <= grace:
            waiting += 1
            continue
        message = _orphan_message(item.tcp, key, seconds=now - first, grace=grace, policy=policy)
        if policy == "delete":
            actions.append(DeleteOrphan(namespace=key[0], name=key[1], uid=key[2], message=message))
        elif key not in reported:
            reported.add(key)
            actions.append(ReportOrphan(namespace=key[0], name=key[1], uid=key[2], message=message))
    return Plan(
        actions=tuple(actions),
        clocks=Clocks(since=since, reported=frozenset(reported)),
        waiting=waiting,
    )


def recreate(latest: Found, vanished: managed.Applied | None) -> dict[str, Any] | None:
    """The TCP to create again for one that vanished (annotations ``vanished``), or None.

    Only the latest intent's word counts: a provision for the vanished TCP's owner, as new as
    the one it ran or newer, is still the hub's wish, so the site converges back to it.
    Anything else (no message, one that does not verify, a delete, another owner's
    intent, an older one) leaves the TCP gone: the apply loop handles new intents, and the
    Deleted report is then the truth.
    """
    if not isinstance(latest, Latest) or vanished is None:
        return None
    intent = latest.intent
    if intent.op != "provision" or intent.owner.uid != vanished.owner_uid:
        return None
    if latest.seq < vanished.intent_seq or intent.generation < vanished.generation:
        return None
    return managed.desired(intent, seq=latest.seq)


def _reapply(tcp: Mapping[str, Any], latest: Latest, ours: managed.Applied) -> Reapply | None:
    intent = latest.intent
    if intent.op != "provision" or latest.seq != ours.intent_seq or intent.owner.uid != ours.owner_uid:
        # A newer intent (or a delete) is the apply loop's to handle; an older one cannot be
        # the subject's latest unless the stream was recreated, and then it is not ours to judge.
        return None
    fields = managed.drift(intent.spec, tcp)
    handover = legacy.handover(tcp)
    older = handover is not None or legacy.marked(tcp)
    if not fields and not propagation.differs(intent.labels, intent.annotations, tcp) and not older:
        # Also applied: a propagated label or annotation changed or removed at the site, and
        # a TCP an older agent wrote (handed over, then applied until its annotations are gone).
        return None
    body = managed.desired(intent, seq=latest.seq, observed=tcp)
    version = str(managed.meta(tcp).get("resourceVersion") or "")
    if version:
        # Optimistic concurrency: if the apply loop applied a newer intent in meanwhile, this
        # apply fails with Conflict instead of writing the older spec over it.
        body["metadata"]["resourceVersion"] = version
    namespace, name = objects.key(tcp)
    return Reapply(
        namespace=namespace,
        name=name,
        body=body,
        fields=tuple(fields),
        seq=latest.seq,
        handover=handover,
    )


def _orphan_message(tcp: Mapping[str, Any], key: Key, *, seconds: float, grace: float, policy: Policy) -> str:
    owner = str((managed.meta(tcp).get("annotations") or {}).get(managed.OWNER) or "unknown")
    what = "deleting it" if policy == "delete" else "leaving it in place (orphan policy report)"
    return (
        f"TenantControlPlane {key[0]}/{key[1]} (owner {owner}) has had no intent for {seconds:.0f}s "
        f"(grace {grace:.0f}s) while every intent for this site was applied: {what}"
    )


def new_event(action: DeleteOrphan | ReportOrphan, *, site: str, now: dt.datetime) -> dict[str, Any]:
    """The Warning Event about an orphaned TCP the shell records (deleted, or reported)."""
    return events.new_event(
        managed.TCP,
        namespace=action.namespace,
        name=action.name,
        uid=action.uid,
        type="Warning",
        reason=REASON_DELETED if isinstance(action, DeleteOrphan) else REASON_ORPHANED,
        message=action.message,
        component=COMPONENT,
        instance=f"{COMPONENT}-{site}",
        now=now,
    )
