"""The RemoteKamajiControlPlane controller: wires its parts, runs them, and routes what happens.

Owns the work queue (``queue.WorkQueue``: one worker per key at a time) and the wiring: the
watches (``informing``: RKCPs, Clusters and Sites cached and indexed), the NATS topology of the
known sites (``hub.controllers.streams``), one reconcile per key (``reconciling``: observe, decide, act, write
status), the Site status writer (``hub.controllers.site.controller.SiteSync``) and the released deletions
(``purging``), the survey of the intent stream (``surveying``) and the resync of every RKCP.
Every long-lived loop runs under ``common.aiotasks.supervise``. Routes events to the keys they
concern: a watch event, a message the ingest read (``on_observation``), a site's heartbeat
(``on_site_change``); and forgets a deleted RKCP in one place (``gone``).
"""

from __future__ import annotations

import asyncio
import functools
import random

from common import aiotasks, objects
from hub.controllers import cache, queue
from hub.controllers.deps import Deps, Settings
from hub.controllers.rkcp import informing, surveying
from hub.controllers.rkcp.purging import ReleasedDeletions
from hub.controllers.rkcp.reconciling import Reconciler
from hub.controllers.site import controller as site_controller
from hub.controllers.streams import SiteStreams
from hub.ingest import liveness
from protocol.coordinates import Coordinates

Key = objects.Key


class Controller:
    def __init__(self, settings: Settings, deps: Deps) -> None:
        self.settings = settings
        self.deps = deps
        self.observations = deps.observations
        self.queue: queue.WorkQueue[Key] = queue.WorkQueue()
        site_objects = cache.ObjectCache()
        self.topology = SiteStreams(settings, deps.conn, site_objects, holds=deps.holds)
        self.site_sync = site_controller.SiteSync(
            settings, deps, objects=site_objects, control_planes=self.control_planes,
            ensure_topology=self.topology.ensure_site,
        )  # fmt: skip
        self.informers = informing.Informers(
            namespaces=settings.namespaces, label_selector=settings.label_selector,
            site_sync=self.site_sync, listener=self,
        )  # fmt: skip
        self.rkcps = self.informers.rkcps
        self.index = self.informers.index
        self.released = ReleasedDeletions(settings, deps, on_purged=self._released_purged)
        """Deletions the site-unavailable timeout released, purged once the site confirms."""
        self.reconciler = Reconciler(
            settings, deps, informers=self.informers, site_sync=self.site_sync, topology=self.topology,
            released=self.released,
        )  # fmt: skip
        self.survey = surveying.IntentSurvey(
            settings, deps.conn, self.reconciler.published, on_moved=self._intent_moved,
            shared=self.known_sites if settings.shared else None,
        )  # fmt: skip
        """What is written to KB_INTENTS behind the hub's back, found once per interval."""

    async def run(self) -> None:
        await self.topology.ensure()
        kube = self.deps.kube
        loops: list[informing.Loop] = self.informers.watches(kube)
        for ns in self.informers.scopes:
            loops.append(
                (f"secret watch {ns or '*'}", functools.partial(self.reconciler.checksums.run, kube, ns))
            )
        loops.append(("site status", self.site_sync.run))
        loops += [(f"rkcp worker {i}", self._worker) for i in range(self.settings.workers)]
        ready = self.informers.rkcps_synced
        loops.append(("intent survey", self.survey.run))
        loops.append(("resync", self._resync))
        loops.append(("released deletions", lambda: self.released.run(ready=ready, maps=self.maps)))
        group = aiotasks.Group()
        for name, run in loops:
            group.supervise(name, run)
        await group.run()

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if not self.deps.holds(self.index.site_of(key)):
                self.queue.done(key)  # another replica's share: its site is led there
                continue
            try:
                requeue = await self.reconciler.handle(key)
            finally:
                self.queue.done(key)
            # The safety net's requeue is ``_resync``'s, for every RKCP at once: no timer per RKCP.
            if requeue is not None and requeue < self.settings.resync_interval:
                self.queue.add(key, requeue)

    async def _resync(self) -> None:
        """Every RKCP reconciled at least once per ``resync_interval``, whatever happens: one
        timer for them all (controller-runtime's SyncPeriod), none kept per RKCP; the RKCPs
        spread over a tenth of the interval, not all at the same instant."""
        interval = self.settings.resync_interval
        while True:
            await asyncio.sleep(interval * 0.9)
            for key in self.rkcps:
                self.queue.add(key, random.uniform(0.0, interval * 0.1))

    # -- what the ingest, the site poller and the Site status ask ----------------------------

    def known_sites(self) -> frozenset[str]:
        return self.topology.known_sites()

    def ensured(self, site: str) -> bool:
        return self.topology.ensured(site)

    def control_planes(self, site: str) -> int:
        """How many authorized RKCPs are placed at ``site`` (the Site status shows it)."""
        return self.index.placed(site, self.reconciler.denial)

    def maps(self, coords: Coordinates) -> bool:
        """Whether an RKCP maps to ``coords``: the ingest opens and keeps nothing else.

        Asked for every message the ingest reads: one for the coordinates of a released deletion
        (no RKCP maps to them any more) may be the site's confirmation, so it is checked now.
        """
        mapped = self.index.maps(coords)
        if not mapped:
            self.released.poke(coords)
        return mapped

    def on_observation(self, coords: Coordinates) -> None:
        self.released.poke(coords)
        for key in self.index.at(coords):
            self.queue.add(key)

    def _released_purged(self, coords: Coordinates) -> None:
        """A released owner's messages were purged at ``coords``: what is held is read again."""
        self.observations.unload(coords)
        self.reconciler.published.drop(coords)
        for key in self.index.at(coords):
            self.queue.add(key)

    def _intent_moved(self, coords: Coordinates) -> None:
        """The survey found ``coords``' intent subject written behind the hub's back."""
        for key in self.index.at(coords):
            self.queue.add(key)

    async def listed(self) -> None:
        """Until the RKCPs and Sites are listed: every site they name is known from then on."""
        await self.informers.rkcps_synced.wait()
        await self.informers.sites_synced.wait()

    def polled(self) -> None:
        """The sites' heartbeats were read (after ``listed``): each site's connectedness is known."""
        self.informers.sites_polled.set()

    def on_site_change(self, site: str, change: liveness.Change = liveness.Change.CONTROL_PLANES) -> None:
        """The site's view changed: its Site is looked at, and its RKCPs when they decide on it."""
        self.site_sync.add(site)
        if change is not liveness.Change.CONTROL_PLANES:
            return
        for _, key in self.index.at_site(site):
            self.queue.add(key)

    # -- what the watches tell (``informing.Listener``) ----------------------------------------

    def changed(self, key: Key) -> None:
        self.queue.add(key)

    def moved(self, old: Coordinates | None, new: Coordinates | None) -> None:
        if old is not None and not self.index.maps(old):
            self.reconciler.published.drop(old)  # nothing reads it there any more
        for coords in (old, new):
            if coords is not None:
                self.site_sync.add(coords.site)  # one control plane more or less there

    def site_changed(self, site: str) -> None:
        self.on_site_change(site)

    def gone(self, key: Key, coords: Coordinates | None) -> None:
        """The one place a deleted RKCP is forgotten: every part drops what it held for it."""
        self.reconciler.forget(key, coords)
        if coords is None:
            return
        for other in self.index.at(coords):
            self.queue.add(other)  # a conflict may have resolved
        self.site_sync.add(coords.site)  # one control plane less there
