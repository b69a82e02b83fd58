"""End to end with Cluster API's own controllers (built from its Go module) around the hub, and
the real Kamaji operator at the site: a Cluster and an RKCP written as the release's template
shows, with nothing set by hand, are owned by CAPI's Cluster controller, provisioned through
the site, and CAPI's own conditions on the Cluster turn True because of the RKCP's status; a
version written without its ``v`` (as a KamajiControlPlane takes it) reaches the site with it;
deleting the Cluster takes everything away."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from common.kube import resources
from sandbox.capi import infra
from sandbox.launcher import System
from tests import helpers, systems
from tests.e2e.clusterctl_support import CLUSTER, NS, available, conditions

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

SITE = "site-a"
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE
INFRA = infra.STAND_IN_CLUSTER


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(real_capi: object, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    directory = tmp_path_factory.mktemp("capi") / "sandbox"
    async with systems.running(
        directory, sites=(SITE,), base=(), kubernetes="real", kamaji="real", capi="real"
    ) as topology:
        yield topology


async def apply_template(world: System, name: str, *, version: str) -> None:
    """The release's cluster template rendered as clusterctl renders it, created with the
    infrastructure the template asks its user to add (Cluster API v1.14 calls a Cluster without
    one neither Available nor not: InfrastructureReady stays Unknown): the system's
    ``create_control_plane`` with real Cluster API."""
    _, rkcp = await world.create_control_plane(name, site=SITE, namespace=NS, version=version)
    assert "ownerReferences" not in rkcp["metadata"]  # CAPI's Cluster controller sets it


@pytest.mark.timeout(300)  # the module's world is set up in it: clusters, Kamaji, clusterctl init
async def test_capi_owns_provisions_and_calls_the_cluster_available(world: System) -> None:
    await apply_template(world, "c1", version="1.31.0")
    cluster = await world.mgmt.get(CLUSTER, "c1", namespace=NS)

    async def rkcp() -> dict[str, Any]:
        return await world.mgmt.get(RKCP, "c1", namespace=NS)

    owned = await helpers.eventually(
        rkcp, lambda o: bool(o["metadata"].get("ownerReferences")), within=60, every=0.3, what="an owner"
    )
    [owner] = owned["metadata"]["ownerReferences"]
    # A plain owner: CAPI makes a Cluster the controller only of what its topology made.
    uid = cluster["metadata"]["uid"]
    assert owner == {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1", "uid": uid}
    assert owned["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == "c1"

    ready = await helpers.eventually(
        rkcp,
        lambda o: conditions(o).get("Ready", {}).get("status") == "True",
        within=120,
        every=0.5,
        what="the RKCP Ready",
    )
    assert ready["spec"]["version"] == "1.31.0" and ready["status"]["version"] == "v1.31.0"
    tcp = await world.site_kube(SITE).get(TCP, "c1", namespace=world.namespace)
    assert tcp["spec"]["kubernetes"]["version"] == "v1.31.0"

    # CAPI's Cluster controller reads the RKCP's status (initialization, the Available condition,
    # the endpoint) and probes the tenant API server with the kubeconfig Secret the hub wrote.
    done = await available(world.mgmt, "c1")
    said = conditions(done)
    assert said["RemoteConnectionProbe"]["status"] == "True"
    assert done["status"]["initialization"]["controlPlaneInitialized"] is True
    endpoint = ready["spec"]["controlPlaneEndpoint"]
    assert done["spec"]["controlPlaneEndpoint"] == {"host": endpoint["host"], "port": endpoint["port"]}
    assert done["status"]["phase"] == "Provisioned"
    # The hub wrote the endpoint into the InfraCluster, which then called itself provisioned.
    standin = await world.mgmt.get(INFRA, "c1", namespace=NS)
    assert standin["spec"]["controlPlaneEndpoint"] == done["spec"]["controlPlaneEndpoint"]


async def test_deleting_the_cluster_takes_the_control_plane_away(world: System) -> None:
    await apply_template(world, "c2", version="v1.31.0")

    async def phase() -> str:
        return str(((await world.mgmt.get(CLUSTER, "c2", namespace=NS)).get("status") or {}).get("phase"))

    await helpers.eventually(
        phase, lambda p: p == "Provisioned", within=120, every=0.5, what="c2 provisioned"
    )
    await world.mgmt.delete(resources.CLUSTER, "c2", namespace=NS)

    async def gone() -> tuple[object, object, object]:
        return (
            await world.mgmt.get_or_none(resources.CLUSTER, "c2", namespace=NS),
            await world.mgmt.get_or_none(RKCP, "c2", namespace=NS),
            await world.site_kube(SITE).get_or_none(TCP, "c2", namespace=world.namespace),
        )

    await helpers.eventually(gone, lambda g: g == (None, None, None), within=120, every=0.5, what="c2 gone")
