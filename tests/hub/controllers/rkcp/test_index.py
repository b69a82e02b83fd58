"""hub.controllers.rkcp.index: who else is, or claimed first, an owner identity; and that a claimed
identity changes nothing to the conflict order (coordinates and age decide it)."""

from __future__ import annotations

from typing import Any

import pytest

from hub.api import rkcp as api
from hub.controllers.rkcp import index
from hub.reconcile.rkcp import vocabulary
from protocol.coordinates import Coordinates


def obj(
    name: str,
    uid: str,
    *,
    claim: str | None = None,
    created: str,
    tcp: str = "",
    namespace: str = "default",
    finalized: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid, "creationTimestamp": created}
    if finalized:
        meta["finalizers"] = [vocabulary.FINALIZER]
    if claim is not None:
        meta["annotations"] = {api.OWNER_UID_ANNOTATION: claim}
    spec = {"site": "site-a", "version": "v1.31.0", **({"tenantControlPlaneName": tcp} if tcp else {})}
    return {"metadata": meta, "spec": spec}


ORIGINAL = obj("original", "u-orig", claim="u-orig", created="2026-11-30T10:00:00Z")
MOVED = obj("moved", "u-new", claim="u-first", created="2026-11-30T10:00:00Z")
"""Moved here: its identity is the uid it had before (no RKCP here has it)."""
SQUATTER = "squatter"
"""The namespace whose Site placement is denied (``denied``)."""


def denied(coords: Coordinates, namespace: str) -> str:
    return "not authorized" if namespace == SQUATTER else ""


OLDER = "2026-11-30T09:00:00Z"

# (id, others in the index, the object asked about, expected claimant)
CASES: list[tuple[str, list[dict[str, Any]], dict[str, Any], str]] = [
    (
        "its own uid claims nothing of anyone",
        [ORIGINAL],
        obj("x", "u-x", claim="u-x", created="2026-11-30T11:00:00Z"),
        "",
    ),
    ("no annotation", [ORIGINAL], obj("x", "u-x", created="2026-11-30T11:00:00Z"), ""),
    ("a moved identity nobody else has", [ORIGINAL], MOVED, ""),
    (
        "another RKCP's uid",
        [ORIGINAL],
        obj("x", "u-x", claim="u-orig", created="2026-11-30T11:00:00Z"),
        "default/original",
    ),
    (
        "another RKCP's uid, even when the claimer is older",
        [ORIGINAL],
        obj("x", "u-x", claim="u-orig", created="2026-11-30T09:00:00Z"),
        "default/original",
    ),
    (
        "claimed first by an older one (a copy of a moved manifest)",
        [MOVED],
        obj("x", "u-x", claim="u-first", created="2026-11-30T11:00:00Z"),
        "default/moved",
    ),
    (
        "an older claimer the hub never stamped (no finalizer: paused, or new) claims nothing",
        [obj("y", "u-y", claim="u-first", created=OLDER, finalized=False)],
        MOVED,
        "",
    ),
    (
        "an older claimer whose placement is not authorized claims nothing (no hostage)",
        [obj("y", "u-y", claim="u-first", created=OLDER, namespace=SQUATTER)],
        MOVED,
        "",
    ),
    (
        "an older claimer, stamped and authorized, keeps it",
        [obj("y", "u-y", claim="u-first", created=OLDER)],
        MOVED,
        "default/y",
    ),
    (
        "another RKCP's uid counts even unstamped and unauthorized (no tenant chooses a uid)",
        [obj("y", "u-first", created=OLDER, finalized=False, namespace=SQUATTER)],
        MOVED,
        "squatter/y",
    ),
    (
        "the older of two claimers keeps it",
        [obj("y", "u-y", claim="u-first", created="2026-11-30T11:00:00Z")],
        MOVED,
        "",
    ),
]


