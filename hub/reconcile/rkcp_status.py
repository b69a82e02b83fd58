"""The RemoteKamajiControlPlane status from what the hub observed: pure, one setter per condition.

Each ``set_<x>_condition`` decides one condition from its observations and always sets a reason
(Unknown on the first visit rather than absent). ``new_status`` assembles the CAPI contract
fields from the site's latest Status message; ``initialized`` never goes back to false.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from common import conditions as c
from hub import api
from protocol import messages

SERVING_PHASES = ("Ready", "Upgrading")
REPLACING_PREVIOUS_OWNER = "ReplacingPreviousOwner"
"""The reason (condition, event, the agent's status) while an earlier owner's TCP is replaced."""


@dataclass(frozen=True)
class SiteView:
    connected: bool | None
    """None: no heartbeat ever seen."""
    last_heartbeat_time: dt.datetime | None = None
    backlog: int | None = None


class Secrets(enum.StrEnum):
    """Where the site's sealed secrets stand for this RKCP (its ``SecretsSynced`` condition)."""

    SYNCED = "Synced"
    """The CAPI Secrets carry the latest box's checksum (or are written in this reconcile)."""
    DECRYPT_FAILED = "DecryptFailed"
    WAITING = "Waiting"
    """Nothing sealed yet (or the box of a replaced owner)."""
    # Withheld: the secrets are someone else's, or this placement may not have them.
    OWNER_MISMATCH = "OwnerMismatch"
    NOT_AUTHORIZED = "NotAuthorized"
    CONFLICT = "Conflict"
    PAUSED = "Paused"


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


@dataclass(frozen=True)
class Facts:
    """Everything the conditions are computed from."""

    generation: int
    status: messages.Status | None
    """The site's latest status for this owner (None: none yet, or it belongs to another owner)."""
    published_seq: int
    """Stream sequence of the latest intent published for this control plane (0: none)."""
    site: SiteView
    secrets: Secrets
    secrets_message: str = ""
    paused: bool = False
    deleting: bool = False
    conflict_with: str = ""
    not_authorized: str = ""
    """Why the Site does not grant the placement ("" when it does)."""
    waiting_for_cluster: str = ""
    recreating: bool = False
    """The site reported the TCP gone while the hub still wants it (its latest intent is a
    provision for this owner): it is being created again, not deleted."""
    replacing: tuple[str, ...] = ()
    """Uids of earlier owners whose released deletion the site has not confirmed yet: their TCP
    may still stand at these coordinates, and the provision intent replaces it (issue 11 §3)."""


def _set(status: api.Status, cond: c.Condition, now: dt.datetime) -> None:
    status.conditions = c.set_condition(status.conditions, cond, now=now)


def _new(
    type_: str, value: c.Status, reason: str, message: str, f: Facts, *, now: dt.datetime
) -> c.Condition:
    """A condition of ``type_`` observed at the RKCP's generation."""
    return c.new_condition(type_, value, reason, message, observed_generation=f.generation, now=now)


def set_site_connected_condition(status: api.Status, f: Facts, *, now: dt.datetime) -> None:
    if f.site.connected is None:
        cond = _new(
            api.SITE_CONNECTED, c.UNKNOWN, "NoHeartbeat", "no heartbeat from the site yet", f, now=now
        )
    elif f.site.connected:
        cond = _new(api.SITE_CONNECTED, c.TRUE, "HeartbeatReceived", "", f, now=now)
    else:
        when = f.site.last_heartbeat_time.isoformat() if f.site.last_heartbeat_time else "never"
        cond = _new(api.SITE_CONNECTED, c.FALSE, "HeartbeatMissing", f"last heartbeat {when}", f, now=now)
    _set(status, cond, now)


def set_intent_delivered_condition(status: api.Status, f: Facts, *, now: dt.datetime) -> None:
    if f.published_seq == 0:
        cond = _new(api.INTENT_DELIVERED, c.UNKNOWN, "NotPublished", "no intent published yet", f, now=now)
    elif f.status is not None and f.status.intent_seq >= f.published_seq:
        cond = _new(api.INTENT_DELIVERED, c.TRUE, "Acknowledged", "", f, now=now)
    else:
        cond = _new(
            api.INTENT_DELIVERED,
            c.FALSE,
            "Pending",
            f"waiting for the site to apply intent {f.published_seq}",
            f,
            now=now,
        )
    _set(status, cond, now)


def set_status_fresh_condition(status: api.Status, f: Facts, *, now: dt.datetime) -> None:
    if f.status is None:
        cond = _new(api.STATUS_FRESH, c.UNKNOWN, "NoStatus", "no status from the site yet", f, now=now)
    elif f.site.connected is False:
        cond = _new(
            api.STATUS_FRESH,
            c.FALSE,
            "SiteSilent",
            "the site is not connected; its last status may be outdated",
            f,
            now=now,
        )
    elif f.status.intent_seq < f.published_seq:
        cond = _new(api.STATUS_FRESH, c.FALSE, "Outdated", "the status answers an older intent", f, now=now)
    else:
        cond = _new(api.STATUS_FRESH, c.TRUE, "UpToDate", "", f, now=now)
    _set(status, cond, now)


def set_tenant_control_plane_ready_condition(status: api.Status, f: Facts, *, now: dt.datetime) -> None:
    s = f.status
    if f.replacing and not f.deleting:
        cond = _new(
            api.TENANT_CONTROL_PLANE_READY,
            c.FALSE,
            REPLACING_PREVIOUS_OWNER,
            f"the TenantControlPlane of the previous owner (uid {', '.join(f.replacing)}), whose deletion "
            "was released while the site was unavailable, is deleted at the site before this one is created",
            f,
            now=now,
        )
    elif s is None:
        cond = _new(api.TENANT_CONTROL_PLANE_READY, c.UNKNOWN, "NoStatus", "", f, now=now)
    elif s.phase == "Deleted" and f.recreating:
        cond = _new(
            api.TENANT_CONTROL_PLANE_READY,
            c.FALSE,
            "Recreating",
            "the TenantControlPlane was deleted at the site; the provision intent recreates it",
            f,
            now=now,
        )
    elif s.phase in SERVING_PHASES:
        cond = _new(api.TENANT_CONTROL_PLANE_READY, c.TRUE, s.phase, s.message, f, now=now)
    else:
        # Drifted: the site changed fields we own and the agent is reverting them (issue 11 §5).
        specific = s.phase in ("Rejected", "Failed") or s.reason == "Drifted"
        reason = s.reason if specific and s.reason else s.phase
        cond = _new(api.TENANT_CONTROL_PLANE_READY, c.FALSE, reason, s.message, f, now=now)
    _set(status, cond, now)


def set_secrets_synced_condition(status: api.Status, f: Facts, *, now: dt.datetime) -> None:
    value, reason = _SECRETS_CONDITION[f.secrets]
    _set(status, _new(api.SECRETS_SYNCED, value, reason, f.secrets_message, f, now=now), now)


def set_paused_condition(status: api.Status, f: Facts, *, now: dt.datetime) -> None:
    cond = (
        _new(
            api.PAUSED, c.TRUE, "Paused", "the owner Cluster is paused: no intents are published", f, now=now
        )
        if f.paused
        else _new(api.PAUSED, c.FALSE, "NotPaused", "", f, now=now)
    )
    _set(status, cond, now)


def set_deleting_condition(
    status: api.Status, f: Facts, *, now: dt.datetime, reason: str = "", message: str = ""
) -> None:
    cond = (
        _new(api.DELETING, c.TRUE, reason or "Deleting", message, f, now=now)
        if f.deleting
        else _new(api.DELETING, c.FALSE, "NotDeleting", "", f, now=now)
    )
    _set(status, cond, now)


def set_available_condition(status: api.Status, f: Facts, *, now: dt.datetime) -> None:
    cond = (
        _new(api.AVAILABLE, c.TRUE, "Available", "", f, now=now)
        if status.ready
        else _new(
            api.AVAILABLE, c.FALSE, "NotReady", "the tenant control plane does not serve yet", f, now=now
        )
    )
    _set(status, cond, now)


def set_ready_condition(status: api.Status, f: Facts, *, now: dt.datetime) -> None:
    if f.not_authorized:
        cond = _new(api.READY, c.FALSE, "NotAuthorized", f.not_authorized, f, now=now)
    elif f.conflict_with:
        cond = _new(
            api.READY,
            c.FALSE,
            "Conflict",
            f"the same TenantControlPlane is claimed by the older {f.conflict_with}",
            f,
            now=now,
        )
    elif f.waiting_for_cluster:
        cond = _new(api.READY, c.FALSE, "WaitingForCluster", f.waiting_for_cluster, f, now=now)
    else:
        cond = c.summary(
            status.conditions,
            api.READY,
            of=(
                api.TENANT_CONTROL_PLANE_READY,
                api.SITE_CONNECTED,
                api.INTENT_DELIVERED,
                api.SECRETS_SYNCED,
                api.PAUSED,
                api.DELETING,
            ),
            negative=(api.PAUSED, api.DELETING),
            observed_generation=f.generation,
            now=now,
        )
    _set(status, cond, now)


def new_status(previous: api.Status, f: Facts, *, now: dt.datetime) -> api.Status:
    """The whole status for ``f``, keeping what must not move (initialized, transition times)."""
    status = previous.model_copy(deep=True)
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
    status.initialization.control_plane_initialized = status.initialized
    status.site = api.SiteStatus(last_heartbeat_time=f.site.last_heartbeat_time, backlog=f.site.backlog)
    set_site_connected_condition(status, f, now=now)
    set_intent_delivered_condition(status, f, now=now)
    set_status_fresh_condition(status, f, now=now)
    set_tenant_control_plane_ready_condition(status, f, now=now)
    set_secrets_synced_condition(status, f, now=now)
    set_paused_condition(status, f, now=now)
    set_deleting_condition(status, f, now=now)
    set_available_condition(status, f, now=now)
    set_ready_condition(status, f, now=now)
    return status
