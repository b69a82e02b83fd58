"""The RemoteKamajiControlPlane controller's shell: watch, observe, reconcile (pure), act, patch.

Talks to the management cluster (``common.kube``: RKCPs, Clusters, Sites, Secrets, Events) and
to NATS (``common.bus``: the latest intent per control plane, publishing, purging). Caches RKCPs,
Clusters and Sites from their watches; everything the site said comes from
``hub.observations`` (fed by ``hub.ingest``, read through ``hub.intake``) and ``hub.sites``.
One worker per key at a time (``queue.WorkQueue``). Placement is authorized by the Site
(``hub.placements``) before anything is published; the Site status is written by
``hub.controllers.site`` from the same caches.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import nacl.signing
import pydantic

from common import bus
from common import kube as ckube
from common.bus import errors as bus_errors
from common.kube import errors as kerrors
from common.kube import resources, watching
from hub import api, intake, mapping, placements, sites
from hub import metrics as hub_metrics
from hub import observations as hub_observations
from hub.controllers import cache, queue, writing
from hub.controllers import released as released_deletions
from hub.controllers import site as site_controller
from hub.reconcile import rkcp, rkcp_status
from protocol import errors as protocol_errors
from protocol import keys as protocol_keys
from protocol import messages, names, signing, streams, subjects
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
CLUSTER = resources.CLUSTER
SITE = resources.SITE
STATUS_WRITE_INTERVAL = 1.0
"""Seconds: at most one status write per RKCP per interval (bursts of site reports coalesce)."""

Key = tuple[str, str]


def _key(obj: dict[str, Any]) -> Key:
    m = obj.get("metadata") or {}
    return str(m.get("namespace") or ""), str(m.get("name") or "")


class Controller:
    def __init__(
        self,
        *,
        kube: ckube.Kube,
        conn: bus.Connection,
        signer: nacl.signing.SigningKey,
        observations: hub_observations.Observations,
        intake: intake.Intake,
        sites: sites.Sites,
        metrics: hub_metrics.Metrics,
        namespaces: tuple[str, ...] = (),
        static_sites: Iterable[str] = (),
        prefix: str = subjects.DEFAULT_PREFIX,
        replicas: int = 1,
        limits: streams.SiteLimits = streams.SiteLimits(),  # noqa: B008 - frozen, so one shared default is safe
        workers: int = 8,
        heartbeat_interval: float = sites.HEARTBEAT_INTERVAL,
        intent_check_interval: float = rkcp.RESYNC_SECONDS,
    ) -> None:
        self.kube = kube
        self.conn = conn
        self.signer = signer
        self.signing_key_id = protocol_keys.key_id(bytes(signer.verify_key))
        self._own_key = {protocol_keys.key_id(bytes(signer.verify_key)): signer.verify_key}
        self.observations = observations
        self.intake = intake
        self.sites = sites
        self.metrics = metrics
        self.namespaces = namespaces
        self.static_sites = frozenset(static_sites)
        self.prefix = prefix
        self.replicas = replicas
        self.limits = limits
        """Each site's quota on its own stream (``protocol.streams.SiteLimits``)."""
        self.workers = workers
        self.heartbeat_interval = heartbeat_interval
        """The agents' heartbeat interval: a site is connected while its last beat is ≤ 3 of them old."""
        self.intent_check_interval = intent_check_interval
        """Seconds between checks of each intent subject against the hub's record (a purge or an
        overwrite behind the hub's back); every RKCP is also reconciled at least this often."""
        self.queue: queue.WorkQueue[Key] = queue.WorkQueue()
        self.rkcps = cache.ObjectCache()
        self.clusters = cache.ObjectCache()
        self.site_objects = cache.ObjectCache()
        self._caches = {RKCP: self.rkcps, CLUSTER: self.clusters, SITE: self.site_objects}
        self._site_inputs: dict[str, int] = {}
        """A hash of each Site's spec and generation: its status writes change neither."""
        self._sites_synced = asyncio.Event()
        self.site_sync = site_controller.SiteSync(
            kube=kube,
            sites=sites,
            objects=self.site_objects,
            control_planes=self.control_planes,
            signing_key_id=protocol_keys.key_id(bytes(signer.verify_key)),
            heartbeat_interval=heartbeat_interval,
        )
        self._inputs: dict[Key, int] = {}
        """A hash of what each RKCP's reconcile decides from (see ``_decision_inputs``)."""
        self._created: dict[Key, str] = {}
        self._owner: dict[Key, str] = {}
        """The owner Cluster's name of each RKCP (for Cluster events)."""
        self._by_coords: dict[Coordinates, set[Key]] = defaultdict(set)
        self._coords_of: dict[Key, Coordinates] = {}
        self._topology_sites: frozenset[str] = frozenset()
        self._last_status_write: dict[Key, float] = {}
        self._initialized: set[str] = set()
        self._secret_checksums: dict[Key, str] = {}
        self._secrets_synced = asyncio.Event()
        self._published_cache: dict[Coordinates, rkcp.Published | None] = {}
        """The latest intent per control plane: read from the stream once, then kept current by
        our own publishes and purges (one leader writes; a fenced publish that fails drops it), and
        checked against the stream as ``rkcp.recheck_published`` says."""
        self._published_checked: dict[Coordinates, float] = {}
        """Loop time each record was last read from, or written to, the stream."""
        self._refused: dict[Key, tuple[str, int]] = {}
        """The (reason, sealed-secrets sequence) of the last refusal counted per RKCP (once each)."""
        self._last_error: dict[Key, str] = {}
        """Uids seen Ready once (first-ready metric and event exactly once per object)."""
        self._synced = asyncio.Event()
        self._rkcps_listed: set[str | None] = set()
        """Watch scopes whose RKCPs were listed: the released deletions are scanned after all."""
        self._rkcps_synced = asyncio.Event()
        self.released = released_deletions.ReleasedDeletions(
            conn=conn, prefix=prefix, on_purged=self._released_purged, metrics=metrics
        )
        """Deletions the site-unavailable timeout released, purged once the site confirms."""

    # -- wiring ----------------------------------------------------------------------------

    def known_sites(self) -> frozenset[str]:
        """Sites named by ``--sites`` or by a Site object: the hub keeps their streams and
        consumers and polls their heartbeats. An RKCP naming any other site is not authorized,
        so a tenant cannot make the hub create a consumer for a site name it invents."""
        return self.static_sites | {name for _, name in self.site_objects}

    def control_planes(self, site: str) -> int:
        """How many authorized RKCPs are placed at ``site`` (the Site status shows it)."""
        return sum(
            1
            for coords, keys in self._by_coords.items()
            if coords.site == site
            for key in keys
            if not self._denial(coords, key[0])
        )

    def maps(self, coords: Coordinates) -> bool:
        """Whether an RKCP maps to ``coords``: the ingest opens and keeps nothing else.

        Asked for every message the ingest reads: one for the coordinates of a released deletion
        (no RKCP maps to them any more) may be the site's confirmation, so it is checked now.
        """
        mapped = bool(self._by_coords.get(coords))
        if not mapped:
            self.released.poke(coords)
        return mapped

    def on_observation(self, coords: Coordinates) -> None:
        self.released.poke(coords)
        for key in self._by_coords.get(coords, ()):
            self.queue.add(key)

    def _released_purged(self, coords: Coordinates) -> None:
        """A released owner's messages were purged at ``coords``: what is held is read again."""
        self.observations.unload(coords)
        self._published_cache.pop(coords, None)
        for key in self._by_coords.get(coords, ()):
            self.queue.add(key)

    def on_site_change(self, site: str) -> None:
        self.site_sync.add(site)
        for coords, keys in self._by_coords.items():
            if coords.site == site:
                for key in keys:
                    self.queue.add(key)

    async def run(self) -> None:
        await self.ensure_topology()
        scopes: list[str | None] = list(self.namespaces) or [None]
        tasks = [asyncio.create_task(self._watch(RKCP, ns)) for ns in scopes]
        tasks += [asyncio.create_task(self._watch(CLUSTER, ns)) for ns in scopes]
        tasks.append(asyncio.create_task(self._watch(SITE, None)))  # cluster-scoped
        tasks.append(asyncio.create_task(self.site_sync.run()))
        tasks += [asyncio.create_task(self._watch_secrets(ns)) for ns in scopes]
        tasks += [asyncio.create_task(self._worker()) for _ in range(self.workers)]
        tasks.append(asyncio.create_task(self.released.run(ready=self._rkcps_synced, maps=self.maps)))
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def ensure_topology(self) -> None:
        wanted = self.known_sites()
        if wanted and wanted <= self._topology_sites:
            return
        await bus.ensure_topology(
            self.conn, sites=sorted(wanted), replicas=self.replicas, prefix=self.prefix, limits=self.limits
        )
        self._topology_sites = wanted

    # -- caches ----------------------------------------------------------------------------

    async def _watch(self, r: resources.Resource, namespace: str | None) -> None:
        known = self._caches[r]
        async for item in watching.stream(self.kube, r, namespace=namespace):
            if isinstance(item, watching.Synced):
                fresh = {_key(o): o for o in item.items}
                for gone in [k for k in known if (namespace is None or k[0] == namespace) and k not in fresh]:
                    self._forget(r, gone)
                for o in item.items:
                    self._remember(r, o)
                if r is SITE:
                    self._sites_synced.set()
                if r is RKCP:
                    self._rkcps_listed.add(namespace)
                    if len(self._rkcps_listed) >= max(1, len(self.namespaces)):
                        self._rkcps_synced.set()
            elif item.type == "DELETED":
                self._forget(r, _key(item.object))
            else:
                self._remember(r, item.object)

    async def _watch_secrets(self, namespace: str | None) -> None:
        """The checksum annotation of every CAPI Secret we write, so a reconcile needs no GET."""
        async for item in watching.stream(
            self.kube, resources.SECRET, namespace=namespace, label_selector=writing.CLUSTER_NAME_LABEL
        ):
            if isinstance(item, watching.Synced):
                self._secret_checksums = {
                    k: v
                    for k, v in self._secret_checksums.items()
                    if namespace is not None and k[0] != namespace
                }
                objs = item.items
            elif item.type == "DELETED":
                self._secret_checksums.pop(_key(item.object), None)
                continue
            else:
                objs = [item.object]
            for obj in objs:
                notes = (obj.get("metadata") or {}).get("annotations") or {}
                self._secret_checksums[_key(obj)] = str(notes.get(writing.CHECKSUM_ANNOTATION) or "")
            self._secrets_synced.set()

    def _remember(self, r: resources.Resource, obj: dict[str, Any]) -> None:
        key = _key(obj)
        if r is RKCP:
            inputs = hash(_decision_inputs(obj))
            previous = self._inputs.get(key)
            self.rkcps.put(key, obj)
            self._inputs[key] = inputs
            self._created[key] = str((obj.get("metadata") or {}).get("creationTimestamp") or "")
            self._owner[key] = _owner_cluster(obj)
            self._index(key, obj)
            # Our own status writes come back as MODIFIED events: they change nothing to decide.
            if previous != inputs:
                self.queue.add(key)
        elif r is SITE:
            site = self.site_sync.remember(obj)
            m = obj.get("metadata") or {}
            inputs = hash((m.get("generation"), repr(obj.get("spec"))))
            # Our own status writes come back too: only a new spec changes what is authorized.
            if self._site_inputs.get(site) != inputs:
                self._site_inputs[site] = inputs
                self.on_site_change(site)
        else:
            self.clusters.put(key, obj)
            for k in self._rkcps_of_cluster(key):
                self.queue.add(k)

    def _forget(self, r: resources.Resource, key: Key) -> None:
        if r is RKCP:
            self.rkcps.pop(key)
            for index in (self._inputs, self._created, self._owner, self._refused):
                index.pop(key, None)
            coords = self._coords_of.pop(key, None)
            if coords is not None:
                self._by_coords[coords].discard(key)
                for other in self._by_coords[coords]:
                    self.queue.add(other)  # a conflict may have resolved
                self.site_sync.add(coords.site)  # one control plane less there
        elif r is SITE:
            self.site_sync.forget(key[1])
            self._site_inputs.pop(key[1], None)
            self.on_site_change(key[1])  # its RKCPs are no longer authorized
        else:
            self.clusters.pop(key)
            for k in self._rkcps_of_cluster(key):
                self.queue.add(k)

    def _index(self, key: Key, obj: dict[str, Any]) -> None:
        try:
            coords = Coordinates(*mapping.coordinates(api.RemoteKamajiControlPlane.parse(obj)))
        except (pydantic.ValidationError, mapping.InvalidCoordinates):
            return
        old = self._coords_of.get(key)
        if old is not None and old != coords:
            self._by_coords[old].discard(key)
            self.site_sync.add(old.site)
        if old != coords:
            self.site_sync.add(coords.site)
        self._coords_of[key] = coords
        self._by_coords[coords].add(key)

    def _rkcps_of_cluster(self, cluster: Key) -> list[Key]:
        return [k for k, owner in self._owner.items() if k[0] == cluster[0] and owner == cluster[1]]

    # -- the loop --------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                requeue = await self.sync(key)
                self._last_error.pop(key, None)
            except (kerrors.KubeError, bus_errors.BusError) as exc:
                self.metrics.reconcile_errors.inc()
                log.warning("reconciling %s/%s: %s; retrying", *key, exc)
                await self._error_event(key, str(exc))
                requeue = 5.0
            except Exception:
                self.metrics.reconcile_errors.inc()
                log.exception("reconciling %s/%s failed", *key)
                requeue = 10.0
            finally:
                self.queue.done(key)
            if requeue is not None:
                self.queue.add(key, requeue)

    async def _error_event(self, key: Key, message: str) -> None:
        """A Warning event per distinct error (a retry loop of the same error records it once)."""
        obj = self.rkcps.get(key)
        if obj is None or self._last_error.get(key) == message:
            return
        self._last_error[key] = message
        try:
            r = api.RemoteKamajiControlPlane.parse(obj)
        except pydantic.ValidationError:
            return
        await writing.record_event(self.kube, rkcp.Event("Warning", "ReconcileError", message), r)

    async def sync(self, key: Key) -> float | None:
        obj = self.rkcps.get(key)
        if obj is None:
            return None
        try:
            r = api.RemoteKamajiControlPlane.parse(obj)
        except pydantic.ValidationError as exc:
            log.error("RemoteKamajiControlPlane %s/%s is not valid: %s", *key, exc)
            return None
        observed = await self.observe(r)
        if observed is None:
            return None
        plan = rkcp.reconcile(observed)
        if plan.secrets_refused:
            self._count_refusal(key, plan.secrets_refused, observed.report.secrets_seq)
        for action in plan.actions:
            if not await self.execute(action, r, observed):
                return 1.0  # fenced or raced: observe again shortly
        if plan.first_ready:
            self._initialized.add(r.metadata.uid)
        if plan.first_ready and r.metadata.creation_timestamp is not None:
            self.metrics.first_ready_seconds.observe(
                (observed.now - r.metadata.creation_timestamp).total_seconds()
            )
        requeue = plan.requeue_after
        if requeue is not None:
            requeue = min(requeue, self.intent_check_interval)
        if plan.status is not None:
            return await self._write_status(key, r, plan.status, requeue)
        return requeue

    def _count_refusal(self, key: Key, reason: str, seq: int) -> None:
        if self._refused.get(key) == (reason, seq):
            return
        self._refused[key] = (reason, seq)
        self.metrics.secrets_refused.labels(reason=reason).inc()
        log.warning("sealed secrets (seq %d) not written for %s/%s: %s", seq, *key, reason)

    async def observe(self, r: api.RemoteKamajiControlPlane) -> rkcp.Observed | None:
        now = dt.datetime.now(dt.UTC)
        cluster_name = _owner_cluster_model(r)
        cluster, problem = None, ""
        if not cluster_name:
            problem = "waiting for an ownerReference to a Cluster (set by Cluster API)"
        else:
            found = self.clusters.get((r.metadata.namespace, cluster_name))
            if found is None:
                problem = f"waiting for Cluster {r.metadata.namespace}/{cluster_name}"
            else:
                cluster = api.Cluster.parse(found)
        try:
            coords = Coordinates(*mapping.coordinates(r))
        except mapping.InvalidCoordinates as exc:
            problem = problem or str(exc)
            coords = Coordinates(r.spec.site, r.metadata.namespace, r.metadata.name)
        desired = mapping.tcp_spec(r, cluster) if cluster is not None and not problem else None
        report = await self._report(coords)
        published = await self._published(coords, report.status)
        snap = self.sites.snapshot(coords.site, now, interval=self.heartbeat_interval)
        site_view = rkcp_status.SiteView(
            connected=snap.connected if snap.last_heartbeat_time is not None else None,
            last_heartbeat_time=snap.last_heartbeat_time,
            backlog=snap.backlog,
        )
        name = cluster_name or r.metadata.name
        # Until the Sites are listed every placement would look unauthorized (and say so).
        await self._sites_synced.wait()
        await self._secrets_synced.wait()
        checksums = {
            secret: self._secret_checksums[(r.metadata.namespace, secret)]
            for secret in (names.capi_kubeconfig(name), names.capi_ca(name))
            if (r.metadata.namespace, secret) in self._secret_checksums
        }
        return rkcp.Observed(
            rkcp=r,
            cluster=cluster,
            cluster_problem=problem,
            desired_spec=desired,
            published=published,
            report=report,
            site=site_view,
            secrets_checksums=checksums,
            cluster_name=name,
            conflict_with=self._conflict(coords, r),
            not_authorized=self._denial(coords, r.metadata.namespace),
            known_initialized=r.metadata.uid in self._initialized,
            now=now,
            signing_key_id=self.signing_key_id,
            topology_ready=coords.site in self._topology_sites or coords.site not in self.known_sites(),
        )

    def _denial(self, coords: Coordinates, namespace: str) -> str:
        """Why the Site does not let ``namespace`` place at ``coords`` ("" when it does)."""
        spec = self.site_sync.spec(coords.site)
        return placements.denial(
            spec, site=coords.site, namespace=namespace, target_namespace=coords.namespace
        )

    def _conflict(self, coords: Coordinates, r: api.RemoteKamajiControlPlane) -> str:
        """The older authorized RKCP claiming the same TCP, if this one is the younger.

        An RKCP its Site does not authorize claims nothing: otherwise a tenant could create one
        early for a name another tenant will use, and hold that tenant's control plane hostage.
        """
        mine = (
            r.metadata.creation_timestamp or dt.datetime.max.replace(tzinfo=dt.UTC),
            r.metadata.namespace,
            r.metadata.name,
        )
        for key in self._by_coords.get(coords, ()):
            if key == (r.metadata.namespace, r.metadata.name) or self._denial(coords, key[0]):
                continue
            ts = self._created.get(key)
            when = (
                dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
                if ts
                else dt.datetime.max.replace(tzinfo=dt.UTC)
            )
            if (when, key[0], key[1]) < mine:
                return f"{key[0]}/{key[1]}"
        return ""

    async def _published(self, coords: Coordinates, status: messages.Status | None) -> rkcp.Published | None:
        now = asyncio.get_running_loop().time()
        known = coords in self._published_cache
        held = self._published_cache.get(coords)
        age = now - self._published_checked.get(coords, -math.inf)
        if known and not rkcp.recheck_published(held, status, age=age, max_age=self.intent_check_interval):
            return held
        found = await self._read_published(coords)
        if known and found != held:
            log.warning(
                "intent subject of %s changed behind the hub's back: held seq %s, the stream has seq %s",
                "/".join(coords),
                held.seq if held else "none",
                found.seq if found else "none",
            )
        self._published_cache[coords] = found
        self._published_checked[coords] = now
        return found

    async def _read_published(self, coords: Coordinates) -> rkcp.Published | None:
        stream = streams.stream_name(subjects.Kind.INTENT, prefix=self.prefix)
        stored = await bus.last_message(self.conn, stream, subjects.intent(*coords, prefix=self.prefix))
        if stored is None:
            return None
        try:
            i = messages.decode_intent(stored.data)
        except protocol_errors.DecodeError as exc:
            log.error("undecodable intent on %s: %s", stored.subject, exc)
            return rkcp.Published.undecodable(stored.seq)
        for uid in i.replaces:
            self.released.track(coords, uid, stored.seq)
        try:
            signing.verify(stored.data, self._own_key)
            signed = True
        except (protocol_errors.DecodeError, protocol_errors.SignatureError) as exc:
            log.warning("intent on %s (seq %d) is not the hub's: %s", stored.subject, stored.seq, exc)
            signed = False
        return rkcp.Published(
            seq=stored.seq,
            op=rkcp.Op(i.op),
            generation=i.generation,
            owner_uid=i.owner.uid,
            spec_digest=rkcp.spec_digest(i.spec),
            kubeconfig_key=i.kubeconfig_key,
            key_id=i.key_id,
            signed=signed,
            replaces=tuple(i.replaces),
        )

    async def _report(self, coords: Coordinates) -> rkcp.SiteReport:
        # Loaded once per process (the intake reads the streams the first time), whatever the
        # consumer recorded before: a restarted hub's consumer never delivers again what the
        # previous process acknowledged (the sealed secrets, typically), however many newer
        # statuses it delivers first (issue 11 §2).
        seen = await self.intake.load(coords)
        if seen is None:
            return rkcp.SiteReport()
        return rkcp.SiteReport(
            status=seen.status,
            secrets_checksum=seen.sealed.checksum if seen.sealed is not None else "",
            secrets_error=seen.secrets_error.message if seen.secrets_error is not None else "",
            secrets_owner_uid=seen.sealed.owner_uid if seen.sealed is not None else "",
            secrets_seq=seen.sealed_seq,
        )

    # -- acting ----------------------------------------------------------------------------

    async def execute(self, action: rkcp.Action, r: api.RemoteKamajiControlPlane, o: rkcp.Observed) -> bool:
        ns, name = r.metadata.namespace, r.metadata.name
        if isinstance(action, rkcp.AddFinalizer | rkcp.RemoveFinalizer):
            finalizers = [f for f in r.metadata.finalizers if f != rkcp.FINALIZER]
            if isinstance(action, rkcp.AddFinalizer):
                finalizers.append(rkcp.FINALIZER)
            patch = {"metadata": {"finalizers": finalizers, "resourceVersion": r.metadata.resource_version}}
            try:
                await self.kube.patch(RKCP, name, patch, namespace=ns)
            except (kerrors.Conflict, kerrors.NotFound):
                return False
        elif isinstance(action, rkcp.EnsureTopology):
            await self.ensure_topology()
        elif isinstance(action, rkcp.Publish):
            return await self._publish(action, r, o)
        elif isinstance(action, rkcp.Purge):
            # Purge is planned only for a control plane we published to: its coordinates are valid.
            coords = Coordinates(*mapping.coordinates(r))
            for kind in (subjects.Kind.INTENT, subjects.Kind.STATUS, subjects.Kind.SECRET):
                subject = subjects.control_plane(kind, *coords, prefix=self.prefix)
                stream = streams.stream_name(kind, site=coords.site, prefix=self.prefix)
                await bus.purge_subject(self.conn, stream, subject)
            self.observations.forget(coords)
            self._published_cache[coords] = None
            self._published_checked[coords] = asyncio.get_running_loop().time()
        elif isinstance(action, rkcp.Release):
            coords = Coordinates(*mapping.coordinates(r))
            self.released.track(coords, r.metadata.uid, action.seq)
        elif isinstance(action, rkcp.WriteSecrets):
            return await writing.write_latest(
                self.kube, self.intake, action, r, cluster_name=o.cluster_name, metrics=self.metrics
            )
        elif isinstance(action, rkcp.SetEndpoint):
            await self.kube.patch(
                RKCP,
                name,
                {"spec": {"controlPlaneEndpoint": {"host": action.host, "port": action.port}}},
                namespace=ns,
            )
        elif isinstance(action, rkcp.Event):
            await writing.record_event(self.kube, action, r)
        return True

    async def _publish(self, action: rkcp.Publish, r: api.RemoteKamajiControlPlane, o: rkcp.Observed) -> bool:
        site, ns, name = mapping.coordinates(r)
        intent = messages.Intent(
            op=action.op,
            site=site,
            namespace=ns,
            name=name,
            owner=messages.Owner(
                uid=r.metadata.uid,
                namespace=r.metadata.namespace,
                name=r.metadata.name,
                cluster=o.cluster_name,
            ),
            generation=r.metadata.generation,
            issued_at=o.now,
            spec=action.spec,
            kubeconfig_key=r.spec.kubeconfig_secret_key,
            replaces=action.replaces,
        )
        body = messages.encode(signing.sign(intent, self.signer))
        digest = rkcp.spec_digest(action.spec)
        # The sequence it is fenced on is part of the id: publishing the same intent again over a
        # replayed or purged one is a new message, which the duplicate window must not drop; a
        # retry of this very publish (same fence) still is one. The key id too: the same intent signed
        # again after a rotation is a new message.
        msg_id = (
            f"intent:{r.metadata.uid}:{r.metadata.generation}:{action.op}:{digest[:16]}"
            f":{action.expected_last_seq}:{self.signing_key_id}"
        )
        try:
            ack = await bus.publish(
                self.conn,
                subjects.intent(site, ns, name, prefix=self.prefix),
                body,
                msg_id=msg_id,
                expected_last_subject_seq=action.expected_last_seq,
            )
        except bus_errors.WrongLastSequence as exc:
            log.info(
                "intent for %s/%s not published: %s (another writer; observing again)",
                r.metadata.namespace,
                r.metadata.name,
                exc,
            )
            self._published_cache.pop(Coordinates(site, ns, name), None)
            return False
        except bus_errors.BusError:
            # The outcome is unknown (the publish may have landed): read the stream next time.
            self._published_cache.pop(Coordinates(site, ns, name), None)
            raise
        self._published_checked[Coordinates(site, ns, name)] = asyncio.get_running_loop().time()
        self._published_cache[Coordinates(site, ns, name)] = rkcp.Published(
            seq=ack.seq,
            op=rkcp.Op(action.op),
            generation=r.metadata.generation,
            owner_uid=r.metadata.uid,
            spec_digest=digest,
            kubeconfig_key=r.spec.kubeconfig_secret_key,
            key_id=self.signing_key_id,
            replaces=action.replaces,
        )
        for uid in action.replaces:
            self.released.track(Coordinates(site, ns, name), uid, ack.seq)
        self.metrics.intents_published.labels(site=site, op=action.op).inc()
        log.info(
            "published %s intent for %s/%s (generation %d) as seq %d",
            action.op,
            r.metadata.namespace,
            r.metadata.name,
            r.metadata.generation,
            ack.seq,
        )
        return True

    async def _write_status(
        self, key: Key, r: api.RemoteKamajiControlPlane, status: api.Status, requeue: float | None
    ) -> float | None:
        if status == r.status:
            return requeue
        loop = asyncio.get_running_loop()
        wait = self._last_status_write.get(key, 0.0) + STATUS_WRITE_INTERVAL - loop.time()
        if wait > 0:
            return wait if requeue is None else min(wait, requeue)
        body = status.to_dict()
        try:
            await self.kube.patch(RKCP, key[1], {"status": body}, namespace=key[0], subresource="status")
        except kerrors.NotFound:
            return None
        self._last_status_write[key] = loop.time()
        return requeue


def _owner_cluster(obj: dict[str, Any]) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == "Cluster" and str(ref.get("apiVersion") or "").startswith("cluster.x-k8s.io/"):
            return str(ref.get("name") or "")
    return ""


def _owner_cluster_model(r: api.RemoteKamajiControlPlane) -> str:
    for ref in r.metadata.owner_references:
        if ref.kind == "Cluster" and ref.api_version.startswith("cluster.x-k8s.io/"):
            return ref.name
    return ""


def _decision_inputs(obj: dict[str, Any]) -> tuple[Any, ...]:
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
