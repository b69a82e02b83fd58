"""sandbox.capi.controller against an API server carrying the CRDs: a Cluster of the shipped
ClusterClass gets its RKCP and DockerCluster, and follows an upgrade of its topology."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from common import kube as ckube
from common.kube import resources
from hub.api import crds as crdgen
from sandbox import crds, kubeapi
from sandbox.capi import controller
from sandbox.launcher import workload
from tests import helpers

CRDS = Path(__file__).resolve().parents[3] / "deploy" / "crds"
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
NS = "team-a"


@pytest.fixture
async def mgmt(tmp_path: Path) -> AsyncIterator[ckube.Kube]:
    server = kubeapi.Server(name="mgmt")
    await server.start(port=0)
    server.apply_crd_files(
        [CRDS / crdgen.FILENAME, CRDS / crdgen.TEMPLATE_FILENAME, crds.CLUSTER, *crds.TOPOLOGY]
    )
    api_client = await ckube.api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "kubeconfig"))
    k = ckube.Kube(api_client)
    await k.create(resources.NAMESPACE, {"metadata": {"name": NS}})
    yield k
    await api_client.close()
    await server.stop()


async def _apply_class(k: ckube.Kube) -> None:
    # The templates before the class that names them: a pass in between would find the class
    # and not yet its templates (and say so).
    made = workload.cluster_class(namespace=NS, target_namespace="tenants")
    for obj in sorted(made, key=lambda o: o["kind"] == "ClusterClass"):
        await k.create(controller.resource_of(obj), obj, namespace=NS)


async def _cluster(k: ckube.Kube, name: str = "c1") -> dict[str, Any]:
    body = workload.topology_cluster(name, namespace=NS, site="site-b", target_namespace="tenants")
    created: dict[str, Any] = await k.create(resources.CLUSTER, body, namespace=NS)
    return created


async def test_a_topology_cluster_gets_its_control_plane_and_infrastructure(mgmt: ckube.Kube) -> None:
    await _apply_class(mgmt)
    cluster = await _cluster(mgmt)
    await controller.reconcile(mgmt, cluster)
    cluster = await mgmt.get(resources.CLUSTER, "c1", namespace=NS)
    ref = cluster["spec"]["controlPlaneRef"]
    assert (ref["kind"], ref["namespace"]) == ("RemoteKamajiControlPlane", NS)
    rkcp = await mgmt.get(RKCP, ref["name"], namespace=NS)
    assert rkcp["spec"]["site"] == "site-b"
    assert rkcp["spec"]["targetNamespace"] == "tenants"
    assert (rkcp["spec"]["version"], rkcp["spec"]["replicas"]) == ("v1.31.0", 2)
    [owner] = rkcp["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Cluster", "c1", cluster["metadata"]["uid"])
    infra_ref = cluster["spec"]["infrastructureRef"]
    infra = await mgmt.get(controller.resource_of(infra_ref), infra_ref["name"], namespace=NS)
    assert infra["kind"] == "DockerCluster"
    # The next pass makes the Cluster their controller (as CAPI's Cluster controller does after
    # its topology controller); one more changes nothing.
    await controller.reconcile(mgmt, cluster)
    for resource, name in ((RKCP, ref["name"]), (controller.resource_of(infra_ref), infra_ref["name"])):
        [owner] = (await mgmt.get(resource, name, namespace=NS))["metadata"]["ownerReferences"]
        assert owner["controller"] is True, resource.kind
    before = (await mgmt.get(RKCP, ref["name"], namespace=NS))["metadata"]["resourceVersion"]
    await controller.reconcile(mgmt, cluster)
    assert (await mgmt.get(RKCP, ref["name"], namespace=NS))["metadata"]["resourceVersion"] == before


async def test_an_upgrade_of_the_topology_reaches_the_control_plane(mgmt: ckube.Kube) -> None:
    await _apply_class(mgmt)
    await controller.reconcile(mgmt, await _cluster(mgmt))
    change = {"spec": {"topology": {"version": "v1.32.0", "controlPlane": {"replicas": 3}}}}
    cluster = await mgmt.patch(resources.CLUSTER, "c1", change, namespace=NS)
    await controller.reconcile(mgmt, cluster)
    rkcp = await mgmt.get(RKCP, cluster["spec"]["controlPlaneRef"]["name"], namespace=NS)
    assert (rkcp["spec"]["version"], rkcp["spec"]["replicas"]) == ("v1.32.0", 3)


async def test_a_hand_made_cluster_owns_its_control_plane_as_capi_makes_it(mgmt: ckube.Kube) -> None:
    # Written as the release's template shows, with no ownerReference: the hub waits for one.
    values = workload.template_values("c2", namespace=NS, site="site-a", target_namespace="tenants")
    made = {o["kind"]: o for o in workload.rendered(workload.CLUSTER_TEMPLATE, values)}
    cluster = await mgmt.create(resources.CLUSTER, made["Cluster"], namespace=NS)
    await mgmt.create(RKCP, made["RemoteKamajiControlPlane"], namespace=NS)
    await controller.reconcile(mgmt, cluster)
    rkcp = await mgmt.get(RKCP, "c2", namespace=NS)
    [owner] = rkcp["metadata"]["ownerReferences"]
    # A plain owner, as CAPI's Cluster controller writes it for a Cluster without a topology.
    uid = cluster["metadata"]["uid"]
    assert owner == {"apiVersion": cluster["apiVersion"], "kind": "Cluster", "name": "c2", "uid": uid}
    assert rkcp["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == "c2"
    before = rkcp["metadata"]["resourceVersion"]
    await controller.reconcile(mgmt, cluster)
    assert (await mgmt.get(RKCP, "c2", namespace=NS))["metadata"]["resourceVersion"] == before


def _reconciled(cluster: dict[str, Any]) -> dict[str, Any] | None:
    found = [c for c in cluster.get("status", {}).get("conditions", ()) if c["type"] == "TopologyReconciled"]
    return found[0] if found else None


async def test_a_missing_class_is_reported_once_and_in_the_cluster_until_it_comes(mgmt: ckube.Kube) -> None:
    reports: list[str] = []
    stop = asyncio.Event()
    await _cluster(mgmt)
    running = asyncio.create_task(controller.run(mgmt, stop=stop, report=reports.append, interval=0.05))
    try:

        async def said() -> dict[str, Any] | None:
            return _reconciled(await mgmt.get(resources.CLUSTER, "c1", namespace=NS))

        # As CAPI's topology controller says it: what the sandbox's view shows for the Cluster.
        failed = await helpers.eventually(said, lambda c: c is not None, within=10)
        assert failed is not None
        assert (failed["status"], failed["reason"], failed["severity"]) == (
            "False", "TopologyReconcileFailed", "Error",
        )  # fmt: skip
        assert failed["message"] == f"ClusterClass {NS}/kamaji-broker not found"
        await _apply_class(mgmt)

        async def made() -> bool:
            cluster = await mgmt.get(resources.CLUSTER, "c1", namespace=NS)
            done = _reconciled(cluster)
            return "controlPlaneRef" in cluster["spec"] and done is not None and done["status"] == "True"

        await helpers.eventually(made, within=10)
    finally:
        stop.set()
        await running
    assert reports == [f"Cluster {NS}/c1: ClusterClass {NS}/kamaji-broker not found"]


@pytest.mark.parametrize(
    ("api_version", "kind", "plural"),
    [
        ("cluster.x-k8s.io/v1beta1", "ClusterClass", "clusterclasses"),
        ("cluster.x-k8s.io/v1beta1", "Cluster", "clusters"),
        (
            "controlplane.cluster.x-k8s.io/v1alpha1",
            "RemoteKamajiControlPlaneTemplate",
            "remotekamajicontrolplanetemplates",
        ),
        ("infrastructure.cluster.x-k8s.io/v1beta1", "DockerCluster", "dockerclusters"),
        ("v1", "Namespace", "namespaces"),
    ],
)
def test_resource_of(api_version: str, kind: str, plural: str) -> None:
    made = controller.resource_of({"apiVersion": api_version, "kind": kind})
    assert (made.api_version, made.plural, made.kind) == (api_version, plural, kind)
