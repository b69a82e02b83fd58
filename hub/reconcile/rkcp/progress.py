"""CAPI's v1beta2 control-plane conditions of an RKCP, from what its site reports. Pure.

``RollingOut``, ``ScalingUp`` and ``ScalingDown`` (negative polarity: True while it happens;
the Cluster controller folds them into the Cluster's own) compare the site's replica counts and
version with the spec, as KubeadmControlPlane compares its Machines; ``Available`` (mirrored
into the Cluster's ``ControlPlaneAvailable``) is True while the TenantControlPlane serves, else
False with reason ``NotAvailable`` and a message naming the cause: the site offline, the site's
rejection with its reason, Kamaji missing or still provisioning, the pause, and so on.
Reasons are CAPI's (``api/core/v1beta2`` condition reasons). Talks to nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Final

from hub import conditions as c
from hub.api import rkcp
from hub.reconcile.rkcp.facts import Facts, new, put
from protocol import messages

# CAPI v1beta2 reasons of each condition (clusterv1.<X>Reason).
ROLLING_OUT, NOT_ROLLING_OUT = "RollingOut", "NotRollingOut"
SCALING_UP, NOT_SCALING_UP = "ScalingUp", "NotScalingUp"
SCALING_DOWN, NOT_SCALING_DOWN = "ScalingDown", "NotScalingDown"
AVAILABLE, NOT_AVAILABLE = "Available", "NotAvailable"

NO_TCP: Final = ("Rejected", "Deleted")
"""Phases in which no TenantControlPlane of this owner stands at the site (nothing runs)."""


def _v(version: str) -> str:
    return version if version.startswith("v") else f"v{version}"


def _running(f: Facts) -> messages.Status | None:
    """The site's status when a TenantControlPlane of this owner runs there, else None."""
    s = f.status
    return s if s is not None and s.phase not in NO_TCP else None


def set_rolling_out_condition(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    """True while API server pods are not up to date or the version moves (KCP: Machines not UpToDate)."""
    s = _running(f)
    lines = []
    stale = 0
    if s is not None:
        stale = max(0, s.replicas - s.updated_replicas)
        if s.version and _v(s.version) != _v(f.spec.version):
            lines.append(f"* Version {_v(s.version)}, {_v(f.spec.version)} required")
            stale = stale or s.replicas
        elif s.phase == "Upgrading":
            lines.append("* the TenantControlPlane is Upgrading")
    if stale or lines:
        message = "\n".join([f"Rolling out {stale} not up-to-date replicas", *lines])
        put(status, new(rkcp.ROLLING_OUT, c.TRUE, ROLLING_OUT, message, f, now=now), now)
    else:
        put(status, new(rkcp.ROLLING_OUT, c.FALSE, NOT_ROLLING_OUT, "", f, now=now), now)


def _replicas(f: Facts) -> tuple[int, int]:
    """(current, desired): what runs at the site, what should (none once deleting, as KCP)."""
    s = _running(f)
    return (s.replicas if s is not None else 0), (0 if f.deleting else f.spec.replicas)


def set_scaling_up_condition(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    current, desired = _replicas(f)
    if current < desired:
        message = f"Scaling up from {current} to {desired} replicas"
        put(status, new(rkcp.SCALING_UP, c.TRUE, SCALING_UP, message, f, now=now), now)
    else:
        put(status, new(rkcp.SCALING_UP, c.FALSE, NOT_SCALING_UP, "", f, now=now), now)


def set_scaling_down_condition(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    current, desired = _replicas(f)
    if current > desired:
        message = f"Scaling down from {current} to {desired} replicas"
        put(status, new(rkcp.SCALING_DOWN, c.TRUE, SCALING_DOWN, message, f, now=now), now)
    else:
        put(status, new(rkcp.SCALING_DOWN, c.FALSE, NOT_SCALING_DOWN, "", f, now=now), now)


def _site_cause(f: Facts) -> str:
    """What keeps the site from serving this control plane, from the site's side ("" if nothing)."""
    site, s = f.spec.site, f.status
    if f.site.connected is None:
        return f"site {site} has not connected yet (no heartbeat from its agent)"
    if not f.site.connected:
        when = c.moment(f.site.last_heartbeat_time)
        return f"site {site} is offline (last heartbeat {when})"
    if f.replacing:
        return f"waiting for site {site} to delete the TenantControlPlane of the previous owner"
    no_kamaji = f"waiting for Kamaji: site {site} does not serve TenantControlPlanes"
    if s is None:
        if f.published_seq == 0:
            return "no intent published yet"
        return no_kamaji if f.site.kamaji_detected is False else f"waiting for site {site} to report"
    detail = ": ".join(p for p in (s.reason, s.message) if p)
    if s.phase == "Rejected":
        return f"site {site} rejected the TenantControlPlane: {detail or 'no reason given'}"
    if s.phase == "Failed":
        return f"the TenantControlPlane failed at site {site}: {detail or 'no reason given'}"
    if s.phase == "Deleted":
        recreated = "; the provision intent recreates it" if f.recreating else ""
        return f"the TenantControlPlane was deleted at site {site}{recreated}"
    if s.phase in ("Pending", "Provisioning"):
        return no_kamaji if f.site.kamaji_detected is False else (
            f"waiting for Kamaji at site {site} to provision the TenantControlPlane ({s.phase})"
        )  # fmt: skip
    return f"the TenantControlPlane at site {site} is {s.phase}" + (f": {detail}" if detail else "")


def unavailable_cause(f: Facts) -> str:
    """Why the control plane does not serve, for the Available condition's message."""
    if f.deleting:
        cause = "the control plane is being deleted"
    elif f.not_authorized:
        cause = f"placement not authorized: {f.not_authorized}"
    elif f.conflict_with:
        cause = f"the same TenantControlPlane is claimed by the older {f.conflict_with}"
    elif f.waiting_for_cluster:
        cause = f.waiting_for_cluster
    elif f.paused and f.status is None:
        return f"reconciliation is paused ({f.paused}): nothing is sent to site {f.spec.site}"
    else:
        cause = _site_cause(f)
    return f"{cause}; reconciliation is paused ({f.paused})" if f.paused else cause


def set_available_condition(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    """True while the TenantControlPlane serves (``status.ready``) and is not being deleted."""
    if status.ready and not f.deleting:
        put(status, new(rkcp.AVAILABLE, c.TRUE, AVAILABLE, "", f, now=now), now)
    else:
        put(status, new(rkcp.AVAILABLE, c.FALSE, NOT_AVAILABLE, unavailable_cause(f), f, now=now), now)


def set_progress_conditions(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    """RollingOut, ScalingUp, ScalingDown and Available, in that order."""
    set_rolling_out_condition(status, f, now=now)
    set_scaling_up_condition(status, f, now=now)
    set_scaling_down_condition(status, f, now=now)
    set_available_condition(status, f, now=now)
