"""Reconciling one RemoteKamajiControlPlane: observe → decide (here, pure) → act → patch status.

``reconcile`` takes everything the controller observed (the object, its owner Cluster, the
desired TCP spec, the last intent on the control plane's subject, the site's latest status and
secrets, the site's liveness, the CAPI Secrets as they are) and returns a ``Plan``: the actions
to perform, in order, the status to write, and when to look again. Finalizer first (CAPI); an
intent is published only when what the site should run differs from the last intent, so a
resync or a hub restart publishes nothing, or when the subject lost the owner's intent behind the
hub's back (purged, or overwritten with an older one while the site runs a newer generation).

The steps live beside it: ``rkcp_intents`` (the subject's latest intent and whether ours must go
again), ``rkcp_secrets`` (whether the sealed secrets are written), ``rkcp_status`` (conditions);
the actions are ``rkcp_actions``'s, re-exported here as the shell's vocabulary (``rkcp.Publish``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from hub import api, cluster_api
from hub.reconcile import owner, rkcp_intents, rkcp_secrets, rkcp_status
from hub.reconcile.rkcp_actions import Action as Action
from hub.reconcile.rkcp_actions import AddFinalizer as AddFinalizer
from hub.reconcile.rkcp_actions import EnsureTopology as EnsureTopology
from hub.reconcile.rkcp_actions import Event as Event
from hub.reconcile.rkcp_actions import Publish as Publish
from hub.reconcile.rkcp_actions import Purge as Purge
from hub.reconcile.rkcp_actions import Release as Release
from hub.reconcile.rkcp_actions import RemoveFinalizer as RemoveFinalizer
from hub.reconcile.rkcp_actions import SetEndpoint as SetEndpoint
from hub.reconcile.rkcp_actions import WriteSecrets as WriteSecrets
from hub.reconcile.rkcp_intents import Op as Op
from hub.reconcile.rkcp_intents import Published as Published
from hub.reconcile.rkcp_intents import recheck_published as recheck_published
from hub.reconcile.rkcp_intents import spec_digest as spec_digest
from protocol import messages

FINALIZER = "kamaji-broker.io/finalizer"
RESYNC_SECONDS = 30.0
DELETE_POLL_SECONDS = 5.0


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
    """Why there is no usable owner Cluster ("" when there is one)."""
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
    now: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    topology_ready: bool = True
    """The hub ensured the site's stream and consumer in this process (False: plan it first)."""
    owner_claimed_by: str = ""
    """Another RKCP here that is, or claimed first, the owner identity this one's annotation names."""

    @property
    def owner(self) -> owner.Owner:
        finalized = FINALIZER in self.rkcp.metadata.finalizers
        return owner.decide(
            self.rkcp,
            self.published,
            claimed_by=self.owner_claimed_by,
            finalized=finalized,
            key_id=self.signing_key_id,
        )

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


def reconcile(o: Observed) -> Plan:
    if owner.DELETE_FOR_MOVE in o.rkcp.metadata.annotations:
        # clusterctl move deletes the source object: it lives on in the target, hands off.
        return Plan(actions=[], status=None)
    plan = reconcile_delete(o) if o.rkcp.metadata.deletion_timestamp is not None else reconcile_normal(o)
    if not o.topology_ready:
        # The site's stream and the hub's consumer before anything else: observing only reads.
        plan.actions.insert(0, EnsureTopology())
    return plan


def _report_for_owner(o: Observed) -> messages.Status | None:
    s = o.report.status
    # A status of a previous owner (same coordinates, older object) says nothing about ours.
    if s is None or (s.owner_uid and s.owner_uid != o.owner_uid):
        return None
    return s


def _facts(
    o: Observed, status: messages.Status | None, secrets: rkcp_secrets.SecretsDecision, **kw: Any
) -> rkcp_status.Facts:
    return rkcp_status.Facts(
        generation=o.rkcp.metadata.generation,
        status=status,
        published_seq=o.published.seq if o.published else 0,
        site=o.site,
        secrets=secrets.state,
        secrets_message=secrets.message,
        conflict_with=o.conflict_with,
        not_authorized=o.not_authorized or o.owner.refused,
        **kw,
    )


def _paused(o: Observed) -> bool:
    return o.cluster is not None and o.cluster.paused


def reconcile_normal(o: Observed) -> Plan:
    r = o.rkcp
    if FINALIZER not in r.metadata.finalizers or o.owner.stamp:
        # Finalizer first, before anything reaches the site: otherwise a delete racing this
        # reconcile could leave a TCP running with nobody left to remove it. The owner identity
        # in the same patch: nothing reaches the site under a uid a move would change.
        return Plan(actions=[AddFinalizer(owner_uid=o.owner_uid)], status=None, requeue_after=0.0)
    status_msg = _report_for_owner(o)
    secrets = rkcp_secrets.decide_secrets(o)
    facts = _facts(
        o,
        status_msg,
        secrets,
        paused=_paused(o),
        waiting_for_cluster=o.cluster_problem,
        recreating=rkcp_intents.still_wanted(o, status_msg),
        replacing=rkcp_intents.replaced_owners(o, status_msg),
    )
    # A paused Cluster means hands off (CAPI): conditions only, no writes of ours (decide_secrets
    # withholds the secrets then).
    actions = [*_intent(o, status_msg), *secrets.actions, *_endpoint(o, status_msg)]
    status = rkcp_status.new_status(r.status, facts, now=o.now)
    first_ready = status.initialized and not (r.status.initialized or o.known_initialized)
    if first_ready:
        actions.append(
            Event("Normal", "TenantControlPlaneReady", f"the control plane at site {r.spec.site} is Ready")
        )
    return Plan(
        actions=actions,
        status=status,
        requeue_after=RESYNC_SECONDS,
        first_ready=first_ready,
        secrets_refused=secrets.refused,
    )


