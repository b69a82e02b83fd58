"""hub.reconcile.rkcp.owner: which owner identity an RKCP speaks by, as a table; and what the plan does
with it (stamped with the finalizer, carried over by clusterctl move, refused, hands off)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hub import conditions as c
from hub.api import cluster
from hub.api import rkcp as api
from hub.reconcile.rkcp import decide, facts, owner, vocabulary
from hub.reconcile.rkcp.owner import Standing
from hub.reconcile.rkcp.published import Published
from tests.hub.reconcile.rkcp import test_decide as test_rkcp
from tests.hub.reconcile.rkcp.test_decide import cond, kinds, observed, rkcp_obj, status

NEW = "uid-in-the-target"
"""The object's uid after clusterctl move recreated it."""
FIRST = "rkcp-uid"
"""The uid it had at its first reconcile (``test_rkcp.UID``): the stamped identity."""


def obj(
    claim: str | None, *, uid: str = NEW, finalized: bool = True, deleting: bool = False, **meta: Any
) -> Any:
    # clusterctl move copies the spec, the endpoint the hub wrote included.
    r = rkcp_obj(
        finalizer=finalized, deleting=deleting, controlPlaneEndpoint={"host": "10.0.0.1", "port": 6443}
    )
    annotations = {} if claim is None else {api.OWNER_UID_ANNOTATION: claim}
    return r.model_copy(
        update={"metadata": r.metadata.model_copy(update={"uid": uid, "annotations": annotations, **meta})}
    )


KEY = "hub-key-2"
"""The key the hub signs with now."""


def published(*, of: tuple[str, str] = ("default", "cp1"), key_id: str = KEY, **kw: Any) -> Published:
    """The subject's latest intent, issued for the RKCP ``of`` (namespace, name) and signed by ``key_id``."""
    return dataclasses.replace(test_rkcp.published(**kw), owner_object=of, key_id=key_id)


def unsigned(p: Published) -> Published:
    return dataclasses.replace(p, signed=False)


