"""The whole system as processes, started once per module by the sandbox's launcher.

``world`` runs NATS, three emulated clusters (mgmt, site-a, site-b), a Kamaji simulator per site,
``kamaji-broker hub`` and one ``kamaji-broker agent`` per site, all as separate OS processes
with the credentials the real CLI generated, and provisions two control planes per site
(``site-a-1`` … ``site-b-2``) before any test runs. Tests that change or delete control planes
create their own, so every test may rely on the base ones being Ready.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from common import bus
from sandbox.launcher import System, workload
from tests import helpers, systems

SITES = ("site-a", "site-b")
PER_SITE = 2
BASE = workload.control_plane_names(SITES, per_site=PER_SITE)
"""(name, site) of the control planes every test may rely on."""


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=systems.BACKENDS)
async def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[System]:
    """Every test of a module runs on both backends: the emulator and real Kubernetes."""
    kubernetes = systems.backend(request)
    directory = tmp_path_factory.mktemp("e2e") / "sandbox"
    async with systems.running(directory, sites=SITES, base=BASE, kubernetes=kubernetes) as system:
        yield system


@pytest_asyncio.fixture(loop_scope="module")
async def hub_conn(world: System) -> AsyncIterator[bus.Connection]:
    """A NATS connection with the hub's generated identity (it may read every stream)."""
    conn = await bus.connect(helpers.options(world.nats_url, seed_file=world.hub_credential()), deadline=10)
    yield conn
    await conn.close()
