"""The whole topology as processes, started once per module by the sandbox's launcher.

``world`` runs NATS, three emulated clusters (mgmt, site-a, site-b), a Kamaji simulator per site,
``kamaji-broker hub`` and one ``kamaji-broker agent`` per site, all as separate OS processes
with the credentials the real CLI generated, and provisions two control planes per site
(``site-a-1`` … ``site-b-2``) before any test runs. Tests that change or delete control planes
create their own, so every test may rely on the base ones being Ready.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from common import bus
from sandbox.launcher import Topology, workload
from tests import helpers

SITES = ("site-a", "site-b")
PER_SITE = 2
BASE = workload.control_plane_names(SITES, per_site=PER_SITE)
"""(name, site) of the control planes every test may rely on."""

KAMAJI_CRD = (
    Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "kamaji-tenantcontrolplane-crd.yaml"
)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def until(check: Callable[[], Awaitable[bool]], *, within: float = 60.0) -> None:
    await helpers.eventually(check, within=within, every=0.2)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Topology]:
    topology = Topology(
        tmp_path_factory.mktemp("e2e") / "sandbox", sites=SITES, kamaji_delay=0.3, heartbeat_interval=2.0
    )
    await topology.start()
    # Clients of the tests verify this topology's server with the CA its nats-config made.
    helpers.trust(topology.nats_url, topology.nats_ca_file)
    pids = [c.pid for c in topology.children if c.pid is not None]
    try:
        for name, site in BASE:
            await topology.create_control_plane(name, site=site)

        async def all_ready() -> bool:
            return (await topology.progress()).done

        await until(all_ready)
        yield topology
    finally:
        await topology.stop()
    # stop() is part of what is tested: by PID, nothing it started may outlive it.
    assert [pid for pid in pids if alive(pid)] == []


@pytest_asyncio.fixture(loop_scope="module")
async def hub_conn(world: Topology) -> AsyncIterator[bus.Connection]:
    """A NATS connection with the hub's generated identity (it may read every stream)."""
    conn = await bus.connect(helpers.options(world.nats_url, seed_file=world.hub_seed), deadline=10)
    yield conn
    await conn.close()
