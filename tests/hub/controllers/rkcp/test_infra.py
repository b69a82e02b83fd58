"""The InfraCluster endpoint and the Cluster versions, against the emulated management cluster.

An infrastructure provider's kind is a CRD registered here (``FooCluster``, which has
``spec.controlPlaneEndpoint``; ``BarCluster``, which has not); the v1beta2 Cluster CRD is the
sandbox's compact one served in both versions with v1beta2 stored, as CAPI ≥ 1.11 installs it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from common.bus import errors as bus_errors
from common.kube import resources
from tests import helpers
from tests.hub.conftest import RKCP, ROOT, World, cluster_obj, condition, rkcp_obj, until_ready

INFRA_GROUP = "infrastructure.cluster.x-k8s.io"
ENDPOINT = {"host": "cp.example", "port": 443}
CRD = resources.CUSTOM_RESOURCE_DEFINITION


def infra_crd(kind: str, *, endpoint: bool) -> dict[str, Any]:
    """An InfraCluster kind whose spec keeps only the fields its schema declares."""
    spec: dict[str, Any] = {"region": {"type": "string"}}
    if endpoint:
        spec["controlPlaneEndpoint"] = {
            "type": "object",
            "properties": {"host": {"type": "string"}, "port": {"type": "integer", "format": "int32"}},
        }
    plural = f"{kind.lower()}s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{INFRA_GROUP}"},
        "spec": {
            "group": INFRA_GROUP, "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [{"name": "v1alpha1", "served": True, "storage": True, "subresources": {"status": {}},
                          "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                              "spec": {"type": "object", "properties": spec},
                              "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}],
        },
    }  # fmt: skip


def cluster_crd_v1beta2() -> dict[str, Any]:
    """The sandbox's Cluster CRD serving v1beta1 and v1beta2 (stored), the references of v1beta2
    being ContractVersionedObjectReferences (apiGroup, kind, name)."""
    crd: dict[str, Any] = yaml.safe_load((ROOT / "sandbox" / "crds" / "cluster.yaml").read_text())
    [v1beta1] = crd["spec"]["versions"]
    v1beta2 = copy.deepcopy(v1beta1)
    v1beta1["storage"] = False
    v1beta2["name"] = "v1beta2"
    spec = v1beta2["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    for ref in ("controlPlaneRef", "infrastructureRef"):
        spec[ref]["properties"] = {f: {"type": "string"} for f in ("apiGroup", "kind", "name")}
    crd["spec"]["versions"] = [v1beta1, v1beta2]
    return crd


async def register(w: World, crd: dict[str, Any], plural: str, version: str) -> resources.Resource:
    await w.mgmt.create_or_replace(CRD, crd)
    r = resources.Resource(crd["spec"]["group"], version, plural, crd["spec"]["names"]["kind"])
    await helpers.eventually(lambda: w.mgmt.serves(r), what=f"{plural} served")
    return r


def infra_ref(kind: str, *, v1beta2: bool) -> dict[str, str]:
    if v1beta2:
        return {"apiGroup": INFRA_GROUP, "kind": kind, "name": "infra"}
    return {"apiVersion": f"{INFRA_GROUP}/v1alpha1", "kind": kind, "name": "infra", "namespace": "default"}


async def intents(w: World) -> list[Any]:
    try:
        return await w.intents()
    except bus_errors.NotFound:  # the hub creates the streams as it starts
        return []


async def events(w: World, reason: str) -> list[dict[str, Any]]:
    listed = await w.mgmt.list(resources.EVENT, namespace="default")
    return [e for e in listed.items if e["reason"] == reason]


async def test_the_endpoint_the_site_reports_lands_on_the_infra_cluster(world: World) -> None:
    foo = await register(world, infra_crd("FooCluster", endpoint=True), "fooclusters", "v1alpha1")
    body = {
        "apiVersion": foo.api_version,
        "kind": "FooCluster",
        "metadata": {"name": "infra"},
        "spec": {"region": "eu"},
    }
    await world.mgmt.create(foo, body, namespace="default")
    cl = await world.mgmt.create(
        resources.CLUSTER, cluster_obj("c1", infrastructureRef=infra_ref("FooCluster", v1beta2=False)),
        namespace="default",
    )  # fmt: skip
    world.start_hub()
    world.start_agent()
    await world.mgmt.create(RKCP, rkcp_obj("cp1", cluster=cl), namespace="default")
    obj = await until_ready(world)
    endpoint = obj["spec"]["controlPlaneEndpoint"]

    async def infra() -> dict[str, Any]:
        return await world.mgmt.get(foo, "infra", namespace="default")

    found = await helpers.eventually(infra, lambda o: "controlPlaneEndpoint" in o["spec"], what="endpoint")
    # Exactly the RKCP's endpoint (what CAPI copies to the Cluster); nothing else touched.
    assert found["spec"] == {"region": "eu", "controlPlaneEndpoint": endpoint}
    [event] = await helpers.eventually(lambda: events(world, "InfrastructureEndpointSet"))
    assert "FooCluster default/infra" in event["message"]


async def test_a_kind_without_the_field_is_reported_once_not_retried_in_a_loop(world: World) -> None:
    bar = await register(world, infra_crd("BarCluster", endpoint=False), "barclusters", "v1alpha1")
    body = {
        "apiVersion": bar.api_version,
        "kind": "BarCluster",
        "metadata": {"name": "infra"},
        "spec": {"region": "eu"},
    }
    before = await world.mgmt.create(bar, body, namespace="default")
    cl = await world.mgmt.create(
        resources.CLUSTER, cluster_obj("c1", infrastructureRef=infra_ref("BarCluster", v1beta2=False)),
        namespace="default",
    )  # fmt: skip
    await world.mgmt.create(
        RKCP, rkcp_obj("cp1", cluster=cl, controlPlaneEndpoint=ENDPOINT), namespace="default"
    )
    c = world.start_hub(workers=0)  # this test reconciles, one sync at a time
    key = ("default", "cp1")

    async def refused() -> list[dict[str, Any]]:
        await c.reconciler.handle(key)
        return await events(world, "InfrastructureEndpointRefused")

    [event] = await helpers.eventually(refused, within=20, what="the refusal reported")
    assert "BarCluster default/infra" in event["message"] and "controlPlaneEndpoint" in event["message"]
    first = c.reconciler.infra.last(key)
    assert first is not None and first.state == "refused"
    for _ in range(5):
        await c.reconciler.handle(key)
    # Reconciled again and again: not attempted again (an attempt records a new outcome), reported once.
    assert c.reconciler.infra.last(key) is first
    assert len(await events(world, "InfrastructureEndpointRefused")) == 1
    after = await world.mgmt.get(bar, "infra", namespace="default")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
async def test_clusters_are_watched_in_the_newest_served_version(world: World, version: str) -> None:
    v1beta2 = version == "v1beta2"
    if v1beta2:
        await register(world, cluster_crd_v1beta2(), "clusters", "v1beta2")
    clusters = resources.Resource("cluster.x-k8s.io", version, "clusters", "Cluster")
    foo = await register(world, infra_crd("FooCluster", endpoint=True), "fooclusters", "v1alpha1")
    body = {"apiVersion": foo.api_version, "kind": "FooCluster", "metadata": {"name": "infra"}}
    await world.mgmt.create(foo, body, namespace="default")
    spec = cluster_obj("c1", infrastructureRef=infra_ref("FooCluster", v1beta2=v1beta2))
    spec["apiVersion"] = f"cluster.x-k8s.io/{version}"
    spec["spec"]["clusterNetwork"]["apiServerPort"] = 7443
    cl = await world.mgmt.create(clusters, spec, namespace="default")
    c = world.start_hub()
    await world.mgmt.create(
        RKCP, rkcp_obj("cp1", cluster=cl, controlPlaneEndpoint=ENDPOINT), namespace="default"
    )
    # Reconciled from the Cluster read in that version: its port in the intent, the endpoint on the
    # InfraCluster its reference (with or without a version) names.
    [intent] = await helpers.eventually(lambda: intents(world), within=20, what="the intent")
    assert intent.spec["networkProfile"]["port"] == 7443
    found = await helpers.eventually(
        lambda: world.mgmt.get(foo, "infra", namespace="default"),
        lambda o: "controlPlaneEndpoint" in (o.get("spec") or {}), within=20, what="the endpoint",
    )  # fmt: skip
    assert found["spec"]["controlPlaneEndpoint"] == ENDPOINT
    assert c.informers.cluster_version == version
    cached = c.informers.clusters.get(("default", "c1"))
    assert cached is not None and cached["apiVersion"] == f"cluster.x-k8s.io/{version}"


async def test_nothing_is_patched_while_the_cluster_is_paused(world: World) -> None:
    foo = await register(world, infra_crd("FooCluster", endpoint=True), "fooclusters", "v1alpha1")
    body = {"apiVersion": foo.api_version, "kind": "FooCluster", "metadata": {"name": "infra"}}
    await world.mgmt.create(foo, body, namespace="default")
    ref = infra_ref("FooCluster", v1beta2=False)
    cl = await world.mgmt.create(
        resources.CLUSTER, cluster_obj("c1", paused=True, infrastructureRef=ref), namespace="default"
    )
    await world.mgmt.create(
        RKCP, rkcp_obj("cp1", cluster=cl, controlPlaneEndpoint=ENDPOINT), namespace="default"
    )
    c = world.start_hub()

    async def paused() -> bool:
        return condition(await world.rkcp("cp1"), "Paused") == ("True", "Paused")

    await helpers.eventually(paused, within=20, what="Paused")
    assert c.reconciler.infra.last(("default", "cp1")) is None
    assert "controlPlaneEndpoint" not in (await world.mgmt.get(foo, "infra", namespace="default")).get(
        "spec", {}
    )
    # Unpaused: the endpoint lands.
    await world.mgmt.patch(resources.CLUSTER, "c1", {"spec": {"paused": False}}, namespace="default")
    found = await helpers.eventually(
        lambda: world.mgmt.get(foo, "infra", namespace="default"),
        lambda o: "controlPlaneEndpoint" in (o.get("spec") or {}), within=20, what="the endpoint",
    )  # fmt: skip
    assert found["spec"]["controlPlaneEndpoint"] == ENDPOINT
