"""hub.reconcile.rkcp.released: when a released deletion is confirmed and what of it is purged."""

from __future__ import annotations

import pytest

from hub.reconcile.rkcp import released
from protocol import subjects

OLD, NEW = "old-uid", "new-uid"
INT, S, X = subjects.Kind.INTENT, subjects.Kind.STATUS, subjects.Kind.SECRET


def intent(
    owner: str = OLD, *, op: str = "delete", seq: int = 10, replaces: tuple[str, ...] = ()
) -> released.Stored:
    return released.Stored(seq=seq, owner_uid=owner, op=op, replaces=replaces)


def status(owner: str = OLD, phase: str = "Deleted", *, seq: int = 20, answers: int = 10,
           reason: str = "") -> released.Stored:  # fmt: skip
    return released.Stored(seq=seq, owner_uid=owner, phase=phase, reason=reason, intent_seq=answers)


def secret(owner: str = OLD, seq: int = 15) -> released.Stored:
    return released.Stored(seq=seq, owner_uid=owner)


CASES = [
    # id, intent, status, secret, confirmed, purges
    ("site still away", intent(), status("Ready", answers=5), secret(), False, ()),
    ("site deleting it", intent(), status("Deleting"), secret(), False, ()),
    ("Deleted answers the delete: purge all three", intent(), status(), secret(), True,
     ((INT, 10), (S, 20), (X, 15))),
    ("Deleted of an older intent is not the answer", intent(), status(answers=5), secret(), False, ()),
    ("a stranger's Deleted confirms nothing", intent(), status(owner="x"), None, False, ()),
    ("no status yet, the delete waits", intent(), None, secret(), False, ()),
    ("everything purged already: done", None, None, None, True, ()),
    ("new owner's intent names it, old TCP still reported",
     intent(NEW, op="provision", seq=30, replaces=(OLD,)), status("Ready", answers=5), secret(), False, ()),
    ("new owner's TCP reported: the old owner's secrets go, the new intent stays",
     intent(NEW, op="provision", seq=30, replaces=(OLD,)), status(NEW, "Provisioning", answers=30), secret(),
     True, ((X, 15),)),
    ("the agent's replacing report is not an answer", intent(NEW, op="provision", seq=30, replaces=(OLD,)),
     status(NEW, "Provisioning", answers=30, reason="ReplacingPreviousOwner"), secret(), False, ()),
    ("a new owner's Conflict is not an answer", intent(NEW, op="provision", seq=30, replaces=(OLD,)),
     status(NEW, "Rejected", answers=30), secret(), False, ()),
    ("a new owner not naming it confirms nothing", intent(NEW, op="provision", seq=30),
     status(NEW, "Ready", answers=30), secret(), False, ()),
    ("the old owner's Deleted answering the new intent: its status goes too",
     intent(NEW, op="provision", seq=30, replaces=(OLD,)), status(answers=30), secret(NEW), True, ((S, 20),)),
    ("no status, new owner still replacing it",
     intent(NEW, op="provision", seq=30, replaces=(OLD,)), None, None, False, ()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("i", "s", "x", "confirmed", "purges"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decide(
    i: released.Stored | None,
    s: released.Stored | None,
    x: released.Stored | None,
    confirmed: bool,
    purges: tuple[tuple[subjects.Kind, int], ...],
) -> None:
    d = released.decide(OLD, 10, intent=i, status=s, secret=x)
    assert d.confirmed is confirmed and d.done is confirmed
    assert tuple((p.kind, p.seq) for p in d.purge) == purges
