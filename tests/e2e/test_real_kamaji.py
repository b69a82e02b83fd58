"""End to end with the real Kamaji operator at the site: an RKCP becomes our TenantControlPlane,
Kamaji's Deployment, Service and Secrets, a tenant API server that the kubeconfig the hub wrote
reaches; an upgrade and a scale go through Kamaji and come back Ready; a downgrade its webhook
denies shows on the RKCP in Kamaji's words and is not tried again at once; a delete takes away
everything Kamaji made."""

from __future__ import annotations

import asyncio
import base64
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from common.kube import resources
from sandbox.launcher import System
from sandbox.realkamaji import tenants
from tests import helpers, systems

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

SITE = "site-a"
NS = "default"
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE
KAMAJI_FINALIZERS = {"finalizer.kamaji.clastix.io", "finalizer.kamaji.clastix.io/soot"}
KAMAJI_SECRETS = (
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
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    real_binaries: object, real_kamaji: object, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[System]:
    directory = tmp_path_factory.mktemp("kamaji") / "sandbox"
    # A refused intent is tried again after --namespace-retry: long here, so that "tried once"
    # does not depend on how fast the rest of a test runs.
    async with systems.running(
        directory,
        sites=(SITE,),
        base=(("cp1", SITE),),
        kubernetes="real",
        kamaji="real",
        env={"KB_AGENT_NAMESPACE_RETRY": "600"},
    ) as topology:
        yield topology


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}


async def ready(world: System, name: str, **status: Any) -> dict[str, Any]:
    """The RKCP once Ready with ``status`` fields as given."""

    async def probe() -> dict[str, Any]:
        return await world.mgmt.get(RKCP, name, namespace=NS)

    def done(obj: dict[str, Any]) -> bool:
        got = obj.get("status") or {}
        return conditions(obj).get("Ready", {}).get("status") == "True" and all(
            got.get(k) == v for k, v in status.items()
        )

    return await helpers.eventually(probe, done, within=90, every=0.3, what=f"{name} Ready with {status}")


async def test_the_control_plane_is_kamajis_deployment_service_and_secrets(world: System) -> None:
    obj = await ready(world, "cp1")
    assert obj["status"]["version"] == "v1.31.0" and obj["status"]["readyReplicas"] == 2
    site = world.site_kube(SITE)
    tcp = await site.get(TCP, "cp1", namespace=world.namespace)
    assert set(tcp["metadata"]["finalizers"]) >= KAMAJI_FINALIZERS
    assert tcp["status"]["kubernetesResources"]["version"]["status"] == "Ready"
    deployment = await site.get(tenants.DEPLOYMENT, "cp1", namespace=world.namespace)
    assert deployment["status"]["readyReplicas"] == 2
    service = await site.get(tenants.SERVICE, "cp1", namespace=world.namespace)
    address = service["status"]["loadBalancer"]["ingress"][0]["ip"]
    assert tcp["status"]["controlPlaneEndpoint"] == f"{address}:6443"
    for suffix in KAMAJI_SECRETS:
        assert await site.get_or_none(resources.SECRET, f"cp1-{suffix}", namespace=world.namespace), suffix
    # The endpoint the hub wrote on the RKCP is the one Kamaji reports.
    assert obj["spec"]["controlPlaneEndpoint"] == {"host": address, "port": 6443}


