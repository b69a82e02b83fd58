"""The baseline kamaji-broker replaces, for ``bench/provision.py``: one controller that holds a
kubeconfig for every site (Kamaji's ExternalClusterReference approach), run in the bench's process
and made as fast as it can be (concurrent writes, one watch per site, nothing read twice).

Two shapes of it:

``Provider`` (``--baseline provider``, the default): what a Cluster API control-plane provider
does in that approach. The load creates a Cluster and its control-plane object in the management
cluster, as it does for the broker (an RKCP stands in for Kamaji's KamajiControlPlane: the same
spec). The controller watches both, adds its finalizer, creates the TenantControlPlane in the
site and, once it is Ready, copies the two Secrets back, sets the endpoint and writes the status
once: the management cluster's objects and writes of the broker's path, without NATS, sealing
and an agent per site.

``Bare`` (``--baseline bare``): TenantControlPlanes written straight into the sites and the
Secrets copied back, nothing else in the management cluster: the least any approach does.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from common import kube as ckube
from common.kube import errors, resources, watching
from hub.api import cluster as cluster_api
from hub.api import rkcp as api
from hub.mapping import tcp
from sandbox.launcher import workload

NAMESPACE = "default"
SITE_NAMESPACE = "tenants"
TCP = resources.TENANT_CONTROL_PLANE
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
FINALIZER = "controlplane.cluster.x-k8s.io/direct"


def tcp_body(rkcp: api.RemoteKamajiControlPlane, cluster: cluster_api.Cluster) -> dict[str, Any]:
    return {
        "apiVersion": TCP.api_version,
        "kind": TCP.kind,
        "metadata": {"name": rkcp.metadata.name, "namespace": SITE_NAMESPACE},
        "spec": tcp.tcp_spec(rkcp, cluster),
    }


def ready_of(obj: dict[str, Any]) -> bool:
    """Whether a TenantControlPlane's version status says Ready."""
    status = obj.get("status") or {}
    return ((status.get("kubernetesResources") or {}).get("version") or {}).get("status") == "Ready"


class Bare:
    """TCPs written straight into the sites; the Secrets copied back once Ready."""

    def __init__(self, mgmt: ckube.Kube, sites: dict[str, ckube.Kube]) -> None:
        self.mgmt = mgmt
        self.sites = sites
        self.copied: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.failures: list[BaseException] = []

    def loops(self) -> list[Any]:
        return [self.watch_site(site) for site in self.sites]

    async def create(self, name: str, site: str) -> None:
        cluster = cluster_api.Cluster.parse(workload.cluster(name, namespace=NAMESPACE))
        rkcp = api.RemoteKamajiControlPlane.parse(
            workload.remote_kamaji_control_plane(
                name, namespace=NAMESPACE, cluster_uid="direct", site=site, target_namespace=SITE_NAMESPACE
            )
        )
        await self.sites[site].create(TCP, tcp_body(rkcp, cluster), namespace=SITE_NAMESPACE)

    async def watch_site(self, site: str) -> None:
        kube = self.sites[site]
        async for item in watching.stream(kube, TCP, namespace=SITE_NAMESPACE):
            for obj in item.items if isinstance(item, watching.Synced) else [item.object]:
                name = obj["metadata"]["name"]
                if ready_of(obj) and name not in self.copied:
                    self.copied.add(name)
                    self.spawn(self.finish(kube, name, obj))

    def spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        failed = None if task.cancelled() else task.exception()
        if failed is not None:
            self.failures.append(failed)

    async def finished(self) -> None:
        """Once every write started is done; the first failure, if one failed."""
        while self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.failures:
            raise RuntimeError(f"the direct controller failed {len(self.failures)} times") from self.failures[
                0
            ]

    async def finish(self, kube: ckube.Kube, name: str, tcp_obj: dict[str, Any]) -> None:
        await self.copy(kube, name)

    async def copy(self, kube: ckube.Kube, name: str) -> None:
        kc, ca = await asyncio.gather(
            kube.get(resources.SECRET, f"{name}-admin-kubeconfig", namespace=SITE_NAMESPACE),
            kube.get(resources.SECRET, f"{name}-ca", namespace=SITE_NAMESPACE),
        )
        for suffix, data in (
            ("ca", {"tls.crt": ca["data"]["ca.crt"], "tls.key": ca["data"]["ca.key"]}),
            ("kubeconfig", {"value": kc["data"]["admin.conf"]}),
        ):
            body = {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "cluster.x-k8s.io/secret",
                "metadata": {"name": f"{name}-{suffix}", "namespace": NAMESPACE,
                             "labels": {"cluster.x-k8s.io/cluster-name": name}},
                "data": data,
            }  # fmt: skip
            await self.mgmt.create_or_replace(resources.SECRET, body, namespace=NAMESPACE)


