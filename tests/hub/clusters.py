"""The two clusters of a ``World`` (tests/hub/conftest.py): the management cluster and site-a,
and who acts on them.

``emulated`` starts two ``sandbox.kubeapi`` servers for one test; everyone on them is the
admin, since the emulator authorizes no ordinary request (``sandbox.kubeapi.DEVIATIONS``).
``RealPair`` is two real clusters (``sandbox.realkube``) for the whole session, set up once as
an operator installs the broker: ``deploy/hub`` applied to the management cluster, and the
agent chart's ServiceAccount and RBAC for target namespace ``tenants`` at the site. ``real``
hands one test the kubeconfigs of those ServiceAccounts (never the admin's) and, on its way
out, removes what the test made, so that every test starts from the same empty clusters.
Tenants of the management cluster are ServiceAccounts as well, each bound to a Role in its own
namespace only (``RealPair.tenant``), as a CAPI tenant is.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from common import kube as ckube
from common.kube import errors as kerrors
from common.kube import resources
from hub.api import crds as crdgen
from sandbox import crds, kubeapi, processes, realkube
from sandbox.kamaji import crds as crd_install
from sandbox.launcher import installs
from tests import helpers
from tests.deploy import manifests

ROOT = Path(__file__).resolve().parents[2]
MGMT_CRDS = (
    crds.CLUSTER,
    ROOT / "deploy" / "crds" / crdgen.FILENAME,
    ROOT / "deploy" / "crds" / crdgen.SITE_FILENAME,
)
"""The management cluster's CRDs: CAPI's Cluster (compact), the RKCP and the Site."""
TARGET_NAMESPACE = "tenants"
"""The site's namespace for TenantControlPlanes: the agent's only one on a real site."""
TENANT = "capi-tenant"
"""The ServiceAccount a tenant acts as, in the tenant's own namespace."""
ROLE = resources.Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDING = resources.Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
WRITE = ["get", "list", "watch", "create", "update", "patch", "delete"]
TENANT_RULES = [
    {"apiGroups": [group], "resources": [resource], "verbs": verbs}
    for group, resource, verbs in (
        ("cluster.x-k8s.io", "clusters", WRITE),
        ("controlplane.cluster.x-k8s.io", "remotekamajicontrolplanes", WRITE),
        ("", "secrets", WRITE),
        ("", "events", ["get", "list", "watch"]),
    )
]
"""What a tenant of Cluster API may do in its own namespace: its Clusters, control planes and
Secrets (its workload cluster's kubeconfig among them), and read the Events about them."""
KEPT = frozenset({"kube-system", "kube-public", "kube-node-lease", installs.SYSTEM_NAMESPACE})
"""Namespaces whose Secrets a wipe leaves: the clusters' and the broker's own."""


@dataclass(frozen=True)
class Clusters:
    """Kubeconfigs of one World, by who uses them."""

    backend: str
    """``emulator`` or ``real`` (``tests.systems.BACKENDS``)."""
    mgmt: Path
    """The management cluster's admin: the test itself, and the operator (Site objects)."""
    site: Path
    """Site-a's admin: the test and the Kamaji simulator."""
    hub: Path
    agent: Path
    agent_namespaces: tuple[str, ...]
    """The agent's ``--namespaces`` (empty: all), which its RBAC covers."""
    tenant: Callable[[str], Awaitable[Path]]
    """The kubeconfig of the tenant of a namespace; the namespace is made on first use."""

    @property
    def rbac(self) -> bool:
        """Whether the API server refuses what RBAC does not grant (only a real one does)."""
        return self.backend == "real"

    @property
    def cel(self) -> bool:
        """Whether the API server evaluates the CRDs' CEL rules (only a real one does)."""
        return self.backend == "real"


