"""sandbox.progress: the phase of each control plane and the counts per site, from RKCPs and Secret names."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox import progress


def rkcp(
    name: str = "site-a-1",
    *,
    site: str = "site-a",
    ready: bool | None = None,
    deleting: bool = False,
    conditions: dict[str, tuple[str, str]] | None = None,
) -> dict[str, Any]:
    conditions = conditions or {}
    obj: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "ownerReferences": [{"kind": "Cluster", "name": f"{name}-cluster"}],
        },
        "spec": {"site": site, "version": "v1.31.0"},
    }
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    if ready is not None or conditions:
        obj["status"] = {
            "ready": bool(ready),
            "conditions": [{"type": t, "status": s, "reason": r} for t, (s, r) in conditions.items()],
        }
    return obj


KUBECONFIG = {("default", "site-a-1-cluster-kubeconfig")}

NONE: set[tuple[str, str]] = set()
TCP_READY = "TenantControlPlaneReady"
DELIVERED = "IntentDelivered"


def waiting(type_: str, status: str, reason: str) -> dict[str, Any]:
    return rkcp(ready=False, conditions={type_: (status, reason)})


CASES = [
    pytest.param(rkcp(), NONE, "Requested", False, id="new"),
    pytest.param(waiting(DELIVERED, "Unknown", "NotPublished"), NONE, "Requested", False, id="unpublished"),
    pytest.param(waiting(DELIVERED, "False", "Pending"), NONE, "Delivering", False, id="unanswered"),
    pytest.param(waiting(TCP_READY, "False", "Provisioning"), NONE, "Provisioning", False, id="provisioning"),
    pytest.param(waiting(TCP_READY, "False", "Rejected"), NONE, "Rejected", False, id="site-refused"),
    pytest.param(waiting("Ready", "False", "Conflict"), NONE, "Conflict", False, id="conflict"),
    pytest.param(rkcp(ready=True), NONE, "WaitingForKubeconfig", False, id="ready-without-secret"),
    pytest.param(rkcp(ready=True), KUBECONFIG, "Ready", True, id="ready-with-secret"),
    pytest.param(rkcp(ready=True, deleting=True), KUBECONFIG, "Deleting", True, id="deleting"),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "secrets", "phase", "done"), CASES)
def test_phase(obj: dict[str, Any], secrets: set[tuple[str, str]], phase: str, done: bool) -> None:
    cp = progress.new_control_plane(obj, secrets=secrets)
    assert (cp.phase, cp.done) == (phase, done)
    assert cp.cluster == "site-a-1-cluster"
    assert (cp.missing() == "") == done


def test_sites_count_requested_provisioning_ready_and_missing_names_each() -> None:
    snapshot = progress.new_snapshot(
        [
            rkcp("site-b-1", site="site-b"),
            rkcp("site-a-1", ready=True),
            rkcp("site-a-2", ready=False, conditions={TCP_READY: ("False", "Provisioning")}),
        ],
        secrets=KUBECONFIG,
    )
    assert [cp.name for cp in snapshot.control_planes] == ["site-a-1", "site-a-2", "site-b-1"]
    assert snapshot.sites == (
        progress.SiteProgress(site="site-a", requested=2, provisioning=1, ready=1),
        progress.SiteProgress(site="site-b", requested=1, provisioning=0, ready=0),
    )
    assert not snapshot.done and snapshot.ready == 1
    assert snapshot.missing() == [
        "default/site-a-2 at site-a: not Ready (phase Provisioning)",
        "default/site-b-1 at site-b: not Ready (phase Requested)",
    ]


def test_changes_print_each_phase_change_and_each_site_change_once() -> None:
    before = progress.new_snapshot([rkcp()], secrets=set())
    after = progress.new_snapshot([rkcp(ready=True)], secrets=KUBECONFIG)
    assert progress.changes(None, before, elapsed=0) == [
        "[   0.0s] default/site-a-1 (site-a): Requested",
        "[   0.0s] site-a: requested 1, provisioning 0, ready 0",
    ]
    assert progress.changes(before, after, elapsed=2.5) == [
        "[   2.5s] default/site-a-1 (site-a): Requested -> Ready",
        "[   2.5s] site-a: requested 1, provisioning 0, ready 1",
    ]
    assert progress.changes(after, after, elapsed=3) == []


def test_table_lists_unfinished_first_and_cuts_at_the_limit() -> None:
    snapshot = progress.new_snapshot(
        [rkcp("site-a-1", ready=True), *(rkcp(f"site-a-{i}") for i in range(2, 5))], secrets=KUBECONFIG
    )
    lines = progress.table(snapshot, elapsed=1.0, limit=2)
    assert lines[0].endswith("1/4 control planes ready")
    rows = lines[lines.index(next(x for x in lines if "CONTROL PLANE" in x)) + 1 :]
    assert [r.split()[0] for r in rows[:2]] == ["default/site-a-2", "default/site-a-3"]
    assert rows[2] == "  ... and 2 more"