@pytest.mark.parametrize(("others", "asked", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_owner_claimed_by(others: list[dict[str, Any]], asked: dict[str, Any], expected: str) -> None:
    idx = index.Index()
    for o in [*others, asked]:
        idx.put((o["metadata"]["namespace"], o["metadata"]["name"]), o)
    parsed = api.RemoteKamajiControlPlane.parse(asked)
    assert idx.owner_claimed_by(parsed, parsed.owner_uid_claim, denied) == expected


def test_a_claimed_identity_changes_nothing_to_the_conflict_order() -> None:
    """Two RKCPs at the same coordinates: the younger conflicts, whatever identity it claims."""
    idx = index.Index()
    victim = obj("victim", "u-v", claim="u-v", created="2026-11-30T10:00:00Z", tcp="shared")
    thief = obj("thief", "u-t", claim="u-v", created="2026-11-30T11:00:00Z", tcp="shared")
    for o in (victim, thief):
        idx.put(("default", o["metadata"]["name"]), o)
    parsed = {o["metadata"]["name"]: api.RemoteKamajiControlPlane.parse(o) for o in (victim, thief)}
    coords = idx.coordinates(("default", "thief"))
    assert coords is not None and coords == idx.coordinates(("default", "victim"))
    allowed = lambda coords, namespace: ""  # noqa: E731
    assert idx.conflict(coords, parsed["thief"], allowed) == "default/victim"
    assert idx.conflict(coords, parsed["victim"], allowed) == ""
    assert (
        idx.forget(("default", "thief")) == coords
        and idx.owner_claimed_by(parsed["thief"], "u-v", allowed) == "default/victim"
    )


def at_site(obj_: dict[str, Any], site: str) -> dict[str, Any]:
    return {**obj_, "spec": {**obj_["spec"], "site": site}}


def test_a_sites_rkcps_follow_moves_and_deletions() -> None:
    idx = index.Index()
    a1 = obj("a1", "u-1", created=OLDER)
    a2 = obj("a2", "u-2", created=OLDER)
    idx.put(("default", "a1"), a1)
    idx.put(("default", "a2"), a2)
    idx.put(("squatter", "s"), obj("s", "u-s", created=OLDER, namespace=SQUATTER))
    assert idx.placed("site-a", denied) == 2  # the squatter's placement is not authorized
    assert {key for _, key in idx.at_site("site-a")} == {
        ("default", "a1"),
        ("default", "a2"),
        ("squatter", "s"),
    }
    idx.put(("default", "a2"), at_site(a2, "site-b"))  # moved to another site
    assert (idx.placed("site-a", denied), idx.placed("site-b", denied)) == (1, 1)
    idx.forget(("default", "a1"))
    idx.forget(("squatter", "s"))
    assert list(idx.at_site("site-a")) == []
    assert idx._by_site.keys() == {"site-b"}  # an emptied site leaves nothing behind


def owned_by(obj_: dict[str, Any], cluster: str) -> dict[str, Any]:
    ref = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": cluster, "uid": "c"}
    return {**obj_, "metadata": {**obj_["metadata"], "ownerReferences": [ref]}}


def test_a_clusters_rkcps_follow_owner_changes_and_deletions() -> None:
    idx = index.Index()
    idx.put(("default", "a"), owned_by(obj("a", "u-a", created=OLDER), "c1"))
    idx.put(("default", "b"), owned_by(obj("b", "u-b", created=OLDER), "c1"))
    idx.put(("other", "a"), owned_by(obj("a", "u-o", created=OLDER, namespace="other"), "c1"))
    assert sorted(idx.of_cluster(("default", "c1"))) == [("default", "a"), ("default", "b")]
    assert idx.of_cluster(("other", "c1")) == [("other", "a")]  # a Cluster owns in its namespace
    idx.put(("default", "b"), owned_by(obj("b", "u-b", created=OLDER), "c2"))  # another owner
    assert (idx.of_cluster(("default", "c1")), idx.of_cluster(("default", "c2"))) == (
        [("default", "a")],
        [("default", "b")],
    )
    idx.put(("default", "a"), obj("a", "u-a", created=OLDER))  # no owner any more
    assert idx.of_cluster(("default", "c1")) == []
    for key in (("default", "b"), ("other", "a")):
        idx.forget(key)
    assert (len(idx._by_owner), idx._owner) == (0, {})  # nothing left behind
