"""Deletions the site-unavailable timeout released: when their subjects go. Pure.

A released deletion leaves the owner's delete intent in the stream for the site to apply when
it returns: the RKCP and its finalizer are gone, so no reconcile of it ever
purges its subjects. ``decide`` looks at the last message of each subject of the coordinates
(what ``hub.controllers.rkcp.purging`` read) and says whether the site confirmed, and which of the
released owner's messages are purged then, each up to its own sequence: a message of a new
owner at the same coordinates, published meanwhile, is never touched.

Confirmed means: the site reported the released owner's TCP ``Deleted`` in answer to the delete
intent or a later one, or a new owner whose intent names the released one (``replaces``) has
its own TCP reported there (which the agent creates only once the old one is gone).
"""

from __future__ import annotations

from dataclasses import dataclass

from hub.reconcile.rkcp import status as rkcp_status
from protocol import subjects


@dataclass(frozen=True)
class Stored:
    """The last message on one subject, reduced to what the decision needs."""

    seq: int
    owner_uid: str
    op: str = ""
    """For an intent: provision | delete."""
    replaces: tuple[str, ...] = ()
    """For an intent: the earlier owners it names."""
    phase: str = ""
    """For a status."""
    reason: str = ""
    """For a status."""
    intent_seq: int = 0
    """For a status: the intent it answers."""


@dataclass(frozen=True)
class PurgeUpTo:
    """Purge ``kind``'s subject of the coordinates up to and including sequence ``seq``."""

    kind: subjects.Kind
    seq: int


@dataclass(frozen=True)
class Decision:
    confirmed: bool
    purge: tuple[PurgeUpTo, ...] = ()

    @property
    def done(self) -> bool:
        """Nothing more to wait for: the released deletion can be forgotten."""
        return self.confirmed


def _answered_by_new_owner(uid: str, intent: Stored | None, status: Stored) -> bool:
    return (
        intent is not None
        and uid in intent.replaces
        and status.owner_uid == intent.owner_uid
        and status.phase != "Rejected"
        and status.reason != rkcp_status.REPLACING_PREVIOUS_OWNER
    )


def decide(
    uid: str,
    delete_seq: int,
    *,
    intent: Stored | None,
    status: Stored | None,
    secret: Stored | None,
) -> Decision:
    """Whether the site confirmed the released deletion of owner ``uid`` (delete intent at
    ``delete_seq``), and the purges of that owner's remaining messages once it did."""
    if status is None:
        # Nothing the site said yet, or the subjects were purged already: done only when no
        # message of the owner is left and no intent still waits to delete its TCP.
        waiting = intent is not None and (intent.owner_uid == uid or uid in intent.replaces)
        return Decision(confirmed=not waiting and (secret is None or secret.owner_uid != uid))
    confirmed = (
        status.owner_uid == uid and status.phase == "Deleted" and status.intent_seq >= delete_seq
    ) or _answered_by_new_owner(uid, intent, status)
    if not confirmed:
        return Decision(confirmed=False)
    purge: list[PurgeUpTo] = []
    if intent is not None and intent.owner_uid == uid and intent.op == "delete":
        purge.append(PurgeUpTo(subjects.Kind.INTENT, intent.seq))
    if status.owner_uid == uid:
        purge.append(PurgeUpTo(subjects.Kind.STATUS, status.seq))
    if secret is not None and secret.owner_uid == uid:
        purge.append(PurgeUpTo(subjects.Kind.SECRET, secret.seq))
    return Decision(confirmed=True, purge=tuple(purge))
