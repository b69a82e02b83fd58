"""Reconciling one RemoteKamajiControlPlane: observe → decide (here, pure) → act → patch status.

``reconcile`` takes everything the controller observed (the object, its owner Cluster, the
desired TCP spec, the last intent on the control plane's subject, the site's latest status and
secrets, the site's liveness, the CAPI Secrets as they are) and returns a ``Plan``: the actions
to perform, in order, the status to write, and when to look again. Finalizer first (CAPI); an
intent is published only when what the site should run differs from the last intent, so a
resync or a hub restart publishes nothing, or when the subject lost the owner's intent behind the
hub's back (purged, or overwritten with an older one while the site runs a newer generation).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from hub import api, cluster_api
from hub.reconcile import rkcp_status
from protocol import messages

FINALIZER = "kamaji-broker.io/finalizer"
RESYNC_SECONDS = 30.0
DELETE_POLL_SECONDS = 5.0


@dataclass(frozen=True)
class Published:
    """The latest intent on the control plane's subject, as stored in the stream."""

    seq: int
    op: str
    generation: int
    owner_uid: str
    spec_digest: str
    """``spec_digest`` of the intent's TCP spec (a digest, not the spec: the hub keeps one per
    control plane, and ten thousand parsed specs cost a hundred megabytes)."""
    kubeconfig_key: str = "admin.conf"
    key_id: str = ""
    """The signing key id the intent names."""
    signed: bool = True
    """Signed by the hub's current key. Anyone with the hub's NATS credentials can publish on
    the subject; what the hub did not sign is replaced (and, after a key rotation, re-signed)."""
    replaces: tuple[str, ...] = ()
    """The intent's ``replaces``: earlier owners whose released deletion it carries on."""


def spec_digest(spec: dict[str, Any] | None) -> str:
    """SHA-256 of the spec's canonical JSON (sorted keys): equal specs, equal digests."""
    return hashlib.sha256(msgspec.json.encode(spec, order="sorted")).hexdigest()


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


@dataclass(frozen=True)
class AddFinalizer:
    pass


@dataclass(frozen=True)
class RemoveFinalizer:
    pass


@dataclass(frozen=True)
class Publish:
    op: Literal["provision", "delete"]
    spec: dict[str, Any]
    expected_last_seq: int
    """Fencing: the subject's sequence we based the decision on (0: no message yet)."""
    replaces: tuple[str, ...] = ()
    """Earlier owners whose TCP the site may delete to apply this intent (``replaced_owners``)."""


@dataclass(frozen=True)
class Purge:
    """Remove the control plane's intent, status and secrets subjects."""


@dataclass(frozen=True)
class Release:
    """The site-unavailable timeout released this owner's deletion: its delete intent (``seq``)
    stays for the site, and its subjects are purged once the site confirms (issue 11 §6)."""

    seq: int


@dataclass(frozen=True)
class WriteSecrets:
    """Fetch the latest sealed secrets from the stream, open them and write the CAPI Secrets, if
    the box is still the one decided on (``checksum``, ``owner_uid``). Plans hold no plaintext."""

    checksum: str
    owner_uid: str
    """The uid the sealed message names; ``hub.controllers.writing`` writes only for that RKCP."""


@dataclass(frozen=True)
class SetEndpoint:
    host: str
    port: int


@dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


