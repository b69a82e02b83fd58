"""The whole path in one process: the hub's controller, ingest and site poller on a management
cluster; the real agent loops on a site with the Kamaji simulator; a real nats-server between
them. The clusters are emulated, or real (``tests.hub.clusters``): then the hub, the agent and
every tenant act as ServiceAccounts bound by the RBAC we ship, never as the admin."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent import metrics as agent_metrics
from agent.apply import loop as apply_loop
from agent.status import loop as status_loop
from common import bus
from common import kube as ckube
from common.kube import resources
from hub import metrics as hub_metrics
from hub.controllers import deps as config
from hub.controllers.rkcp import controller as rkcp_controller
from hub.reconcile.rkcp import decide as rkcp_reconcile
from protocol import keys, messages, sealing, streams, subjects
from sandbox import kamaji, kubeapi
from tests import helpers
from tests.agent import wiring
from tests.hub import clusters
from tests.hub import loops as hub_loops

ROOT = clusters.ROOT
SITE = "site-a"
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
MGMT_CRDS = clusters.MGMT_CRDS
GRANT = {"namespaces": ["default"], "targetNamespaces": ["tenants"]}
"""What the Site of the hub tests grants: their RKCPs are in ``default`` and target ``tenants``."""


def site_obj(name: str = SITE, *placements: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kamaji-broker.io/v1alpha1", "kind": "Site", "metadata": {"name": name},
            "spec": {"placements": list(placements)}}  # fmt: skip


def cluster_obj(name: str = "c1", *, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "clusterNetwork": {
                "apiServerPort": 6443,
                "services": {"cidrBlocks": ["10.96.0.0/16"]},
                "pods": {"cidrBlocks": ["10.244.0.0/16"]},
                "serviceDomain": "cluster.local",
            },
            **spec,
        },
    }


def rkcp_obj(
    name: str = "cp1", *, cluster: dict[str, Any] | None = None, namespace: str = "default", **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if cluster is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "cluster.x-k8s.io/v1beta1",
                "kind": "Cluster",
                "name": cluster["metadata"]["name"],
                "uid": cluster["metadata"]["uid"],
            }
        ]
    return {"apiVersion": f"{RKCP.group}/{RKCP.version}", "kind": RKCP.kind, "metadata": meta,
            "spec": {"site": SITE, "version": "v1.31.0", "targetNamespace": "tenants", **spec}}  # fmt: skip


@dataclass
class World:
    mgmt: ckube.Kube
    site: ckube.Kube
    conn: bus.Connection
    prefix: str
    signer: Any
    keyring: sealing.Keyring
    public: keys.HubPublicKeys
    clusters: clusters.Clusters
    hub_kube: ckube.Kube
    """The hub's client: the admin's on the emulator, its ServiceAccount's on real clusters."""
    agent_kube: ckube.Kube
    """The agent's client: the admin's on the emulator, its ServiceAccount's on a real site."""
    hub_metrics: hub_metrics.Metrics = field(default_factory=hub_metrics.Metrics)
    tasks: dict[str, list[asyncio.Task[None]]] = field(default_factory=dict)
    controller: rkcp_controller.Controller | None = None
    tenants: dict[str, ckube.Kube] = field(default_factory=dict)
    """Clients of the tenants a test acted as, by namespace (``tenant``)."""
    _opened: list[ckube.Kube] = field(default_factory=list)

    async def tenant(self, namespace: str) -> ckube.Kube:
        """The client of ``namespace``'s tenant (someone who may create Clusters and RKCPs
        there): on real clusters a ServiceAccount whose Role is in that namespace only, on the
        emulator the admin. The namespace is made on first use."""
        if namespace not in self.tenants:
            path = await self.clusters.tenant(namespace)
            if path == self.clusters.mgmt:
                self.tenants[namespace] = self.mgmt
            else:
                client = ckube.Kube(await ckube.api_client_from_kubeconfig(path))
                self._opened.append(client)
                self.tenants[namespace] = client
        return self.tenants[namespace]

    async def close(self) -> None:
        """Stop what runs and close the tenants' clients."""
        for part in list(self.tasks):
            await self.stop(part)
        for client in self._opened:
            await client.close()

    def start_hub(
        self,
        *,
        workers: int = 2,
        namespaces: tuple[str, ...] = (),
        watch_filter: str = "",
        resync: float = rkcp_reconcile.RESYNC_SECONDS,
        static_sites: frozenset[str] = frozenset({SITE}),
    ) -> rkcp_controller.Controller:
        """The hub's controller, ingest and site poller; ``workers=0`` runs its watches and
        ingest only, so a test decides when ``Reconciler.sync`` reconciles. ``namespaces`` and
        ``watch_filter`` are the hub's --namespace(s) and --watch-filter; ``resync`` the longest
        an RKCP goes unreconciled; ``static_sites`` the hub's --sites (empty: the sites its RKCPs
        and Sites name)."""
        settings = config.Settings(
            static_sites=static_sites, prefix=self.prefix, workers=workers, heartbeat_interval=0.3,
            namespaces=namespaces, watch_filter=watch_filter, resync_interval=resync,
        )  # fmt: skip
        c, self.tasks["hub"] = hub_loops.start(
            settings, kube=self.hub_kube, conn=self.conn, signer=self.signer, keyring=self.keyring,
            metrics=self.hub_metrics, earlier_keys=self.public.verify_keys(),
        )  # fmt: skip
        self.controller = c
        return c

    async def stop(self, part: str) -> None:
        tasks = self.tasks.pop(part, [])
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def start_agent(self) -> agent_metrics.Metrics:
        public = self.public
        m = agent_metrics.Metrics()
        deps = wiring.deps(self.conn, self.agent_kube, public, site=SITE, prefix=self.prefix, metrics=m)
        publisher = deps.publisher
        settings = wiring.settings(
            site=SITE, prefix=self.prefix, namespaces=self.clusters.agent_namespaces,
            status_min_interval=0.1, namespace_retry=0.5,
        )  # fmt: skip
        status = status_loop.StatusLoop(settings, deps)
        apply = apply_loop.ApplyLoop(
            settings, deps, on_delete=status.deleting, known=status.known, bind_retry=0.2
        )

        async def beat() -> None:
            while True:
                hb = messages.Heartbeat(
                    site=SITE, agent_version="0.1.0", started_at=helpers.T0, sent_at=messages.utcnow(),
                    trusted_key_ids=tuple(public.verify_keys()),
                )  # fmt: skip
                await publisher.heartbeat(hb)
                await asyncio.sleep(0.3)

        self.tasks["agent"] = [
            asyncio.create_task(apply.run()),
            asyncio.create_task(status.run()),
            asyncio.create_task(beat()),
        ]
        return m

    async def rkcp(self, name: str = "cp1") -> dict[str, Any] | None:
        return await self.mgmt.get_or_none(RKCP, name, namespace="default")

    async def intents(self) -> list[messages.Intent]:
        """Every intent message still in the stream for this test's prefix (compacted per subject)."""
        stream = streams.stream_name(subjects.Kind.INTENT, prefix=self.prefix)
        held = await bus.subjects_of(self.conn, stream, ">")
        stored = [await bus.last_message(self.conn, stream, subject) for subject in held]
        in_order = sorted((m for m in stored if m is not None and m.data), key=lambda m: m.seq)
        return [messages.decode_intent(m.data) for m in in_order]

    async def last_intent_seq(self, name: str = "cp1") -> int:
        stored = await bus.last_message(
            self.conn, streams.stream_name(subjects.Kind.INTENT, prefix=self.prefix),
            subjects.intent(SITE, "tenants", name, prefix=self.prefix),
        )  # fmt: skip
        return stored.seq if stored else 0


