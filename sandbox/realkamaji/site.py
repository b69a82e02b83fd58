"""One site of the real backend running the real Kamaji operator.

In a network namespace of its own (``sandbox.sitenet``), the site is:

- a real cluster (``sandbox.realkube.Cluster``: etcd, kube-apiserver, kube-controller-manager,
  kube-scheduler) with Kamaji's CRDs, as its module ships them;
- kwok with fake Nodes, so the Deployments Kamaji makes get Pods that are scheduled, Running and
  Ready without a kubelet;
- the DataStore (``sandbox.realkamaji.datastore``), an etcd with TLS, and the ``DataStore``
  object naming it, Kamaji's default;
- the Kamaji operator (``kamaji manager``) as the cluster's admin, its webhooks served with a
  certificate of our own (bind-mounted where the operator reads it: its path is fixed) and
  registered by URL (``sandbox.realkamaji.webhooks``), so its admission applies;
- a tenant API server behind every control plane (``sandbox.realkamaji.tenants``), at the
  endpoint Kamaji reports.

``start`` brings them up in that order and waits for each; ``stop`` ends them in reverse and
removes the namespace. Every process is a ``sandbox.processes.Child`` named
``<component>-<site>``, so faults can be injected by name like any other.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import yaml

from common import kube
from common.files import atomic, tls
from common.kube import resources
from sandbox import ports, processes, realkube
from sandbox.kamaji import crds as install
from sandbox.realkamaji import binaries as kamaji_binaries
from sandbox.realkamaji import datastore as store
from sandbox.realkamaji import tenants as tenant_servers
from sandbox.realkube import binaries as kube_binaries
from sandbox.realkube import webhooks
from sandbox.sitenet import Namespace

__all__ = ["KAMAJI_NAMESPACE", "NODES", "Site"]

KAMAJI_NAMESPACE = "kamaji-system"
NODES = 2
WEBHOOK_PORT = 9443
"""Fixed in the operator (it offers no flag), hence the namespace per site."""
MUTATING = ("MutatingWebhookConfiguration", "kamaji-mutating-webhook-configuration")
VALIDATING = ("ValidatingWebhookConfiguration", "kamaji-validating-webhook-configuration")
WEBHOOK_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
"""Where the operator reads its serving certificate (fixed too): each site's is bind-mounted there."""

NODE = resources.Resource("", "v1", "nodes", "Node", namespaced=False)
DATA_STORE = resources.Resource("kamaji.clastix.io", "v1alpha1", "datastores", "DataStore", namespaced=False)
CONFIGURATIONS = {
    "MutatingWebhookConfiguration": resources.Resource(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
    ),
    "ValidatingWebhookConfiguration": resources.Resource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
    ),
}
KWOK_ANNOTATION = "kwok.x-k8s.io/node"


def node_manifest(name: str) -> dict[str, Any]:
    """A fake Node kwok manages: room for every control plane's Pods."""
    room = {"cpu": "64", "memory": "256Gi", "pods": "500"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION: "fake"},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok"},
        },
        "status": {"allocatable": room, "capacity": room},
    }