@contextlib.asynccontextmanager
async def emulated(tmp_path: Path) -> AsyncIterator[Clusters]:
    """Two emulators of this test's own, with their CRDs; every identity is the admin."""
    mgmt_server = kubeapi.Server(name="mgmt")
    site_server = kubeapi.Server(name="site-a")
    await mgmt_server.start(port=0)
    await site_server.start(port=0)
    try:
        for path in MGMT_CRDS:
            await mgmt_server.apply_crd(yaml.safe_load(path.read_text()))
        await site_server.apply_crd(yaml.safe_load(crds.TENANT_CONTROL_PLANE.read_text()))
        mgmt = mgmt_server.write_kubeconfig(tmp_path / "mgmt")
        site = site_server.write_kubeconfig(tmp_path / "site")
        async with _admin(site) as admin:
            await _namespace(admin, TARGET_NAMESPACE)

        async def tenant(namespace: str) -> Path:
            async with _admin(mgmt) as admin:
                await _namespace(admin, namespace)
            return mgmt

        yield Clusters("emulator", mgmt, site, hub=mgmt, agent=site, agent_namespaces=(), tenant=tenant)
    finally:
        await mgmt_server.stop()
        await site_server.stop()


@contextlib.asynccontextmanager
async def real(pair: RealPair) -> AsyncIterator[Clusters]:
    """``pair``'s clusters for one test, wiped when it is done."""
    try:
        yield Clusters(
            "real", pair.mgmt.kubeconfig, pair.site.kubeconfig, hub=pair.hub, agent=pair.agent,
            agent_namespaces=(TARGET_NAMESPACE,), tenant=pair.tenant,
        )  # fmt: skip
    finally:
        await pair.wipe()


class RealPair:
    """A real management cluster and a real site-a, with the broker installed on each."""

    def __init__(self, directory: Path, binaries: realkube.Binaries) -> None:
        self.directory = directory
        self.mgmt = realkube.Cluster(directory / "mgmt", name="mgmt", binaries=binaries)
        self.site = realkube.Cluster(directory / "site-a", name="site-a", binaries=binaries)
        self.hub = directory / "identities" / "hub.kubeconfig"
        self.agent = directory / "identities" / "agent.kubeconfig"
        self._tenants: dict[str, Path] = {}

    async def start(self) -> None:
        """Both clusters side by side, then what the operator installs on each."""
        started = await asyncio.gather(self.mgmt.start(), self.site.start(), return_exceptions=True)
        failed = [e for e in started if isinstance(e, BaseException)]
        if failed:
            await self.stop()
            raise failed[0]
        await asyncio.gather(self._install_hub(), self._install_agent())

    async def stop(self) -> None:
        await asyncio.gather(self.mgmt.stop(), self.site.stop())

    async def _install_hub(self) -> None:
        """The CRDs, then ``kubectl apply --server-side -k deploy/hub`` as the install docs have it."""
        await _crds(self.mgmt, MGMT_CRDS)
        args = [str(self.mgmt.binaries.kubectl), "--kubeconfig", str(self.mgmt.kubeconfig), "apply"]
        args += ["--server-side", "--force-conflicts", "-k", str(installs.DEPLOY / "hub")]
        await asyncio.to_thread(processes.run, args, log=self.directory / "setup.log")
        await self.mgmt.service_account_kubeconfig(
            namespace=installs.SYSTEM_NAMESPACE, name=installs.HUB_SERVICE_ACCOUNT, path=self.hub
        )

    async def _install_agent(self) -> None:
        """The TCP CRD, the target namespace, and the chart's ServiceAccount and RBAC for it."""
        await _crds(self.site, [crds.TENANT_CONTROL_PLANE])
        async with _admin(self.site.kubeconfig) as admin:
            for namespace in (TARGET_NAMESPACE, installs.SYSTEM_NAMESPACE):
                await _namespace(admin, namespace)
        rbac = self.directory / "agent-rbac.yaml"
        rbac.write_text(yaml.safe_dump_all(_agent_rbac()))
        args = [str(self.site.binaries.kubectl), "--kubeconfig", str(self.site.kubeconfig), "apply"]
        await asyncio.to_thread(processes.run, [*args, "-f", str(rbac)], log=self.directory / "setup.log")
        await self.site.service_account_kubeconfig(
            namespace=installs.SYSTEM_NAMESPACE, name=installs.AGENT_RELEASE, path=self.agent
        )

    async def tenant(self, namespace: str) -> Path:
        """The kubeconfig of ``namespace``'s tenant: on first use the operator makes the
        namespace, the tenant's ServiceAccount and its Role there (``TENANT_RULES``)."""
        if namespace not in self._tenants:
            async with _admin(self.mgmt.kubeconfig) as admin:
                await _onboard(admin, namespace)
            path = self.directory / "identities" / f"tenant-{namespace}.kubeconfig"
            await self.mgmt.service_account_kubeconfig(namespace=namespace, name=TENANT, path=path)
            self._tenants[namespace] = path
        return self._tenants[namespace]

    async def wipe(self) -> None:
        """Remove what a test made: RKCPs, Clusters, Sites and Secrets of the management cluster,
        TCPs and Secrets at the site (finalizers dropped: their controllers are stopped).
        Namespaces and tenants stay, for the next test."""
        async with _admin(self.mgmt.kubeconfig) as mgmt, _admin(self.site.kubeconfig) as site:
            for r in (resources.REMOTE_KAMAJI_CONTROL_PLANE, resources.CLUSTER, resources.SITE):
                await _remove(mgmt, r)
            await _remove(mgmt, resources.SECRET)
            await _remove(site, resources.TENANT_CONTROL_PLANE)
            await _remove(site, resources.SECRET)