@contextlib.asynccontextmanager
async def open_kube(tmp_path: Path) -> AsyncIterator[ckube.Kube]:
    """An emulated management cluster with the Cluster, RKCP and Site CRDs, and a client on it."""
    server = kubeapi.Server(name="mgmt")
    await server.start(port=0)
    try:
        for path in MGMT_CRDS:
            await server.apply_crd(yaml.safe_load(path.read_text()))
        api = await ckube.api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "mgmt.kubeconfig"))
        try:
            yield ckube.Kube(api)
        finally:
            await api.close()
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def open_world(
    conn: bus.Connection,
    prefix: str,
    tmp_path: Path,
    *,
    placements: tuple[dict[str, Any], ...] = (GRANT,),
    real: clusters.RealPair | None = None,
) -> AsyncIterator[World]:
    """A management cluster and a site (with the Kamaji simulator), the Site object of
    ``site-a`` granting ``placements``, keys, and nothing running yet: tests start the hub and
    the agent (``World.start_hub``/``start_agent``). Emulated clusters of this test's own, or
    ``real``'s clusters, wiped when the test is done."""
    async with contextlib.AsyncExitStack() as stack:
        c = await stack.enter_async_context(clusters.real(real) if real else clusters.emulated(tmp_path))
        mgmt, site = await _client(stack, c.mgmt), await _client(stack, c.site)
        hub = mgmt if c.hub == c.mgmt else await _client(stack, c.hub)
        agent = site if c.agent == c.site else await _client(stack, c.agent)
        sim = kamaji.Simulator(site.api_client, ready_delay=0.2, delete_delay=0.3)
        await sim.start()
        stack.push_async_callback(sim.stop)
        signer, sealer = keys.new_signing_key(), keys.new_sealing_key()
        public = keys.HubPublicKeys(
            signing=(keys.public_entry(bytes(signer.verify_key), created_at=helpers.T0),),
            sealing=(keys.public_entry(bytes(sealer.public_key), created_at=helpers.T0),),
        )
        await mgmt.create(resources.SITE, site_obj(SITE, *placements))
        w = World(
            mgmt=mgmt, site=site, conn=conn, prefix=prefix, signer=signer, keyring=sealing.Keyring([sealer]),
            public=public, clusters=c, hub_kube=hub, agent_kube=agent,
        )  # fmt: skip
        stack.push_async_callback(w.close)
        yield w


