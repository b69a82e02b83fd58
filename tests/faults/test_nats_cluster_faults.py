"""NATS faults, a three-node JetStream cluster: streams at 3 replicas, one node killed in
the middle of a burst, then the leader of KB_INTENTS killed in the middle of another. Everything
converges, nothing is lost, no TCP is duplicated.

Order: the first node (not a leader) is started again, and has caught up, before the leader is
killed. With 3 nodes and R3 streams, a quorum is 2: killing the leader while the first node is
still away would leave one node, and the streams would refuse every write until one came back,
which shows unavailability, not healing. So each kill leaves a quorum, and the second one
exercises a real election, with the node that was away among the candidates.

Each fault is measured twice: with the node still away (the cluster heals around it: seconds
from the end of the burst, scenario "... (node away)"), and after it is started again (the
``fault`` measure, seconds from the restart). One topology for the module (``cluster``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from protocol import streams
from sandbox.launcher import System
from tests import helpers, systems
from tests.faults.conftest import BASE, SITES
from tests.faults.measure import Measure
from tests.faults.nats_support import SERVER_ERRORS, Burst

# The first test also pays for the module's topology (three nats-servers, a meta leader election:
# 108 s on two busy cores): tests/faults/conftest.py's per-scenario ceiling covers it.
pytestmark = pytest.mark.asyncio(loop_scope="module")

INTENTS = streams.intents_stream_name()
STREAMS = (INTENTS, *(streams.site_stream_name(site) for site in SITES))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[System]:
    directory = tmp_path_factory.mktemp("nats-cluster") / "sandbox"
    async with systems.running(directory, sites=SITES, base=BASE, nats_nodes=3) as topology:
        yield topology


async def whole(world: System) -> None:
    """Every node up, caught up, agreeing on the meta leader and every stream's leader."""

    async def settled() -> bool:
        return await world.jetstream_settled(STREAMS)

    await helpers.eventually(settled, within=60, every=0.2)


async def killed_mid_burst(world: System, fault: Measure, victim: str, *, prefix: str, what: str) -> None:
    """Kill ``victim`` in the middle of a burst; converge with it away, then again once it is
    started again (and caught up)."""
    burst = Burst(world, prefix, 12)
    fault.inject(
        world, fault=f"{what} SIGKILL mid-burst, started again on its store", workload=burst.workload
    )
    away = Measure(scenario=f"{fault.scenario} (node away)")
    away.inject(world, fault=f"{what} SIGKILL mid-burst, not started again", workload=burst.workload)
    burst.start()
    await burst.in_flight(created=4)
    await world.kill(victim)
    await burst.done()
    # Two nodes of three keep every stream's quorum: the cluster heals around the dead node.
    await away.lifted(world)
    await away.converges(world, allowed_errors=[SERVER_ERRORS])
    await world.start_again(victim)
    await whole(world)
    await fault.lifted(world)
    await fault.converges(world, allowed_errors=[SERVER_ERRORS])


async def test_a_node_killed_mid_burst(cluster: System, fault: Measure) -> None:
    await whole(cluster)
    leaders = {await cluster.meta_leader(), await cluster.stream_leader(INTENTS)}
    # A node that leads neither the meta group nor KB_INTENTS (there is one unless both are on
    # one node; then any other node): its loss needs no election of the streams that matter.
    victim = next(name for name in cluster.nats_names if name not in leaders)
    await killed_mid_burst(cluster, fault, victim, prefix="nn", what=f"{victim} (no leader)")


async def test_the_stream_leader_killed_mid_burst(cluster: System, fault: Measure) -> None:
    await whole(cluster)
    leader = await cluster.stream_leader(INTENTS)
    assert leader in cluster.nats_names
    await killed_mid_burst(cluster, fault, leader, prefix="nl", what=f"{leader} (leader of {INTENTS})")
    # A new leader was elected while it was away; it may have won again since.
    assert await cluster.stream_leader(INTENTS) in cluster.nats_names
