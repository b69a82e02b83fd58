"""Reconciling one RemoteKamajiControlPlane: observe → decide (here, pure) → act → patch status.

``reconcile`` takes everything the controller observed (the object, its owner Cluster, the
desired TCP spec, the last intent on the control plane's subject, the site's latest status and
secrets, the site's liveness, the CAPI Secrets as they are) and returns a ``Plan``: the actions
to perform, in order, the status to write, and when to look again. Finalizer first (CAPI); an
intent is published only when what the site should run differs from the last intent, so a
resync or a hub restart publishes nothing, or when the subject lost the owner's intent behind the
hub's back (purged, or overwritten with an older one while the site runs a newer generation).

The steps live beside it: ``intents`` (the subject's latest intent and whether ours must go
again), ``secrets`` (whether the sealed secrets are written), ``status`` (conditions). What it
decides from and what it decides, the actions included, are ``vocabulary``'s: the shell imports
them from there, never from here.
"""

from __future__ import annotations

from typing import Any

from hub.api import cluster, rkcp
from hub.reconcile.rkcp import infra, intents, owner
from hub.reconcile.rkcp import secrets as rkcp_secrets
from hub.reconcile.rkcp import status as rkcp_status
from hub.reconcile.rkcp.facts import Facts
from hub.reconcile.rkcp.published import Op, Published
from hub.reconcile.rkcp.vocabulary import (
    FINALIZER,
    Action,
    AddFinalizer,
    EnsureTopology,
    Event,
    Observed,
    Plan,
    Publish,
    Purge,
    Release,
    RemoveFinalizer,
    SetEndpoint,
)
from protocol import messages

RESYNC_SECONDS = 10 * 3600.0
"""The longest an RKCP goes unreconciled when nothing happens to it (controller-runtime's
``SyncPeriod``): a safety net, not how changes are found. Every input is an event: the watches
(RKCPs, Clusters, Sites, Secrets), what its site sends, its site's heartbeat turning stale or
fresh, and the survey of the intent stream (what was written there behind the hub's back)."""
DELETE_POLL_SECONDS = 5.0


def reconcile(o: Observed) -> Plan:
    if owner.DELETE_FOR_MOVE in o.rkcp.metadata.annotations:
        # clusterctl move deletes the source object: it lives on in the target, hands off. Move
        # takes the finalizer off itself; one still there on a deleted object (the annotation set
        # by hand, a move stopped half-way) is let go like Orphan: never stuck, and nothing is
        # deleted or purged that the target management cluster may own now.
        deleted = o.rkcp.metadata.deletion_timestamp is not None and FINALIZER in o.rkcp.metadata.finalizers
        return Plan(actions=[RemoveFinalizer()] if deleted else [], status=None)
    plan = reconcile_delete(o) if o.rkcp.metadata.deletion_timestamp is not None else reconcile_normal(o)
    if not o.topology_ready and not _paused(o):
        # The site's stream and the hub's consumer before anything else: observing only reads.
        plan.actions.insert(0, EnsureTopology())
    return plan


def report_for_owner(o: Observed) -> messages.Status | None:
    """The site's status of this owner's TenantControlPlane (None: none yet, or another owner's)."""
    s = o.report.status
    # A status of a previous owner (same coordinates, older object) says nothing about ours.
    if s is None or (s.owner_uid and s.owner_uid != o.owner_uid):
        return None
    return s


def _facts(
    o: Observed, status: messages.Status | None, secrets: rkcp_secrets.SecretsDecision, **kw: Any
) -> Facts:
    kw.setdefault("generation", o.rkcp.metadata.generation)
    return Facts(
        status=status,
        published_seq=o.published.seq if o.published else 0,
        site=o.site,
        secrets=secrets.state,
        secrets_message=secrets.message,
        conflict_with=o.conflict_with,
        not_authorized=o.not_authorized or o.owner.refused,
        spec=o.rkcp.spec,
        tenant_control_plane_name=o.rkcp.spec.tenant_control_plane_name or o.rkcp.metadata.name,
        paused=_paused(o),
        **kw,
    )


def _paused(o: Observed) -> str:
    """Why reconciliation is paused (CAPI: the Cluster's spec.paused, the RKCP's annotation), or ""."""
    return cluster.pause_message(o.cluster, o.rkcp)


