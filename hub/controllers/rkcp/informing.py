"""The RKCP controller's watches: RKCPs, Clusters (v1beta2 where served) and Sites, cached and indexed.

Owns the RKCP and Cluster caches (``cache.ObjectCache``), the RKCP index (``index.Index``), a hash
of each Site's spec, and whether each kind was listed. Each watch is a ``common.kube.informer``
whose sink files the object and tells the ``Listener`` (the controller) what to reconcile: an
RKCP whose decision inputs changed, the RKCPs of a Cluster, a Site whose spec changed; a deleted
RKCP is handed over whole (``gone``), so one place forgets everything held for it. The Site
objects themselves are ``hub.controllers.site.controller.SiteSync``'s. Talks to the management cluster
through the informers.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from common import kube as ckube
from common import objects
from common.kube import informer, resources
from hub.api import cluster
from hub.controllers import cache
from hub.controllers.rkcp import index
from hub.controllers.site import controller as site_controller
from protocol.coordinates import Coordinates

Key = objects.Key
Loop = tuple[str, Callable[[], Awaitable[None]]]


class Listener(Protocol):
    def changed(self, key: Key) -> None:
        """Reconcile the RKCP at ``key``."""

    def gone(self, key: Key, coords: Coordinates | None) -> None:
        """The RKCP at ``key`` (mapping to ``coords``) was deleted: forget it."""

    def moved(self, old: Coordinates | None, new: Coordinates | None) -> None:
        """An RKCP now maps to other coordinates (or none, or some for the first time)."""

    def site_changed(self, site: str) -> None:
        """What the Site authorizes may have changed."""


class Informers:
    def __init__(
        self,
        *,
        namespaces: tuple[str, ...],
        label_selector: str | None = None,
        site_sync: site_controller.SiteSync,
        listener: Listener,
    ) -> None:
        self.scopes: list[str | None] = list(namespaces) or [None]
        self.label_selector = label_selector
        """``--watch-filter``: the RKCPs and Clusters watched are those it selects; an object that
        loses the label leaves the cache as if deleted, and is left alone from then on."""
        self.rkcps = cache.ObjectCache()
        self.clusters = cache.ObjectCache(drop=("status",))
        """Clusters as the RKCP reconcile reads them (``hub.api.cluster.Cluster``: metadata, spec)."""
        self.index = index.Index()
        self.site_sync = site_sync
        self.listener = listener
        self._site_inputs: dict[str, int] = {}
        """A hash of each Site's spec and generation: its status writes change neither."""
        self.sites_synced = asyncio.Event()
        """Set once the Sites were listed: until then every placement would look unauthorized."""
        self._rkcps_listed: set[str | None] = set()
        """Watch scopes whose RKCPs were listed: the released deletions are scanned after all."""
        self.rkcps_synced = asyncio.Event()
        self.sites_polled = asyncio.Event()
        """Set once the sites' heartbeats were read after the listings (or a reconcile waited long
        enough for it): until then a site's connectedness is not known, and a reconcile would write
        it Unknown (and again at the poll)."""
        self.cluster_version = ""
        """The version of ``cluster.x-k8s.io`` Clusters are watched in ("" before the watch starts)."""

    def watches(self, kube: ckube.Kube) -> list[Loop]:
        """The long-lived watches, by name: RKCPs and Clusters per scope, Sites (cluster-scoped)."""
        found: list[Loop] = []
        for ns in self.scopes:
            scope = ns or "*"
            found.append((f"rkcp watch {scope}", functools.partial(self._inform_rkcps, kube, ns)))
            clusters = functools.partial(self._inform_clusters, kube, ns)
            found.append((f"cluster watch {scope}", clusters))
        sites = functools.partial(
            informer.inform, kube, resources.SITE, _Sites(self), synced=self.sites_synced.set
        )
        found.append(("site watch", sites))
        return found

    async def _inform_clusters(self, kube: ckube.Kube, namespace: str | None) -> None:
        # The version is discovered each time the watch (re)starts: v1beta2 where CAPI serves it.
        version = cluster.served_version(await kube.group_versions(cluster.GROUP))
        self.cluster_version = version
        await informer.inform(
            kube, cluster.resource(version), _Clusters(self), namespace=namespace,
            label_selector=self.label_selector,
        )  # fmt: skip

    async def _inform_rkcps(self, kube: ckube.Kube, namespace: str | None) -> None:
        def listed() -> None:
            self._rkcps_listed.add(namespace)
            if len(self._rkcps_listed) >= len(self.scopes):
                self.rkcps_synced.set()

        await informer.inform(
            kube, resources.REMOTE_KAMAJI_CONTROL_PLANE, _RKCPs(self), namespace=namespace,
            label_selector=self.label_selector, synced=listed,
        )  # fmt: skip


class _Sink:
    """An informer's sink that files what it sees in the ``Informers`` and tells their listener."""

    def __init__(self, informers: Informers) -> None:
        self.i = informers


class _RKCPs(_Sink):
    def known(self) -> Iterable[Key]:
        return self.i.rkcps

    def upsert(self, key: Key, obj: dict[str, Any]) -> None:
        self.i.rkcps.put(key, obj)
        old = self.i.index.coordinates(key)
        changed = self.i.index.put(key, obj)
        new = self.i.index.coordinates(key)
        if new != old:
            self.i.listener.moved(old, new)
        # Our own status writes come back as MODIFIED events: they change nothing to decide.
        if changed:
            self.i.listener.changed(key)

    def delete(self, key: Key) -> None:
        self.i.rkcps.pop(key)
        self.i.listener.gone(key, self.i.index.forget(key))


class _Clusters(_Sink):
    def known(self) -> Iterable[Key]:
        return self.i.clusters

    def upsert(self, key: Key, obj: dict[str, Any]) -> None:
        self.i.clusters.put(key, obj)
        self._changed(key)

    def delete(self, key: Key) -> None:
        self.i.clusters.pop(key)
        self._changed(key)

    def _changed(self, key: Key) -> None:
        """Reconcile the RKCPs of the Cluster at ``key``."""
        for k in self.i.index.of_cluster(key):
            self.i.listener.changed(k)


class _Sites(_Sink):
    def known(self) -> Iterable[Key]:
        return self.i.site_sync.objects

    def upsert(self, key: Key, obj: dict[str, Any]) -> None:
        site = self.i.site_sync.remember(obj)
        m = obj.get("metadata") or {}
        inputs = hash(
            (
                m.get("generation"),
                repr(obj.get("spec")),
                m.get("deletionTimestamp"),
                repr(m.get("finalizers")),
            )
        )
        # Our own status writes come back too: only a new spec changes what is authorized, and
        # a deletion (its finalizer: the credential's revocation, ``hub.controllers.site.credentials``).
        if self.i._site_inputs.get(site) != inputs:
            self.i._site_inputs[site] = inputs
            self.i.listener.site_changed(site)

    def delete(self, key: Key) -> None:
        self.i.site_sync.forget(key[1])
        self.i._site_inputs.pop(key[1], None)
        self.i.listener.site_changed(key[1])  # its RKCPs are no longer authorized
