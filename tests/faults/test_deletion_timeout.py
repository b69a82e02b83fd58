"""Deletion past the site timeout: the site's agent is killed, an RKCP with a
short ``siteUnavailableDeletionTimeout`` is deleted and released, and (second scenario) the same
Cluster and RKCP are created again before the site returns. Once the agent is started again the
topology converges: the released owner's TCP is gone (replaced by the new owner's), and nothing
of the released owner is left in the streams. Real processes throughout; each scenario ends with
the invariants of ``sandbox.launcher.invariants``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from agent.tcp import managed
from common import bus
from common.kube import resources
from protocol import messages, streams, subjects
from sandbox.launcher import System, invariants
from tests import helpers, systems
from tests.faults.measure import Measure

pytestmark = [pytest.mark.asyncio(loop_scope="module")]

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE
NS = "default"
SITE = "site-b"
TIMEOUT = "2s"
KINDS = (subjects.Kind.INTENT, subjects.Kind.STATUS, subjects.Kind.SECRET)


@pytest_asyncio.fixture(loop_scope="module")
async def hub_conn(world: System) -> AsyncIterator[bus.Connection]:
    """A NATS connection with the hub's generated identity (it may read every stream)."""
    conn = await bus.connect(helpers.options(world.nats_url, seed_file=world.hub_credential()), deadline=10)
    yield conn
    await conn.close()


async def owners_in_streams(conn: bus.Connection, world: System, name: str) -> dict[str, str]:
    """The owner uid of the last message on each subject of control plane ``name`` at SITE."""
    out: dict[str, str] = {}
    for kind in KINDS:
        stored = await bus.last_message(
            conn,
            streams.stream_name(kind, site=SITE),
            subjects.control_plane(kind, SITE, world.namespace, name),
        )
        if stored is None:
            continue
        if kind is subjects.Kind.INTENT:
            out[kind.value] = messages.decode_intent(stored.data).owner.uid
        elif kind is subjects.Kind.STATUS:
            out[kind.value] = messages.decode_status(stored.data).owner_uid
        else:
            out[kind.value] = messages.decode_sealed_secrets(stored.data).owner_uid
    return out


async def ready(world: System, name: str) -> dict[str, object]:
    found: list[dict[str, object]] = []

    async def check() -> bool:
        obj = await world.mgmt.get_or_none(RKCP, name, namespace=NS)
        found[:] = [obj] if obj is not None else []
        return obj is not None and invariants.conditions(obj).get("Ready") == "True"

    await helpers.eventually(check, within=60, every=0.2)
    return found[0]


async def release_while_dark(world: System, fault: Measure, name: str, *, workload: str) -> str:
    """``name`` Ready at SITE; the agent killed; the RKCP deleted and released by the timeout.
    Returns its uid."""
    await world.create_control_plane(name, site=SITE, siteUnavailableDeletionTimeout=TIMEOUT)
    obj = await ready(world, name)
    fault.inject(
        world, fault=f"agent-{SITE} SIGKILL, RKCP deleted past the {TIMEOUT} site timeout", workload=workload
    )
    await world.kill(f"agent-{SITE}")
    await systems.delete_control_plane(world, name)

    async def released() -> bool:
        return await world.mgmt.get_or_none(RKCP, name, namespace=NS) is None

    await helpers.eventually(released, within=60, every=0.2)
    assert await world.site_kube(SITE).get_or_none(TCP, name, namespace=world.namespace) is not None
    return str(obj["metadata"]["uid"])  # type: ignore[index]


async def test_released_deletion_is_applied_and_purged_when_the_site_returns(
    world: System, fault: Measure, hub_conn: bus.Connection
) -> None:
    name = "released"
    uid = await release_while_dark(
        world, fault, name, workload="1 Ready RKCP at site-b deleted, 2 base RKCPs"
    )
    assert (await owners_in_streams(hub_conn, world, name)).get("intent") == uid  # waiting for the site
    await world.start_again(f"agent-{SITE}")
    await fault.lifted(world)
    deleted = [(NS, name, SITE)]

    async def purged() -> bool:
        return await owners_in_streams(hub_conn, world, name) == {}

    await helpers.eventually(purged, within=60, every=0.3)
    await fault.converges(world, deleted=deleted)


async def test_recreated_under_the_same_name_before_the_site_returns(
    world: System, fault: Measure, hub_conn: bus.Connection
) -> None:
    name = "recreated"
    old_uid = await release_while_dark(
        world, fault, name, workload="1 Ready RKCP at site-b deleted and created again, 2 base RKCPs"
    )
    old_tcp = await world.site_kube(SITE).get(TCP, name, namespace=world.namespace)
    _, created = await world.create_control_plane(name, site=SITE, siteUnavailableDeletionTimeout=TIMEOUT)
    new_uid = str(created["metadata"]["uid"])

    async def replacing() -> bool:
        obj = await world.mgmt.get_or_none(RKCP, name, namespace=NS)
        found = [
            (c["status"], c["reason"])
            for c in ((obj or {}).get("status") or {}).get("conditions", ())
            if c["type"] == "TenantControlPlaneReady"
        ]
        return found == [("False", "ReplacingPreviousOwner")]

    await helpers.eventually(replacing, within=60, every=0.2)
    await world.start_again(f"agent-{SITE}")
    await fault.lifted(world)

    async def replaced_and_purged() -> bool:
        tcp = await world.site_kube(SITE).get_or_none(TCP, name, namespace=world.namespace)
        left = await owners_in_streams(hub_conn, world, name)
        return (
            tcp is not None
            and tcp["metadata"]["uid"] != old_tcp["metadata"]["uid"]
            and tcp["metadata"]["annotations"][managed.OWNER_UID] == new_uid
            and old_uid not in left.values()
        )

    await helpers.eventually(replaced_and_purged, within=60, every=0.3)
    await fault.converges(world)
    await ready(world, name)
    # Left as every scenario leaves the topology: only the base control planes and its own.
    await systems.delete_control_plane(world, name)
    deleted = [(NS, name, SITE)]
    await helpers.eventually(lambda: invariants.converged(world, deleted=deleted), within=60, every=0.3)
    assert await owners_in_streams(hub_conn, world, name) == {}
