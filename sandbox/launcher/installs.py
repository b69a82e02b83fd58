"""What an operator installs on real clusters, and the identities the hub and agents run as there.

With ``Options.kubernetes`` ``"real"`` the hub's manifests are applied to a management cluster
as ``deploy/hub`` says (``kubectl apply --server-side -k deploy/hub``, kustomize built into
kubectl) and the agent's chart is installed at each site with Helm's own engine (the Go SDK of
helm-python-sdk, as ``helm install`` does). With no kubelet their Deployments never run a pod:
the hub and agents run as local processes instead, but as the ServiceAccounts those installs
created (a token from the TokenRequest API), bound by exactly the RBAC they installed. On the
emulator every process is the admin and nothing is installed. A layer of
``sandbox.launcher.system.System``, on top of the clusters and the NATS nodes (their URLs
are in the chart's values).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from sandbox import processes
from sandbox.launcher import overlays
from sandbox.launcher.clusters import Clusters
from sandbox.launcher.layout import DEPLOY
from sandbox.launcher.natsnodes import NatsNodes
from sandbox.launcher.options import MGMT

__all__ = ["AGENT_RELEASE", "DEPLOY", "SYSTEM_NAMESPACE", "Installs"]

SYSTEM_NAMESPACE = "kamaji-broker-system"
"""Where ``deploy/hub`` puts the hub and where the agent's chart is installed at a site."""
HUB_SERVICE_ACCOUNT = "kamaji-broker-hub"
AGENT_RELEASE = "kamaji-broker-agent"
"""The Helm release at each site: its ServiceAccount, and ``<release>-identity`` its Secret."""
EMULATED_IDENTITY_SECRET = "default/kamaji-broker-agent-nats"
"""On the emulator, where each site's agent keeps its own NATS key and JWT (operator mode): made
at its first start, from the bootstrap credential ``site add`` wrote."""


class Installs(NatsNodes, Clusters):
    """``hub_kubeconfig``, ``agent_kubeconfig``, ``agent_identity_secret`` and ``lease_namespace``
    for the processes; ``_install`` before they start."""

    @property
    def real(self) -> bool:
        return self.options.kubernetes == "real"

    @property
    def lease_namespace(self) -> str:
        """The hub replicas' Lease: in the hub's own namespace, the only one its Role grants."""
        return SYSTEM_NAMESPACE if self.real else "default"

    def hub_kubeconfig(self, cluster: str) -> Path:
        return (
            self.directory / "identities" / f"hub-{cluster}.kubeconfig"
            if self.real
            else self.kubeconfig(cluster)
        )

    def agent_kubeconfig(self, site: str) -> Path:
        return (
            self.directory / "identities" / f"agent-{site}.kubeconfig" if self.real else self.kubeconfig(site)
        )

    def agent_identity_secret(self, site: str) -> str:
        return f"{SYSTEM_NAMESPACE}/{AGENT_RELEASE}-identity" if self.real else EMULATED_IDENTITY_SECRET

    async def _install(self) -> None:
        """On real clusters: the hub's manifests on ``mgmt``, the agent's chart at every site."""
        if not self.real:
            return
        await asyncio.gather(self.install_hub(MGMT), *(self._install_agent(s) for s in self.sites))

    async def install_hub(self, cluster: str) -> None:
        """``kubectl apply --server-side -k deploy/hub`` on ``cluster`` (with ``hub_namespaces``,
        ``-k`` of the overlay ``overlays.namespaced`` writes), and the kubeconfig of the
        ServiceAccount it created (``hub_kubeconfig``)."""
        real = self.real_clusters[cluster]
        if self.options.capi == "real":
            # `clusterctl init` installed it with Cluster API (``Clusters._start_capi``).
            await real.service_account_kubeconfig(
                namespace=SYSTEM_NAMESPACE, name=HUB_SERVICE_ACCOUNT, path=self.hub_kubeconfig(cluster)
            )
            return
        args = [str(real.binaries.kubectl), "--kubeconfig", str(self.kubeconfig(cluster)), "apply"]
        args += ["--server-side", "--force-conflicts", "-k", str(self._hub_kustomization())]
        await asyncio.to_thread(processes.run, args, log=self.log("setup"))
        await real.service_account_kubeconfig(
            namespace=SYSTEM_NAMESPACE, name=HUB_SERVICE_ACCOUNT, path=self.hub_kubeconfig(cluster)
        )

    def _hub_kustomization(self) -> Path:
        watched = self.options.hub_namespaces
        if not watched:
            return DEPLOY / "hub"
        overlay = self.directory / "hub-namespaced"
        overlay.mkdir(exist_ok=True)
        files = overlays.namespaced(
            watched, overlay=overlay, deploy=DEPLOY, system_namespace=SYSTEM_NAMESPACE
        )
        for name, text in files.items():
            (overlay / name).write_text(text)
        return overlay

    def _hub_nats_url(self) -> str:
        return ",".join(self.nats_urls)

    async def _install_agent(self, site: str) -> None:
        values = self._agent_values(site)
        await asyncio.to_thread(_helm_install, self.kubeconfig(site), values)
        await self.real_clusters[site].service_account_kubeconfig(
            namespace=SYSTEM_NAMESPACE, name=AGENT_RELEASE, path=self.agent_kubeconfig(site)
        )

    def _agent_values(self, site: str) -> dict[str, Any]:
        """The chart's values as an operator gives them for this site (the Secret and ConfigMap
        they name are what its pod would mount; the local process is given the files)."""
        return {
            "site": site,
            "nats": {"url": ",".join(self.nats_urls), "tls": {"existingConfigMap": "kamaji-broker-nats-ca"}},
            "credentials": {
                "type": "operator",
                "existingSecret": f"{AGENT_RELEASE}-bootstrap",
                "key": "bootstrap.creds",
            },
            "hubPublicKeys": {"json": json.dumps(json.loads(self.hub_public_keys.read_text()))},
            "namespaces": [self.namespace],
            "heartbeatInterval": f"{self.options.heartbeat_interval:g}s",
        }


def _helm_install(kubeconfig: Path, values: dict[str, Any]) -> None:
    try:
        import helm_python
    except ImportError as exc:
        raise processes.LaunchError(
            "a real site's agent is installed with Helm's engine: install the `real` extra "
            "(pip install 'kamaji-broker[real]'; `make sandbox` and `make test` do)"
        ) from exc
    config = helm_python.Config(kubeconfig_path=str(kubeconfig), namespace=SYSTEM_NAMESPACE)
    try:
        chart = helm_python.Chart.load(str(DEPLOY / "charts" / "kamaji-broker-agent"))
        config.install(
            chart, AGENT_RELEASE, values, namespace=SYSTEM_NAMESPACE, create_namespace=True, timeout=60
        )
    except helm_python.HelmError as exc:
        raise processes.LaunchError(f"helm install {AGENT_RELEASE} failed: {exc}") from exc
    finally:
        config.close()
