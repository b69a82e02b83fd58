"""The vocabulary of one RemoteKamajiControlPlane reconcile: what it decides from, what it decides,
and what it asks its shell to do. Small values, no I/O: talks to nothing.

``Observed`` is everything the controller observed (the object, its owner Cluster, the desired
TCP spec and metadata, the intent subject's record, the site's report, the site's liveness, the
CAPI Secrets' checksums, the InfraCluster patch's outcome, the owner identity's claim);
``Plan`` is the decision: the actions, in order (finalizer first), the status, when to look
again. ``hub.reconcile.rkcp.decide`` plans and ``hub.controllers.rkcp`` performs the actions:
the Kubernetes writes (finalizers, the endpoint and the InfraCluster's, events, the CAPI
Secrets) and the NATS ones (streams, intents, purges). A plan never holds secret material:
``WriteSecrets`` names the box by checksum and the shell opens it. ``Outcome`` is what became of
the last ``PatchInfraEndpoint`` (the shell records it, ``infra`` reads it).

The intent subject's record, ``Published``, lives apart in ``published``: the owner identity is
decided from it (``owner``), and ``Observed`` asks ``owner`` for its own.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Literal

from hub.api import cluster as cluster_api
from hub.api import rkcp as api
from hub.reconcile.rkcp import facts, owner
from hub.reconcile.rkcp.published import Published
from protocol import messages


@dataclass(frozen=True)
class AddFinalizer:
    owner_uid: str = ""
    """The owner identity stamped in the same patch (``hub.reconcile.rkcp.owner``)."""


@dataclass(frozen=True)
class RemoveFinalizer:
    pass


@dataclass(frozen=True)
class EnsureTopology:
    """Create the site's stream and the hub's consumer on it (idempotent): the site appeared
    after the hub started, and its agent cannot report before they exist."""


@dataclass(frozen=True)
class Publish:
    op: Literal["provision", "delete"]
    spec: dict[str, Any]
    expected_last_seq: int
    """Fencing: the subject's sequence we based the decision on (0: no message yet)."""
    replaces: tuple[str, ...] = ()
    """Earlier owners whose TCP the site may delete to apply this intent (``replaced_owners``)."""
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    """``labels`` and ``annotations`` the TCP carries beside the agent's own (provision only)."""


@dataclass(frozen=True)
class Purge:
    """Remove the control plane's intent, status and secrets subjects."""


@dataclass(frozen=True)
class Release:
    """The site-unavailable timeout released this owner's deletion: its delete intent (``seq``)
    stays for the site, and its subjects are purged once the site confirms."""

    seq: int


@dataclass(frozen=True)
class WriteSecrets:
    """Fetch the latest sealed secrets from the stream, open them and write the CAPI Secrets, if
    the box is still the one decided on (``checksum``, ``owner_uid``). Plans hold no plaintext."""

    checksum: str
    owner_uid: str
    """The uid the sealed message names; ``hub.controllers.rkcp.writing`` writes only for that RKCP."""


@dataclass(frozen=True)
class SetEndpoint:
    host: str
    port: int


@dataclass(frozen=True)
class PatchInfraEndpoint:
    """Set ``spec.controlPlaneEndpoint`` of the Cluster's InfraCluster (any kind that has the
    field) to ``host:port``, if it is unset or different (``hub.reconcile.rkcp.infra``)."""

    group: str
    version: str
    """"": the group's preferred version (a v1beta2 reference names no version)."""
    kind: str
    name: str
    namespace: str
    host: str
    port: int


@dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


Action = (
    AddFinalizer
    | RemoveFinalizer
    | EnsureTopology
    | Publish
    | Purge
    | Release
    | WriteSecrets
    | SetEndpoint
    | PatchInfraEndpoint
    | Event
)


State = Literal["set", "refused", "waiting"]


@dataclass(frozen=True)
class Outcome:
    """What became of the last attempt for this RKCP."""

    target: PatchInfraEndpoint
    """The attempt (object and endpoint): a new target is a new attempt."""
    state: State
    reason: str
    at: dt.datetime


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
    site: facts.SiteView
    secrets_checksums: dict[str, str]
    """Checksum annotation of each existing CAPI Secret (``<cluster>-kubeconfig``, ``<cluster>-ca``)."""
    cluster_name: str
    conflict_with: str = ""
    not_authorized: str = ""
    """Why the Site does not grant this placement ("" when it does; see
    ``hub.controllers.site.placements``)."""
    known_initialized: bool = False
    """The controller already saw this object become Ready (its cache may lag our own write)."""
    signing_key_id: str = ""
    """The key id the hub signs with now ("": not compared)."""
    cluster_problem_reason: str = "WaitingForCluster"
    """The Ready reason for ``cluster_problem``: ``WaitingForCluster``, ``InvalidCoordinates``
    (a name the site cannot use) or ``IntentTooLarge`` (labels, annotations or spec too big)."""
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    desired_metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    """The TCP's propagated ``labels`` and ``annotations`` (``hub.mapping.tcp.tcp_metadata``)."""
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
        """The owner identity the site knows this control plane by (``hub.reconcile.rkcp.owner``)."""
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
    ``secrets.REFUSALS``; counted in kb_hub_secrets_refused_total), "" when nothing was refused."""
