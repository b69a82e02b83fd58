"""What one reconcile of a RemoteKamajiControlPlane decides from, and what it decides.

``Observed`` is everything the controller observed (the object, its owner Cluster, the desired
TCP spec and metadata, the intent subject's record, the site's report, the site's liveness, the
CAPI Secrets' checksums, the InfraCluster patch's outcome, the owner identity's claim);
``Plan`` is the decision (actions, status, when to look again). Pure data: talks to nothing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from hub import api, cluster_api
from hub.reconcile import owner, rkcp_status
from hub.reconcile.rkcp_actions import Action, Outcome
from hub.reconcile.rkcp_published import Published
from protocol import messages

FINALIZER = "kamaji-broker.io/finalizer"


@dataclass(frozen=True)
class SiteReport:
    """What the site sent about this control plane (already matched to the owner uid)."""

    status: messages.Status | None = None
    secrets_checksum: str = ""
    """The checksum of the latest sealed secrets ("" when none): the CAPI Secrets must carry it."""
    secrets_error: str = ""
    secrets_owner_uid: str = ""
    """The owner uid the sealed secrets name (the TCP's owner at the site); "" when none."""
    secrets_seq: int = 0
    """Sequence of the sealed secrets in the site's stream (a refusal is counted once per message)."""


@dataclass(frozen=True)
class Observed:
    rkcp: api.RemoteKamajiControlPlane
    cluster: cluster_api.Cluster | None
    cluster_problem: str
    """Why no intent can be made: no usable owner Cluster, or the RKCP's own fields ("" when
    one can); ``cluster_problem_reason`` says which."""
    desired_spec: dict[str, Any] | None
    """The TCP spec (None when it cannot be computed yet: no Cluster)."""
    published: Published | None
    report: SiteReport
    site: rkcp_status.SiteView
    secrets_checksums: dict[str, str]
    """Checksum annotation of each existing CAPI Secret (``<cluster>-kubeconfig``, ``<cluster>-ca``)."""
    cluster_name: str
    conflict_with: str = ""
    not_authorized: str = ""
    """Why the Site does not grant this placement ("" when it does; see ``hub.placements``)."""
    known_initialized: bool = False
    """The controller already saw this object become Ready (its cache may lag our own write)."""
    signing_key_id: str = ""
    """The key id the hub signs with now ("": not compared)."""
    cluster_problem_reason: str = "WaitingForCluster"
    """The Ready reason for ``cluster_problem``: ``WaitingForCluster``, ``InvalidCoordinates``
    (a name the site cannot use) or ``IntentTooLarge`` (labels, annotations or spec too big)."""
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    desired_metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    """The TCP's propagated ``labels`` and ``annotations`` (``hub.mapping.tcp_metadata``)."""
    topology_ready: bool = True
    """The hub ensured the site's stream and consumer in this process (False: plan it first)."""
    infra_outcome: Outcome | None = None
    """What became of the last InfraCluster endpoint patch for this RKCP (None: none tried)."""
    owner_claimed_by: str = ""
    """Another RKCP here that is, or claimed first, the owner identity this one's annotation names."""

    @property
    def owner(self) -> owner.Owner:
        finalized = FINALIZER in self.rkcp.metadata.finalizers
        return owner.decide(self.rkcp, self.published, claimed_by=self.owner_claimed_by, finalized=finalized)

    @property
    def owner_uid(self) -> str:
        """The owner identity the site knows this control plane by (``hub.reconcile.owner``)."""
        return self.owner.uid


@dataclass
class Plan:
    actions: list[Action]
    status: api.Status | None
    """None: leave the status alone (e.g. the object is about to disappear)."""
    requeue_after: float | None = None
    first_ready: bool = False
    """The control plane became Ready for the first time (for kb_hub_first_ready_seconds)."""
    secrets_refused: str = ""
    """Why the site's sealed secrets were not written for this object (a reason of
    ``rkcp_secrets.REFUSALS``; counted in kb_hub_secrets_refused_total), "" when nothing was refused."""
