"""The hub's replicas sharing the sites (``--shard``): each leads its share, a killed replica's
share is taken over by the survivor, and when it comes back the shares are rebalanced; no site
is led by two replicas at any moment seen, and nothing is lost (the invariants of
``sandbox.launcher.invariants``). Real processes throughout: two hub replicas, three sites.

Which replica leads a site is read off each replica's own metrics: a site's gauges
(``kb_hub_site_connected``) exist only in the term that leads it, and are cleared when that term
ends, before the replica's Lease says it let go.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from hub.reconcile import shares
from sandbox.launcher import System, invariants, workload
from tests import helpers, systems
from tests.faults.measure import Measure
from tests.faults.test_hub_faults import Names, burst, create, mid_burst, remove

pytestmark = [pytest.mark.asyncio(loop_scope="module"), systems.BOTH]

SITES = ("site-a", "site-b", "site-c")
BASE = workload.control_plane_names(SITES, per_site=1)
HUBS = ("hub", "hub-1")
SHARES = {hub: {site for site in SITES if shares.owner(site, HUBS) == hub} for hub in HUBS}
"""Who leads what with both up (rendezvous hashing of the replica names)."""
_GAUGE = re.compile(r'^kb_hub_site_connected\{site="([^"]+)"\}', re.MULTILINE)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[System]:
    kubernetes = systems.backend(request)
    directory = tmp_path_factory.mktemp("hub-shards") / "sandbox"
    settings = {"hub_replicas": 2, "shard": True, "kamaji_delay": 1.0, "kubernetes": kubernetes}
    async with systems.running(directory, sites=SITES, base=BASE, **settings) as w:
        yield w


async def led(world: System) -> dict[str, set[str]]:
    """The sites each replica leads now (a replica that does not answer leads none)."""

    async def one(http: aiohttp.ClientSession, hub: str) -> set[str]:
        try:
            async with http.get(f"{world.hub_health_urls[hub]}/metrics") as answer:
                return set(_GAUGE.findall(await answer.text()))
        except aiohttp.ClientError:
            return set()

    async with aiohttp.ClientSession() as http:
        found = await asyncio.gather(*(one(http, hub) for hub in HUBS))
    return dict(zip(HUBS, found, strict=True))


class Overlaps:
    """Every look at both replicas' shares, while it runs: any site led by both is kept."""

    def __init__(self, world: System) -> None:
        self.world = world
        self.seen: list[tuple[str, dict[str, set[str]]]] = []
        self.looks = 0

    async def run(self) -> None:
        while True:
            now = await led(self.world)
            self.looks += 1
            both = set.intersection(*now.values())
            if both:
                self.seen.append((", ".join(sorted(both)), now))
            await asyncio.sleep(0.1)


def split(now: dict[str, set[str]]) -> bool:
    return now == SHARES


async def test_a_killed_replicas_sites_are_taken_over_and_given_back_when_it_returns(
    world: System, fault: Measure
) -> None:
    assert all(SHARES.values()), f"both replicas lead some site: {SHARES}"
    await helpers.eventually(lambda: led(world), split, within=60, every=0.2, what="the sites shared")
    overlaps = Overlaps(world)
    watching = asyncio.create_task(overlaps.run())
    names: Names = burst("shard", per_site=4)
    try:
        await create(world, names)
        await helpers.eventually(lambda: mid_burst(world, names), within=60, every=0.1)
        victim = str(shares.owner(shares.SINGLETONS, HUBS))  # the credential service goes over too
        fault.inject(world, fault=f"hub replica {victim} SIGKILL mid-burst", workload="12 RKCPs created")
        await world.kill(victim)
        await fault.lifted(world)
        await fault.converges(world)
        [survivor] = [hub for hub in HUBS if hub != victim]
        assert (await led(world))[survivor] == set(SITES)

        await world.start_again(victim)
        await helpers.eventually(lambda: led(world), split, within=60, every=0.2, what="the shares again")
        more: Names = burst("rejoined", per_site=2)
        await create(world, more)
        names += more
        await helpers.eventually(lambda: invariants.converged(world), within=120, every=0.5)
    finally:
        watching.cancel()
    assert overlaps.looks > 10 and overlaps.seen == []
    await remove(world, names)