async def test_kubectl_with_the_kubeconfig_the_hub_wrote_lists_the_tenants_namespaces(
    world: System, tmp_path: Path
) -> None:
    await ready(world, "cp1")
    secret = await world.mgmt.get(resources.SECRET, "cp1-kubeconfig", namespace=NS)
    kubeconfig = tmp_path / "cp1.kubeconfig"
    kubeconfig.write_bytes(base64.b64decode(secret["data"]["value"]))
    kubeconfig.chmod(0o600)
    tcp = await world.site_kube(SITE).get(TCP, "cp1", namespace=world.namespace)
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    assert server == f"https://{tcp['status']['controlPlaneEndpoint']}"

    async def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(
            subprocess.run,
            [helpers.kubectl(), "--kubeconfig", str(kubeconfig), *args, "-o", "name"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    # Kamaji calls a control plane Ready when its Deployment is (kwok's Pods); the tenant API
    # server process may still be starting then, as a real Pod's container may.
    done = await helpers.eventually(
        lambda: kubectl("get", "namespaces"),
        lambda d: d.returncode == 0,
        within=60,
        every=0.5,
        what="kubectl",
    )
    assert {"namespace/default", "namespace/kube-system", "namespace/kube-public"} <= set(done.stdout.split())
    # Kamaji's phases after Ready run against this server: kubeadm's and the kubelet's config.
    wanted = {"configmap/kubeadm-config", "configmap/kubelet-config"}
    await helpers.eventually(
        lambda: kubectl("get", "configmaps", "-n", "kube-system"),
        lambda d: wanted <= set(d.stdout.split()),
        within=90,
        every=0.5,
        what="Kamaji's kubeadm and kubelet configuration in the tenant",
    )


async def test_an_upgrade_and_a_scale_reach_kamaji_and_come_back_ready(world: System) -> None:
    await world.create_control_plane("up", site=SITE)
    await ready(world, "up", version="v1.31.0")
    await systems.update_control_plane(world, "up", version="v1.32.0", replicas=3)
    obj = await ready(world, "up", version="v1.32.0", readyReplicas=3)
    assert conditions(obj)["TenantControlPlaneReady"]["status"] == "True"
    site = world.site_kube(SITE)
    tcp = await site.get(TCP, "up", namespace=world.namespace)
    assert tcp["status"]["kubernetesResources"]["version"]["version"] == "v1.32.0"
    deployment = await site.get(tenants.DEPLOYMENT, "up", namespace=world.namespace)
    assert deployment["spec"]["replicas"] == 3 and deployment["status"]["readyReplicas"] == 3
    images = {c["name"]: c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert images["kube-apiserver"].endswith(":v1.32.0")


async def test_a_downgrade_kamajis_webhook_denies_shows_on_the_rkcp_and_is_not_tried_again_at_once(
    world: System,
) -> None:
    await world.create_control_plane("down", site=SITE, version="v1.32.0")
    await ready(world, "down", version="v1.32.0")
    await systems.update_control_plane(world, "down", version="v1.31.0")

    async def probe() -> dict[str, Any]:
        return await world.mgmt.get(RKCP, "down", namespace=NS)

    def denied(obj: dict[str, Any]) -> bool:
        return conditions(obj).get("TenantControlPlaneReady", {}).get("reason") == "AdmissionDenied"

    obj = await helpers.eventually(probe, denied, within=60, every=0.3, what="the denial on the RKCP")
    condition = conditions(obj)["TenantControlPlaneReady"]
    assert condition["status"] == "False"
    assert "denied the request" in condition["message"] and "downgrade" in condition["message"]
    # Later intents go through meanwhile; the denied one waits for --namespace-retry.
    await world.create_control_plane("after", site=SITE)
    await ready(world, "after")
    log = world.log(f"agent-{SITE}").read_text()
    attempts = [line for line in log.splitlines() if "tenants.down" in line and "AdmissionDenied" in line]
    assert len(attempts) == 1, attempts
    tcp = await world.site_kube(SITE).get(TCP, "down", namespace=world.namespace)
    assert tcp["spec"]["kubernetes"]["version"] == "v1.32.0", "Kamaji kept what it had"


async def test_a_delete_takes_away_everything_kamaji_made(world: System) -> None:
    await world.create_control_plane("gone", site=SITE)
    await ready(world, "gone")
    site = world.site_kube(SITE)
    kamaji_site = world.kamaji_sites[SITE]
    assert kamaji_site.tenants is not None
    running = kamaji_site.tenants.running
    await helpers.eventually(
        lambda: (world.namespace, "gone") in running, within=30, what="its tenant API server"
    )
    await systems.delete_control_plane(world, "gone")

    async def leftovers() -> list[str]:
        left = []
        if await world.mgmt.get_or_none(RKCP, "gone", namespace=NS) is not None:
            left.append("the RKCP")
        for kind in (TCP, tenants.DEPLOYMENT, tenants.SERVICE):
            if await site.get_or_none(kind, "gone", namespace=world.namespace) is not None:
                left.append(kind.kind)
        secrets = (await site.list(resources.SECRET, namespace=world.namespace)).items
        left += [s["metadata"]["name"] for s in secrets if s["metadata"]["name"].startswith("gone-")]
        return left

    await helpers.eventually(leftovers, lambda left: left == [], within=90, every=0.5, what="nothing left")
    await helpers.eventually(
        lambda: (world.namespace, "gone") not in running, within=30, what="its tenant API server stopped"
    )