Action = AddFinalizer | RemoveFinalizer | Publish | Purge | Release | WriteSecrets | SetEndpoint | Event


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
    ``REFUSALS``; counted in kb_hub_secrets_refused_total), "" when nothing was refused."""


OWNER_MISMATCH = "OwnerMismatch"
NOT_AUTHORIZED = "NotAuthorized"
CONFLICT = "Conflict"
PAUSED = "Paused"
REFUSALS = (OWNER_MISMATCH, NOT_AUTHORIZED, CONFLICT, PAUSED)
"""Why sealed secrets are withheld from an RKCP; each is also its SecretsSynced reason."""


def reconcile(o: Observed) -> Plan:
    if o.rkcp.metadata.deletion_timestamp is not None:
        return reconcile_delete(o)
    return reconcile_normal(o)


def _report_for_owner(o: Observed) -> messages.Status | None:
    s = o.report.status
    # A status of a previous owner (same coordinates, older object) says nothing about ours.
    if s is None or (s.owner_uid and s.owner_uid != o.rkcp.metadata.uid):
        return None
    return s


def _confirmed(status: messages.Status | None) -> bool:
    """The site answered for this owner's own TCP: no earlier owner's TCP stands there any more."""
    return (
        status is not None
        and status.phase != "Rejected"
        and status.reason != rkcp_status.REPLACING_PREVIOUS_OWNER
    )


def replaced_owners(o: Observed, status: messages.Status | None) -> tuple[str, ...]:
    """Earlier owners of these coordinates whose TCP the site may still run (issue 11 §3).

    The subject holds one intent: a new owner's provision overwrites a released owner's delete
    (the site was away past ``siteUnavailableDeletionTimeout``), so the new intent carries the
    released owners on, signed, and the agent deletes a TCP of theirs before creating the new one.
    Derived from the stream alone (the latest intent and what it carried), so a restarted hub
    knows them too: a delete of another owner adds that owner; our own intent keeps its list until
    the site answers for our TCP. The newest ``messages.MAX_REPLACED`` are kept.
    """
    p, uid = o.published, o.rkcp.metadata.uid
    if p is None or not p.signed:
        return ()
    if p.owner_uid == uid:
        carried = () if _confirmed(status) else p.replaces
    else:
        carried = (*p.replaces, p.owner_uid) if p.op == "delete" and p.owner_uid else ()
    out = tuple(dict.fromkeys(u for u in carried if u and u != uid))
    return out[-messages.MAX_REPLACED :]


@dataclass(frozen=True)
class SecretsDecision:
    state: str
    """A ``rkcp_status.Facts.secrets`` value."""
    message: str = ""
    actions: list[Action] = field(default_factory=list)
    refused: str = ""
    """A reason of ``REFUSALS`` when the site sent secrets this object must not get."""


def decide_secrets(o: Observed) -> SecretsDecision:
    """Whether the site's sealed secrets are written into this object's CAPI Secrets.

    Secrets reach only their owner: the RKCP whose uid the sealed message names, and only while
    it is authorized, not in conflict and not paused (a paused Cluster means hands off: the
    secrets are written when it resumes). Any other RKCP naming the same coordinates (a tenant
    grabbing another's TenantControlPlane) gets nothing, however often the box comes again.
    Messages never carry secret material nor the other owner's identity.
    """
    r, report = o.rkcp, o.report
    if report.secrets_error:
        return SecretsDecision("DecryptFailed", report.secrets_error)
    sealed = bool(report.secrets_checksum)
    if sealed and report.secrets_owner_uid in replaced_owners(o, None):
        # The released owner's secrets, still on the subject while its TCP is replaced: not ours,
        # and not a refusal either (nobody is trying to take them).
        return SecretsDecision("Waiting", "waiting for the TenantControlPlane of this owner")
    if sealed and report.secrets_owner_uid != r.metadata.uid:
        return SecretsDecision(
            OWNER_MISMATCH,
            "the site's secrets for this TenantControlPlane belong to another owner; nothing is written",
            refused=OWNER_MISMATCH,
        )
    if o.not_authorized or o.conflict_with:
        reason = NOT_AUTHORIZED if o.not_authorized else CONFLICT
        return SecretsDecision(
            reason,
            "secrets are written only for an authorized placement without conflict",
            refused=reason if sealed else "",
        )
    state, message, actions = _secrets_state(o)
    if actions and o.cluster is not None and o.cluster.paused:
        return SecretsDecision(
            PAUSED,
            "the owner Cluster is paused: the site's secrets are written when it resumes",
            refused=PAUSED,
        )
    return SecretsDecision(state, message, actions)


def _secrets_state(o: Observed) -> tuple[str, str, list[Action]]:
    names = (f"{o.cluster_name}-kubeconfig", f"{o.cluster_name}-ca")
    if not o.report.secrets_checksum:
        return "Waiting", "", []
    if all(o.secrets_checksums.get(n) == o.report.secrets_checksum for n in names):
        return "Synced", "", []
    # Missing or stale (another checksum): the box is fetched from the stream and written.
    write = WriteSecrets(checksum=o.report.secrets_checksum, owner_uid=o.report.secrets_owner_uid)
    return "Synced", "", [write]


def _facts(
    o: Observed, status: messages.Status | None, secrets: str, secrets_message: str, **kw: Any
) -> rkcp_status.Facts:
    return rkcp_status.Facts(
        generation=o.rkcp.metadata.generation,
        status=status,
        published_seq=o.published.seq if o.published else 0,
        site=o.site,
        secrets=secrets,
        secrets_message=secrets_message,
        **kw,
    )


def _signed_by_another_key(o: Observed) -> bool:
    """The latest intent names a key the hub no longer signs with (a rotation): sign it again,
    or agents refuse it once that key is retired (``keys retire``) and a site that comes back,
    or an agent that re-reads the subject, would be left with an intent it cannot verify."""
    p = o.published
    return bool(o.signing_key_id) and p is not None and bool(p.key_id) and p.key_id != o.signing_key_id


def recheck_published(
    published: Published | None, status: messages.Status | None, *, age: float, max_age: float
) -> bool:
    """Whether the hub's record of the subject's latest intent must be read from the stream again.

    The record is kept current by the hub's own publishes, but anyone with the hub's NATS
    credentials can overwrite the subject (replay an older intent) or purge it. A site that
    answers a sequence the hub never published says the subject moved; a purge leaves no trace
    at the site, so the record is also checked against the stream every ``max_age`` seconds.
    """
    if status is not None and status.intent_seq > (published.seq if published is not None else 0):
        return True
    return age >= max_age


def _displaced(o: Observed, status: messages.Status | None) -> str:
    """Why the subject no longer holds this owner's intent although the site applied one ("" if it does)."""
    p = o.published
    if p is not None and not p.signed and not _signed_by_another_key(o):
        # (A message naming an older key of the hub's is a rotation, re-signed without a warning.)
        return f"the intent subject holds a message (seq {p.seq}) not signed by the hub's current key"
    if status is None or status.owner_uid != o.rkcp.metadata.uid or status.phase == "Deleted":
        return ""
    if p is None and status.intent_seq > 0:
        return f"the intent subject is empty (purged) while the site applied intent {status.intent_seq}"
    if p is not None and p.owner_uid == o.rkcp.metadata.uid and status.observed_generation > p.generation:
        # An older, genuinely signed intent published again: the agent refuses it (StaleGeneration),
        # but the subject must hold the current intent, or the site never gets it after a restart.
        return (
            f"the intent subject holds generation {p.generation} (seq {p.seq}) while the site runs "
            f"generation {status.observed_generation}"
        )
    return ""


def _still_wanted(o: Observed, status: messages.Status | None) -> bool:
    """The site reports this owner's TCP Deleted although the latest intent is its provision.

    Someone deleted it at the site; the hub does not accept that (issue 11 §1): the agent
    recreates it from the intent, and the RKCP says Recreating rather than Deleted meanwhile.
    """
    p = o.published
    return (
        status is not None
        and status.phase == "Deleted"
        and status.owner_uid == o.rkcp.metadata.uid
        and p is not None
        and p.op == "provision"
        and p.owner_uid == o.rkcp.metadata.uid
    )


def _vanished(o: Observed, status: messages.Status | None) -> bool:
    """The Deleted answers the latest intent itself: nothing at the site will bring the TCP back
    (the agent could not recreate it), so the intent is published again and applied anew."""
    return (
        _still_wanted(o, status)
        and status is not None
        and o.published is not None
        and (status.intent_seq >= o.published.seq)
    )


def _wants_intent(o: Observed, status: messages.Status | None) -> bool:
    # The generation alone does not count: the hub's own write of spec.controlPlaneEndpoint bumps
    # it, as do fields that never reach the site (deletionPolicy). What the site must run does.
    p, r = o.published, o.rkcp
    return (
        p is None
        or p.op != "provision"
        or p.owner_uid != r.metadata.uid
        or p.spec_digest != spec_digest(o.desired_spec)
        or p.kubeconfig_key != r.spec.kubeconfig_secret_key
        or _signed_by_another_key(o)
        or bool(_displaced(o, status))
        or _vanished(o, status)
    )


def reconcile_normal(o: Observed) -> Plan:
    r = o.rkcp
    if FINALIZER not in r.metadata.finalizers:
        # Finalizer first, before anything reaches the site: otherwise a delete racing this
        # reconcile could leave a TCP running with nobody left to remove it.
        return Plan(actions=[AddFinalizer()], status=None, requeue_after=0.0)
    actions: list[Action] = []
    status_msg = _report_for_owner(o)
    secrets = decide_secrets(o)
    paused = o.cluster is not None and o.cluster.paused
    facts = _facts(
        o,
        status_msg,
        secrets.state,
        secrets.message,
        paused=paused,
        conflict_with=o.conflict_with,
        not_authorized=o.not_authorized,
        waiting_for_cluster=o.cluster_problem,
        recreating=_still_wanted(o, status_msg),
        replacing=replaced_owners(o, status_msg),
    )
    # Not authorized: nothing reaches the site, whatever else holds (issue 10).
    blocked = bool(
        o.not_authorized or o.cluster_problem or o.conflict_with or paused or o.desired_spec is None
    )
    if not blocked and _wants_intent(o, status_msg):
        assert o.desired_spec is not None
        if displaced := _displaced(o, status_msg):
            actions.append(
                Event("Warning", "IntentDisplaced", f"{displaced}: publishing the current intent again")
            )
        elif _vanished(o, status_msg):
            actions.append(
                Event(
                    "Warning",
                    "TenantControlPlaneVanished",
                    f"site {r.spec.site} reports the TenantControlPlane deleted while it is still wanted: "
                    "publishing the provision intent again",
                )
            )
        replaces = replaced_owners(o, status_msg)
        if replaces and (o.published is None or o.published.owner_uid != r.metadata.uid):
            actions.append(
                Event(
                    "Normal",
                    rkcp_status.REPLACING_PREVIOUS_OWNER,
                    f"the deletion of the previous owner (uid {', '.join(replaces)}) was released while "
                    f"site {r.spec.site} was unavailable: its TenantControlPlane is replaced by this one",
                )
            )
        actions.append(
            Publish(
                op="provision",
                spec=o.desired_spec,
                expected_last_seq=o.published.seq if o.published else 0,
                replaces=replaces,
            )
        )
        actions.append(
            Event(
                "Normal",
                "IntentPublished",
                f"provision intent for generation {r.metadata.generation} sent to site {r.spec.site}",
            )
        )
    # A paused Cluster means hands off (CAPI): conditions only, no writes of ours (decide_secrets
    # withholds the secrets then).
    actions.extend(secrets.actions)
    if (
        not paused
        and status_msg is not None
        and status_msg.endpoint is not None
        and r.spec.control_plane_endpoint is None
    ):
        actions.append(SetEndpoint(host=status_msg.endpoint.host, port=status_msg.endpoint.port))
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


def _deleted_answer(o: Observed, p: Published) -> bool:
    """The site answered the delete intent ``p`` with Deleted: for this owner's TCP, or for the
    TCP of an earlier owner the intent names (what stood there was that one's, and it is gone)."""
    s = o.report.status
    return (
        s is not None
        and s.phase == "Deleted"
        and s.intent_seq >= p.seq
        and (s.owner_uid in ("", o.rkcp.metadata.uid) or s.owner_uid in p.replaces)
    )


def reconcile_delete(o: Observed) -> Plan:
    r = o.rkcp
    if FINALIZER not in r.metadata.finalizers:
        return Plan(actions=[], status=None)
    status_msg = _report_for_owner(o)
    p = o.published
    ours = p is not None and p.owner_uid == r.metadata.uid

    def deleting(reason: str, message: str) -> api.Status:
        decision = decide_secrets(o)
        facts = _facts(
            o,
            status_msg,
            decision.state,
            decision.message,
            deleting=True,
            conflict_with=o.conflict_with,
            not_authorized=o.not_authorized,
        )
        status = rkcp_status.new_status(r.status, facts, now=o.now)
        rkcp_status.set_deleting_condition(status, facts, now=o.now, reason=reason, message=message)
        rkcp_status.set_ready_condition(status, facts, now=o.now)
        return status

    if r.spec.deletion_policy == "Orphan" or not ours or o.conflict_with:
        # Nothing of ours at the site to remove (never published, another owner's subject, or
        # Orphan: the TCP stays and its subjects go, so the agent stops reporting it).
        actions: list[Action] = [Purge()] if ours else []
        if r.spec.deletion_policy == "Orphan" and ours:
            actions.append(
                Event("Normal", "Orphaned", f"the TenantControlPlane at site {r.spec.site} is left running")
            )
        return Plan(actions=[*actions, RemoveFinalizer()], status=None)
    assert p is not None
    if p.op != "delete" or _signed_by_another_key(o) or not p.signed:
        return Plan(
            actions=[
                Publish(
                    op="delete", spec={}, expected_last_seq=p.seq, replaces=replaced_owners(o, status_msg)
                ),
                Event("Normal", "DeleteIntentPublished", f"delete intent sent to site {r.spec.site}"),
            ],
            status=deleting(
                "WaitingForSite", f"waiting for site {r.spec.site} to delete the TenantControlPlane"
            ),
            requeue_after=DELETE_POLL_SECONDS,
        )
    # Only a Deleted that answers the delete intent: one that predates it (the TCP vanished
    # earlier) is followed by the agent's answer, which would refill the subjects after a purge.
    if _deleted_answer(o, p):
        return Plan(
            actions=[
                Purge(),
                RemoveFinalizer(),
                Event("Normal", "Deleted", f"site {r.spec.site} deleted the TenantControlPlane"),
            ],
            status=None,
        )
    timeout = r.spec.site_unavailable_deletion_timeout_seconds
    heard = o.site.last_heartbeat_time or r.metadata.deletion_timestamp or o.now
    if timeout is not None and o.site.connected is not True and (o.now - heard).total_seconds() > timeout:
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
    return Plan(
        actions=[],
        status=deleting("WaitingForSite", f"waiting for site {r.spec.site} to delete the TenantControlPlane"),
        requeue_after=DELETE_POLL_SECONDS,
    )
