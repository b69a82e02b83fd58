"""A tenant API server behind every control plane Kamaji made at a site: the kubelet's part.

Every half second ``Tenants`` reads the site's Deployments of Kamaji (label
``kamaji.clastix.io/name``) and the Secrets and ConfigMaps of their namespaces, and for each
runs its kube-apiserver container as a process in the site's network namespace
(``sandbox.realkamaji.pods`` says what it runs): on the Service's cluster IP, which this machine
routes into the namespace (so the endpoint Kamaji reports, and the kubeconfig the hub hands
out, reach it), and under the Service's name ``<name>.<namespace>.svc`` in the namespace's
``/etc/hosts`` (the name Kamaji itself calls it by), storing in the site's DataStore under the
prefix Kamaji chose. Started again when what it runs changes (a certificate rotated, a flag) or
when it exits; stopped when its Deployment goes. The binary is this machine's kube-apiserver,
whatever version the Pod's image names.

It is the site's load balancer too: a Service of type LoadBalancer gets its cluster IP as its
external address (the Service network is what this machine routes into the site, as a
bare-metal balancer announces an address), so a control plane exposed that way is reachable,
and Kamaji, which waits for the address, goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import kube
from common.kube import resources
from sandbox import processes
from sandbox.realkamaji import pods
from sandbox.sitenet import Namespace

__all__ = ["LABEL", "Tenants"]

LABEL = "kamaji.clastix.io/name"
DEPLOYMENT = resources.Resource("apps", "v1", "deployments", "Deployment")
CONFIG_MAP = resources.Resource("", "v1", "configmaps", "ConfigMap")
SERVICE = resources.Resource("", "v1", "services", "Service")
INTERVAL = 0.5

log = logging.getLogger(__name__)


@dataclass
class _Running:
    child: processes.Child
    fingerprint: str


class Tenants:
    """Runs until cancelled (``run``); ``stop`` ends every tenant API server."""

    def __init__(self, directory: Path, *, site: str, netns: Namespace, kube_apiserver: Path) -> None:
        self.directory = directory
        self.site = site
        self.netns = netns
        self.kube_apiserver = kube_apiserver
        self.running: dict[tuple[str, str], _Running] = {}
        self._starting: asyncio.Future[None] | None = None

    async def run(self, client: kube.Kube) -> None:
        while True:
            try:
                await self.sync(client)
            except Exception as exc:  # the API server restarting: the next round reads again
                log.warning("site %s: tenant API servers not synced: %s", self.site, exc)
            await asyncio.sleep(INTERVAL)

    async def sync(self, client: kube.Kube) -> None:
        await self._balance(client)
        deployments = (await client.list(DEPLOYMENT, label_selector=LABEL)).items
        sources: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        wanted: set[tuple[str, str]] = set()
        for deployment in deployments:
            meta = deployment["metadata"]
            key = (str(meta["namespace"]), str(meta["name"]))
            if key[0] not in sources:
                sources[key[0]] = await self._sources(client, key[0])
            secrets, maps = sources[key[0]]
            root = self.directory / key[0] / key[1]
            try:
                launch = pods.launch(deployment, secrets=secrets, config_maps=maps, root=str(root))
            except pods.MissingSource:
                continue  # Kamaji has not written it yet
            wanted.add(key)
            running = self.running.get(key)
            if (
                running is not None
                and running.fingerprint == launch.fingerprint
                and running.child.returncode is None
            ):
                continue
            if running is not None:
                await self._stop(key)
            # Shielded: a stop cancelling the loop waits for a start under way (``stop``), so no
            # server is started after ``stop`` has looked at ``running``.
            self._starting = asyncio.ensure_future(asyncio.to_thread(self._start, key, launch, root))
            await asyncio.shield(self._starting)
        for key in set(self.running) - wanted:
            await self._stop(key)

    async def _balance(self, client: kube.Kube) -> None:
        """Every LoadBalancer Service without an address gets its cluster IP as one."""
        for service in (await client.list(SERVICE)).items:
            spec, status = service.get("spec") or {}, service.get("status") or {}
            if spec.get("type") != "LoadBalancer" or (status.get("loadBalancer") or {}).get("ingress"):
                continue
            cluster_ip = spec.get("clusterIP")
            if not cluster_ip or cluster_ip == "None":
                continue
            meta = service["metadata"]
            ingress = {"status": {"loadBalancer": {"ingress": [{"ip": cluster_ip, "ipMode": "VIP"}]}}}
            await client.patch(
                SERVICE, meta["name"], ingress, namespace=meta["namespace"], subresource="status"
            )

    async def _sources(self, client: kube.Kube, namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
        secrets = {
            s["metadata"]["name"]: s.get("data") or {}
            for s in (await client.list(resources.SECRET, namespace=namespace)).items
        }
        maps = {
            m["metadata"]["name"]: m.get("data") or {}
            for m in (await client.list(CONFIG_MAP, namespace=namespace)).items
        }
        return secrets, maps

    def _start(self, key: tuple[str, str], launch: pods.Launch, root: Path) -> None:
        for relative, content in launch.files.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            _write(path, content)
        self.netns.add_address(launch.address)
        namespace, name = key
        self.netns.write_hosts({f"{name}.{namespace}.svc": launch.address})
        args = [*self.netns.exec_prefix(), str(self.kube_apiserver), *launch.args[1:]]
        child = processes.Child(
            name=f"tenant-{namespace}-{name}-{self.site}", args=args, log=root / "kube-apiserver.log"
        )
        child.start()
        self.running[key] = _Running(child=child, fingerprint=launch.fingerprint)
        log.info(
            "site %s: tenant API server of %s/%s started on %s:%d",
            self.site,
            namespace,
            name,
            launch.address,
            launch.port,
        )

    async def _stop(self, key: tuple[str, str]) -> None:
        running = self.running[key]
        running.child.terminate()
        await asyncio.shield(running.child.wait_stopped(timeout=10))
        del self.running[key]

    async def stop(self) -> None:
        """Every tenant API server, once a start under way has finished (call after the loop is
        cancelled)."""
        if self._starting is not None:
            await asyncio.gather(self._starting, return_exceptions=True)
        for key in list(self.running):
            with contextlib.suppress(Exception):
                await self._stop(key)


def _write(path: Path, content: bytes) -> None:
    """A mounted file: readable by its owner alone (private keys among them)."""
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_bytes(content)
