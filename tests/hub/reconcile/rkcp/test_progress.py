"""hub.reconcile.rkcp.progress: CAPI's RollingOut, ScalingUp, ScalingDown and Available, one row each.

Each row is what the site reports (or does not) and what the hub knows besides; the expected
condition is CAPI's status, reason and message (``api/core/v1beta2`` reasons, KCP's messages).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest

from hub import conditions as c
from hub.api import rkcp
from hub.reconcile.rkcp import status as rkcp_status
from hub.reconcile.rkcp.facts import Facts, Secrets, SiteView
from protocol import messages

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
SPEC = rkcp.Spec(site="site-a", version="v1.31.0", replicas=3)
ONLINE = SiteView(connected=True, last_heartbeat_time=NOW, kamaji_detected=True)


def report(
    phase: str = "Ready",
    *,
    replicas: int = 3,
    ready: int | None = None,
    updated: int | None = None,
    version: str = "v1.31.0",
    reason: str = "",
    message: str = "",
) -> messages.Status:
    return messages.Status(
        site="site-a", namespace="default", name="cp1", owner_uid="uid", intent_seq=5,
        phase=phase,  # type: ignore[arg-type]
        reason=reason, message=message, version=version, replicas=replicas,
        ready_replicas=replicas if ready is None else ready,
        updated_replicas=replicas if updated is None else updated,
        observed_at=NOW,
    )  # fmt: skip


def facts(s: messages.Status | None = None, **kw: Any) -> Facts:
    base = Facts(
        generation=1, status=s, published_seq=5, site=ONLINE, secrets=Secrets.WAITING, spec=SPEC,
        tenant_control_plane_name="cp1",
    )  # fmt: skip
    return dataclasses.replace(base, **kw)


def conditions(f: Facts) -> dict[str, tuple[str, str, str]]:
    status = rkcp_status.new_status(rkcp.Status(), f, now=NOW)
    return {x.type: (x.status, x.reason, x.message) for x in status.conditions}


ROLLING_OUT = [
    # id, facts, RollingOut (status, reason, message)
    ("nothing reported: nothing rolls out", facts(), ("False", "NotRollingOut", "")),
    ("every pod up to date", facts(report()), ("False", "NotRollingOut", "")),
    ("one pod of three not updated", facts(report(updated=2)),
     ("True", "RollingOut", "Rolling out 1 not up-to-date replicas")),
    ("the version moves: every pod rolls", facts(report(version="v1.30.2")),
     ("True", "RollingOut", "Rolling out 3 not up-to-date replicas\n* Version v1.30.2, v1.31.0 required")),
    ("a version stored without the v compares equal", facts(report(version="1.31.0")),
     ("False", "NotRollingOut", "")),
    ("Kamaji says Upgrading", facts(report("Upgrading", updated=1)),
     ("True", "RollingOut", "Rolling out 2 not up-to-date replicas\n* the TenantControlPlane is Upgrading")),
    ("rejected: no TenantControlPlane, nothing rolls", facts(report("Rejected", replicas=0, version="")),
     ("False", "NotRollingOut", "")),
]  # fmt: skip


@pytest.mark.parametrize(("f", "want"), [r[1:] for r in ROLLING_OUT], ids=[r[0] for r in ROLLING_OUT])
def test_rolling_out(f: Facts, want: tuple[str, str, str]) -> None:
    assert conditions(f)[rkcp.ROLLING_OUT] == want


SCALING = [
    # id, facts, ScalingUp, ScalingDown
    ("nothing at the site yet: scaling up from 0", facts(),
     ("True", "ScalingUp", "Scaling up from 0 to 3 replicas"), ("False", "NotScalingDown", "")),
    ("as many as asked", facts(report()), ("False", "NotScalingUp", ""), ("False", "NotScalingDown", "")),
    ("one short", facts(report(replicas=2)),
     ("True", "ScalingUp", "Scaling up from 2 to 3 replicas"), ("False", "NotScalingDown", "")),
    ("one too many", facts(report(replicas=4)),
     ("False", "NotScalingUp", ""), ("True", "ScalingDown", "Scaling down from 4 to 3 replicas")),
    ("deleting: down to none", facts(report(), deleting=True),
     ("False", "NotScalingUp", ""), ("True", "ScalingDown", "Scaling down from 3 to 0 replicas")),
    ("deleted at the site: nothing runs", facts(report("Deleted", replicas=3)),
     ("True", "ScalingUp", "Scaling up from 0 to 3 replicas"), ("False", "NotScalingDown", "")),
]  # fmt: skip


@pytest.mark.parametrize(("f", "up", "down"), [r[1:] for r in SCALING], ids=[r[0] for r in SCALING])
def test_scaling(f: Facts, up: tuple[str, str, str], down: tuple[str, str, str]) -> None:
    found = conditions(f)
    assert (found[rkcp.SCALING_UP], found[rkcp.SCALING_DOWN]) == (up, down)


OFFLINE = SiteView(connected=False, last_heartbeat_time=NOW - dt.timedelta(minutes=5), kamaji_detected=True)
PAUSED = "Cluster spec.paused is set to true"
AVAILABLE = [
    # id, facts, Available's message ("" and True when it serves; else False, NotAvailable)
    ("serving", facts(report()), ""),
    ("Upgrading still serves", facts(report("Upgrading")), ""),
    ("serving, the site silent since: the last report stands", facts(report(), site=OFFLINE), ""),
    ("site offline", facts(site=OFFLINE),
     "site site-a is offline (last heartbeat 2026-11-30T11:55:00Z)"),
    ("site never connected", facts(site=SiteView(connected=None)),
     "site site-a has not connected yet (no heartbeat from its agent)"),
    ("rejected, with the site's reason", facts(report("Rejected", reason="NamespaceNotFound",
                                                      message="namespace tenants not found")),
     "site site-a rejected the TenantControlPlane: NamespaceNotFound: namespace tenants not found"),
    ("failed at the site", facts(report("Failed", reason="Invalid", message="spec.x is bad")),
     "the TenantControlPlane failed at site site-a: Invalid: spec.x is bad"),
    ("waiting for Kamaji: not installed at the site",
     facts(site=dataclasses.replace(ONLINE, kamaji_detected=False)),
     "waiting for Kamaji: site site-a does not serve TenantControlPlanes"),
    ("waiting for Kamaji to provision", facts(report("Provisioning", replicas=0)),
     "waiting for Kamaji at site site-a to provision the TenantControlPlane (Provisioning)"),
    ("waiting for the site's first report", facts(), "waiting for site site-a to report"),
    ("no intent published yet", facts(published_seq=0), "no intent published yet"),
    ("NotReady says what the site said", facts(report("NotReady", reason="Drifted", message="reverting")),
     "the TenantControlPlane at site site-a is NotReady: Drifted: reverting"),
    ("deleted at the site, recreated", facts(report("Deleted", replicas=0), recreating=True),
     "the TenantControlPlane was deleted at site site-a; the provision intent recreates it"),
    ("the previous owner's TCP first", facts(replacing=("old-uid",)),
     "waiting for site site-a to delete the TenantControlPlane of the previous owner"),
    ("paused before anything was sent", facts(paused=PAUSED),
     f"reconciliation is paused ({PAUSED}): nothing is sent to site site-a"),
    ("paused, and the site rejected it", facts(report("Rejected", reason="Conflict"), paused=PAUSED),
     f"site site-a rejected the TenantControlPlane: Conflict; reconciliation is paused ({PAUSED})"),
    ("not authorized", facts(not_authorized="site site-a does not grant namespace default"),
     "placement not authorized: site site-a does not grant namespace default"),
    ("conflict", facts(conflict_with="default/older"),
     "the same TenantControlPlane is claimed by the older default/older"),
    ("no Cluster", facts(waiting_for_cluster="waiting for Cluster default/c1"),
     "waiting for Cluster default/c1"),
    ("serving but deleted", facts(report(), deleting=True), "the control plane is being deleted"),
]  # fmt: skip


@pytest.mark.parametrize(("f", "message"), [r[1:] for r in AVAILABLE], ids=[r[0] for r in AVAILABLE])
def test_available_names_the_cause(f: Facts, message: str) -> None:
    want = ("True", "Available", "") if not message else ("False", "NotAvailable", message)
    assert conditions(f)[rkcp.AVAILABLE] == want


def test_status_selector_names_the_tenant_control_planes_pods() -> None:
    """Kamaji's Deployment selects a TCP's API server pods by ``kamaji.clastix.io/name=<tcp>``:
    the scale subresource's ``labelSelectorPath`` (``.status.selector``) reads that."""
    status = rkcp_status.new_status(rkcp.Status(), facts(tenant_control_plane_name="shared"), now=NOW)
    assert status.selector == "kamaji.clastix.io/name=shared"


