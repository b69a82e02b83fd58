"""The Site status writer's shell: for each Site object, observe, compute (pure), patch on change.

Talks to the management cluster (``common.kube``: patch ``sites/status``); on its first look at
a Site, has the site's NATS stream and consumers made (``ensure_topology``, once: a Site with no
control plane yet needs them for its agent to start; a failure is retried). Reads the Site
objects from the RKCP controller's cache (one informer per kind: the controller's watch feeds
``objects``), the site's heartbeat and backlog from ``hub.ingest.liveness``, and the number of RKCPs
placed at the site from the controller's index. One worker; a site is looked at when it changes
(its object, its control planes, what ``hub.ingest.liveness`` reports: connected, backlog, what the
agent says of itself) and every ``resync`` seconds besides, for the heartbeat time alone.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic

from common import logs
from common.bus import errors as bus_errors
from common.kube import errors as kerrors
from common.kube import resources
from hub.api import site as site_api
from hub.controllers import cache, queue
from hub.controllers.deps import Deps, Settings
from hub.controllers.site import bootstrap, credentials
from hub.credentials import rules
from hub.reconcile import site as site_status
from protocol import keys as protocol_keys

log = logging.getLogger(__name__)

SITE = resources.SITE
TOPOLOGY_RETRY = 5.0
"""Seconds until a site whose stream and consumers could not be made is looked at again."""
COUNTS_QUIET = 2.0
"""Seconds a Site's counts must stand still before a status in which only they moved is written."""
WRITE_INTERVAL = 30.0
"""Seconds: while only its counts keep moving, at most one status write per Site per interval. A
burst of control planes placed at a site changes its count with each one; the count is
information, not a trigger (a change of anything else is written at once)."""


def key(site: str) -> cache.Key:
    """The cache key of a Site: cluster-scoped, so no namespace."""
    return ("", site)