def reconcile_normal(o: Observed) -> Plan:
    r = o.rkcp
    if (FINALIZER not in r.metadata.finalizers or o.owner.stamp) and not _paused(o):
        # Finalizer first, before anything reaches the site: otherwise a delete racing this
        # reconcile could leave a TCP running with nobody left to remove it. The owner identity
        # in the same patch: nothing reaches the site under a uid a move would change. Paused (CAPI
        # checks it before the finalizer): no finalizer either, only the status below, blocked as paused.
        return Plan(actions=[AddFinalizer(owner_uid=o.owner_uid)], status=None, requeue_after=0.0)
    status_msg = report_for_owner(o)
    secrets = rkcp_secrets.decide_secrets(o)
    endpoint = _endpoint(o, status_msg)
    facts = _facts(
        o,
        status_msg,
        secrets,
        # The endpoint is the hub's own write on the object as read (the patch carries its
        # resourceVersion): the status is for the generation that write makes, or its watch
        # event would cost a second status write that moves observedGeneration alone.
        generation=r.metadata.generation + 1 if endpoint else r.metadata.generation,
        waiting_for_cluster=o.cluster_problem,
        waiting_reason=o.cluster_problem_reason,
        recreating=intents.still_wanted(o, status_msg),
        replacing=intents.replaced_owners(o, status_msg),
    )
    # A paused Cluster means hands off (CAPI): conditions only, no writes of ours (decide_secrets
    # withholds the secrets then).
    actions = [*_intent(o, status_msg), *secrets.actions, *endpoint]
    if not _blocked(o):  # after the RKCP's own endpoint; never for an object that acts as nobody
        actions += infra.decide_infra(o, status_msg)
    status = rkcp_status.new_status(r.status, facts, now=o.now)
    # Ready for the first time: a metric, no Event (its conditions say so, and a CAPI control
    # plane provider records none for a creation going as asked).
    first_ready = status.initialized and not (r.status.initialized or o.known_initialized)
    return Plan(
        actions=actions,
        status=status,
        requeue_after=RESYNC_SECONDS,
        first_ready=first_ready,
        secrets_refused=secrets.refused,
    )


def _blocked(o: Observed) -> bool:
    """Not authorized, refused as an owner, without a usable Cluster, in conflict or paused: the
    hub writes nothing for this object, at the site or in the management cluster."""
    return bool(o.not_authorized or o.owner.refused or o.cluster_problem or o.conflict_with or _paused(o))


def _intent(o: Observed, status: messages.Status | None) -> list[Action]:
    # Not authorized: nothing reaches the site, whatever else holds.
    if _blocked(o) or o.desired_spec is None or not intents.wants_intent(o, status):
        return []
    return intents.provision(o, status, o.desired_spec)


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


def _waiting(o: Observed) -> rkcp.Status:
    """The status while the site deletes the TenantControlPlane (or, paused, until it may)."""
    facts = _facts(o, report_for_owner(o), rkcp_secrets.decide_secrets(o), deleting=True)
    status = rkcp_status.new_status(o.rkcp.status, facts, now=o.now)
    reason = "WaitingForSite"
    message = f"waiting for site {o.rkcp.spec.site} to delete the TenantControlPlane"
    if facts.paused:
        reason, message = "Paused", f"the deletion waits until reconciliation is unpaused ({facts.paused})"
    rkcp_status.set_deleting_condition(status, facts, now=o.now, reason=reason, message=message)
    rkcp_status.set_ready_condition(status, facts, now=o.now)
    return status


def reconcile_delete(o: Observed) -> Plan:
    r = o.rkcp
    if FINALIZER not in r.metadata.finalizers:
        return Plan(actions=[], status=None)
    if _paused(o):
        # Paused (CAPI), deleting or not: nothing published, the finalizer kept until unpaused.
        return Plan(actions=[], status=_waiting(o), requeue_after=RESYNC_SECONDS)
    p = o.published
    ours = p is not None and p.owner_uid == o.owner_uid
    if r.spec.deletion_policy == "Orphan" or not ours or o.conflict_with:
        return _let_go(o, ours=ours)
    assert p is not None
    if p.op != Op.DELETE or intents.signed_by_another_key(o) or not p.signed:
        replaces = intents.replaced_owners(o, report_for_owner(o))
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