def _intent(o: Observed, status: messages.Status | None) -> list[Action]:
    # Not authorized: nothing reaches the site, whatever else holds (issue 10).
    blocked = o.not_authorized or o.owner.refused or o.cluster_problem or o.conflict_with or _paused(o)
    if blocked or o.desired_spec is None or not rkcp_intents.wants_intent(o, status):
        return []
    return rkcp_intents.provision(o, status, o.desired_spec)


def _endpoint(o: Observed, status: messages.Status | None) -> list[Action]:
    """The endpoint the site reports, once, unless the owner Cluster is paused."""
    if (
        _paused(o)
        or status is None
        or status.endpoint is None
        or o.rkcp.spec.control_plane_endpoint is not None
    ):
        return []
    return [SetEndpoint(host=status.endpoint.host, port=status.endpoint.port)]


def _deleted_answer(o: Observed, p: Published) -> bool:
    """The site answered the delete intent ``p`` with Deleted: for this owner's TCP, or for the
    TCP of an earlier owner the intent names (what stood there was that one's, and it is gone)."""
    s = o.report.status
    return (
        s is not None
        and s.phase == "Deleted"
        and s.intent_seq >= p.seq
        and (s.owner_uid in ("", o.owner_uid) or s.owner_uid in p.replaces)
    )


def _waiting(o: Observed) -> api.Status:
    """The status while the site deletes the TenantControlPlane."""
    facts = _facts(o, _report_for_owner(o), rkcp_secrets.decide_secrets(o), deleting=True)
    status = rkcp_status.new_status(o.rkcp.status, facts, now=o.now)
    message = f"waiting for site {o.rkcp.spec.site} to delete the TenantControlPlane"
    rkcp_status.set_deleting_condition(status, facts, now=o.now, reason="WaitingForSite", message=message)
    rkcp_status.set_ready_condition(status, facts, now=o.now)
    return status


def reconcile_delete(o: Observed) -> Plan:
    r = o.rkcp
    if FINALIZER not in r.metadata.finalizers:
        return Plan(actions=[], status=None)
    p = o.published
    ours = p is not None and p.owner_uid == o.owner_uid
    if r.spec.deletion_policy == "Orphan" or not ours or o.conflict_with:
        return _let_go(o, ours=ours)
    assert p is not None
    if p.op != Op.DELETE or rkcp_intents.signed_by_another_key(o) or not p.signed:
        replaces = rkcp_intents.replaced_owners(o, _report_for_owner(o))
        return Plan(
            actions=[
                Publish(op="delete", spec={}, expected_last_seq=p.seq, replaces=replaces),
                Event("Normal", "DeleteIntentPublished", f"delete intent sent to site {r.spec.site}"),
            ],
            status=_waiting(o),
            requeue_after=DELETE_POLL_SECONDS,
        )
    # Only a Deleted that answers the delete intent: one that predates it (the TCP vanished
    # earlier) is followed by the agent's answer, which would refill the subjects after a purge.
    if _deleted_answer(o, p):
        deleted = Event("Normal", "Deleted", f"site {r.spec.site} deleted the TenantControlPlane")
        return Plan(actions=[Purge(), RemoveFinalizer(), deleted], status=None)
    if _site_gone_too_long(o):
        return _release(o, p)
    return Plan(actions=[], status=_waiting(o), requeue_after=DELETE_POLL_SECONDS)


def _let_go(o: Observed, *, ours: bool) -> Plan:
    """Nothing of ours at the site to remove (never published, another owner's subject, or
    Orphan: the TCP stays and its subjects go, so the agent stops reporting it)."""
    r = o.rkcp
    actions: list[Action] = [Purge()] if ours else []
    if r.spec.deletion_policy == "Orphan" and ours:
        actions.append(
            Event("Normal", "Orphaned", f"the TenantControlPlane at site {r.spec.site} is left running")
        )
    return Plan(actions=[*actions, RemoveFinalizer()], status=None)


def _site_gone_too_long(o: Observed) -> bool:
    timeout = o.rkcp.spec.site_unavailable_deletion_timeout_seconds
    heard = o.site.last_heartbeat_time or o.rkcp.metadata.deletion_timestamp or o.now
    return timeout is not None and o.site.connected is not True and (o.now - heard).total_seconds() > timeout


def _release(o: Observed, p: Published) -> Plan:
    r = o.rkcp
    limit = r.spec.site_unavailable_deletion_timeout
    return Plan(
        actions=[
            Event(
                "Warning",
                "SiteUnavailable",
                f"site {r.spec.site} silent for longer than {limit}: finalizer removed; "
                "the delete intent stays for the site to apply when it returns",
            ),
            Release(seq=p.seq),
            RemoveFinalizer(),
        ],
        status=None,
    )
