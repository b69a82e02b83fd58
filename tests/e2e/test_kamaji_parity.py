"""The Kamaji simulator measured against the real Kamaji operator: the same scenario on both, a
TenantControlPlane created, upgraded, downgraded and deleted as the agent writes one, and what
each does with it observed the same way. ``SAME`` is what they must agree on; ``DIFFERENCES`` is
every way they differ, each as (simulator, real): an observation outside both fails the test,
and the docs' table (docs/getting-started/sandbox.md, "The simulator and the real Kamaji")
names exactly these rows."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from common import kube
from common.kube import errors as kerrors
from common.kube import resources
from sandbox import crds, realkamaji, realkube
from sandbox.kamaji import Simulator
from sandbox.kamaji import crds as install
from tests import helpers

pytestmark = pytest.mark.e2e

TCP = resources.TENANT_CONTROL_PLANE
NS = "tenants"
SANDBOX_PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started" / "sandbox.md"

SAME = (
    "reaches Ready",
    "has finalizer.kamaji.clastix.io",
    "<name>-ca and <name>-admin-kubeconfig with admin.conf",
    "admin.conf's server is the endpoint",
    "reports the upgraded version once Ready",
    "gone after delete, its Secrets too",
)

DIFFERENCES: dict[str, tuple[Any, Any]] = {
    "finalizers": (
        ("finalizer.kamaji.clastix.io",),
        ("finalizer.kamaji.clastix.io", "finalizer.kamaji.clastix.io/soot"),
    ),
    "Secrets": (
        ("admin-kubeconfig", "ca"),
        (
            "admin-kubeconfig",
            "api-server-certificate",
            "api-server-kubelet-client-certificate",
            "ca",
            "controller-manager-kubeconfig",
            "datastore-certificate",
            "datastore-config",
            "front-proxy-ca-certificate",
            "front-proxy-client-certificate",
            "sa-certificate",
            "scheduler-kubeconfig",
        ),
    ),
    "endpoint address": ("the simulator's pool", "the Service's load-balancer address"),
    "spec defaults written": (
        ("admissionControllers",),
        ("dataStore", "dataStoreSchema", "admissionControllers", "registrySettings"),
    ),
    "Deployment and Service": (False, True),
    "downgrade": ("accepted", "denied by its webhook"),
    "version above its newest (v1.34.0)": ("accepted", "denied by its webhook"),
}
"""Aspect → (simulator, real): every aspect ``observe`` finds different, and no other."""


async def every_finalizer(client: kube.Kube, name: str, *, since: str, into: set[str]) -> None:
    """Every finalizer ``name`` has from resourceVersion ``since`` until it is deleted, into ``into``."""
    async for event in client.watch(TCP, resource_version=since, namespace=NS, timeout_seconds=600):
        meta = event.object.get("metadata") or {}
        if event.type == "BOOKMARK" or meta.get("name") != name:
            continue
        into.update(meta.get("finalizers") or ())
        if event.type == "DELETED":
            return


async def statuses(
    client: kube.Kube, name: str, *, since: str, until: str, version: str, within: float = 90
) -> tuple[str, ...]:
    """The distinct ``version.status`` values written after resourceVersion ``since`` (a watch:
    none is missed, however short) until ``until`` at ``version``; a ``until`` at another version
    (the one before an upgrade) is not counted."""
    seen: list[str] = []
    async with asyncio.timeout(within):
        async for event in client.watch(
            TCP, resource_version=since, namespace=NS, timeout_seconds=int(within) + 5
        ):
            meta = event.object.get("metadata") or {}
            if event.type == "BOOKMARK" or meta.get("name") != name:
                continue
            got = (event.object.get("status") or {}).get("kubernetesResources", {}).get("version", {})
            status = got.get("status")
            if status == until and got.get("version") != version:
                continue
            if status and (not seen or seen[-1] != status):
                seen.append(status)
            if status == until:
                return tuple(seen)
    raise AssertionError(f"{name}: the watch ended before {until} at {version}; saw {seen}")


def manifest(name: str, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "kamaji.clastix.io/v1alpha1",
        "kind": "TenantControlPlane",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "controlPlane": {"deployment": {"replicas": 1}, "service": {"serviceType": "LoadBalancer"}},
            "kubernetes": {"version": version, "kubelet": {"cgroupfs": "systemd"}},
            "networkProfile": {"port": 6443},
        },
    }


async def refused(client: kube.Kube, name: str, version: str) -> str:
    try:
        await client.patch(TCP, name, {"spec": {"kubernetes": {"version": version}}}, namespace=NS)
    except kerrors.KubeError as exc:
        assert "denied the request" in exc.message, exc
        return "denied by its webhook"
    return "accepted"


async def observe(client: kube.Kube, name: str) -> dict[str, Any]:
    """The scenario, and what it shows: every aspect of ``SAME`` and ``DIFFERENCES``."""
    seen: dict[str, Any] = {}
    finalizers: set[str] = set()
    created = await client.create(TCP, manifest(name, "v1.31.0"), namespace=NS)
    since = created["metadata"]["resourceVersion"]
    collecting = asyncio.create_task(every_finalizer(client, name, since=since, into=finalizers))
    seen["status sequence on create"] = await statuses(
        client, name, since=since, until="Ready", version="v1.31.0"
    )
    seen["reaches Ready"] = True
    tcp = await client.get(TCP, name, namespace=NS)
    secrets = (await client.list(resources.SECRET, namespace=NS)).items
    mine = {
        s["metadata"]["name"][len(name) + 1 :]: s
        for s in secrets
        if s["metadata"]["name"].startswith(f"{name}-")
    }
    seen["Secrets"] = tuple(sorted(mine))
    admin = mine.get("admin-kubeconfig", {}).get("data") or {}
    seen["admin-kubeconfig keys"] = tuple(sorted(admin))
    seen["<name>-ca and <name>-admin-kubeconfig with admin.conf"] = "ca" in mine and "admin.conf" in admin
    endpoint = tcp["status"]["controlPlaneEndpoint"]
    server = re.search(r"server: (\S+)", base64.b64decode(admin["admin.conf"]).decode())
    seen["admin.conf's server is the endpoint"] = (
        server is not None and server.group(1) == f"https://{endpoint}"
    )
    service = await client.get_or_none(realkamaji.tenants.SERVICE, name, namespace=NS)
    deployment = await client.get_or_none(realkamaji.tenants.DEPLOYMENT, name, namespace=NS)
    seen["Deployment and Service"] = service is not None and deployment is not None
    balanced = ((service or {}).get("status") or {}).get("loadBalancer", {}).get("ingress") or [{}]
    seen["endpoint address"] = (
        "the Service's load-balancer address"
        if balanced[0].get("ip") == endpoint.rsplit(":", 1)[0]
        else "the simulator's pool"
    )
    spec = tcp["spec"]
    defaults = ("dataStore", "dataStoreSchema", "admissionControllers", "registrySettings")
    seen["spec defaults written"] = tuple(
        d
        for d in defaults
        if d in spec or d in spec["kubernetes"] or d in spec["controlPlane"].get("deployment", {})
    )
    patched = await client.patch(TCP, name, {"spec": {"kubernetes": {"version": "v1.32.0"}}}, namespace=NS)
    seen["status sequence on upgrade"] = await statuses(
        client, name, since=patched["metadata"]["resourceVersion"], until="Ready", version="v1.32.0"
    )
    seen["reports the upgraded version once Ready"] = True
    seen["downgrade"] = await refused(client, name, "v1.31.0")
    seen["version above its newest (v1.34.0)"] = await refused(client, name, "v1.34.0")
    await client.delete(TCP, name, namespace=NS)

    async def gone() -> bool:
        if await client.get_or_none(TCP, name, namespace=NS) is not None:
            return False
        left = (await client.list(resources.SECRET, namespace=NS)).items
        return not [s for s in left if s["metadata"]["name"] in (f"{name}-ca", f"{name}-admin-kubeconfig")]

    await helpers.eventually(gone, within=60, every=0.2, what=f"{name} and its Secrets gone")
    seen["gone after delete, its Secrets too"] = True
    # Every finalizer it had in its life (Kamaji adds its second once the tenant's side runs).
    await asyncio.wait_for(collecting, timeout=60)
    seen["finalizers"] = tuple(sorted(finalizers))
    seen["has finalizer.kamaji.clastix.io"] = "finalizer.kamaji.clastix.io" in finalizers
    return seen


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def simulated(
    real_binaries: realkube.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[kube.Kube]:
    """A real cluster with the compact TenantControlPlane CRD and the simulator on it."""
    cluster = realkube.Cluster(tmp_path_factory.mktemp("simulated"), name="simulated", binaries=real_binaries)
    await cluster.start()
    api_client = await kube.api_client_from_kubeconfig(cluster.kubeconfig)
    try:
        await install.install(api_client, [crds.TENANT_CONTROL_PLANE])
        client = kube.Kube(api_client)
        await client.create(resources.NAMESPACE, {"metadata": {"name": NS}})
        async with Simulator(api_client, ready_delay=0.5):
            yield client
    finally:
        await api_client.close()
        await cluster.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def real(real_kamaji: object, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[kube.Kube]:
    site = realkamaji.Site(tmp_path_factory.mktemp("real-kamaji"), name="parity", index=0)
    await site.start()
    api_client = await kube.api_client_from_kubeconfig(site.kubeconfig)
    try:
        client = kube.Kube(api_client)
        await client.create(resources.NAMESPACE, {"metadata": {"name": NS}})
        yield client
    finally:
        await api_client.close()
        await site.stop()


@pytest.mark.asyncio(loop_scope="module")
async def test_the_simulator_differs_from_the_real_kamaji_only_as_listed(
    simulated: kube.Kube, real: kube.Kube
) -> None:
    sim, kamaji = await asyncio.gather(observe(simulated, "parity"), observe(real, "parity"))
    for aspect in SAME:
        assert sim[aspect] is True and kamaji[aspect] is True, aspect
    assert set(sim) == set(kamaji)
    differing = {aspect: (sim[aspect], kamaji[aspect]) for aspect in sim if sim[aspect] != kamaji[aspect]}
    assert differing == DIFFERENCES


def test_the_docs_table_names_every_difference() -> None:
    text = SANDBOX_PAGE.read_text()
    section = (
        text.split("### The simulator and the real Kamaji", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    )
    rows = {
        line.split("|")[1].strip()
        for line in section.splitlines()
        if line.startswith("| ") and "---" not in line
    }
    rows.discard("aspect")
    assert rows == set(DIFFERENCES)
