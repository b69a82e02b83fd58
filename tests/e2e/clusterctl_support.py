"""What the clusterctl scenarios share: ``clusterctl generate cluster`` from the release, applied
with kubectl, and waiting for CAPI's own conditions to call a Cluster Available.

Used by tests/e2e/test_clusterctl.py and test_clusterctl_move.py.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from prometheus_client.parser import text_string_to_metric_families

from common import kube
from common.kube import resources
from hub.api import cluster
from sandbox.capi import infra
from sandbox.launcher import System
from tests import helpers

NS = "default"
CLUSTER = cluster.resource(cluster.V1BETA2)
STAND_IN = infra.STAND_IN_CLUSTER
AVAILABLE = ("ControlPlaneInitialized", "ControlPlaneAvailable", "InfrastructureReady", "Available")


async def refusals(hub_health_url: str) -> dict[str, float]:
    """The hub's ``kb_hub_secrets_refused_total`` by reason, read off its /metrics."""
    async with aiohttp.ClientSession() as http, http.get(f"{hub_health_url}/metrics") as answer:
        text = await answer.text()
    return {
        sample.labels["reason"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "kb_hub_secrets_refused"
        for sample in family.samples
        if sample.name.endswith("_total")
    }


async def site_version(world: System, site: str, name: str) -> str | None:
    """The version the TenantControlPlane ``name`` at ``site`` reports."""
    tcp = await world.site_kube(site).get(resources.TENANT_CONTROL_PLANE, name, namespace=world.namespace)
    found = ((tcp.get("status") or {}).get("kubernetesResources") or {}).get("version") or {}
    return found.get("version")


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}


def _kubectl(kubeconfig: Path, *args: str, text: str = "") -> None:
    subprocess.run(
        [helpers.kubectl(), "--kubeconfig", str(kubeconfig), *args],
        input=text,
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )


async def kubectl_apply(kubeconfig: Path, text: str) -> None:
    """``kubectl apply -f -`` of ``text`` on the cluster of ``kubeconfig``."""
    await asyncio.to_thread(_kubectl, kubeconfig, "apply", "-f", "-", text=text)


async def generate(world: System, site: str, name: str, template: str, **env: str) -> list[dict[str, Any]]:
    """``clusterctl generate cluster NAME --from <release>/TEMPLATE`` at Kubernetes 1.31.0 (its
    ``v`` left out, as a KamajiControlPlane user writes it), placed at ``site``."""
    release = world.clusterctl.release()
    text = await world.clusterctl.run(
        "generate", "cluster", name, "--from", str(release / template), "--kubernetes-version", "1.31.0",
        "--control-plane-machine-count", "2", "--target-namespace", NS,
        env={"KAMAJI_BROKER_SITE": site, "KAMAJI_BROKER_TARGET_NAMESPACE": world.namespace, **env},
    )  # fmt: skip
    return [d for d in yaml.safe_load_all(text) if d]


async def available(management: kube.Kube, name: str) -> dict[str, Any]:
    """Cluster ``name`` once CAPI calls it Available (every condition of ``AVAILABLE`` True)."""

    async def probe() -> dict[str, Any]:
        return await management.get(CLUSTER, name, namespace=NS)

    return await helpers.eventually(
        probe,
        lambda c: all(conditions(c).get(t, {}).get("status") == "True" for t in AVAILABLE),
        within=180,
        every=0.5,
        what=f"Cluster {name}'s {', '.join(AVAILABLE)} True",
    )