def _agent_rbac() -> list[dict[str, Any]]:
    """The agent chart's ServiceAccount, Roles and bindings for ``--namespaces tenants``, as
    Helm renders them (the chart's other objects are the pod's, which runs here as a task)."""
    values = {
        "site": "site-a",
        "nats": {"url": "tls://127.0.0.1:4222", "tls": {"existingConfigMap": "kamaji-broker-nats-ca"}},
        "credentials": {"existingSecret": "kamaji-broker-agent-nats"},
        "hubPublicKeys": {"existingConfigMap": "kamaji-broker-hub-keys"},
        "namespaces": [TARGET_NAMESPACE],
    }
    kinds = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
    rendered = manifests.render_chart(values, namespace=installs.SYSTEM_NAMESPACE)
    return [d for d in manifests.documents(rendered) if d.get("kind") in kinds]


@contextlib.asynccontextmanager
async def _admin(kubeconfig: Path) -> AsyncIterator[ckube.Kube]:
    client = await ckube.connect(in_cluster=False, kubeconfig=kubeconfig)
    try:
        yield client
    finally:
        await client.close()


async def _crds(cluster: realkube.Cluster, paths: Any) -> None:
    api_client = await ckube.api_client_from_kubeconfig(cluster.kubeconfig)
    try:
        await crd_install.install(api_client, paths)
    finally:
        await api_client.close()


async def _namespace(admin: ckube.Kube, name: str) -> None:
    with contextlib.suppress(kerrors.Conflict):
        await admin.create(resources.NAMESPACE, {"metadata": {"name": name}})


async def _onboard(admin: ckube.Kube, namespace: str) -> None:
    """Namespace, ServiceAccount ``TENANT``, and a Role of ``TENANT_RULES`` bound to it."""
    await _namespace(admin, namespace)
    meta = {"name": TENANT, "namespace": namespace}
    subject = {"kind": "ServiceAccount", "name": TENANT, "namespace": namespace}
    role_ref = {"apiGroup": ROLE.group, "kind": "Role", "name": TENANT}
    for r, body in (
        (resources.SERVICE_ACCOUNT, {"metadata": meta}),
        (ROLE, {"metadata": meta, "rules": TENANT_RULES}),
        (ROLE_BINDING, {"metadata": meta, "roleRef": role_ref, "subjects": [subject]}),
    ):
        await admin.create_or_replace(r, body, namespace=namespace)


async def _remove(admin: ckube.Kube, r: resources.Resource) -> None:
    """Every object of ``r`` outside ``KEPT``, finalizers dropped, deleted; until none is left."""

    async def left() -> list[dict[str, Any]]:
        found = (await admin.list(r)).items
        return [o for o in found if o["metadata"].get("namespace") not in KEPT]

    for obj in await left():
        meta = obj["metadata"]
        with contextlib.suppress(kerrors.NotFound):
            if meta.get("finalizers"):
                patch = {"metadata": {"finalizers": None}}
                await admin.patch(r, meta["name"], patch, namespace=meta.get("namespace"))
            await admin.delete(r, meta["name"], namespace=meta.get("namespace"))

    async def none_left() -> bool:
        return not await left()

    await helpers.eventually(none_left, within=30, what=f"every {r.kind} removed")
