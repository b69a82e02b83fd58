"""Partitions: a site's link to NATS cut (briefly, and past its agent's connection and a
deletion timeout), cut one way, slowed and lossy, or flapping, while control planes are created,
upgraded and deleted there.

The world runs with ``site_links``: each site (its API server, Kamaji simulator and agent) and
the nats-server in a network namespace of their own, a site reaching NATS over a veth pair whose
traffic with the nats-server ``world.link(site)`` shapes (``sandbox.sitenet.Link``). While a
site is cut off, its control planes say so (``SiteConnected=False``, ``HeartbeatMissing``);
after the heal everything converges with nothing written twice or lost, and nobody intervenes
(``fault.converges``: the invariants of ``sandbox.launcher.invariants``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Callable, Sequence

import pytest
import pytest_asyncio

from common.kube import resources
from sandbox.launcher import System, invariants
from sandbox.sitenet import CLEAR, DOWN, Counts, Shape
from tests import helpers, systems
from tests.faults.conftest import BASE, SITES
from tests.faults.measure import Measure
from tests.faults.nats_support import noticed_nats_down

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(shutil.which("iptables") is None, reason="iptables is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces are made as root"),
]

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
NS = "default"
SITE = "site-a"
BURST = 6


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    directory = tmp_path_factory.mktemp("partitions") / "sandbox"
    # PINGs every 2 s: a cut of more than about 8 s outlasts the agent's connection (a cut of
    # minutes does at the default 20 s), which it then leaves and makes again after the heal.
    args = ("--nats-ping-interval", "2s")
    async with systems.running(directory, sites=SITES, base=BASE, site_links=True, args=args) as system:
        yield system


@pytest_asyncio.fixture(autouse=True, loop_scope="module")
async def healed(world: System) -> AsyncIterator[None]:
    """Every scenario leaves the link clear, also one that failed (the next is not to inherit it)."""
    yield
    await world.link(SITE).shape(out=CLEAR, into=CLEAR)


async def _site_says(world: System, names: Sequence[str], status: str, reason: str = "") -> None:
    """Until every one of ``names`` has ``SiteConnected`` at ``status`` (with ``reason``)."""

    async def said() -> bool:
        for name in names:
            obj = await world.mgmt.get_or_none(RKCP, name, namespace=NS)
            found = {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or ()}
            got = found.get("SiteConnected") or {}
            if got.get("status") != status or (reason and got.get("reason") != reason):
                return False
        return True

    await helpers.eventually(said, within=90, every=0.3)


async def _churn(world: System, prefix: str) -> tuple[list[str], list[invariants.Deleted]]:
    """At SITE: BURST control planes created, the first upgraded, the last deleted (its intent
    published while the site may not hear it); the names left and the one deleted."""
    names = [f"{prefix}-{i}" for i in range(BURST)]
    for name in names:
        await world.create_control_plane(name, site=SITE)
    await systems.update_control_plane(world, names[0], version="v1.32.0")
    await systems.delete_control_plane(world, names[-1])
    return names[:-1], [(NS, names[-1], SITE)]


WORKLOAD = f"{BURST} created, 1 upgraded, 1 deleted"


async def _churn_behind(
    world: System,
    fault: Measure,
    prefix: str,
    what: str,
    *,
    workload: str = WORKLOAD,
    out: Shape | None = None,
    into: Shape | None = None,
) -> tuple[list[str], list[invariants.Deleted]]:
    """The fault (SITE's link ``what``, shaped ``out``/``into`` as given), then ``_churn``."""
    fault.inject(world, fault=f"{SITE}'s link {what}", workload=workload)
    if out is not None or into is not None:
        await world.link(SITE).shape(out=out, into=into)
    return await _churn(world, prefix)


async def _converges(
    world: System,
    fault: Measure,
    kept: Sequence[str],
    deleted: Sequence[invariants.Deleted],
    *,
    heal_first: bool = True,
) -> None:
    """The link healed (or, not ``heal_first``, after converging over it), the invariants
    holding, and the scenario's control planes deleted."""
    if heal_first:
        await world.link(SITE).shape(out=CLEAR, into=CLEAR)
    await fault.lifted(world)
    await fault.converges(world, deleted=deleted, within=120 if heal_first else 180)
    await world.link(SITE).shape(out=CLEAR, into=CLEAR)
    await systems.delete_all(world, kept, SITE)


async def test_a_site_cut_off_during_a_burst_says_so_and_converges_after_the_heal(
    world: System, fault: Measure
) -> None:
    kept, deleted = await _churn_behind(world, fault, "cut", "to NATS cut both ways", out=DOWN, into=DOWN)
    base = [name for name, site in BASE if site == SITE]
    await _site_says(world, [*kept, *base], "False", "HeartbeatMissing")
    await _converges(world, fault, kept, deleted)
    await _site_says(world, base, "True")


async def test_a_partition_outlasting_the_connection_and_a_deletion_timeout_converges(
    world: System, fault: Measure
) -> None:
    released = "released"
    await world.create_control_plane(released, site=SITE, siteUnavailableDeletionTimeout="2s")
    await _site_says(world, [released], "True")
    workload = f"{BURST} created, 1 upgraded, 2 deleted (one released past its 2s site timeout)"
    what = "cut past its agent's NATS connection and a deletion timeout"
    kept, deleted = await _churn_behind(world, fault, "long", what, workload=workload, out=DOWN, into=DOWN)
    await systems.delete_control_plane(world, released)

    async def let_go() -> bool:  # the hub gave up waiting for the site: the RKCP is gone
        return await world.mgmt.get_or_none(RKCP, released, namespace=NS) is None

    await helpers.eventually(let_go, within=90, every=0.3)
    # The agent counted its connection stale (no PONG) and left it: it connects anew after the heal.
    await noticed_nats_down(world.agent_health_urls[SITE])
    await _converges(world, fault, kept, [*deleted, (NS, released, SITE)])


@pytest.mark.parametrize("deaf", ["site hears nothing", "nothing the site says arrives"])
async def test_a_one_way_partition_converges_after_the_heal(world: System, fault: Measure, deaf: str) -> None:
    hears = deaf == "site hears nothing"
    what = f"one way: {deaf}"
    if hears:
        kept, deleted = await _churn_behind(world, fault, "oneway", what, into=DOWN)
    else:
        kept, deleted = await _churn_behind(world, fault, "mute", what, out=DOWN)
    # The hub hears no heartbeat either way: the site's answers are lost, or its TCP acks are.
    await _site_says(world, kept, "False", "HeartbeatMissing")
    await _converges(world, fault, kept, deleted)


async def test_a_slow_lossy_link_during_provisioning_converges(world: System, fault: Measure) -> None:
    lossy = Shape(delay=0.1, jitter=0.01, loss=0.05)
    what = "at 200 ms round trip, 5% loss each way"
    kept, deleted = await _churn_behind(world, fault, "lossy", what, out=lossy, into=lossy)
    await _packets_dropped(world)  # the link does lose packets, both ways
    # Provisioning goes on over the bad link: every control plane Ready before it is healed.
    await _converges(world, fault, kept, deleted, heal_first=False)


async def test_a_flapping_link_converges_once_it_holds(world: System, fault: Measure) -> None:
    kept, deleted = await _churn_behind(world, fault, "flap", "down and up again 10 times")
    link = world.link(SITE)
    for _ in range(10):
        await link.shape(out=DOWN, into=DOWN)
        await _packets_dropped(world, both=False)
        await link.shape(out=CLEAR, into=CLEAR)
        await _packets_passed(world, both=False)
    await _converges(world, fault, kept, deleted)


async def _packets_dropped(world: System, *, both: bool = True) -> None:
    """Until the link has dropped more packets than it had: in each direction, or (not ``both``:
    a site without a connection only knocks) in either."""
    await _more(world, lambda out, into: (out.dropped, into.dropped), both=both)


async def _packets_passed(world: System, *, both: bool = True) -> None:
    """Until the link has passed more packets than it had, in each direction (or in either)."""
    await _more(world, lambda out, into: (out.passed, into.passed), both=both)


async def _more(world: System, count: Callable[[Counts, Counts], tuple[int, int]], *, both: bool) -> None:
    before = count(*await world.link(SITE).counts())

    async def more() -> bool:
        now = count(*await world.link(SITE).counts())
        grew = [n > b for n, b in zip(now, before, strict=True)]
        return all(grew) if both else any(grew)

    await helpers.eventually(more, within=60, every=0.1)