# (id, object, the subject's latest intent, claimed by another RKCP here, expected (uid, standing, stamp))
CASES: list[tuple[str, Any, Published | None, str, tuple[str, Standing, bool]]] = [
    ("first reconcile: the uid, stamped", obj(None, finalized=False), None, "", (NEW, Standing.OWN, True)),
    (
        "an object from before the annotation spoke by its uid: stamped with it",
        obj(None),
        published(owner=NEW),
        "",
        (NEW, Standing.OWN, True),
    ),
    ("stamped: its own uid", obj(NEW), published(owner=NEW), "", (NEW, Standing.OWN, False)),
    (
        "moved without the annotation (from an older hub, or dropped by a replace): the subject's owner",
        obj(None),
        published(owner=FIRST),
        "",
        (FIRST, Standing.MOVED, True),
    ),
    (
        "no annotation at creation (no finalizer): its own uid, as ever (adopting takes the annotation)",
        obj(None, finalized=False),
        published(owner=FIRST),
        "",
        (NEW, Standing.OWN, True),
    ),
    (
        "no annotation, another namespace/name's intent: its own uid",
        obj(None),
        published(owner=FIRST, of=("default", "elsewhere")),
        "",
        (NEW, Standing.OWN, True),
    ),
    (
        "no annotation, a released owner's delete: its own uid (the released TCP is replaced, not taken)",
        obj(None),
        published(op="delete", owner=FIRST),
        "",
        (NEW, Standing.OWN, True),
    ),
    (
        "no annotation, the subject's owner is a still existing RKCP: its own uid",
        obj(None),
        published(owner=FIRST),
        "default/original",
        (NEW, Standing.OWN, True),
    ),
    (
        "moved: the subject holds the hub's provision for the stamped identity",
        obj(FIRST),
        published(owner=FIRST),
        "",
        (FIRST, Standing.MOVED, False),
    ),
    (
        "moved, arriving without the finalizer: still the stamped identity",
        obj(FIRST, finalized=False),
        published(owner=FIRST),
        "",
        (FIRST, Standing.MOVED, False),
    ),
    (
        "moved and being deleted: its own delete intent on the subject",
        obj(FIRST, deleting=True),
        published(op="delete", owner=FIRST),
        "",
        (FIRST, Standing.MOVED, False),
    ),
    (
        "a released owner's delete on the subject is no move: a hand-set identity at creation is replaced",
        obj(FIRST, finalized=False),
        published(op="delete", owner=FIRST),
        "",
        (NEW, Standing.OWN, True),
    ),
    (
        "a released owner's delete, the identity set on a stamped object: refused, never resurrected",
        obj(FIRST),
        published(op="delete", owner=FIRST),
        "",
        (NEW, Standing.REFUSED, False),
    ),
    (
        "an intent the hub did not sign proves nothing",
        obj(FIRST, finalized=False),
        unsigned(published(owner=FIRST)),
        "",
        (NEW, Standing.OWN, True),
    ),
    (
        "signed by an earlier, trusted key of the hub's (a rotation; signed again afterwards): proof",
        obj(FIRST),
        published(owner=FIRST, key_id="hub-key-1"),
        "",
        (FIRST, Standing.MOVED, False),
    ),
    (
        "an intent naming another key id that verifies against no key of the hub's proves nothing",
        obj(FIRST),
        unsigned(published(owner=FIRST, key_id="hub-key-1")),
        "",
        (NEW, Standing.REFUSED, False),
    ),
    (
        "the same on an object the hub never stamped: its own owner",
        obj(FIRST, finalized=False),
        unsigned(published(owner=FIRST, key_id="forged-key")),
        "",
        (NEW, Standing.OWN, True),
    ),
    (
        "an intent issued for another namespace/name proves nothing (move keeps both)",
        obj(FIRST, finalized=False),
        published(owner=FIRST, of=("default", "elsewhere")),
        "",
        (NEW, Standing.OWN, True),
    ),
    (
        "an undecodable message proves nothing",
        obj(FIRST, finalized=False),
        Published.undecodable(3),
        "",
        (NEW, Standing.OWN, True),
    ),
    (
        "another owner's intent on the subject: the identity is not a move's",
        obj(FIRST, finalized=False),
        published(owner="someone-else"),
        "",
        (NEW, Standing.OWN, True),
    ),
    (
        "an empty subject (an Orphan's purged one, say): a hand-set identity takes no orphaned TCP",
        obj(FIRST, finalized=False),
        None,
        "",
        (NEW, Standing.OWN, True),
    ),
    (
        "the identity is a still existing RKCP's (a copied manifest): its own owner from the start",
        obj(FIRST, finalized=False),
        published(owner=FIRST),
        "default/original",
        (NEW, Standing.OWN, True),
    ),
    (
        "the identity is a still existing RKCP's, on a stamped object: refused, the TCP stays its owner's",
        obj(FIRST),
        published(owner=FIRST),
        "default/original",
        (NEW, Standing.REFUSED, False),
    ),
    (
        "the annotation edited after the object spoke by its own uid: its uid, stamped again",
        obj("edited"),
        published(owner=NEW),
        "",
        (NEW, Standing.OWN, True),
    ),
    (
        "the same after a key rotation (the intent signed by the hub's earlier key)",
        obj("edited"),
        published(owner=NEW, key_id="hub-key-1"),
        "",
        (NEW, Standing.OWN, True),
    ),
]


@pytest.mark.parametrize(
    ("r", "p", "claimed_by", "expected"), [x[1:] for x in CASES], ids=[x[0] for x in CASES]
)
def test_decide(r: Any, p: Published | None, claimed_by: str, expected: tuple[str, Standing, bool]) -> None:
    finalized = vocabulary.FINALIZER in r.metadata.finalizers
    got = owner.decide(r, p, claimed_by=claimed_by, finalized=finalized)
    assert (got.uid, got.standing, got.stamp) == expected
    # Only a refusal explains itself; it names the annotation and what to do.
    assert bool(got.refused) == (got.standing == Standing.REFUSED)
    if got.refused:
        assert api.OWNER_UID_ANNOTATION in got.refused and "remove the annotation" in got.refused
        assert (claimed_by in got.refused) if claimed_by else ("no running control plane" in got.refused)


def moved_world(r: Any, **kw: Any) -> vocabulary.Observed:
    """What the hub of the target management cluster observes after clusterctl move: the site
    runs the stamped identity's TCP, reports and sealed its secrets for it; the CAPI Secrets are
    not written yet."""
    defaults: dict[str, Any] = {
        "published": published(owner=FIRST),
        "report": vocabulary.SiteReport(
            status=status(owner=FIRST), secrets_checksum="abc", secrets_owner_uid=FIRST
        ),
    }
    return observed(r, **{"signing_key_id": KEY, **defaults, **kw})


