"""hub.reconcile.rkcp.decide: pause as Cluster API defines it (contract rule "ControlPlane: pausing").

Paused is the Cluster's ``spec.paused`` or the ``cluster.x-k8s.io/paused`` annotation on the RKCP
itself; it is checked before the finalizer is added (a paused RKCP gets none, only its status
with CAPI's Paused condition) and on the delete path (nothing published, the finalizer kept).
"""

from __future__ import annotations

from typing import Any

import pytest

from hub.api import cluster as cluster_api
from hub.api import rkcp as api
from hub.reconcile.rkcp import decide, vocabulary
from tests.hub.reconcile.rkcp.test_decide import UID, cond, kinds, observed, published, rkcp_obj, status

ANNOTATED = {"cluster.x-k8s.io/paused": ""}
BOTH = (
    "Cluster spec.paused is set to true, RemoteKamajiControlPlane has the cluster.x-k8s.io/paused annotation"
)
RUNNING = cluster_api.Cluster.parse({"metadata": {"name": "cluster-1"}})
SPEC_PAUSED = cluster_api.Cluster.parse({"metadata": {"name": "cluster-1"}, "spec": {"paused": True}})
CLUSTER_ANNOTATED = cluster_api.Cluster.parse({"metadata": {"name": "cluster-1", "annotations": ANNOTATED}})


def annotated(**kw: Any) -> api.RemoteKamajiControlPlane:
    r = rkcp_obj(**kw)
    r.metadata.annotations.update(ANNOTATED)
    return r


MESSAGES = [
    # id, Cluster, RKCP annotated, Paused message ("" when not paused)
    ("running", RUNNING, False, ""),
    ("Cluster spec.paused", SPEC_PAUSED, False, "Cluster spec.paused is set to true"),
    ("the RKCP's own annotation", RUNNING, True,
     "RemoteKamajiControlPlane has the cluster.x-k8s.io/paused annotation"),
    ("the RKCP's annotation without a Cluster", None, True,
     "RemoteKamajiControlPlane has the cluster.x-k8s.io/paused annotation"),
    ("the Cluster's annotation (kept from before)", CLUSTER_ANNOTATED, False,
     "Cluster has the cluster.x-k8s.io/paused annotation"),
    ("both", SPEC_PAUSED, True, BOTH),
]  # fmt: skip


@pytest.mark.parametrize(
    ("cluster", "own", "message"), [m[1:] for m in MESSAGES], ids=[m[0] for m in MESSAGES]
)
def test_pause_message_is_capis(cluster: cluster_api.Cluster | None, own: bool, message: str) -> None:
    r = annotated() if own else rkcp_obj()
    assert cluster_api.pause_message(cluster, r) == message


def paused_condition(plan: vocabulary.Plan) -> tuple[str, str, str]:
    assert plan.status is not None
    found = [c for c in plan.status.conditions if c.type == api.PAUSED]
    return found[0].status, found[0].reason, found[0].message


OWN_SECRETS = vocabulary.SiteReport(status=status(), secrets_checksum="abc", secrets_owner_uid=UID)
PAUSED = [
    # id, observed: no action at all, whatever it would be unpaused; the status says Paused
    ("annotated, no finalizer yet: no finalizer", observed(annotated(finalizer=False), published=None)),
    ("Cluster paused, no finalizer yet: no finalizer",
     observed(rkcp_obj(finalizer=False), cluster=SPEC_PAUSED, published=None)),
    ("annotated, new: no intent", observed(annotated(), published=None)),
    ("annotated, spec changed: no intent",
     observed(annotated(), desired_spec={"kubernetes": {"version": "v1.32.0"}})),
    ("annotated, secrets arrived: not written", observed(annotated(), report=OWN_SECRETS)),
    ("annotated, endpoint reported: not set", observed(annotated())),
    ("annotated, a new site: not even its topology", observed(annotated(), topology_ready=False)),
    ("annotated, deleting: no delete intent, finalizer kept", observed(annotated(deleting=True))),
    ("Cluster paused, deleting: no delete intent, finalizer kept",
     observed(rkcp_obj(deleting=True), cluster=SPEC_PAUSED)),
    ("annotated, deleting, Orphan: finalizer kept",
     observed(annotated(deleting=True, deletionPolicy="Orphan"))),
    ("annotated, deleting, delete intent answered: no purge, finalizer kept",
     observed(annotated(deleting=True), published=published(op="delete", seq=7),
              report=vocabulary.SiteReport(status=status("Deleted", seq=7, endpoint=False)))),
]  # fmt: skip


@pytest.mark.parametrize("o", [p[1] for p in PAUSED], ids=[p[0] for p in PAUSED])
def test_a_paused_rkcp_gets_nothing_but_its_status(o: vocabulary.Observed) -> None:
    plan = decide.reconcile(o)
    assert kinds(plan) == []
    assert plan.status is not None and paused_condition(plan)[:2] == ("True", "Paused")
    # Ready folds Paused in (negative polarity): False, Paused alone or among other issues.
    assert cond(plan, api.READY)[0] == "False"


def test_a_paused_deletion_says_it_waits_for_the_unpause() -> None:
    plan = decide.reconcile(observed(annotated(deleting=True)))
    assert plan.status is not None
    deleting = next(c for c in plan.status.conditions if c.type == api.DELETING)
    assert (deleting.status, deleting.reason) == ("True", "Paused")
    assert "RemoteKamajiControlPlane has the cluster.x-k8s.io/paused annotation" in deleting.message
    assert plan.requeue_after is not None


UNPAUSED = [
    # id, the same situation unpaused: what proceeds
    ("no finalizer: the finalizer", observed(rkcp_obj(finalizer=False), published=None), ["AddFinalizer"]),
    ("new: the intent", observed(published=None, report=vocabulary.SiteReport()), ["Publish"]),
    ("deleting: the delete intent", observed(rkcp_obj(deleting=True)), ["Publish"]),
    ("deleting, answered: purge and let go",
     observed(rkcp_obj(deleting=True), published=published(op="delete", seq=7),
              report=vocabulary.SiteReport(status=status("Deleted", seq=7, endpoint=False))),
     ["Purge", "RemoveFinalizer"]),
]  # fmt: skip


@pytest.mark.parametrize(("o", "actions"), [u[1:] for u in UNPAUSED], ids=[u[0] for u in UNPAUSED])
def test_once_unpaused_it_proceeds(o: vocabulary.Observed, actions: list[str]) -> None:
    plan = decide.reconcile(o)
    assert kinds(plan) == actions
    if plan.status is not None:
        assert paused_condition(plan) == ("False", "NotPaused", "")


def test_the_paused_condition_carries_capis_message() -> None:
    plan = decide.reconcile(observed(annotated(), cluster=SPEC_PAUSED))
    assert paused_condition(plan) == ("True", "Paused", BOTH)
