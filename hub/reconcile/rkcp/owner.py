"""Who an RKCP is at the site: the owner identity that survives ``clusterctl move``. Pure.

The site knows a control plane's owner by a uid (the intent's ``owner.uid``, the TCP's owner
annotation, the owner its status and sealed secrets name). An object's ``metadata.uid`` changes
when ``clusterctl move`` recreates it in another management cluster, so the hub stamps the uid
it first saw as the annotation ``rkcp.OWNER_UID_ANNOTATION`` (in the finalizer's patch, before
anything reaches the site), which move copies, and speaks for the object by it.

An annotation is tenant input, so one that is not the object's own uid is believed only as a
move's result: the control plane's intent subject holds the hub's intent for that owner (its
provision, or its delete while this object is being deleted), issued for an RKCP of this one's
namespace and name (move keeps both), signed by a key of the hub's (``Published.signed``: its
current key, or an earlier one it still trusts, verified; a key id alone proves nothing, as anyone
with the hub's NATS credentials can write the subject), and no other RKCP of this management cluster is
that owner or claimed it first. A TCP of a still existing RKCP is never taken (and two RKCPs at
the same coordinates are refused by the conflict index anyway); a deleted or released owner is
never resurrected; a copy of another RKCP's manifest becomes its own owner. An object without
the annotation but with the hub's finalizer, whose subject holds such an intent (moved from a
hub older than the annotation, or the annotation dropped), takes that owner up on the same
proof. ``decide`` is asked by ``hub.reconcile.rkcp.decide`` (``Observed.owner``) on every reconcile.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from hub.api import rkcp
from hub.reconcile.rkcp.published import Op, Published

DELETE_FOR_MOVE: Final = "clusterctl.cluster.x-k8s.io/delete-for-move"
"""What ``clusterctl move`` annotates a source object with before it removes its finalizers and
deletes it: the object lives on in the target management cluster, so nothing is removed."""


class Standing(enum.StrEnum):
    OWN = "Own"
    """The object's own uid (stamped, or stamped in this reconcile)."""
    MOVED = "Moved"
    """An earlier uid of the object, carried by ``clusterctl move``."""
    REFUSED = "Refused"
    """An identity the hub does not believe, stamped already: the object acts as nobody."""


@dataclass(frozen=True)
class Owner:
    uid: str
    """The identity the hub speaks for the object by (its own uid while refused: it matches
    nothing at the site, so nothing of another owner is touched or read)."""
    standing: Standing = Standing.OWN
    stamp: bool = False
    """The annotation must be written with ``uid`` (with the finalizer)."""
    refused: str = ""
    """Why the annotation is not believed (``REFUSED``), naming the annotation and what to do."""


def _the_hubs(p: Published) -> bool:
    """The signature verified against a key of the hub's (current or an earlier, trusted one)."""
    return p.signed


def candidate(r: rkcp.RemoteKamajiControlPlane, published: Published | None) -> str:
    """The identity ``r`` would take beside its uid: its annotation's, or (none stamped) the owner
    the subject's latest intent names; the shell asks the index who else is it (``claimed_by``)."""
    return r.owner_uid_claim or (published.owner_uid if published is not None else "")


def moved_here(r: rkcp.RemoteKamajiControlPlane, published: Published | None, *, claim: str) -> bool:
    """The subject holds the hub's intent for ``claim``, issued for an object of ``r``'s namespace
    and name: that owner left another management cluster without a delete (a move), and its
    control plane runs on."""
    p, deleting = published, r.metadata.deletion_timestamp is not None
    return (
        p is not None
        and bool(claim)
        and _the_hubs(p)
        and p.owner_uid == claim
        and p.owner_object == (r.metadata.namespace, r.metadata.name)
        and (p.op == Op.PROVISION or (deleting and p.op == Op.DELETE))
    )


def decide(
    r: rkcp.RemoteKamajiControlPlane,
    published: Published | None,
    *,
    claimed_by: str,
    finalized: bool,
) -> Owner:
    """The owner identity of ``r``; ``claimed_by`` names another RKCP of this management cluster
    that is, or claimed first, the identity ``r``'s annotation names ("" none); ``finalized``: the
    hub's finalizer is on ``r`` (the annotation was stamped, or came with a moved object)."""
    uid, claim = r.metadata.uid, r.owner_uid_claim
    if not claim:
        left = published.owner_uid if published is not None else ""
        proof = moved_here(r, published, claim=left)
        if finalized and left != uid and not claimed_by and proof:
            # Moved (it came with the finalizer) without the annotation, from a hub older than
            # it or dropped by a replace: what the annotation could claim on the same proof. A
            # new object (no finalizer yet) is its own owner, as ever: adopting is explicit.
            return Owner(left, Standing.MOVED, stamp=True)
        # First reconcile (or an object from before the annotation: it spoke by its uid).
        return Owner(uid, stamp=True)
    if claim == uid:
        return Owner(uid)
    if published is not None and _the_hubs(published) and published.owner_uid == uid:
        # The object already speaks by its own uid at the site: the annotation was edited since.
        return Owner(uid, stamp=True)
    if not claimed_by and moved_here(r, published, claim=claim):
        return Owner(claim, Standing.MOVED)
    if not finalized and r.metadata.deletion_timestamp is None:
        # Created with an identity that is not a move's (a copied manifest, or a hand-set one):
        # the object is its own owner from its first reconcile.
        return Owner(uid, stamp=True)
    whose = f"is RKCP {claimed_by}'s" if claimed_by else "owns no running control plane at these coordinates"
    return Owner(
        uid,
        Standing.REFUSED,
        refused=(
            f"annotation {rkcp.OWNER_UID_ANNOTATION} names owner {claim}, which {whose}: nothing is "
            "published for this object; remove the annotation to make it its own owner"
        ),
    )
