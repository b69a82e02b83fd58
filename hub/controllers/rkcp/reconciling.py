"""One reconcile of one RKCP: observe, decide (``hub.reconcile.rkcp.decide``, pure), act, write status.

Owns what a reconcile remembers per RKCP between visits (the last error recorded as an Event, the
last refusal counted, the uid seen Ready once), each dropped by ``forget``, and the parts only a
reconcile uses: the record of published intents (``published``), the CAPI Secret checksums
(``checksums``), the status writer (``status_writes``), the InfraCluster endpoint writer
(``infra``), the fleet's gauges (``gauges``) and the hands (``acting``). Reads the
RKCPs, Clusters and the index from ``informing``, what the sites said from ``hub.ingest.observations``
(loaded through ``hub.ingest.record`` once per process; a sealed box it decides not to write is not
kept for later, ``_release_box``) and ``hub.ingest.liveness``, each Site's grant from
``hub.controllers.site.controller.SiteSync``, and whether the site's topology is ready from
``hub.controllers.streams``. Observing only
reads: what it finds missing (a new site's topology) is an action (``EnsureTopology``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from typing import Any

import pydantic

from common import logs, objects
from common.bus import errors as bus_errors
from common.kube import errors as kerrors
from hub.api import cluster as cluster_api
from hub.api import rkcp as api
from hub.controllers.deps import Deps, Settings
from hub.controllers.rkcp import (
    acting,
    checksums,
    gauges,
    informing,
    infra,
    published,
    status_writes,
    writing,
)
from hub.controllers.rkcp.purging import ReleasedDeletions
from hub.controllers.site import controller as site_controller
from hub.controllers.site import placements
from hub.controllers.streams import SiteStreams
from hub.mapping import tcp
from hub.reconcile.rkcp import decide, facts, owner, vocabulary
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)

Key = objects.Key

CATCH_UP = 0.05
"""Seconds until an RKCP whose cached object predates the hub's own last write is looked at again."""
FIRST_POLL_WAIT = 10.0
"""Seconds a term's first reconciles wait for its first read of the sites' heartbeats."""


