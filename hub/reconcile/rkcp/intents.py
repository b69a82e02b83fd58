"""What the intent subject of an RKCP holds, and whether this owner's intent must go (again). Pure.

``published.Published`` is the hub's record of the latest intent on the control plane's subject
(read from the stream by ``hub.controllers.rkcp.published``); the predicates here compare it
with the RKCP, the site's latest status and the hub's signing key, and ``provision`` plans the
provision intent with the events that say why. ``hub.reconcile.rkcp.decide`` composes them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from hub.api import rkcp
from hub.reconcile.rkcp import status as rkcp_status
from hub.reconcile.rkcp import vocabulary
from hub.reconcile.rkcp.published import Op, Published
from protocol import messages
from protocol.coordinates import Coordinates

if TYPE_CHECKING:
    from hub.reconcile.rkcp.vocabulary import Observed


def spec_digest(spec: dict[str, Any] | None, metadata: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """SHA-256 of the spec's canonical JSON (sorted keys): equal specs, equal digests.

    With the propagated labels and annotations when there are any (a label added to the RKCP
    changes no generation, yet must reach the TCP); without any, the digest is the spec's
    alone, as before they were carried, so an upgraded hub publishes nothing new for them.
    """
    wanted = {k: dict(v) for k, v in (metadata or {}).items() if v}
    document: Any = {"spec": spec, "metadata": wanted} if wanted else spec
    return hashlib.sha256(msgspec.json.encode(document, order="sorted")).hexdigest()


def recheck_published(published: Published | None, status: messages.Status | None) -> bool:
    """Whether the hub's record of the subject's latest intent must be read from the stream again.

    The record is kept current by the hub's own publishes, but anyone with the hub's NATS
    credentials can overwrite the subject (replay an older intent) or purge it. A site that
    answers a sequence the hub never published says the subject moved. The rest (a purge leaves
    no trace at the site) is found by the hub's survey of the stream, not by reading each subject.
    """
    return status is not None and status.intent_seq > (published.seq if published is not None else 0)


def _confirmed(status: messages.Status | None) -> bool:
    """The site answered for this owner's own TCP: no earlier owner's TCP stands there any more."""
    return (
        status is not None
        and status.phase != "Rejected"
        and status.reason != rkcp_status.REPLACING_PREVIOUS_OWNER
    )


def replaced_owners(o: Observed, status: messages.Status | None) -> tuple[str, ...]:
    """Earlier owners of these coordinates whose TCP the site may still run.

    The subject holds one intent: a new owner's provision overwrites a released owner's delete
    (the site was away past ``siteUnavailableDeletionTimeout``), so the new intent carries the
    released owners on, signed, and the agent deletes a TCP of theirs before creating the new one.
    Derived from the stream alone (the latest intent and what it carried), so a restarted hub
    knows them too: a delete of another owner adds that owner; our own intent keeps its list until
    the site answers for our TCP. The newest ``messages.MAX_REPLACED`` are kept.
    """
    p, uid = o.published, o.owner_uid
    if p is None or not p.signed:
        return ()
    if p.owner_uid == uid:
        carried = () if _confirmed(status) else p.replaces
    else:
        carried = (*p.replaces, p.owner_uid) if p.op == Op.DELETE and p.owner_uid else ()
    out = tuple(dict.fromkeys(u for u in carried if u and u != uid))
    return out[-messages.MAX_REPLACED :]


def signed_by_another_key(o: Observed) -> bool:
    """The latest intent names a key the hub no longer signs with (a rotation): sign it again,
    or agents refuse it once that key is retired (``keys retire``) and a site that comes back,
    or an agent that re-reads the subject, would be left with an intent it cannot verify."""
    p = o.published
    return bool(o.signing_key_id) and p is not None and bool(p.key_id) and p.key_id != o.signing_key_id


def displaced(o: Observed, status: messages.Status | None) -> str:
    """Why the subject no longer holds this owner's intent although the site applied one ("" if it does)."""
    p = o.published
    if p is not None and not p.signed and not signed_by_another_key(o):
        # (A message naming an older key of the hub's is a rotation, re-signed without a warning.)
        return f"the intent subject holds a message (seq {p.seq}) not signed by the hub's current key"
    if status is None or status.owner_uid != o.owner_uid or status.phase == "Deleted":
        return ""
    if p is None and status.intent_seq > 0:
        return f"the intent subject is empty (purged) while the site applied intent {status.intent_seq}"
    if p is not None and p.owner_uid == o.owner_uid and status.observed_generation > p.generation:
        # An older, genuinely signed intent published again: the agent refuses it (StaleGeneration),
        # but the subject must hold the current intent, or the site never gets it after a restart.
        return (
            f"the intent subject holds generation {p.generation} (seq {p.seq}) while the site runs "
            f"generation {status.observed_generation}"
        )
    return ""


