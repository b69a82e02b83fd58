"""The RemoteKamajiControlPlane status from what the hub observed: pure, one setter per condition.

Each ``set_<x>_condition`` decides one condition from its observations (``facts.Facts``)
and always sets a reason (Unknown on the first visit rather than absent); CAPI's RollingOut,
ScalingUp, ScalingDown and Available are ``progress``'s. ``new_status`` assembles the CAPI
contract fields from the site's latest Status message; ``initialized`` never goes back to false.
"""

from __future__ import annotations

import datetime as dt
from typing import Final

from hub import conditions as c
from hub.api import rkcp
from hub.reconcile.rkcp import progress
from hub.reconcile.rkcp.facts import Facts, Secrets, new, put

SERVING_PHASES: Final = ("Ready", "Upgrading")
REPLACING_PREVIOUS_OWNER: Final = "ReplacingPreviousOwner"
"""The reason (condition, event, the agent's status) while an earlier owner's TCP is replaced."""
POD_SELECTOR_LABEL: Final = "kamaji.clastix.io/name"
"""The label Kamaji selects a TenantControlPlane's API server pods by (its Deployment's
``spec.selector``): ``status.selector`` names those pods, at the site, for the scale subresource."""


_SECRETS_CONDITION: dict[Secrets, tuple[c.Status, str]] = {
    Secrets.SYNCED: (c.TRUE, "Synced"),
    Secrets.DECRYPT_FAILED: (c.FALSE, "DecryptFailed"),
    Secrets.WAITING: (c.UNKNOWN, "WaitingForSecrets"),
    Secrets.OWNER_MISMATCH: (c.FALSE, "OwnerMismatch"),
    Secrets.NOT_AUTHORIZED: (c.FALSE, "NotAuthorized"),
    Secrets.CONFLICT: (c.FALSE, "Conflict"),
    Secrets.PAUSED: (c.FALSE, "Paused"),
}
"""The ``SecretsSynced`` status and reason of each state."""


