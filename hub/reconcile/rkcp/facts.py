"""What an RKCP's status is computed from, and the two helpers every condition setter uses. Pure.

``Facts`` gathers the observations (the site's latest Status for this owner, the site's liveness,
where the secrets stand, what blocks the control plane) that ``hub.reconcile.rkcp.decide`` assembles;
``status`` (the hub's own conditions and the status fields) and ``progress`` (CAPI's
RollingOut, ScalingUp, ScalingDown and Available) read them. ``new`` builds a condition at the
RKCP's generation, ``put`` sets it into a status keeping its transition time.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from hub import conditions as c
from hub.api import rkcp
from protocol import messages


@dataclass(frozen=True)
class SiteView:
    connected: bool | None
    """None: no heartbeat ever seen."""
    last_heartbeat_time: dt.datetime | None = None
    kamaji_detected: bool | None = None
    """Whether the site's agent finds Kamaji's TenantControlPlane resource (its heartbeat); None: unknown."""
    revoked: bool = False
    """Operator mode: the site has no Site (or it is being deleted), so its agent's NATS
    credential is revoked (``hub.controllers.site.credentials``) and none is minted for it."""


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
    spec: rkcp.Spec
    """What the RKCP asks for (replicas and version: what the site's counts are compared with)."""
    tenant_control_plane_name: str = ""
    """The TCP's name at the site (its pods carry ``kamaji.clastix.io/name=<it>``)."""
    secrets_message: str = ""
    paused: str = ""
    """Why reconciliation is paused (CAPI's Paused message), "" when it is not."""
    deleting: bool = False
    conflict_with: str = ""
    not_authorized: str = ""
    """Why the Site does not grant the placement ("" when it does)."""
    waiting_for_cluster: str = ""
    waiting_reason: str = "WaitingForCluster"
    """The Ready reason while ``waiting_for_cluster`` says why no intent can be made."""
    recreating: bool = False
    """The site reported the TCP gone while the hub still wants it (its latest intent is a
    provision for this owner): it is being created again, not deleted."""
    replacing: tuple[str, ...] = ()
    """Uids of earlier owners whose released deletion the site has not confirmed yet: their TCP
    may still stand at these coordinates, and the provision intent replaces it."""


def new(type_: str, value: c.Status, reason: str, message: str, f: Facts, *, now: dt.datetime) -> c.Condition:
    """A condition of ``type_`` observed at the RKCP's generation."""
    return c.new_condition(type_, value, reason, message, observed_generation=f.generation, now=now)


def put(status: rkcp.Status, cond: c.Condition, now: dt.datetime) -> None:
    """``cond`` into ``status`` (its transition time kept while its status stays)."""
    status.conditions = c.set_condition(status.conditions, cond, now=now)
