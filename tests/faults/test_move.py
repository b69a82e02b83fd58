"""``clusterctl move`` with real processes: a control plane Ready under the first
management cluster's hub is moved, the way clusterctl moves it (``tests.moving``), to a second
emulated management cluster; the first hub is stopped, a hub is started on the second (same
NATS, same hub keys), and it takes over the running TenantControlPlane: never deleted nor
recreated (its uid stays), no Conflict, no new intent, the RKCP Ready with its CAPI Secrets. It
then drives it (a spec change) and deletes it, by the owner identity stamped before the move.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from common import bus
from common import kube as ckube
from common.kube import resources
from hub.api import rkcp as api
from protocol import names
from sandbox.launcher import System, invariants
from tests import helpers, moving, systems

pytestmark = [pytest.mark.asyncio(loop_scope="module")]

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE
NS = "default"
SITE = "site-a"
NAME = "pivot"
TARGET = "mgmt-2"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    """One site, one base control plane: the first management cluster's world."""
    directory = tmp_path_factory.mktemp("move") / "sandbox"
    async with systems.running(directory, sites=(SITE,), base=(("base-a", SITE),)) as w:
        yield w


@pytest_asyncio.fixture(loop_scope="module")
async def hub_conn(world: System) -> AsyncIterator[bus.Connection]:
    """A NATS connection with the hub's identity (it may read every stream)."""
    conn = await bus.connect(helpers.options(world.nats_url, seed_file=world.hub_credential()), deadline=10)
    yield conn
    await conn.close()


async def ready(management: ckube.Kube) -> dict[str, Any]:
    """The RKCP once Ready with its CAPI Secrets synced."""

    def done(obj: dict[str, Any] | None) -> bool:
        conds = invariants.conditions(obj) if obj is not None else {}
        return conds.get("Ready") == "True" and conds.get("SecretsSynced") == "True"

    found = await helpers.eventually(
        lambda: management.get_or_none(RKCP, NAME, namespace=NS), done, within=90, every=0.2, what="Ready"
    )
    assert found is not None
    return found


async def test_the_target_management_cluster_takes_over_the_running_control_plane(
    world: System, hub_conn: bus.Connection
) -> None:
    site = world.site_kube(SITE)
    await world.create_control_plane(NAME, site=SITE)
    before = await ready(world.mgmt)
    identity = before["metadata"]["uid"]
    assert before["metadata"]["annotations"][api.OWNER_UID_ANNOTATION] == identity  # stamped
    tcp = await site.get(TCP, NAME, namespace=world.namespace)
    bus_before = await moving.on_the_bus(hub_conn, SITE, world.namespace, NAME)
    assert {owner for _, owner in bus_before.values()} == {identity}

    target = await world.start_management(TARGET)
    moved = await moving.move(world.mgmt, target, namespace=NS, cluster=NAME)  # the first hub runs
    assert await world.mgmt.get_or_none(RKCP, NAME, namespace=NS) is None
    await world.retire("hub")
    await world.start_hub(f"hub-{TARGET}", cluster=TARGET)
    # Paused in the target: the new hub only shows it, and meets no Conflict.
    paused = await helpers.eventually(
        lambda: target.get_or_none(RKCP, NAME, namespace=NS),
        lambda o: invariants.conditions(o or {}).get("Paused") == "True",
        within=60,
        every=0.2,
        what="the moved RKCP Paused",
    )
    assert paused is not None and paused["metadata"]["uid"] == moved.uids[identity] != identity
    assert moving.conflicts(paused) == []
    await moving.resume(target, namespace=NS, cluster=NAME)
    after = await ready(target)
    assert (
        moving.conflicts(after) == []
        and after["metadata"]["annotations"][api.OWNER_UID_ANNOTATION] == identity
    )

    # Never deleted nor recreated; nothing published, by either hub: the subjects hold what the
    # first hub and the site left there, all of the stamped identity.
    now = await site.get(TCP, NAME, namespace=world.namespace)
    assert (now["metadata"]["uid"], now["metadata"]["generation"]) == (
        tcp["metadata"]["uid"],
        tcp["metadata"]["generation"],
    )
    assert (await moving.on_the_bus(hub_conn, SITE, world.namespace, NAME))["intent"] == bus_before["intent"]
    # The CAPI Secrets in the target: the site's admin kubeconfig, owned by the object as it is now.
    kubeconfig = await target.get(resources.SECRET, names.capi_kubeconfig(NAME), namespace=NS)
    at_site = await site.get(resources.SECRET, names.kamaji_kubeconfig(NAME), namespace=world.namespace)
    assert kubeconfig["data"][names.CAPI_KUBECONFIG_KEY] == at_site["data"][names.ADMIN_KUBECONFIG_KEY]
    assert [o["uid"] for o in kubeconfig["metadata"]["ownerReferences"]] == [after["metadata"]["uid"]]

    # The new hub drives it, by the stamped identity: a spec change, then a delete.
    await target.patch(RKCP, NAME, {"spec": {"replicas": 3}}, namespace=NS)

    async def scaled() -> bool:
        found = await site.get(TCP, NAME, namespace=world.namespace)
        return bool(found["spec"]["controlPlane"]["deployment"]["replicas"] == 3)

    await helpers.eventually(scaled, within=60, every=0.2, what="replicas 3 at the site")
    assert (await site.get(TCP, NAME, namespace=world.namespace))["metadata"]["uid"] == tcp["metadata"]["uid"]
    seq, owner = (await moving.on_the_bus(hub_conn, SITE, world.namespace, NAME))["intent"]
    assert seq > bus_before["intent"][0] and owner == identity
    await target.delete(RKCP, NAME, namespace=NS)

    async def gone() -> bool:
        rkcp = await target.get_or_none(RKCP, NAME, namespace=NS)
        return rkcp is None and await site.get_or_none(TCP, NAME, namespace=world.namespace) is None

    await helpers.eventually(gone, within=60, every=0.2, what="the moved control plane deleted at the site")
    assert world.failures() == []