def still_wanted(o: Observed, status: messages.Status | None) -> bool:
    """The site reports this owner's TCP Deleted although the latest intent is its provision.

    Someone deleted it at the site; the hub does not accept that: the agent
    recreates it from the intent, and the RKCP says Recreating rather than Deleted meanwhile.
    """
    p = o.published
    return (
        status is not None
        and status.phase == "Deleted"
        and status.owner_uid == o.owner_uid
        and p is not None
        and p.op == Op.PROVISION
        and p.owner_uid == o.owner_uid
    )


def vanished(o: Observed, status: messages.Status | None) -> bool:
    """The Deleted answers the latest intent itself: nothing at the site will bring the TCP back
    (the agent could not recreate it), so the intent is published again and applied anew."""
    return (
        still_wanted(o, status)
        and status is not None
        and o.published is not None
        and (status.intent_seq >= o.published.seq)
    )


def wants_intent(o: Observed, status: messages.Status | None) -> bool:
    # The generation alone does not count: the hub's own write of spec.controlPlaneEndpoint bumps
    # it, as do fields that never reach the site (deletionPolicy). What the site must run does.
    p, r = o.published, o.rkcp
    return (
        p is None
        or p.op != Op.PROVISION
        or p.owner_uid != o.owner_uid
        or p.spec_digest != spec_digest(o.desired_spec, o.desired_metadata)
        or p.kubeconfig_key != r.spec.kubeconfig_secret_key
        or signed_by_another_key(o)
        or bool(displaced(o, status))
        or vanished(o, status)
    )


def provision(o: Observed, status: messages.Status | None, spec: dict[str, Any]) -> list[vocabulary.Action]:
    """The provision intent of ``spec``, fenced on the subject's sequence, and the events that
    say why it goes (again)."""
    r = o.rkcp
    out: list[vocabulary.Action] = []
    if why := displaced(o, status):
        again = f"{why}: publishing the current intent again"
        out.append(vocabulary.Event("Warning", "IntentDisplaced", again))
    elif vanished(o, status):
        out.append(
            vocabulary.Event(
                "Warning",
                "TenantControlPlaneVanished",
                f"site {r.spec.site} reports the TenantControlPlane deleted while it is still wanted: "
                "publishing the provision intent again",
            )
        )
    replaces = replaced_owners(o, status)
    if replaces and (o.published is None or o.published.owner_uid != o.owner_uid):
        out.append(
            vocabulary.Event(
                "Normal",
                rkcp_status.REPLACING_PREVIOUS_OWNER,
                f"the deletion of the previous owner (uid {', '.join(replaces)}) was released while "
                f"site {r.spec.site} was unavailable: its TenantControlPlane is replaced by this one",
            )
        )
    seq = o.published.seq if o.published else 0
    out.append(
        vocabulary.Publish(
            op="provision", spec=spec, expected_last_seq=seq, replaces=replaces, metadata=o.desired_metadata
        )
    )
    if o.published is None:
        # The first intent of a new control plane is the one its creation asked for: its
        # conditions say how far it is, as a CAPI provider records no Event for each step of a
        # creation. A change of what runs there (an upgrade, a scale) is news worth one.
        return out
    # What the site is asked to run, not the generation it is for: the hub's own write of
    # spec.controlPlaneEndpoint moves the RKCP's generation on without a new intent, and an
    # event naming the earlier one reads as if the hub were behind.
    message = (
        f"provision intent sent to site {r.spec.site}: Kubernetes {r.spec.version}, "
        f"{r.spec.replicas} replica{'' if r.spec.replicas == 1 else 's'}"
    )
    out.append(vocabulary.Event("Normal", "IntentPublished", message))
    return out


def message(
    action: vocabulary.Publish, r: rkcp.RemoteKamajiControlPlane, o: vocabulary.Observed, coords: Coordinates
) -> messages.Intent:
    """The intent ``action`` publishes for ``r`` at ``coords`` (unsigned)."""
    return messages.Intent(
        op=action.op,
        site=coords.site,
        namespace=coords.namespace,
        name=coords.name,
        owner=messages.Owner(
            uid=o.owner_uid,
            namespace=r.metadata.namespace,
            name=r.metadata.name,
            cluster=o.cluster_name,
        ),
        generation=r.metadata.generation,
        issued_at=o.now,
        spec=action.spec,
        kubeconfig_key=r.spec.kubeconfig_secret_key,
        replaces=action.replaces,
        labels=dict(action.metadata.get("labels") or {}),
        annotations=dict(action.metadata.get("annotations") or {}),
    )
