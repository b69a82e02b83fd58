"""Attacks on the hub's InfraCluster write (get/patch on infrastructure.cluster.x-k8s.io, every
namespace): a tenant's Cluster points its ``infrastructureRef`` at another tenant's InfraCluster,
and its RKCP carries an endpoint of the tenant's choosing. The hub must write only an object of
the Cluster's own namespace, and say why it refused (an Event on the RKCP).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from common import bus
from common.kube import resources
from tests import helpers
from tests.hub.conftest import RKCP, World, cluster_obj, open_world, rkcp_obj, until_ready
from tests.hub.controllers.rkcp.test_infra import events, infra_crd, infra_ref, register

EVIL = {"host": "evil.example", "port": 443}


@pytest.fixture
async def world(conn: bus.Connection, prefix: str, tmp_path: Path) -> AsyncIterator[World]:
    async with open_world(conn, prefix, tmp_path) as w:
        yield w


ATTACKS = [
    # id, the reference's fields changed, what the refusal names (None: nothing to refuse, the
    # patch goes to the tenant's own namespace, where no such object exists)
    ("a name walking the request path", {"name": "../../victim/fooclusters/infra"},
     "spec.infrastructureRef.name"),
    ("v1beta1's namespace field", {"name": "infra", "namespace": "victim"}, None),
]  # fmt: skip


@pytest.mark.parametrize(("ref_changes", "refusal"), [a[1:] for a in ATTACKS], ids=[a[0] for a in ATTACKS])
async def test_another_namespaces_infra_cluster_is_never_written(
    world: World, ref_changes: dict[str, Any], refusal: str | None
) -> None:
    foo = await register(world, infra_crd("FooCluster", endpoint=True), "fooclusters", "v1alpha1")
    await world.mgmt.create_or_replace(
        resources.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "victim"}}
    )
    body = {"apiVersion": foo.api_version, "kind": "FooCluster", "metadata": {"name": "infra"}}
    before = await world.mgmt.create(foo, body, namespace="victim")
    ref = {**infra_ref("FooCluster", v1beta2=False), **ref_changes}
    cl = await world.mgmt.create(
        resources.CLUSTER, cluster_obj("c1", infrastructureRef=ref), namespace="default"
    )
    world.start_hub()
    world.start_agent()
    await world.mgmt.create(RKCP, rkcp_obj("cp1", cluster=cl, controlPlaneEndpoint=EVIL), namespace="default")
    if refusal is not None:
        [event] = await helpers.eventually(
            lambda: events(world, "InfrastructureEndpointRefused"), what="refusal"
        )
        assert refusal in event["message"]
    await until_ready(world)  # the tenant's control plane itself is unaffected
    # The hub tried (and waits for) its own namespace's object at most; the victim's is untouched.
    after = await world.mgmt.get(foo, "infra", namespace="victim")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert "controlPlaneEndpoint" not in (after.get("spec") or {})


async def test_control_a_tenants_own_infra_cluster_is_written(world: World) -> None:
    """The same set-up aimed at the tenant's own namespace: the write the attacks are denied."""
    foo = await register(world, infra_crd("FooCluster", endpoint=True), "fooclusters", "v1alpha1")
    body = {"apiVersion": foo.api_version, "kind": "FooCluster", "metadata": {"name": "infra"}}
    await world.mgmt.create(foo, body, namespace="default")
    ref = infra_ref("FooCluster", v1beta2=False)
    cl = await world.mgmt.create(
        resources.CLUSTER, cluster_obj("c1", infrastructureRef=ref), namespace="default"
    )
    world.start_hub()
    world.start_agent()
    await world.mgmt.create(RKCP, rkcp_obj("cp1", cluster=cl, controlPlaneEndpoint=EVIL), namespace="default")
    found = await helpers.eventually(
        lambda: world.mgmt.get(foo, "infra", namespace="default"),
        lambda o: "controlPlaneEndpoint" in (o.get("spec") or {}),
        what="the endpoint on the tenant's own InfraCluster",
    )
    assert found["spec"]["controlPlaneEndpoint"] == EVIL
