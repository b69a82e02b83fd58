"""``clusterctl move`` for real, between two management clusters each set up with ``clusterctl
init --control-plane kamaji-broker`` and Cluster API's own controllers, the hub at both (the same
NATS and hub keys, as the docs' move section says): a generated Cluster, Available, moves
from the first to the second while both hubs run. The control plane keeps running at its site
(its TenantControlPlane never deleted nor changed), no hub publishes a new intent, no Conflict;
the Cluster is Available in the target through CAPI's conditions; then, with the first hub
stopped, an upgrade and a delete from the target reach the site. What clusterctl printed is in
DIR/clusterctl/clusterctl.log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import yaml

from common import bus
from common.kube import resources
from hub.api import rkcp
from protocol import names
from sandbox.capi import infra
from sandbox.launcher import System
from tests import helpers, moving, systems
from tests.e2e.clusterctl_support import (
    CLUSTER,
    NS,
    STAND_IN,
    available,
    generate,
    kubectl_apply,
    refusals,
    site_version,
)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

SITE = "site-a"
NAME = "mv1"
TARGET = "mgmt-2"
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(real_capi: object, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    directory = tmp_path_factory.mktemp("clusterctl-move") / "sandbox"
    async with systems.running(
        directory, sites=(SITE,), base=(), kubernetes="real", kamaji="real", capi="real"
    ) as topology:
        yield topology


@pytest.mark.timeout(600)  # two management clusters set up with clusterctl init, a Cluster's life
async def test_clusterctl_move_hands_the_running_control_plane_to_the_target(
    world: System, hub_conn: bus.Connection
) -> None:
    docs = await generate(world, SITE, NAME, "cluster-template.yaml")
    await kubectl_apply(
        world.kubeconfig("mgmt"), yaml.safe_dump_all(infra.with_infrastructure(docs, name=NAME, namespace=NS))
    )
    await available(world.mgmt, NAME)
    before = await world.mgmt.get(RKCP, NAME, namespace=NS)
    identity = before["metadata"]["uid"]
    assert before["metadata"]["annotations"][rkcp.OWNER_UID_ANNOTATION] == identity
    site = world.site_kube(SITE)
    tcp = await site.get(TCP, NAME, namespace=world.namespace)
    on_the_bus = await moving.on_the_bus(hub_conn, SITE, world.namespace, NAME)

    target = await world.start_management(TARGET)  # clusterctl init and CAPI's manager there too
    await world.start_hub(f"hub-{TARGET}", cluster=TARGET)
    await world.clusterctl.run(
        "move", "--to-kubeconfig", str(world.kubeconfig(TARGET)), "--namespace", NS,
        kubeconfig=world.kubeconfig("mgmt"),
    )  # fmt: skip
    said = world.clusterctl.log.read_text().rpartition("$ clusterctl move")[2]  # clusterctl logs on stderr
    assert (
        "Moving Cluster API objects Clusters=1" in said and "Deleting objects from the source cluster" in said
    )
    for kind in (CLUSTER, RKCP, STAND_IN):
        assert await world.mgmt.get_or_none(kind, NAME, namespace=NS) is None, kind.kind

    done = await available(target, NAME)
    assert done["status"]["initialization"] == {
        "infrastructureProvisioned": True,
        "controlPlaneInitialized": True,
    }
    after = await target.get(RKCP, NAME, namespace=NS)
    assert after["metadata"]["uid"] != identity  # a new object, speaking for the same owner
    assert after["metadata"]["annotations"][rkcp.OWNER_UID_ANNOTATION] == identity
    assert moving.conflicts(after) == []
    # The control plane kept running at its site, untouched; nothing new was published.
    now = await site.get(TCP, NAME, namespace=world.namespace)
    assert (now["metadata"]["uid"], now["metadata"]["generation"]) == (
        tcp["metadata"]["uid"],
        tcp["metadata"]["generation"],
    )
    assert (await moving.on_the_bus(hub_conn, SITE, world.namespace, NAME))["intent"] == on_the_bus["intent"]
    kubeconfig = await target.get(resources.SECRET, names.capi_kubeconfig(NAME), namespace=NS)
    assert [o["uid"] for o in kubeconfig["metadata"]["ownerReferences"]] == [after["metadata"]["uid"]]

    # Neither hub refused the site's secrets for a Conflict or an owner it did not know, even
    # while the moved objects were paused and their owner uid new.
    for hub in ("hub", f"hub-{TARGET}"):
        refused = await refusals(world.hub_health_urls[hub])
        assert {r: n for r, n in refused.items() if r != "Paused" and n} == {}, (hub, refused)

    # The first hub stopped, as the docs say; the target's drives the control plane.
    await world.retire("hub")
    await target.patch(RKCP, NAME, {"spec": {"version": "1.32.0"}}, namespace=NS)
    await helpers.eventually(
        lambda: site_version(world, SITE, NAME),
        lambda v: v == "v1.32.0",
        within=180,
        every=0.5,
        what="v1.32.0 at the site",
    )
    assert (await site.get(TCP, NAME, namespace=world.namespace))["metadata"]["uid"] == tcp["metadata"]["uid"]
    seq, owner = (await moving.on_the_bus(hub_conn, SITE, world.namespace, NAME))["intent"]
    assert seq > on_the_bus["intent"][0] and owner == identity

    await target.delete(CLUSTER, NAME, namespace=NS)  # CAPI deletes the RKCP, the hub the TCP

    async def gone() -> dict[str, Any]:
        return {
            "cluster": await target.get_or_none(CLUSTER, NAME, namespace=NS),
            "rkcp": await target.get_or_none(RKCP, NAME, namespace=NS),
            "tcp": await site.get_or_none(TCP, NAME, namespace=world.namespace),
        }

    await helpers.eventually(
        gone,
        lambda found: not any(found.values()),
        within=180,
        every=0.5,
        what="the Cluster deleted to its site",
    )
    assert world.failures() == []
