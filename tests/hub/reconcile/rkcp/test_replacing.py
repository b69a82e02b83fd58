"""hub.reconcile.rkcp.decide: a new owner at the coordinates of a released deletion.

Which earlier owners an intent names (``replaced_owners``), what is published, the conditions
and events while the old TCP is replaced, the old owner's secrets, and a delete answered for it.
"""

from __future__ import annotations

import dataclasses

import pytest

from hub.reconcile.rkcp import decide, intents, vocabulary
from hub.reconcile.rkcp.published import Published
from tests.hub.reconcile.rkcp.test_decide import UID, cond, observed, published, rkcp_obj, status

OLD = "old-uid"
OLDER = "older-uid"


def replaced(p: Published, *uids: str) -> Published:
    return dataclasses.replace(p, replaces=uids)


OWNERS = [
    # id, latest intent on the subject, site's status for this owner, expected replaces
    ("nothing published", None, None, ()),
    ("a released owner's delete", published(op="delete", owner=OLD), None, (OLD,)),
    ("a released delete carrying an older one", replaced(published(op="delete", owner=OLD), OLDER), None,
     (OLDER, OLD)),
    ("another owner's provision: not released by us", published(owner=OLD), None, ()),
    ("a delete not signed by the hub names nobody",
     dataclasses.replace(published(op="delete", owner=OLD), signed=False), None, ()),
    ("our provision keeps its list until the site answers", replaced(published(), OLD), None, (OLD,)),
    ("the agent's own 'replacing' report is not an answer", replaced(published(), OLD),
     status("Provisioning", reason="ReplacingPreviousOwner"), (OLD,)),
    ("a Conflict is not an answer", replaced(published(), OLD), status("Rejected", reason="Conflict"),
     (OLD,)),
    ("our TCP reported: the old one is gone", replaced(published(), OLD), status("Provisioning"), ()),
    ("our own uid is never listed", replaced(published(op="delete", owner=OLD), UID), None, (OLD,)),
]  # fmt: skip


@pytest.mark.parametrize(("p", "s", "expected"), [c[1:] for c in OWNERS], ids=[c[0] for c in OWNERS])
def test_replaced_owners(p: Published | None, s: object, expected: tuple[str, ...]) -> None:
    o = observed(published=p, report=vocabulary.SiteReport(status=s))  # type: ignore[arg-type]
    assert intents.replaced_owners(o, s) == expected  # type: ignore[arg-type]


def test_the_list_is_bounded_newest_kept() -> None:
    many = tuple(f"u{i}" for i in range(40))
    o = observed(
        published=replaced(published(op="delete", owner="last"), *many), report=vocabulary.SiteReport()
    )
    got = intents.replaced_owners(o, None)
    assert len(got) == 16 and got[-1] == "last" and got[0] == "u25"


def test_a_new_owner_over_a_released_delete_publishes_its_provision_naming_the_old_owner() -> None:
    o = observed(published=published(op="delete", owner=OLD, seq=7), report=vocabulary.SiteReport())
    plan = decide.reconcile(o)
    [publish] = [a for a in plan.actions if isinstance(a, vocabulary.Publish)]
    assert (publish.op, publish.replaces, publish.expected_last_seq) == ("provision", (OLD,), 7)
    assert cond(plan, "TenantControlPlaneReady") == ("False", "ReplacingPreviousOwner")
    assert cond(plan, "Ready")[0] == "False"
    [event] = [
        a for a in plan.actions if isinstance(a, vocabulary.Event) and a.reason == "ReplacingPreviousOwner"
    ]
    assert OLD in event.message and event.type == "Normal"


def test_while_replacing_a_spec_change_carries_the_list_on() -> None:
    o = observed(published=replaced(published(spec={"other": 1}), OLD), report=vocabulary.SiteReport())
    [publish] = [a for a in decide.reconcile(o).actions if isinstance(a, vocabulary.Publish)]
    assert publish.replaces == (OLD,)


def test_once_replaced_nothing_is_published_and_the_condition_follows_the_site() -> None:
    o = observed(published=replaced(published(), OLD))
    plan = decide.reconcile(o)
    assert not [a for a in plan.actions if isinstance(a, vocabulary.Publish)]
    assert cond(plan, "TenantControlPlaneReady") == ("True", "Ready")


def test_the_old_owners_secrets_are_waited_past_not_refused() -> None:
    o = observed(
        published=replaced(published(), OLD),
        report=vocabulary.SiteReport(
            status=status(owner=OLD, phase="Deleted"), secrets_checksum="c", secrets_owner_uid=OLD
        ),
    )
    plan = decide.reconcile(o)
    assert plan.secrets_refused == ""
    assert cond(plan, "SecretsSynced") == ("Unknown", "WaitingForSecrets")


def test_a_stranger_s_secrets_are_still_refused() -> None:
    o = observed(
        published=replaced(published(), OLD),
        report=vocabulary.SiteReport(status=None, secrets_checksum="c", secrets_owner_uid="stranger"),
    )
    assert decide.reconcile(o).secrets_refused == "OwnerMismatch"


DELETES = [
    # id, latest intent, status, expected action kinds
    ("our delete answered Deleted for us", published(op="delete", seq=9), status("Deleted", seq=9),
     ["Purge", "RemoveFinalizer"]),
    ("answered Deleted for the old owner it names", replaced(published(op="delete", seq=9), OLD),
     status("Deleted", seq=9, owner=OLD), ["Purge", "RemoveFinalizer"]),
    ("a Deleted of an owner it does not name: wait", published(op="delete", seq=9),
     status("Deleted", seq=9, owner=OLD), []),
    ("the old owner's Deleted of an older intent: wait", replaced(published(op="delete", seq=9), OLD),
     status("Deleted", seq=4, owner=OLD), []),
]  # fmt: skip


@pytest.mark.parametrize(("p", "s", "actions"), [c[1:] for c in DELETES], ids=[c[0] for c in DELETES])
def test_deleting_while_replacing(p: Published, s: object, actions: list[str]) -> None:
    o = observed(rkcp_obj(deleting=True), published=p, report=vocabulary.SiteReport(status=s))  # type: ignore[arg-type]
    plan = decide.reconcile(o)
    assert [type(a).__name__ for a in plan.actions if not isinstance(a, vocabulary.Event)] == actions


def test_the_delete_of_a_replacing_owner_names_the_old_owner_too() -> None:
    o = observed(
        rkcp_obj(deleting=True), published=replaced(published(seq=9), OLD), report=vocabulary.SiteReport()
    )
    [publish] = [a for a in decide.reconcile(o).actions if isinstance(a, vocabulary.Publish)]
    assert (publish.op, publish.replaces) == ("delete", (OLD,))