class Site:
    """Site ``name`` in ``directory``; after ``start``, ``cluster`` (its API) and ``netns``."""

    def __init__(self, directory: Path, *, name: str, index: int) -> None:
        self.directory = directory
        self.name = name
        self.index = index
        self.netns: Namespace | None = None
        self.cluster: realkube.Cluster | None = None
        self.children: dict[str, processes.Child] = {}
        self.tenants: tenant_servers.Tenants | None = None
        self._tenants_task: asyncio.Task[None] | None = None
        self._tenants_client: Any = None
        self.started_in = 0.0

    @property
    def kubeconfig(self) -> Path:
        if self.cluster is None:
            raise RuntimeError(f"site {self.name} is not started")
        return self.cluster.kubeconfig

    def _child(self, component: str, args: list[str], **probe: Any) -> processes.Child:
        child = processes.Child(
            name=f"{component}-{self.name}",
            args=args,
            log=self.directory / "logs" / f"{component}.log",
            **probe,
        )
        self.children[component] = child
        return child

    async def start(self, *, timeout: float = 120.0) -> None:
        began = time.monotonic()
        kb = kamaji_binaries.find()
        binaries = kube_binaries.find()
        try:
            self.netns = await asyncio.to_thread(Namespace.create, self.index)
            self.cluster = realkube.Cluster(
                self.directory / "kube", name=self.name, binaries=binaries, scheduler=True, netns=self.netns
            )
            await self.cluster.start(timeout=timeout)
            api_client = await kube.api_client_from_kubeconfig(self.kubeconfig)
            try:
                client = kube.Kube(api_client)
                await install.install(api_client, kb.crds, timeout=timeout)
                await self._create(client, resources.NAMESPACE, {"metadata": {"name": KAMAJI_NAMESPACE}})
                await self._start_datastore(client, binaries.etcd, timeout=timeout)
                await self._start_kwok(client, kb.kwok, kb.kwok_stages, timeout=timeout)
                await self._start_operator(client, kb, deadline=began + timeout)
            finally:
                await api_client.close()
            await self._start_tenants(binaries.kube_apiserver)
        except BaseException:
            await self.stop()
            raise
        self.started_in = time.monotonic() - began

    async def _create(
        self, client: kube.Kube, resource: resources.Resource, manifest: dict[str, Any]
    ) -> None:
        body = {"apiVersion": resource.api_version, "kind": resource.kind, **manifest}
        namespace = body.get("metadata", {}).get("namespace")
        await client.create_or_replace(resource, body, namespace=namespace, attempts=5)

    async def _start_datastore(self, client: kube.Kube, etcd: Path, *, timeout: float) -> None:
        assert self.netns is not None
        ds = store.DataStore(
            self.directory / "datastore", host=self.netns.address, etcd=etcd, prefix=self.netns.exec_prefix()
        )
        await asyncio.to_thread(ds.generate)
        child = ds.child(log=self.directory / "logs" / "datastore.log")
        child.name = f"datastore-{self.name}"
        self.children["datastore"] = child
        child.start()
        await child.wait_ready(timeout=timeout)
        secret, data_store = ds.manifests(KAMAJI_NAMESPACE)
        await self._create(client, resources.SECRET, secret)
        await self._create(client, DATA_STORE, data_store)

    async def _start_kwok(self, client: kube.Kube, kwok: Path, stages: Path, *, timeout: float) -> None:
        assert self.netns is not None and self.cluster is not None
        args = [*self.netns.exec_prefix(), str(kwok), f"--kubeconfig={self.kubeconfig}"]
        args += [
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
        ]
        args += [
            "--cidr=10.244.0.0/16",
            f"--node-ip={self.netns.address}",
            "--server-address=127.0.0.1:10247",
        ]
        # Nodes renew a Lease, as kubelets do: the node lifecycle controller keeps them Ready.
        args += [f"--config={stages}", "--node-lease-duration-seconds=40"]
        self._child("kwok", args).start()
        for i in range(NODES):
            await self._create(client, NODE, node_manifest(f"{self.name}-node-{i}"))
        await self._until(lambda: self._nodes_ready(client), what="kwok's Nodes Ready", timeout=timeout)

    async def _nodes_ready(self, client: kube.Kube) -> bool:
        ready = 0
        for i in range(NODES):
            node = await client.get_or_none(NODE, f"{self.name}-node-{i}")
            conditions = ((node or {}).get("status") or {}).get("conditions") or []
            ready += any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        return ready == NODES

    async def _until(self, check: Any, *, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not await check():
            for child in self.children.values():
                if child.returncode is not None:
                    raise processes.LaunchError(
                        f"{child.name} exited with code {child.returncode} while waiting for {what}; "
                        f"end of {child.log}:\n{processes.tail(child.log)}"
                    )
            if time.monotonic() > deadline:
                raise processes.LaunchError(f"site {self.name}: no {what} after {timeout:.0f} s")
            await asyncio.sleep(0.2)

    def _webhook_certs(self) -> tuple[Path, bytes]:
        """Our serving certificate for the operator's webhooks, laid out as it reads it, and the
        directories the operator's command needs."""
        WEBHOOK_CERT_DIR.mkdir(parents=True, exist_ok=True)
        (self.directory / "kamaji-tmp").mkdir(parents=True, exist_ok=True)
        pki = self.directory / "webhook-pki"
        made = tls.generate(pki, hosts=("127.0.0.1",))
        ca = pki / tls.CA_CERT
        certs = self.directory / "webhook-certs"
        certs.mkdir(parents=True, exist_ok=True)
        for source, name in ((made.cert, "tls.crt"), (ca, "ca.crt")):
            atomic.write_public(certs / name, source.read_text())
        atomic.write_private(certs / "tls.key", made.key.read_text())
        return certs, ca.read_bytes()

    async def _start_operator(
        self, client: kube.Kube, kb: kamaji_binaries.KamajiBinaries, *, deadline: float
    ) -> None:
        assert self.netns is not None
        certs, ca_pem = await asyncio.to_thread(self._webhook_certs)
        health = ports.free_port()
        tmp = self.directory / "kamaji-tmp"
        # `ip netns exec` gives the command a mount namespace of its own: the bind mount is seen
        # by this operator alone.
        mount = 'mount --bind "$0" ' + str(WEBHOOK_CERT_DIR) + ' && exec "$@"'
        args = [*self.netns.exec_prefix(), "sh", "-c", mount, str(certs), str(kb.kamaji), "manager"]
        args += ["--leader-elect=false", "--metrics-bind-address=0"]
        args += [f"--health-probe-bind-address={self.netns.address}:{health}"]
        args += [
            f"--datastore={store.NAME}",
            f"--pod-namespace={KAMAJI_NAMESPACE}",
            "--serviceaccount-name=kamaji",
        ]
        args += [
            "--webhook-service-name=kamaji-webhook-service",
            f"--tmp-directory={tmp}",
            "--disable-telemetry",
        ]
        args += [f"--webhook-ca-path={WEBHOOK_CERT_DIR / 'ca.crt'}"]
        env = processes.child_env({"KUBECONFIG": str(self.kubeconfig)})
        child = self._child("kamaji", args, env=env, health_url=f"http://{self.netns.address}:{health}")
        child.start()
        await child.wait_ready(timeout=max(1.0, deadline - time.monotonic()))
        for kind_name, source in ((MUTATING, "mutating"), (VALIDATING, "validating")):
            rules = yaml.safe_load((kb.webhooks / f"{source}-webhook.yaml").read_text())
            config = webhooks.configuration(
                kind_name, rules, host="127.0.0.1", port=WEBHOOK_PORT, ca_pem=ca_pem
            )
            await self._create(client, CONFIGURATIONS[kind_name[0]], config)

    async def _start_tenants(self, kube_apiserver: Path) -> None:
        assert self.netns is not None
        self.tenants = tenant_servers.Tenants(
            self.directory / "tenants", site=self.name, netns=self.netns, kube_apiserver=kube_apiserver
        )
        self._tenants_client = await kube.api_client_from_kubeconfig(self.kubeconfig)
        self._tenants_task = asyncio.create_task(self.tenants.run(kube.Kube(self._tenants_client)))

    async def stop_tenants(self) -> None:
        """Stop following Kamaji's Deployments and every tenant API server; safe to repeat."""
        if self._tenants_task is not None:
            self._tenants_task.cancel()
            await asyncio.gather(self._tenants_task, return_exceptions=True)
            self._tenants_task = None
        if self.tenants is not None:
            await self.tenants.stop()
        if self._tenants_client is not None:
            await self._tenants_client.close()
            self._tenants_client = None

    async def stop(self, *, timeout: float = 10.0) -> None:
        """Every process in reverse order, then the cluster, then the namespace (``release``)."""
        await self.stop_tenants()
        for child in reversed(list(self.children.values())):
            child.terminate()
            await child.wait_stopped(timeout=timeout)
        if self.cluster is not None:
            await self.cluster.stop(timeout=timeout)
        await self.release()

    async def release(self) -> None:
        """Remove the network namespace (once its processes are stopped); safe to repeat."""
        if self.netns is not None:
            netns, self.netns = self.netns, None
            await asyncio.to_thread(netns.delete)