class Provider(Bare):
    """A control-plane provider: the Cluster and its control-plane object in the management
    cluster are its input, their status and the Secrets its output."""

    def __init__(self, mgmt: ckube.Kube, sites: dict[str, ckube.Kube]) -> None:
        super().__init__(mgmt, sites)
        self.clusters: dict[str, cluster_api.Cluster] = {}
        self.pending: dict[str, api.RemoteKamajiControlPlane] = {}
        self.placed: set[str] = set()

    def loops(self) -> list[Any]:
        return [*super().loops(), self.watch_clusters(), self.watch_control_planes()]

    async def create(self, name: str, site: str) -> None:
        """The load: what a user (or ClusterClass) creates, as for the broker."""
        cluster = await self.mgmt.create(
            resources.CLUSTER, workload.cluster(name, namespace=NAMESPACE), namespace=NAMESPACE
        )
        body = workload.remote_kamaji_control_plane(
            name, namespace=NAMESPACE, cluster_uid=str(cluster["metadata"]["uid"]), site=site,
            target_namespace=SITE_NAMESPACE,
        )  # fmt: skip
        await self.mgmt.create(RKCP, body, namespace=NAMESPACE)

    async def watch_clusters(self) -> None:
        async for item in watching.stream(self.mgmt, resources.CLUSTER, namespace=NAMESPACE):
            for obj in item.items if isinstance(item, watching.Synced) else [item.object]:
                name = obj["metadata"]["name"]
                self.clusters[name] = cluster_api.Cluster.parse(obj)
                if name in self.pending:
                    self.place(self.pending.pop(name))

    async def watch_control_planes(self) -> None:
        async for item in watching.stream(self.mgmt, RKCP, namespace=NAMESPACE):
            for obj in item.items if isinstance(item, watching.Synced) else [item.object]:
                rkcp = api.RemoteKamajiControlPlane.parse(obj)
                if rkcp.metadata.name not in self.placed:
                    self.place(rkcp)

    def place(self, rkcp: api.RemoteKamajiControlPlane) -> None:
        name = rkcp.metadata.name
        cluster = self.clusters.get(name)
        if cluster is None:
            self.pending[name] = rkcp  # its Cluster's event places it
            return
        self.placed.add(name)
        self.spawn(self.provision(rkcp, cluster))

    async def provision(self, rkcp: api.RemoteKamajiControlPlane, cluster: cluster_api.Cluster) -> None:
        name = rkcp.metadata.name
        meta = {
            "finalizers": [*rkcp.metadata.finalizers, FINALIZER],
            "resourceVersion": rkcp.metadata.resource_version,
        }
        await self.mgmt.patch(RKCP, name, {"metadata": meta}, namespace=NAMESPACE)
        with contextlib.suppress(errors.Conflict):  # there already: its watch finishes it
            await self.sites[rkcp.spec.site].create(TCP, tcp_body(rkcp, cluster), namespace=SITE_NAMESPACE)

    async def finish(self, kube: ckube.Kube, name: str, tcp_obj: dict[str, Any]) -> None:
        await self.copy(kube, name)
        status = tcp_obj.get("status") or {}
        host, _, port = str(status.get("controlPlaneEndpoint") or "").rpartition(":")
        endpoint = {"host": host.strip("[]"), "port": int(port or 0)}
        await self.mgmt.patch(RKCP, name, {"spec": {"controlPlaneEndpoint": endpoint}}, namespace=NAMESPACE)
        version = ((status.get("kubernetesResources") or {}).get("version") or {}).get("version") or ""
        condition = {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                     "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
        body = {"status": {"ready": True, "initialized": True, "version": version, "conditions": [condition]}}
        await self.mgmt.patch(RKCP, name, body, namespace=NAMESPACE, subresource="status")
