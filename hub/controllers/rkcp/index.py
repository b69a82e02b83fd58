"""The index of RKCPs: by coordinates, by owner Cluster, and what of each a watch event may change.

Owns, per RKCP key, the coordinates it maps to, its creation time and owner Cluster's name, and a
hash of what a reconcile decides from; and the reverse maps from coordinates to the RKCP keys
claiming them, from a Cluster to the RKCPs it owns, and from a site to the coordinates claimed
there. ``forget`` drops all of it for a key, and an emptied entry with it, so nothing grows with
churn. Answers the questions the controller asks per message, per Cluster event, per Site and per
reconcile (who maps to these coordinates, which RKCPs a Cluster owns, how many are placed at a
site: none by a scan of every RKCP; which one is older).
Pure: fed by the controller's RKCP watch; whether a placement is authorized is asked of the caller.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pydantic

from common import objects
from hub.api import rkcp as api
from hub.controllers.multimap import MultiMap
from hub.mapping import tcp
from hub.reconcile.rkcp import vocabulary
from protocol.coordinates import Coordinates

Key = objects.Key
Denied = Callable[[Coordinates, str], str]
"""Why the Site does not let a namespace place at coordinates ("" when it does)."""

_LATEST = dt.datetime.max.replace(tzinfo=dt.UTC)


class Index:
    def __init__(self) -> None:
        self._inputs: dict[Key, int] = {}
        """A hash of what each RKCP's reconcile decides from (see ``decision_inputs``)."""
        self._created: dict[Key, str] = {}
        self._site: dict[Key, str] = {}
        """The site each RKCP names, as written (its shard: ``site_of``)."""
        self._owner: dict[Key, str] = {}
        """The owner Cluster's name of each RKCP."""
        self._by_owner: MultiMap[Key, Key] = MultiMap()
        """The RKCPs each Cluster owns (for Cluster events: no scan of every RKCP)."""
        self._coords_of: dict[Key, Coordinates] = {}
        self._by_coords: MultiMap[Coordinates, Key] = MultiMap()
        self._by_site: dict[str, set[Coordinates]] = {}
        """The coordinates claimed at each site: a site's RKCPs without a scan of every RKCP."""
        self._identities: dict[Key, tuple[str, str]] = {}
        """Each RKCP's uid and the owner identity its annotation claims (``hub.reconcile.rkcp.owner``;
        "" while the object lacks the hub's finalizer: the annotation was not stamped by the hub)."""

    def put(self, key: Key, obj: dict[str, Any]) -> bool:
        """Index an RKCP from its watch; whether what a reconcile decides from changed.

        Our own status writes come back as MODIFIED events: they change nothing to decide.
        Coordinates that do not parse leave the RKCP where it was indexed (or unindexed).
        """
        inputs = hash(decision_inputs(obj))
        changed = self._inputs.get(key) != inputs
        self._inputs[key] = inputs
        meta = obj.get("metadata") or {}
        # Strings many RKCPs share (a site, a second) are kept once; a name equal to the key's is
        # the key's own: thousands of RKCPs, each decoded from JSON again on every event.
        self._created[key] = sys.intern(str(meta.get("creationTimestamp") or ""))
        self._site[key] = sys.intern(str((obj.get("spec") or {}).get("site") or ""))
        self._own(key, _same(owner_cluster(obj), key[1]))
        uid = str(meta.get("uid") or "")
        claim = str((meta.get("annotations") or {}).get(api.OWNER_UID_ANNOTATION) or "")
        # Only the hub's stamp is a claim: an annotation on an object the hub never accepted (no
        # finalizer: new, or paused, which blocks the stamp) is tenant input the hub never checked.
        stamped = vocabulary.FINALIZER in (meta.get("finalizers") or ())
        self._identities[key] = (uid, _same(claim, uid) if stamped else "")
        try:
            found = tcp.coordinates(api.RemoteKamajiControlPlane.parse(obj))
        except (pydantic.ValidationError, tcp.InvalidCoordinates):
            return changed
        coords = found.shared(key[1])
        old = self._coords_of.get(key)
        if old is not None and old != coords:
            self._unmap(old, key)
        self._coords_of[key] = coords
        self._by_coords.add(coords, key)
        self._by_site.setdefault(coords.site, set()).add(coords)
        return changed

    def _own(self, key: Key, owner: str) -> None:
        old = self._owner.get(key)
        if old == owner:
            return
        if old:
            self._by_owner.discard((key[0], old), key)
        if owner:
            self._owner[key] = owner
            self._by_owner.add((key[0], owner), key)
        else:
            self._owner.pop(key, None)

    def forget(self, key: Key) -> Coordinates | None:
        """Drop everything held for ``key``; the coordinates it mapped to, if any."""
        self._own(key, "")
        for per_key in (self._inputs, self._created, self._site, self._identities):
            per_key.pop(key, None)
        coords = self._coords_of.pop(key, None)
        if coords is not None:
            self._unmap(coords, key)
        return coords

    def _unmap(self, coords: Coordinates, key: Key) -> None:
        if coords in self._by_coords and self._by_coords.discard(coords, key):
            at_site = self._by_site[coords.site]
            at_site.discard(coords)
            if not at_site:
                del self._by_site[coords.site]

    def coordinates(self, key: Key) -> Coordinates | None:
        return self._coords_of.get(key)

    def at(self, coords: Coordinates) -> frozenset[Key]:
        """The RKCPs mapping to ``coords``."""
        return frozenset(self._by_coords.get(coords))

    def site_of(self, key: Key) -> str:
        """The site an RKCP names (as written, valid or not: whoever leads it writes why not)."""
        return self._site.get(key, "")

    def maps(self, coords: Coordinates) -> bool:
        return coords in self._by_coords

    def at_site(self, site: str) -> Iterator[tuple[Coordinates, Key]]:
        for coords in list(self._by_site.get(site, ())):
            for key in self._by_coords.get(coords):
                yield coords, key

    def of_cluster(self, cluster: Key) -> list[Key]:
        """The RKCPs the Cluster at ``cluster`` owns."""
        return list(self._by_owner.get(cluster))

    def placed(self, site: str, denied: Denied) -> int:
        """How many authorized RKCPs are placed at ``site``."""
        return sum(1 for coords, key in self.at_site(site) if not denied(coords, key[0]))

    def conflict(self, coords: Coordinates, r: api.RemoteKamajiControlPlane, denied: Denied) -> str:
        """The older authorized RKCP claiming the same TCP, if this one is the younger.

        An RKCP its Site does not authorize claims nothing: otherwise a tenant could create one
        early for a name another tenant will use, and hold that tenant's control plane hostage.
        """
        for key in self._by_coords.get(coords):
            if key != _key(r) and not denied(coords, key[0]) and self._older(key, r):
                return f"{key[0]}/{key[1]}"
        return ""

    def _older(self, key: Key, r: api.RemoteKamajiControlPlane) -> bool:
        ts = self._created.get(key)
        when = dt.datetime.fromisoformat(ts.replace("Z", "+00:00")) if ts else _LATEST
        return (when, *key) < (r.metadata.creation_timestamp or _LATEST, *_key(r))

    def owner_claimed_by(self, r: api.RemoteKamajiControlPlane, claim: str, denied: Denied) -> str:
        """Another RKCP that is the owner identity ``claim`` (its uid), or claimed it first by its
        annotation (older, by the conflict order); "" when none, or when ``claim`` is ``r``'s uid.

        A claim counts only from an RKCP the hub stamped (its finalizer) and whose Site authorizes
        its placement, as in ``conflict``: otherwise a tenant who knows another's uid could create
        an older RKCP claiming it (paused, or unauthorized, so never stamped again) and hold the
        moved control plane hostage. A uid is no claim: no tenant chooses one.

        One scan per reconcile of an RKCP taking another identity than its uid (moved: rare).
        """
        if not claim or claim == r.metadata.uid:
            return ""
        for key, (uid, other) in self._identities.items():
            if key != _key(r) and (uid == claim or (other == claim and self._claims(key, r, denied))):
                return f"{key[0]}/{key[1]}"
        return ""

    def _claims(self, key: Key, r: api.RemoteKamajiControlPlane, denied: Denied) -> bool:
        """``key``'s stamped claim comes before ``r``'s: older, and placed where it is authorized."""
        coords = self._coords_of.get(key)
        return coords is not None and not denied(coords, key[0]) and self._older(key, r)


def _same(value: str, like: str) -> str:
    """``like`` when it is equal to ``value``: one string kept where there were two."""
    return like if value == like else value


def _key(r: api.RemoteKamajiControlPlane) -> Key:
    return (r.metadata.namespace, r.metadata.name)


def owner_cluster(obj: dict[str, Any]) -> str:
    """The name of the CAPI Cluster owning ``obj`` ("" when none does)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == "Cluster" and str(ref.get("apiVersion") or "").startswith("cluster.x-k8s.io/"):
            return str(ref.get("name") or "")
    return ""


def decision_inputs(obj: dict[str, Any]) -> tuple[Any, ...]:
    """What a reconcile decides from, of an RKCP: everything but its status and bookkeeping.

    A watch event that changes none of it is our own status write coming back.
    """
    m = obj.get("metadata") or {}
    return (
        m.get("generation"),
        m.get("deletionTimestamp"),
        tuple(m.get("finalizers") or ()),
        repr(m.get("ownerReferences")),
        repr(m.get("labels")),
        repr(m.get("annotations")),
        repr(obj.get("spec")),
    )
