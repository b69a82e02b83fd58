"""The system's clusters: API servers, their clients, and a Kamaji simulator per site.

Owns one cluster per name, ``sandbox.kubeapi``'s emulator or, with ``Options.kubernetes``
``"real"``, a real one of ``sandbox.realkube`` (``mgmt`` with the RKCP, RKCP template, Site,
CAPI Cluster and ClusterClass CRDs, and CAPD's DockerCluster and its template for the example
class; one per site with the compact TenantControlPlane CRD; their kubeconfigs DIR/<cluster>.kubeconfig),
the ``common.kube`` client of each, what an operator applies before the broker starts (the
``Site`` objects ``site add`` wrote, the target namespace at each site) and one
``sandbox.kamaji`` simulator per site with an address pool of its own. With ``Options.kamaji``
``"real"`` each site is a ``sandbox.realkamaji.Site`` instead: a real cluster in a network
namespace of its own, running the real Kamaji operator. With ``Options.capi`` ``"real"`` each
management cluster is set up by ``clusterctl init`` in a network namespace of its own, with
Cluster API's manager (``sandbox.realcapi``) and a stand-in infrastructure provider. A layer of
``sandbox.launcher.system.System``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import sys
from pathlib import Path
from typing import Any

import yaml

from common import kube
from common.kube import errors as kerrors
from common.kube import resources
from hub.api import crds as crdgen
from sandbox import crds, processes, realcapi, realkamaji, realkube
from sandbox.kamaji import crds as install
from sandbox.launcher.layout import DEPLOY
from sandbox.launcher.netlinks import NetLinks
from sandbox.launcher.options import MGMT, Options
from sandbox.sitenet import Namespace

__all__ = ["Clusters"]


def _address_pool(index: int) -> str:
    """Site ``index``'s endpoints: the (index+1)-th /16 of 10.0.0.0/8 (no two sites collide)."""
    if not 0 <= index < 255:
        raise ValueError(f"at most 255 sites, got index {index}")
    return str(ipaddress.ip_network(f"10.{index + 1}.0.0/16"))


