"""The RKCP controller's hands: each ``vocabulary.Action`` of a plan, carried out.

Owns nothing: finalizers and the endpoint are patched on the RKCP and Events recorded
(``common.kube``), the known sites' NATS topology ensured (``hub.controllers.streams``), intents published
through ``published.PublishedIntents``, subjects purged (``common.bus``), released deletions
handed to ``purging.ReleasedDeletions``, sealed secrets opened (``hub.ingest.record``: kept, or read) and
written as CAPI Secrets in one path (``writing.write_latest``), and the InfraCluster's endpoint
patched (``infra.InfraEndpoints``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from common import bus
from common.kube import errors as kerrors
from common.kube import resources
from hub.api import rkcp as api
from hub.controllers.deps import Deps, Settings
from hub.controllers.rkcp import infra as infra_endpoints
from hub.controllers.rkcp import published as published_intents
from hub.controllers.rkcp import writing
from hub.controllers.rkcp.own_writes import OwnWrites
from hub.controllers.rkcp.purging import ReleasedDeletions
from hub.controllers.streams import SiteStreams
from hub.mapping import tcp
from hub.reconcile.rkcp import vocabulary
from protocol import streams, subjects

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE


class Executor:
    def __init__(
        self,
        settings: Settings,
        deps: Deps,
        *,
        published: published_intents.PublishedIntents,
        released: ReleasedDeletions,
        topology: SiteStreams,
        infra: infra_endpoints.InfraEndpoints,
    ) -> None:
        self.settings = settings
        self.deps = deps
        self.published = published
        self.released = released
        self.topology = topology
        self.infra = infra
        self.own = OwnWrites()
        """The hub's own writes the watch has not brought back (shared with the status writer)."""

    async def execute(
        self, action: vocabulary.Action, r: api.RemoteKamajiControlPlane, o: vocabulary.Observed
    ) -> bool:
        """Carry ``action`` out; False when fenced or raced (the caller observes again)."""
        if isinstance(action, vocabulary.AddFinalizer | vocabulary.RemoveFinalizer):
            return await self._finalizer(action, r)
        elif isinstance(action, vocabulary.EnsureTopology):
            await self.topology.ensure()
        elif isinstance(action, vocabulary.Publish):
            return await self.published.publish(action, r, o)
        elif isinstance(action, vocabulary.Purge):
            await self._purge(r)
        elif isinstance(action, vocabulary.Release):
            coords = tcp.coordinates(r)
            self.released.track(coords, o.owner_uid, action.seq)
        elif isinstance(action, vocabulary.WriteSecrets):
            return await writing.write_latest(
                self.deps.kube,
                self.deps.intake,
                action,
                r,
                cluster_name=o.cluster_name,
                owner_uid=o.owner_uid,
                metrics=self.deps.metrics,
            )
        elif isinstance(action, vocabulary.SetEndpoint):
            return await self._endpoint(action, r)
        elif isinstance(action, vocabulary.PatchInfraEndpoint):
            # Never False: its outcome is recorded for the next decision, not a reason to re-observe.
            await self.infra.patch(action, r)
        elif isinstance(action, vocabulary.Event):
            await writing.record_event(self.deps.kube, action, r)
        return True

    async def _purge(self, r: api.RemoteKamajiControlPlane) -> None:
        # Purge is planned only for a control plane we published to: its coordinates are valid.
        coords = tcp.coordinates(r)
        with self.published.write(coords):
            for kind in (subjects.Kind.INTENT, subjects.Kind.STATUS, subjects.Kind.SECRET):
                subject = subjects.control_plane(kind, *coords, prefix=self.settings.prefix)
                stream = streams.stream_name(kind, site=coords.site, prefix=self.settings.prefix)
                await bus.purge_subject(self.deps.conn, stream, subject)
            self.deps.observations.forget(coords)
            self.published.record(coords, None)

    async def _endpoint(self, action: vocabulary.SetEndpoint, r: api.RemoteKamajiControlPlane) -> bool:
        """Set ``spec.controlPlaneEndpoint`` on the object as read (its resourceVersion): the
        generation it makes is the one the plan's status is for. False when raced."""
        endpoint = {"host": action.host, "port": action.port}
        body = {
            "metadata": {"resourceVersion": r.metadata.resource_version},
            "spec": {"controlPlaneEndpoint": endpoint},
        }
        try:
            patched = await self.deps.kube.patch(RKCP, r.metadata.name, body, namespace=r.metadata.namespace)
        except (kerrors.Conflict, kerrors.NotFound):
            return False
        self._wrote(r, patched)
        return True

    async def _finalizer(
        self, action: vocabulary.AddFinalizer | vocabulary.RemoveFinalizer, r: api.RemoteKamajiControlPlane
    ) -> bool:
        """Add (with the owner identity, in one patch) or remove the finalizer; False when raced."""
        finalizers = [f for f in r.metadata.finalizers if f != vocabulary.FINALIZER]
        meta: dict[str, Any] = {"resourceVersion": r.metadata.resource_version}
        if isinstance(action, vocabulary.AddFinalizer):
            finalizers.append(vocabulary.FINALIZER)
            if action.owner_uid:
                meta["annotations"] = {api.OWNER_UID_ANNOTATION: action.owner_uid}
        meta["finalizers"] = finalizers
        try:
            patched = await self.deps.kube.patch(
                RKCP, r.metadata.name, {"metadata": meta}, namespace=r.metadata.namespace
            )
        except (kerrors.Conflict, kerrors.NotFound):
            return False
        self._wrote(r, patched)
        return True

    def _wrote(self, r: api.RemoteKamajiControlPlane, patched: dict[str, Any]) -> None:
        after = str((patched.get("metadata") or {}).get("resourceVersion") or "")
        key = (r.metadata.namespace, r.metadata.name)
        now = asyncio.get_running_loop().time()
        self.own.wrote(key, before=r.metadata.resource_version, after=after, now=now)
