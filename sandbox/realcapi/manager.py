"""Cluster API's core manager on a real management cluster: its CRDs, its webhooks by URL, the
process.

``CoreManager.start`` points Cluster API's CRDs at the manager for conversions between their
versions (``sandbox.realkube.webhooks.conversion``; the CRDs ``clusterctl init`` installed are
patched, any missing one is installed), runs ``capi-manager`` (the Cluster, ClusterClass,
topology and Machine controllers and their webhooks, ClusterTopology on) as the cluster's admin,
and registers its defaulting and validating webhooks by URL once it is ready (replacing the
Service-based ones clusterctl applied, whose Service has no pod behind it and whose CA
cert-manager would inject: what a Deployment, its Service and cert-manager do in a real cluster).
The manager's webhook server listens on every address of its host and its port is fixed, so it
runs in the management cluster's network namespace (``sandbox.sitenet``), beside that cluster's
own servers; its certificate is ours, for that namespace's address. Talks to the management
cluster and the operating system.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Final

import yaml

from common import kube
from common.files import atomic, tls
from common.kube import resources
from sandbox import ports, processes, realkube
from sandbox.kamaji import crds as install
from sandbox.realcapi import binaries as capi_binaries
from sandbox.realkube import webhooks

__all__ = ["WEBHOOK_PORT", "CoreManager"]

WEBHOOK_PORT: Final = 9443
CONFIGURATIONS: Final = {
    "MutatingWebhookConfiguration": resources.Resource(
        "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration"
    ),
    "ValidatingWebhookConfiguration": resources.Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
    ),
}
NAMES: Final = {
    "MutatingWebhookConfiguration": "capi-mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "capi-validating-webhook-configuration",
}
"""As Cluster API's components name them (``capi-`` and controller-gen's name)."""


class CoreManager:
    """Cluster API's manager for ``cluster`` (started in a network namespace); ``start``, ``stop``."""

    def __init__(self, directory: Path, *, cluster: realkube.Cluster) -> None:
        if cluster.netns is None:
            raise ValueError(
                f"cluster {cluster.name} must run in a network namespace for Cluster API's manager"
            )
        self.directory = directory
        self.cluster = cluster
        self.child: processes.Child | None = None

    @property
    def host(self) -> str:
        return self.cluster.host

    def _certs(self) -> tuple[Path, bytes]:
        """Our serving certificate for the manager's webhooks, as it reads them, and its CA."""
        made = tls.generate(self.directory / "webhook-pki", hosts=(self.host,))
        certs = self.directory / "webhook-certs"
        certs.mkdir(parents=True, exist_ok=True)
        atomic.write_public(certs / "tls.crt", made.cert.read_text())
        atomic.write_private(certs / "tls.key", made.key.read_text())
        return certs, (self.directory / "webhook-pki" / tls.CA_CERT).read_bytes()

    async def _crds(
        self, client: kube.Kube, cb: capi_binaries.CapiBinaries, ca_pem: bytes, timeout: float
    ) -> None:
        """Cluster API's CRDs converting through the manager: patched where installed (labels
        and all else as clusterctl left them), installed where missing."""
        missing = []
        for source in cb.crds:
            crd = yaml.safe_load(source.read_text())
            made = webhooks.conversion(crd, host=self.host, port=WEBHOOK_PORT, ca_pem=ca_pem)
            name = made["metadata"]["name"]
            if await client.get_or_none(resources.CUSTOM_RESOURCE_DEFINITION, name) is None:
                out = self.directory / "crds" / source.name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(yaml.safe_dump(made, sort_keys=False))
                missing.append(out)
            elif "conversion" in made["spec"]:
                # A merge patch: the Service clusterctl's components name goes (null), the URL comes.
                conversion = made["spec"]["conversion"]
                client_config = {**conversion["webhook"]["clientConfig"], "service": None}
                patch = {
                    "spec": {
                        "conversion": {
                            **conversion,
                            "webhook": {**conversion["webhook"], "clientConfig": client_config},
                        }
                    }
                }
                await client.patch(resources.CUSTOM_RESOURCE_DEFINITION, name, patch)
        if missing:
            await install.install(client.api_client, missing, timeout=timeout)

    async def _webhooks(self, client: kube.Kube, cb: capi_binaries.CapiBinaries, ca_pem: bytes) -> None:
        for document in yaml.safe_load_all(cb.webhooks.read_text()):
            if not document:
                continue
            kind = document["kind"]
            config = webhooks.configuration(
                (kind, NAMES[kind]), document["webhooks"], host=self.host, port=WEBHOOK_PORT, ca_pem=ca_pem
            )
            existing = await client.get_or_none(CONFIGURATIONS[kind], NAMES[kind])
            if existing is not None:
                # clusterctl's labels stay (its inventory and move read them).
                config["metadata"]["labels"] = existing["metadata"].get("labels") or {}
            await client.create_or_replace(CONFIGURATIONS[kind], config, attempts=5)

    async def start(self, *, timeout: float = 90.0) -> None:
        """CRDs, the manager, then its webhooks; ``LaunchError`` with the end of its log if it
        exits or is not ready within ``timeout``."""
        began = time.monotonic()
        cb = capi_binaries.find()
        certs, ca_pem = await asyncio.to_thread(self._certs)
        api_client = await kube.api_client_from_kubeconfig(self.cluster.kubeconfig)
        client = kube.Kube(api_client)
        try:
            await self._crds(client, cb, ca_pem, timeout)
            health, diagnostics = ports.free_port(), ports.free_port()
            assert self.cluster.netns is not None
            args = [
                *self.cluster.netns.exec_prefix(),
                str(cb.manager),
                f"--kubeconfig={self.cluster.kubeconfig}",
            ]
            args += [f"--webhook-port={WEBHOOK_PORT}", f"--webhook-cert-dir={certs}"]
            args += [
                f"--health-addr={self.host}:{health}",
                f"--diagnostics-address={self.host}:{diagnostics}",
            ]
            args += ["--insecure-diagnostics", "--leader-elect=false", "--feature-gates=ClusterTopology=true"]
            self.child = processes.Child(
                name=f"capi-manager-{self.cluster.name}",
                args=args,
                log=self.directory / "logs" / "capi-manager.log",
                health_url=f"http://{self.host}:{health}",
            )
            self.child.start()
            await self.child.wait_ready(timeout=max(1.0, timeout - (time.monotonic() - began)))
            await self._webhooks(client, cb, ca_pem)
        except BaseException:
            await self.stop()
            raise
        finally:
            await api_client.close()

    async def stop(self, *, timeout: float = 10.0) -> None:
        if self.child is not None:
            self.child.terminate()
            await self.child.wait_stopped(timeout=timeout)