class Clusters(NetLinks):
    """After ``start()``: ``mgmt`` and ``site_kube(site)``, clients of ``common.kube``."""

    def __init__(self, directory: Path, options: Options) -> None:
        super().__init__(directory, options)
        self._api_clients: dict[str, Any] = {}
        self._kubes: dict[str, kube.Kube] = {}
        self.real_clusters: dict[str, realkube.Cluster] = {}
        """With ``Options.kubernetes`` ``"real"``: each started cluster, by name."""
        self.kamaji_sites: dict[str, realkamaji.Site] = {}
        """With ``Options.kamaji`` ``"real"``: each site, by name."""
        self.capi_managers: dict[str, realcapi.CoreManager] = {}
        """With ``Options.capi`` ``"real"``: Cluster API's manager of each management cluster."""
        self._namespaces: list[Namespace] = []
        self._clusterctl: realcapi.Clusterctl | None = None

    @property
    def mgmt(self) -> kube.Kube:
        return self._kube(MGMT)

    def site_kube(self, site: str) -> kube.Kube:
        return self._kube(site)

    def api_server(self, cluster: str) -> str:
        """The child that serves ``cluster``'s API (to pause or kill it): its emulator or its
        kube-apiserver."""
        return f"kube-apiserver-{cluster}" if self.options.kubernetes == "real" else f"kubeapi-{cluster}"

    def _kube(self, cluster: str) -> kube.Kube:
        try:
            return self._kubes[cluster]
        except KeyError:
            raise RuntimeError(f"no client for cluster {cluster!r}: is the system started?") from None

    def _crds(self, cluster: str) -> list[Path]:
        """What each cluster is given: ``mgmt`` (and another management cluster) the RKCP,
        template, Site, Cluster and ClusterClass kinds; a site the TenantControlPlane."""
        if cluster in self.sites:
            return [crds.TENANT_CONTROL_PLANE]
        if self.options.capi == "real":
            # clusterctl init installs Cluster API's and ours; what it checks for (cert-manager's
            # kinds) and an InfraCluster kind for the Clusters come first.
            return [*crds.CERT_MANAGER, *crds.STAND_IN_CLUSTER]
        return [*self._render_crds(), crds.CLUSTER, *crds.TOPOLOGY]

    async def _start_clusters(self) -> list[processes.Child]:
        """Start ``mgmt``'s cluster and every site's: emulators are returned not yet waited for
        (see ``_ready``); real clusters are returned started, with their CRDs installed."""
        if self.options.kamaji == "real":
            # Both to their end, then the first failure: what one started is then recorded
            # (to be stopped) before the other's error unwinds the start.
            done = await asyncio.gather(
                self._start_real([MGMT]), self._start_kamaji_sites(), return_exceptions=True
            )
            failed = [e for e in done if isinstance(e, BaseException)]
            if failed:
                raise failed[0]
            return []
        if self.options.kubernetes == "real":
            await self._start_real([MGMT, *self.sites])
            return []
        return self._start_emulators()

    async def _start_kamaji_sites(self) -> None:
        """Every site with the real Kamaji operator (``sandbox.realkamaji.Site``), side by side;
        its processes children of the system, its admin kubeconfig at DIR/<site>.kubeconfig."""
        made = [
            realkamaji.Site(self.directory / "sites" / s, name=s, index=i) for i, s in enumerate(self.sites)
        ]
        self.kamaji_sites.update({s.name: s for s in made})
        started = await asyncio.gather(
            *(s.start(timeout=max(self.options.start_timeout, 120.0)) for s in made), return_exceptions=True
        )
        for site in made:
            if site.cluster is not None:
                self.children += site.cluster.children.values()
                self.real_clusters[site.name] = site.cluster
            self.children += site.children.values()
        failed = [e for e in started if isinstance(e, BaseException)]
        if failed:
            raise failed[0]
        for site in made:
            assert site.cluster is not None
            site.cluster.write_kubeconfig(self.kubeconfig(site.name))

    async def _release(self) -> None:
        """After every child stopped: the sites' and management clusters' network namespaces."""
        for site in self.kamaji_sites.values():
            await site.release()
        for namespace in self._namespaces:
            await asyncio.to_thread(namespace.delete)
        self._namespaces.clear()

    def _netns(self, name: str) -> Namespace | None:
        """Management cluster ``name``'s network namespace, with ``Options.capi`` ``"real"``."""
        if self.options.capi != "real" or name in self.sites:
            return None
        made = Namespace.create(0x80 + len(self._namespaces))  # the sites' count from 0
        self._namespaces.append(made)
        return made

    def _start_emulators(self) -> list[processes.Child]:
        return [self._emulator(cluster, self._crds(cluster)) for cluster in (MGMT, *self.sites)]

    async def _start_real(self, names: list[str]) -> None:
        """Real clusters ``names`` side by side, their processes children of the system (faults
        by name: ``kube-apiserver-site-a``...), the admin's kubeconfig at DIR/<cluster>.kubeconfig
        and the CRDs of each installed."""
        binaries = realkube.binaries.find()
        made = [
            realkube.Cluster(
                self.directory / "kube" / n,
                name=n,
                binaries=binaries,
                netns=await asyncio.to_thread(self._netns, n),
            )
            for n in names
        ]
        started = await asyncio.gather(
            *(c.start(timeout=self.options.start_timeout) for c in made), return_exceptions=True
        )
        for cluster in made:
            self.children += cluster.children.values()
        failed = [e for e in started if isinstance(e, BaseException)]
        if failed:
            raise failed[0]
        for cluster in made:
            cluster.write_kubeconfig(self.kubeconfig(cluster.name))
            api_client = await kube.api_client_from_kubeconfig(self.kubeconfig(cluster.name))
            try:
                await install.install(
                    api_client, self._crds(cluster.name), timeout=self.options.start_timeout
                )
            finally:
                await api_client.close()
        self.real_clusters.update({c.name: c for c in made})
        await asyncio.gather(*(self._start_capi(c) for c in made if c.netns is not None))

    def _hub_nats_url(self) -> str:
        """``KAMAJI_BROKER_NATS_URL`` for clusterctl (the never-run Deployment's)."""
        return "tls://127.0.0.1:4222"

    @property
    def clusterctl(self) -> realcapi.Clusterctl:
        """clusterctl with Cluster API's and kamaji-broker's repositories (``Options.capi`` "real")."""
        if self._clusterctl is None:
            self._clusterctl = realcapi.Clusterctl(
                self.directory / "clusterctl",
                deploy=DEPLOY,
                variables={
                    "KAMAJI_BROKER_NATS_URL": self._hub_nats_url(),
                    "KAMAJI_BROKER_STREAM_REPLICAS": "1",
                },
            )
        return self._clusterctl

    async def _start_capi(self, cluster: realkube.Cluster) -> None:
        """``clusterctl init --control-plane kamaji-broker``, then what its Deployments would run:
        Cluster API's manager and the stand-in infrastructure provider (the hub: ``Broker``)."""
        await self.clusterctl.init(cluster.kubeconfig)
        manager = realcapi.CoreManager(self.directory / "capi" / cluster.name, cluster=cluster)
        self.capi_managers[cluster.name] = manager
        try:
            await manager.start(timeout=max(self.options.start_timeout, 90.0))
        finally:
            if manager.child is not None:
                self.children.append(manager.child)
        args = [
            sys.executable,
            "-m",
            "sandbox.capi.infra",
            "--kubeconfig",
            str(self.kubeconfig(cluster.name)),
        ]
        ready = "stand-in infrastructure provider running"
        await self._ready([self._spawn(f"stand-in-infrastructure-{cluster.name}", args, ready_text=ready)])

    async def start_management(self, cluster: str) -> kube.Kube:
        """Another management cluster, ``cluster`` (say the target of ``clusterctl move``), with
        ``mgmt``'s CRDs and the same ``Site`` objects; its client. Stopped with the rest; a hub
        on it is ``Broker.start_hub``."""
        if self.options.kubernetes == "real":
            await self._start_real([cluster])
        else:
            await self._ready([self._emulator(cluster, self._crds(cluster))])
        await self._client(cluster)
        await self._apply_sites(self._kube(cluster))
        return self._kube(cluster)

    async def _client(self, cluster: str) -> None:
        api_client = await kube.api_client_from_kubeconfig(self.kubeconfig(cluster))
        self._api_clients[cluster] = api_client
        self._kubes[cluster] = kube.Kube(api_client)

    async def _apply_sites(self, management: kube.Kube) -> None:
        """The placement authorization: what `site add` wrote, applied as an operator would."""
        for site in self.sites:
            manifest = yaml.safe_load(self.site_manifest(site).read_text())
            with contextlib.suppress(kerrors.Conflict):
                await management.create(resources.SITE, manifest)

    async def _connect(self) -> None:
        """A client per cluster, and what an operator applies before the broker starts."""
        for cluster in (MGMT, *self.sites):
            await self._client(cluster)
        await self._apply_sites(self.mgmt)
        for site in self.sites:
            with contextlib.suppress(kerrors.Conflict):
                await self._kubes[site].create(resources.NAMESPACE, {"metadata": {"name": self.namespace}})

    async def _disconnect(self) -> None:
        for site in self.kamaji_sites.values():
            await site.stop_tenants()
        for api_client in self._api_clients.values():
            with contextlib.suppress(Exception):
                await api_client.close()
        self._api_clients.clear()
        self._kubes.clear()

    def _start_simulators(self) -> list[processes.Child]:
        """A Kamaji simulator per site (not waited for: see ``_ready``); none where the real
        operator runs."""
        if self.options.kamaji == "real":
            return []
        return [self._simulator(i, site) for i, site in enumerate(self.sites)]

    def _render_crds(self) -> list[Path]:
        """The RKCP, RKCP template and Site CRDs, as ``python -m hub.api.crds`` renders them, in DIR/crds/."""
        rendered = {
            crdgen.FILENAME: crdgen.render,
            crdgen.TEMPLATE_FILENAME: crdgen.render_template,
            crdgen.SITE_FILENAME: crdgen.render_site,
        }
        self.crds_dir.mkdir(parents=True, exist_ok=True)
        for filename, render in rendered.items():
            (self.crds_dir / filename).write_text(render())
        return [self.crds_dir / filename for filename in rendered]

    def _emulator(self, cluster: str, crd_files: list[Path]) -> processes.Child:
        kubeconfig = self.kubeconfig(cluster)
        args = [sys.executable, "-m", "sandbox.kubeapi", "--port", "0", "--kubeconfig", str(kubeconfig)]
        args += ["--name", cluster, "--host", self.host(cluster)]
        for path in crd_files:
            args += ["--crd", str(path)]
        # The emulator prints this line once it serves and its kubeconfig is written.
        return self._spawn_at(cluster, f"kubeapi-{cluster}", args, ready_text="(kubeconfig:")

    def _simulator(self, index: int, site: str) -> processes.Child:
        args = [sys.executable, "-m", "sandbox.kamaji", "--kubeconfig", str(self.kubeconfig(site))]
        args += ["--ready-delay", str(self.options.kamaji_delay), "--address-pool", _address_pool(index)]
        return self._spawn_at(site, f"kamaji-{site}", args, ready_text="kamaji simulator running")
