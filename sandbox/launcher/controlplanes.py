"""The workload on a running system: Cluster + RKCP pairs created in ``mgmt``, and progress.

Owns what a CAPI user would do to ask for a control plane at a site (a ``Cluster`` and its
``RemoteKamajiControlPlane``, from ``sandbox.launcher.workload``'s manifests; or the ClusterClass
``kamaji-broker`` once and a Cluster of that class, whose RKCP the topology simulator
``sandbox.capi`` makes) and how far every control plane is: read once (``progress``:
``fleet.reading``) or kept by watching (``watcher``: ``fleet.watching``, the live view's). Talks
to ``mgmt`` through ``common.kube``. A layer of ``sandbox.launcher.system.System``.
"""

from __future__ import annotations

from typing import Any

from common import bus, objects
from common.kube import resources
from fleet import reading, verdicts, watching
from hub.controllers.rkcp import writing
from protocol import streams
from sandbox.capi import controller, infra
from sandbox.launcher import workload
from sandbox.launcher.clusters import Clusters

__all__ = ["ControlPlanes"]

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE


class ControlPlanes(Clusters):
    async def create_control_plane(
        self,
        name: str,
        *,
        site: str,
        namespace: str = "default",
        version: str = workload.DEFAULT_VERSION,
        replicas: int = 2,
        **spec: Any,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Create Cluster ``name`` and its RKCP ``name`` (placed at ``site``); returns both as stored."""
        if site not in self.sites:
            raise ValueError(f"unknown site {site!r}; the system has {', '.join(self.sites)}")
        if self.options.capi == "real":
            return await self._create_as_generated(
                name, site=site, namespace=namespace, version=version, replicas=replicas, **spec
            )
        cluster = await self.mgmt.create(
            resources.CLUSTER, workload.cluster(name, namespace=namespace), namespace=namespace
        )
        body = workload.remote_kamaji_control_plane(
            name,
            namespace=namespace,
            cluster_uid=str(cluster["metadata"]["uid"]),
            site=site,
            target_namespace=self.namespace,
            version=version,
            replicas=replicas,
            **spec,
        )
        rkcp = await self.mgmt.create(RKCP, body, namespace=namespace)
        return cluster, rkcp

    async def _create_as_generated(
        self, name: str, *, site: str, namespace: str, version: str, replicas: int, **spec: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """With Cluster API's own controllers: what ``clusterctl generate cluster`` prints, with
        the stand-in infrastructure, created as it is (CAPI's Cluster controller sets the owner)."""
        made = workload.generated(
            name, namespace=namespace, site=site, target_namespace=self.namespace, capi="real",
            version=version, replicas=replicas,
        )  # fmt: skip
        stored: dict[str, dict[str, Any]] = {}
        for obj in sorted(made, key=lambda o: o["kind"] != infra.STAND_IN_CLUSTER.kind):
            if obj["kind"] == RKCP.kind:
                obj["spec"].update(spec)
            stored[obj["kind"]] = await self.mgmt.create(
                controller.resource_of(obj), obj, namespace=namespace
            )
        return stored[resources.CLUSTER.kind], stored[RKCP.kind]

    async def create_topology_cluster(
        self,
        name: str,
        *,
        site: str,
        namespace: str = "default",
        version: str = workload.DEFAULT_VERSION,
        replicas: int = 2,
    ) -> dict[str, Any]:
        """Create Cluster ``name`` of the ClusterClass ``kamaji-broker`` (applied to ``namespace``
        first, with its templates), placed at ``site``; returns the Cluster as stored."""
        if site not in self.sites:
            raise ValueError(f"unknown site {site!r}; the system has {', '.join(self.sites)}")
        *made, body = workload.generated(
            name, namespace=namespace, site=site, target_namespace=self.namespace, topology=True,
            capi=self.options.capi, version=version, replicas=replicas,
        )  # fmt: skip
        for obj in made:  # the ClusterClass and its templates, as kubectl apply leaves them
            await self.mgmt.create_or_replace(controller.resource_of(obj), obj, namespace=namespace)
        created: dict[str, Any] = await self.mgmt.create(resources.CLUSTER, body, namespace=namespace)
        return created

    async def progress(self, conn: bus.Connection | None = None) -> verdicts.Fleet:
        """Every site and every RKCP's phase, as the management cluster shows them now (and the
        bus, through ``conn``, the observer's: ``observer_credential()``). A control plane is done
        once its ``<cluster>-kubeconfig`` Secret exists, as a CAPI user would see it."""
        # The CAPI Secrets carry this label (the hub writes it); existence is enough here.
        secrets = await self.mgmt.list(resources.SECRET, label_selector=writing.CLUSTER_NAME_LABEL)
        names = {objects.key(s) for s in secrets.items}
        stale_after = streams.MISSED_HEARTBEATS * self.options.heartbeat_interval
        # Every Cluster here is the sandbox's: one of a ClusterClass still without its RKCP shows too.
        return await reading.read(self.mgmt, conn, secrets=names, stale_after=stale_after, clusters=True)

    def watcher(self, conn: bus.Connection | None = None) -> watching.Watcher:
        """The fleet as ``progress`` reads it, kept by watching while the watcher runs: the live
        view's. The bus is read at the agents' heartbeat interval."""
        interval = self.options.heartbeat_interval
        scope = watching.Scope(stale_after=streams.MISSED_HEARTBEATS * interval, secrets=True, clusters=True)
        return watching.Watcher(self.mgmt, conn, scope=scope, pace=watching.Pace(bus=interval))