def test_progress_conditions_are_set_on_the_first_visit() -> None:
    """Set even with nothing observed yet, each with a reason (CAPI: never absent)."""
    found = conditions(facts(site=SiteView(connected=None), published_seq=0))
    for type_ in (rkcp.ROLLING_OUT, rkcp.SCALING_UP, rkcp.SCALING_DOWN, rkcp.AVAILABLE):
        assert found[type_][1], type_
    assert c.REDACTED not in {m for _, _, m in found.values()}


@pytest.mark.parametrize(
    ("first", "later"),
    [
        pytest.param(facts(report()), facts(report()), id="the same facts"),
        pytest.param(facts(report()), facts(report("Provisioning", ready=0), generation=2), id="other facts"),
        pytest.param(
            facts(report()), facts(None, site=SiteView(connected=False)), id="no report, the site lost"
        ),
        pytest.param(facts(report("Provisioning", ready=0)), facts(report()), id="initialized now"),
    ],
)
def test_a_new_status_leaves_the_status_it_came_from_as_it_was(first: Facts, later: Facts) -> None:
    """``new_status`` copies only the top of the previous status: nothing below may change."""
    previous = rkcp_status.new_status(rkcp.Status(), first, now=NOW)
    before = previous.model_dump()
    status = rkcp_status.new_status(previous, later, now=NOW + dt.timedelta(minutes=5))
    assert previous.model_dump() == before
    assert status.initialization.control_plane_initialized == status.initialized