class SiteSync:
    def __init__(
        self,
        settings: Settings,
        deps: Deps,
        *,
        objects: cache.ObjectCache,
        control_planes: Callable[[str], int],
        ensure_topology: Callable[[str], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.deps = deps
        self.objects = objects
        """The Site objects, by ``key(site)`` (filled by the controller's watch)."""
        self.control_planes = control_planes
        self.ensure_topology = ensure_topology
        """Makes a site's stream and consumers exist
        (``hub.controllers.streams.SiteStreams.ensure_site``): a Site
        with no control plane yet has them too, so its agent can start."""
        self.signing_key_id = protocol_keys.key_id(bytes(deps.signer.verify_key))
        """The key id the hub signs with: a Site whose agent does not trust it is told so."""
        self.resync = site_status.HEARTBEAT_WRITE_INTERVAL / 2
        """Seconds between looks at one site when nothing changes: ``lastHeartbeatTime`` is then
        at most ``HEARTBEAT_WRITE_INTERVAL`` and a half old (a change of connectedness is
        reported by the heartbeat poller at once)."""
        self.queue: queue.WorkQueue[str] = queue.WorkQueue()
        self.credentials = (
            credentials.SiteCredentials(deps.kube, deps.revoke, self._bootstrap(), issuer=deps.issuer)
            if deps.revoke is not None
            else None
        )
        """Operator mode: the Site's finalizer and the revocation of its agent when deleted."""
        self._written_at: dict[str, float] = {}
        """Loop time of each Site's last status write."""
        self._moved: dict[str, tuple[tuple[int, int | None], float]] = {}
        """Per site, the counts of a status not written yet, and the loop time they last moved."""
        self._specs: dict[str, site_api.SiteSpec | None] = {}
        """Each Site's parsed spec: every reconcile asks, and the control-plane count asks once
        per RKCP, so parsing the cached JSON each time would cost more than the rest."""
        self._records: dict[str, rules.SiteRecord] = {}
        """What each Site says for its credential, once asked since the object last changed:
        every RKCP reconcile asks, and reading it checks the signature of the Site's bootstrap
        credential (8% of the hub's CPU while a burst of control planes was created)."""

    def _bootstrap(self) -> bootstrap.BootstrapSecrets | None:
        revoke = self.deps.revoke
        if self.deps.mint_bootstrap is None or revoke is None or not self.settings.bootstrap_namespace:
            return None
        return bootstrap.BootstrapSecrets(
            self.deps.kube,
            namespace=self.settings.bootstrap_namespace,
            mint=self.deps.mint_bootstrap,
            lifetime=dt.timedelta(seconds=self.settings.bootstrap_lifetime),
            revoke=revoke,
        )

    def add(self, site: str) -> None:
        self.queue.add(site)

    def remember(self, obj: dict[str, Any]) -> str:
        """Cache a Site object from the watch; its name."""
        site = str((obj.get("metadata") or {}).get("name") or "")
        self._put(site, obj)
        try:
            self._specs[site] = site_api.Site.parse(obj).spec
        except pydantic.ValidationError as exc:
            log.error(
                "Site %s is not valid, so it grants nothing: %s", site, exc, extra=logs.about_site(site)
            )
            self._specs[site] = None
        return site

    def forget(self, site: str) -> None:
        self.objects.pop(key(site))
        self._records.pop(site, None)
        self._specs.pop(site, None)
        self._written_at.pop(site, None)
        self._moved.pop(site, None)

    def record(self, site: str) -> rules.SiteRecord:
        """What the Site says for its agent's NATS credential (it exists, its key)."""
        found = self._records.get(site)
        if found is None:
            obj = self.objects.get(key(site))
            found = credentials.record(obj)
            if obj is not None:  # a name no Site has (an RKCP's spec.site) is not kept
                self._records[site] = found
        return found

    def _put(self, site: str, obj: dict[str, Any]) -> None:
        self.objects.put(key(site), obj)
        self._records.pop(site, None)

    def spec(self, site: str) -> site_api.SiteSpec | None:
        """The Site's spec; None when there is no Site object (or an invalid one: grant nothing)."""
        return self._specs.get(site)

    async def run(self) -> None:
        while True:
            site = await self.queue.get()
            try:
                requeue = await self.sync(site)
            except kerrors.KubeError as exc:
                log.warning(
                    "writing the status of Site %s: %s; retrying", site, exc, extra=logs.about_site(site)
                )
                requeue = 5.0
            except Exception:
                log.exception("writing the status of Site %s failed", site, extra=logs.about_site(site))
                requeue = 10.0
            finally:
                self.queue.done(site)
            if requeue is not None:
                self.queue.add(site, requeue)

    async def sync(self, site: str) -> float | None:
        obj = self.objects.get(key(site))
        if obj is None:
            return None  # deleted: nothing to write, nothing to look at again
        credentials = self.credentials if self.deps.singletons else None
        if credentials is not None and await credentials.sync(obj):
            return None  # being deleted: revoked, released; its next event brings it back
        if not self.deps.holds(site):
            # Another replica leads it; this one may still hold its credentials (renewed in time).
            return self.resync if credentials is not None else None
        if self.credentials is not None and (obj.get("metadata") or {}).get("deletionTimestamp"):
            return None  # being deleted: the replica that runs the credentials releases it
        try:
            s = site_api.Site.parse(obj)
        except pydantic.ValidationError:
            return None
        requeue = self.resync
        try:
            await self.ensure_topology(site)
        except bus_errors.BusError as exc:
            # Its status is still written; a look soon tries again.
            log.warning("making the stream and consumers of site %s: %s; retrying", site, exc,
                        extra=logs.about_site(site))  # fmt: skip
            requeue = TOPOLOGY_RETRY
        now = dt.datetime.now(dt.UTC)
        status = site_status.new_status(s.status, self._facts(s, now), now=now)
        if site_status.worth_writing(s.status, status):
            clock = asyncio.get_running_loop().time()
            if site_status.counts_only(s.status, status):
                wait = self._counts_wait(site, status, clock)
                if wait > 0:
                    return min(wait, requeue)
            self._written_at[site] = clock
            self._moved.pop(site, None)
            try:
                # Explicit nulls: a merge patch removes what is no longer known (a backlog).
                # Without ``credential``: the credential service writes that, and a merge patch
                # leaves what it does not name.
                body = status.model_dump(mode="json", by_alias=True, exclude={"credential"})
                patched = await self.deps.kube.patch(SITE, site, {"status": body}, subresource="status")
            except kerrors.NotFound:
                return None
            # Keep our cache current: the watch brings the same object back, but a look before
            # it arrives would otherwise write the same status again. Only while the cache still
            # holds what this look read: an object the watch brought meanwhile (the finalizer
            # this look added, say) is newer, and the next look's finalizer patch would carry the
            # older resourceVersion back and fail with a Conflict.
            if _resource_version(self.objects.get(key(site))) == _resource_version(obj):
                self._put(site, patched)
        return requeue

    def _counts_wait(self, site: str, status: site_api.SiteStatus, clock: float) -> float:
        counts = (status.control_planes, status.backlog)
        seen = self._moved.get(site)
        if seen is None or seen[0] != counts:
            seen = self._moved[site] = (counts, clock)
        return site_status.counts_wait(
            still_for=clock - seen[1],
            written_ago=clock - self._written_at.get(site, -math.inf),
            quiet=COUNTS_QUIET,
            interval=WRITE_INTERVAL,
        )

    def _facts(self, s: site_api.Site, now: dt.datetime) -> site_status.Facts:
        """What the hub observed of the site now."""
        site = s.metadata.name
        snap = self.deps.sites.snapshot(site, now, interval=self.settings.heartbeat_interval)
        beat = snap.heartbeat
        return site_status.Facts(
            generation=s.metadata.generation,
            connected=snap.connected if snap.last_heartbeat_time is not None else None,
            last_heartbeat_time=snap.last_heartbeat_time,
            backlog=snap.backlog,
            control_planes=self.control_planes(site),
            agent_version=(beat.agent_version or None) if beat is not None else None,
            trusted_key_ids=tuple(beat.trusted_key_ids) if beat is not None else (),
            signing_key_id=self.signing_key_id,
        )


def _resource_version(obj: dict[str, Any] | None) -> object:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")