def set_site_connected_condition(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    if f.site.revoked:
        cond = new(
            rkcp.SITE_CONNECTED, c.FALSE, "CredentialsRevoked",
            f"the Site {f.spec.site!r} was deleted (or is being deleted): the hub revoked its agent's NATS "
            "credential and mints none until the Site is created again", f, now=now,
        )  # fmt: skip
    elif f.site.connected is None:
        cond = new(
            rkcp.SITE_CONNECTED, c.UNKNOWN, "NoHeartbeat", "no heartbeat from the site yet", f, now=now
        )
    elif f.site.connected:
        cond = new(rkcp.SITE_CONNECTED, c.TRUE, "HeartbeatReceived", "", f, now=now)
    else:
        when = c.moment(f.site.last_heartbeat_time)
        cond = new(rkcp.SITE_CONNECTED, c.FALSE, "HeartbeatMissing", f"last heartbeat {when}", f, now=now)
    put(status, cond, now)


def set_intent_delivered_condition(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    if f.published_seq == 0:
        cond = new(rkcp.INTENT_DELIVERED, c.UNKNOWN, "NotPublished", "no intent published yet", f, now=now)
    elif f.status is not None and f.status.intent_seq >= f.published_seq:
        cond = new(rkcp.INTENT_DELIVERED, c.TRUE, "Acknowledged", "", f, now=now)
    else:
        cond = new(
            rkcp.INTENT_DELIVERED,
            c.FALSE,
            "Pending",
            f"waiting for the site to apply intent {f.published_seq}",
            f,
            now=now,
        )
    put(status, cond, now)


def set_status_fresh_condition(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    if f.status is None:
        cond = new(rkcp.STATUS_FRESH, c.UNKNOWN, "NoStatus", "no status from the site yet", f, now=now)
    elif f.site.connected is False:
        cond = new(
            rkcp.STATUS_FRESH,
            c.FALSE,
            "SiteSilent",
            "the site is not connected; its last status may be outdated",
            f,
            now=now,
        )
    elif f.status.intent_seq < f.published_seq:
        cond = new(rkcp.STATUS_FRESH, c.FALSE, "Outdated", "the status answers an older intent", f, now=now)
    else:
        cond = new(rkcp.STATUS_FRESH, c.TRUE, "UpToDate", "", f, now=now)
    put(status, cond, now)


def set_tenant_control_plane_ready_condition(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    s = f.status
    if f.replacing and not f.deleting:
        cond = new(
            rkcp.TENANT_CONTROL_PLANE_READY,
            c.FALSE,
            REPLACING_PREVIOUS_OWNER,
            f"the TenantControlPlane of the previous owner (uid {', '.join(f.replacing)}), whose deletion "
            "was released while the site was unavailable, is deleted at the site before this one is created",
            f,
            now=now,
        )
    elif s is None:
        cond = new(rkcp.TENANT_CONTROL_PLANE_READY, c.UNKNOWN, "NoStatus", "", f, now=now)
    elif s.phase == "Deleted" and f.recreating:
        cond = new(
            rkcp.TENANT_CONTROL_PLANE_READY,
            c.FALSE,
            "Recreating",
            "the TenantControlPlane was deleted at the site; the provision intent recreates it",
            f,
            now=now,
        )
    elif s.phase in SERVING_PHASES:
        cond = new(rkcp.TENANT_CONTROL_PLANE_READY, c.TRUE, s.phase, s.message, f, now=now)
    else:
        # Drifted: the site changed fields we own and the agent is reverting them.
        specific = s.phase in ("Rejected", "Failed") or s.reason == "Drifted"
        reason = s.reason if specific and s.reason else s.phase
        cond = new(rkcp.TENANT_CONTROL_PLANE_READY, c.FALSE, reason, s.message, f, now=now)
    put(status, cond, now)


def set_secrets_synced_condition(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    value, reason = _SECRETS_CONDITION[f.secrets]
    put(status, new(rkcp.SECRETS_SYNCED, value, reason, f.secrets_message, f, now=now), now)


def set_paused_condition(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    cond = (
        new(rkcp.PAUSED, c.TRUE, "Paused", f.paused, f, now=now)
        if f.paused
        else new(rkcp.PAUSED, c.FALSE, "NotPaused", "", f, now=now)
    )
    put(status, cond, now)


def set_deleting_condition(
    status: rkcp.Status, f: Facts, *, now: dt.datetime, reason: str = "", message: str = ""
) -> None:
    cond = (
        new(rkcp.DELETING, c.TRUE, reason or "Deleting", message, f, now=now)
        if f.deleting
        else new(rkcp.DELETING, c.FALSE, "NotDeleting", "", f, now=now)
    )
    put(status, cond, now)


def set_ready_condition(status: rkcp.Status, f: Facts, *, now: dt.datetime) -> None:
    if f.not_authorized:
        cond = new(rkcp.READY, c.FALSE, "NotAuthorized", f.not_authorized, f, now=now)
    elif f.conflict_with:
        cond = new(
            rkcp.READY,
            c.FALSE,
            "Conflict",
            f"the same TenantControlPlane is claimed by the older {f.conflict_with}",
            f,
            now=now,
        )
    elif f.waiting_for_cluster:
        cond = new(rkcp.READY, c.FALSE, f.waiting_reason, f.waiting_for_cluster, f, now=now)
    else:
        cond = c.summary(
            status.conditions,
            rkcp.READY,
            of=(
                rkcp.TENANT_CONTROL_PLANE_READY,
                rkcp.SITE_CONNECTED,
                rkcp.INTENT_DELIVERED,
                rkcp.SECRETS_SYNCED,
                rkcp.PAUSED,
                rkcp.DELETING,
            ),
            negative=(rkcp.PAUSED, rkcp.DELETING),
            observed_generation=f.generation,
            now=now,
        )
    put(status, cond, now)


def new_status(previous: rkcp.Status, f: Facts, *, now: dt.datetime) -> rkcp.Status:
    """The whole status for ``f``, keeping what must not move (initialized, transition times)."""
    # A shallow copy: below, every field is assigned anew (conditions as new lists, nested
    # models as new objects), never changed in place, so ``previous`` stays as it was; a deep
    # copy of twelve conditions was a tenth of the hub's CPU in a burst of creates.
    status = previous.model_copy()
    s = f.status
    status.external_managed_control_plane = True
    status.observed_generation = f.generation
    if s is not None:
        status.ready = s.phase in SERVING_PHASES
        if s.phase == "Ready":
            status.initialized = True
        status.version = s.version or status.version
        status.replicas = s.replicas
        status.ready_replicas = s.ready_replicas
        status.available_replicas = s.available_replicas
        status.updated_replicas = s.updated_replicas
        status.up_to_date_replicas = s.updated_replicas
        status.unavailable_replicas = s.unavailable_replicas
    else:
        status.ready = False
    status.initialization = status.initialization.model_copy(
        update={"control_plane_initialized": status.initialized}
    )
    if f.tenant_control_plane_name:
        status.selector = f"{POD_SELECTOR_LABEL}={f.tenant_control_plane_name}"
    set_site_connected_condition(status, f, now=now)
    set_intent_delivered_condition(status, f, now=now)
    set_status_fresh_condition(status, f, now=now)
    set_tenant_control_plane_ready_condition(status, f, now=now)
    set_secrets_synced_condition(status, f, now=now)
    set_paused_condition(status, f, now=now)
    set_deleting_condition(status, f, now=now)
    progress.set_progress_conditions(status, f, now=now)
    set_ready_condition(status, f, now=now)
    return status