async def _client(stack: contextlib.AsyncExitStack, kubeconfig: Path) -> ckube.Kube:
    client = ckube.Kube(await ckube.api_client_from_kubeconfig(kubeconfig))
    stack.push_async_callback(client.close)
    return client


@pytest.fixture
async def world(conn: bus.Connection, prefix: str, tmp_path: Path) -> AsyncIterator[World]:
    async with open_world(conn, prefix, tmp_path) as w:
        yield w


async def create_pair(w: World, name: str = "cp1", **spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    cl = await w.mgmt.create(resources.CLUSTER, cluster_obj(f"{name}-cluster"), namespace="default")
    obj = await w.mgmt.create(RKCP, rkcp_obj(name, cluster=cl, **spec), namespace="default")
    return cl, obj


def condition(obj: dict[str, Any] | None, type_: str) -> tuple[str, str]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if cond["type"] == type_:
            return cond["status"], cond["reason"]
    return "", ""


async def until_ready(w: World, name: str = "cp1", *, summary: bool = True) -> dict[str, Any]:
    """The RKCP once Ready with its secrets synced: ``status.ready`` and, with ``summary``, the
    ``Ready`` condition too (the site heard from, no intent left to apply)."""

    def ready(obj: dict[str, Any] | None) -> bool:
        return (
            obj is not None
            and (obj.get("status") or {}).get("ready") is True
            and (not summary or condition(obj, "Ready")[0] == "True")
            and condition(obj, "SecretsSynced")[0] == "True"
        )

    found = await helpers.eventually(lambda: w.rkcp(name), ready, within=30, what=f"{name} Ready")
    assert found is not None
    return found