def test_the_identity_is_stamped_with_the_finalizer_in_one_action() -> None:
    for r in (obj(None, finalized=False), obj(None)):
        plan = decide.reconcile(observed(r, published=None))
        assert plan.actions == [vocabulary.AddFinalizer(owner_uid=NEW)] and plan.status is None


def test_a_moved_object_takes_over_its_control_plane_publishing_nothing() -> None:
    plan = decide.reconcile(moved_world(obj(FIRST)))
    assert kinds(plan) == ["WriteSecrets"]  # no intent: the site runs what it should, for this owner
    assert plan.actions[0] == vocabulary.WriteSecrets(checksum="abc", owner_uid=FIRST)
    assert cond(plan, "Ready")[0] == "True" and cond(plan, "SecretsSynced") == ("True", "Synced")
    assert plan.status is not None and plan.status.initialized


def test_without_the_identity_a_moved_object_would_meet_its_own_tcp_as_another_owners() -> None:
    """What the hub did before: by its new uid the object is a stranger to its own TCP."""
    plan = decide.reconcile(moved_world(obj(NEW)))
    assert kinds(plan) == ["Publish"] and plan.secrets_refused == facts.Secrets.OWNER_MISMATCH


def test_a_moved_object_whose_cluster_is_still_paused_touches_nothing() -> None:
    paused = cluster.Cluster.parse(
        {"metadata": {"name": "cluster-1", "namespace": "default"}, "spec": {"paused": True}}
    )
    plan = decide.reconcile(moved_world(obj(FIRST), cluster=paused))
    assert kinds(plan) == [] and cond(plan, "SecretsSynced") == ("False", "Paused")


def test_a_moved_object_deletes_its_control_plane_by_the_stamped_identity() -> None:
    o = moved_world(obj(FIRST, deleting=True))
    plan = decide.reconcile(o)
    assert [a.op for a in plan.actions if isinstance(a, vocabulary.Publish)] == ["delete"]
    assert o.owner_uid == FIRST  # the intent's owner (hub.controllers.rkcp.published)


def test_a_refused_identity_publishes_nothing_reads_nothing_and_says_why() -> None:
    o = moved_world(obj(FIRST), published=published(op="delete", owner=FIRST))
    plan = decide.reconcile(o)
    assert kinds(plan) == [] and cond(plan, "SecretsSynced")[0] != "True"
    assert plan.status is not None and not plan.status.ready
    ready = c.get(plan.status.conditions, "Ready")
    assert ready is not None and ready.reason == "NotAuthorized" and api.OWNER_UID_ANNOTATION in ready.message


def test_an_object_refused_another_rkcps_identity_deletes_nothing_of_it() -> None:
    o = moved_world(obj(FIRST, deleting=True), owner_claimed_by="default/original")
    plan = decide.reconcile(o)
    assert kinds(plan) == ["RemoveFinalizer"]  # no delete intent, no purge of the other's subjects


@pytest.mark.parametrize("deleting", [False, True])
def test_the_source_object_clusterctl_move_deletes_is_left_alone(deleting: bool) -> None:
    r = obj(FIRST, uid=FIRST, deleting=deleting)
    r.metadata.annotations[owner.DELETE_FOR_MOVE] = ""
    r.metadata.finalizers.clear()  # clusterctl removes the finalizers before it deletes
    plan = decide.reconcile(moved_world(r, published=published(owner=FIRST)))
    assert plan.actions == [] and plan.status is None


def test_a_deleted_object_marked_for_move_with_the_finalizer_left_on_is_let_go() -> None:
    # The annotation set by hand (or a move stopped half-way), then deleted: never stuck on the
    # finalizer, and no delete intent or purge for a control plane a target may own now.
    r = obj(FIRST, uid=FIRST, deleting=True)
    r.metadata.annotations[owner.DELETE_FOR_MOVE] = ""
    assert vocabulary.FINALIZER in r.metadata.finalizers
    plan = decide.reconcile(moved_world(r, published=published(owner=FIRST)))
    assert plan.actions == [vocabulary.RemoveFinalizer()] and plan.status is None
