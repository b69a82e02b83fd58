"""The user's check of KamajiControlPlane parity: Kamaji's own documented KamajiControlPlane, converted by
changing ``kind`` and adding ``site``, reaches Ready in the sandbox, every field on the TCP.

The example (and where it comes from) is ``fixtures/kamaji-docs-control-plane-provider.yaml``.
The whole topology runs as processes (``tests/e2e/conftest.py``); the test plays the user (and
clusterctl, which substitutes the variables) against the management cluster, then reads the
TCP from the site's own API server.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import objects
from common.kube import resources
from sandbox.launcher import System
from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

TCP = resources.TENANT_CONTROL_PLANE
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
FIXTURE = Path(__file__).parent / "fixtures" / "kamaji-docs-control-plane-provider.yaml"
NAME, NS, SITE = "docs-example", "default", "site-a"
VARIABLES = {
    "CLUSTER_NAME": NAME,
    "CLUSTER_NAMESPACE": NS,
    "KAMAJI_BROKER_SITE": SITE,
    "KUBERNETES_VERSION": "v1.31.0",
    "PODS_CIDR": "10.244.0.0/16",
    "SERVICES_CIDR": "10.95.0.0/16",
}

# Each field of the example's spec → where the provider puts it in the TCP (and what it holds
# there; None: present, whatever Kamaji's defaulting adds inside). site and targetNamespace say
# where the TCP is, which is where the test reads it.
ON_THE_TCP: dict[str, tuple[tuple[str, ...], Any]] = {
    "apiServer.extraArgs": (
        ("controlPlane", "deployment", "extraArgs", "apiServer"),
        ["--cloud-provider=external"],
    ),
    "controllerManager.extraArgs": (
        ("controlPlane", "deployment", "extraArgs", "controllerManager"),
        ["--cloud-provider=external"],
    ),
    "dataStoreName": (("dataStore",), "default"),
    "addons.coreDNS": (("addons", "coreDNS"), None),
    "addons.kubeProxy": (("addons", "kubeProxy"), None),
    "addons.konnectivity": (("addons", "konnectivity"), None),
    "kubelet.cgroupfs": (("kubernetes", "kubelet", "cgroupfs"), "systemd"),
    "kubelet.preferredAddressTypes": (("kubernetes", "kubelet", "preferredAddressTypes"), ["InternalIP"]),
    "network.serviceType": (("controlPlane", "service", "serviceType"), "LoadBalancer"),
    "version": (("kubernetes", "version"), "v1.31.0"),
}
PLACEMENT = {"site", "targetNamespace"}


def documents() -> tuple[dict[str, Any], dict[str, Any]]:
    """The RKCP and the Cluster of the example, with clusterctl's variables substituted."""
    text = string.Template(FIXTURE.read_text()).substitute(VARIABLES)
    rkcp, cluster = yaml.safe_load_all(text)
    return rkcp, cluster


def fields(spec: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted paths of the leaves of ``spec`` (an empty map is a leaf: ``coreDNS: {}``)."""
    out: set[str] = set()
    for key, value in spec.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out |= fields(value, f"{path}.")
        else:
            out.add(path)
    return out


async def test_the_kamaji_docs_example_reaches_ready_with_every_field_on_the_tcp(world: System) -> None:
    rkcp, cluster = documents()
    assert (rkcp["kind"], cluster["kind"]) == (RKCP.kind, resources.CLUSTER.kind)
    created = await world.mgmt.create(resources.CLUSTER, cluster, namespace=NS)
    # What CAPI's Cluster controller adds (the owner), what the sandbox's sites serve (their target
    # namespace), and a label of the user's own, which the TCP must carry too.
    rkcp["metadata"]["ownerReferences"] = [
        {
            "apiVersion": resources.CLUSTER.api_version,
            "kind": resources.CLUSTER.kind,
            "name": NAME,
            "uid": created["metadata"]["uid"],
        }
    ]
    rkcp["metadata"]["labels"] = {"team.example.com/owner": "platform"}
    rkcp["spec"]["targetNamespace"] = world.namespace
    assert fields(rkcp["spec"]) == set(ON_THE_TCP) | PLACEMENT  # no field of the example unchecked
    await world.mgmt.create(RKCP, rkcp, namespace=NS)

    async def ready() -> bool:
        status = (await world.mgmt.get(RKCP, NAME, namespace=NS)).get("status") or {}
        ready = {c["type"]: c["status"] for c in status.get("conditions") or ()}.get("Ready")
        return status.get("ready") is True and ready == "True"

    await helpers.eventually(ready, within=60, every=0.2)

    tcp = await world.site_kube(SITE).get(TCP, NAME, namespace=world.namespace)
    for field, (path, value) in ON_THE_TCP.items():
        found = objects.dig(tcp["spec"], *path)
        if value is None:
            assert isinstance(found, dict), (field, found)
        else:
            assert found == value, (field, path, found)
    profile = tcp["spec"]["networkProfile"]
    assert (profile["podCidr"], profile["serviceCidr"]) == (
        VARIABLES["PODS_CIDR"],
        VARIABLES["SERVICES_CIDR"],
    )
    assert tcp["metadata"]["labels"]["team.example.com/owner"] == "platform"
    assert tcp["metadata"]["labels"]["kamaji-broker.io/site"] == SITE