class Reconciler:
    def __init__(
        self,
        settings: Settings,
        deps: Deps,
        *,
        informers: informing.Informers,
        site_sync: site_controller.SiteSync,
        topology: SiteStreams,
        released: ReleasedDeletions,
    ) -> None:
        self.settings = settings
        self.deps = deps
        self.informers = informers
        self.site_sync = site_sync
        self.topology = topology
        self.published = published.PublishedIntents(settings, deps, released=released)
        self.signing_key_id = self.published.signing_key_id
        self.checksums = checksums.SecretChecksums()
        self.infra = infra.InfraEndpoints(deps.kube)
        self.gauges = gauges.Gauges(deps.metrics)
        self.executor = acting.Executor(
            settings, deps, published=self.published, released=released, topology=topology, infra=self.infra
        )
        self.own = self.executor.own
        self.status_writes = status_writes.StatusWrites(deps.kube, own=self.own)
        self._initialized: dict[Key, str] = {}
        """The uid of each RKCP seen Ready once (first-ready metric and event exactly once per object)."""
        self._refused: dict[Key, tuple[str, int]] = {}
        """The (reason, sealed-secrets sequence) of the last refusal counted per RKCP (once each)."""
        self._last_error: dict[Key, str] = {}
        """The last error recorded as an Event per RKCP (a retry loop of one error records it once)."""

    def forget(self, key: Key, coords: Coordinates | None) -> None:
        """Drop everything remembered of the RKCP at ``key`` (it was deleted, and unindexed), and
        the record of its intent subject ``coords`` unless another RKCP maps there (the stream is
        read again if one maps there later). One entry, not a scan: a namespace of 10,000 RKCPs
        deleted at once costs 10,000 small steps, not 10,000 scans of the record."""
        for per_key in (self._initialized, self._refused, self._last_error):
            per_key.pop(key, None)
        self.own.forget(key)
        self.status_writes.forget(key)
        self.infra.forget(key)
        self.gauges.forget(key)
        if coords is not None and not self.informers.index.maps(coords):
            self.published.drop(coords)

    async def handle(self, key: Key) -> float | None:
        """Reconcile ``key``, whatever goes wrong; seconds until it is looked at again (None: not)."""
        try:
            requeue = await self.sync(key)
            self._last_error.pop(key, None)
        except (kerrors.KubeError, bus_errors.BusError) as exc:
            self.deps.metrics.reconcile_errors.inc()
            log.warning("reconciling %s/%s: %s; retrying", *key, exc, extra=self._about(key))
            await self._error_event(key, str(exc))
            requeue = 5.0
        except Exception:
            self.deps.metrics.reconcile_errors.inc()
            log.exception("reconciling %s/%s failed", *key, extra=self._about(key))
            requeue = 10.0
        if key not in self.informers.rkcps:
            # Deleted while it was being reconciled: what was just noted goes too. Where it mapped
            # is gone with its index entry, so the record is swept (rare: a delete racing a sync).
            self.forget(key, None)
            self.published.retain(self.informers.index.maps)
            return None
        return requeue

    async def _error_event(self, key: Key, message: str) -> None:
        """A Warning event per distinct error (a retry loop of the same error records it once)."""
        obj = self.informers.rkcps.get(key)
        if obj is None or self._last_error.get(key) == message:
            return
        self._last_error[key] = message
        try:
            r = api.RemoteKamajiControlPlane.parse(obj)
        except pydantic.ValidationError:
            return
        await writing.record_event(self.deps.kube, vocabulary.Event("Warning", "ReconcileError", message), r)

    async def sync(self, key: Key) -> float | None:
        r = self._current(key)
        if r is None:
            return None
        if self.own.behind(key, r.metadata.resource_version, now=asyncio.get_running_loop().time()):
            return CATCH_UP  # the watch brings the hub's own last write back in a moment
        observed = await self.observe(r)
        if observed is None:
            return None
        plan = decide.reconcile(observed)
        if plan.secrets_refused:
            self._count_refusal(key, plan.secrets_refused, observed.report.secrets_seq)
        self._release_box(r, observed, plan)
        for action in plan.actions:
            if not await self.executor.execute(action, r, observed):
                return 1.0  # fenced or raced: observe again shortly
            if isinstance(action, vocabulary.WriteSecrets):
                self.checksums.written(r.metadata.namespace, observed.cluster_name, action.checksum)
        self.gauges.reconciled(key, observed, plan, at=asyncio.get_running_loop().time())
        if plan.first_ready:
            self._first_ready(key, r, observed.now)
        requeue = plan.requeue_after
        if requeue is not None:
            requeue = min(requeue, self.settings.resync_interval)
        if plan.status is not None:
            return await self.status_writes.write(key, r, plan.status, requeue)
        return requeue

    def _current(self, key: Key) -> api.RemoteKamajiControlPlane | None:
        obj = self.informers.rkcps.get(key)
        try:
            return api.RemoteKamajiControlPlane.parse(obj) if obj is not None else None
        except pydantic.ValidationError as exc:
            log.error("RemoteKamajiControlPlane %s/%s is not valid: %s", *key, exc, extra=self._about(key))
            return None

    def _first_ready(self, key: Key, r: api.RemoteKamajiControlPlane, now: dt.datetime) -> None:
        self._initialized[key] = r.metadata.uid
        if r.metadata.creation_timestamp is not None:
            seconds = (now - r.metadata.creation_timestamp).total_seconds()
            self.deps.metrics.first_ready_seconds.labels(site=r.spec.site).observe(seconds)

    def _release_box(
        self, r: api.RemoteKamajiControlPlane, o: vocabulary.Observed, plan: vocabulary.Plan
    ) -> None:
        """A box this reconcile decided not to write (the Secrets carry it already, it is withheld,
        or the RKCP is going) is not kept for a later write, which reads it from the stream: kept
        boxes are those waiting for their write, not every box a restarted hub's ``load`` read.
        By its sequence: a newer box recorded meanwhile stays kept for the next reconcile."""
        seq = o.report.secrets_seq
        if not seq or any(isinstance(a, vocabulary.WriteSecrets) for a in plan.actions):
            return
        with contextlib.suppress(tcp.InvalidCoordinates):
            self.deps.observations.drop_box(tcp.coordinates(r), seq=seq)

    def _count_refusal(self, key: Key, reason: str, seq: int) -> None:
        if self._refused.get(key) == (reason, seq):
            return
        self._refused[key] = (reason, seq)
        self.deps.metrics.secrets_refused.labels(reason=reason).inc()
        about = self._about(key, seq=seq)
        # Paused is a user's or clusterctl move's choice: the secrets wait, nothing is wrong.
        level = logging.INFO if reason == facts.Secrets.PAUSED else logging.WARNING
        log.log(level, "sealed secrets (seq %d) not written for %s/%s: %s", seq, *key, reason, extra=about)

    def _about(self, key: Key, *, seq: int | None = None) -> dict[str, Any]:
        """Log fields of the RKCP ``key``: its site as far as its object says."""
        spec = (self.informers.rkcps.get(key) or {}).get("spec") or {}
        return logs.about(namespace=key[0], name=key[1], site=spec.get("site"), seq=seq)

    async def _sites_polled(self) -> None:
        """At a term's start, until its first read of the sites' heartbeats; once only, for at
        most ``FIRST_POLL_WAIT``: a poller that cannot read leaves the sites unknown, as they are,
        and makes no reconcile wait again."""
        polled = self.informers.sites_polled
        if not polled.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(polled.wait(), timeout=FIRST_POLL_WAIT)
            polled.set()

    async def observe(self, r: api.RemoteKamajiControlPlane) -> vocabulary.Observed | None:
        now = dt.datetime.now(dt.UTC)
        cluster_name = tcp.owner_cluster(r)
        cluster, problem = self._cluster(r.metadata.namespace, cluster_name)
        coords, desired, problem, why = tcp.desired(r, cluster, problem)
        report = await self._report(coords)
        await self._sites_polled()
        published = await self.published.get(coords, report.status)
        snap = self.deps.sites.snapshot(coords.site, now, interval=self.settings.heartbeat_interval)
        site_view = facts.SiteView(
            connected=snap.connected if snap.last_heartbeat_time is not None else None,
            last_heartbeat_time=snap.last_heartbeat_time,
            kamaji_detected=snap.heartbeat.kamaji_detected if snap.heartbeat is not None else None,
            revoked=self.deps.revoke is not None and not self.site_sync.record(coords.site).exists,
        )
        name = cluster_name or r.metadata.name
        # Until the Sites are listed every placement would look unauthorized (and say so).
        await self.informers.sites_synced.wait()
        await self.checksums.synced.wait()
        checksums = self.checksums.of_cluster(r.metadata.namespace, name)
        return vocabulary.Observed(
            rkcp=r,
            cluster=cluster,
            cluster_problem=problem,
            cluster_problem_reason=why,
            desired_spec=desired,
            desired_metadata=tcp.tcp_metadata(r) if desired is not None else {},
            published=published,
            report=report,
            site=site_view,
            secrets_checksums=checksums,
            cluster_name=name,
            conflict_with=self.informers.index.conflict(coords, r, self.denial),
            not_authorized=self.denial(coords, r.metadata.namespace),
            known_initialized=self._known_initialized(r),
            now=now,
            signing_key_id=self.signing_key_id,
            topology_ready=self.topology.ready(coords.site),
            infra_outcome=self.infra.last((r.metadata.namespace, r.metadata.name)),
            owner_claimed_by=self.informers.index.owner_claimed_by(
                r, owner.candidate(r, published), self.denial
            ),
        )

    def _cluster(self, namespace: str, name: str) -> tuple[cluster_api.Cluster | None, str]:
        """The owner Cluster as watched, or why there is none ("" when there is)."""
        if not name:
            return None, "waiting for an ownerReference to a Cluster (set by Cluster API)"
        found = self.informers.clusters.get((namespace, name))
        if found is None:
            return None, f"waiting for Cluster {namespace}/{name}"
        return cluster_api.Cluster.parse(found), ""

    def _known_initialized(self, r: api.RemoteKamajiControlPlane) -> bool:
        return self._initialized.get((r.metadata.namespace, r.metadata.name)) == r.metadata.uid

    def denial(self, coords: Coordinates, namespace: str) -> str:
        """Why the Site does not let ``namespace`` place at ``coords`` ("" when it does)."""
        spec = self.site_sync.spec(coords.site)
        return placements.denial(
            spec, site=coords.site, namespace=namespace, target_namespace=coords.namespace
        )

    async def _report(self, coords: Coordinates) -> vocabulary.SiteReport:
        # Loaded once per process, and again after the consumer missed something (the intake
        # reads the streams unless they are known to hold nothing for these coordinates),
        # whatever the consumer recorded before: a restarted hub's consumer never delivers
        # again what the previous process was sent (the sealed secrets, typically), however
        # many newer statuses it delivers first.
        seen = await self.deps.intake.load(coords)
        if seen is None:
            return vocabulary.SiteReport()
        return vocabulary.SiteReport(
            status=seen.status,
            secrets_checksum=seen.sealed.checksum if seen.sealed is not None else "",
            secrets_error=seen.secrets_error.message if seen.secrets_error is not None else "",
            secrets_owner_uid=seen.sealed.owner_uid if seen.sealed is not None else "",
            secrets_seq=seen.sealed_seq,
        )
