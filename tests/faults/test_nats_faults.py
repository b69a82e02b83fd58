"""NATS faults, one server: nats-server SIGKILLed in the middle of a burst of control
planes and started again on the same store. Everything converges and nothing is lost: every
intent applied (a TCP per RKCP at its site, with its spec), every status and sealed secret
arrived (every RKCP Ready, its CAPI Secrets the site's current admin kubeconfig), no duplicate.

The cluster faults (three nodes, R3 streams) are in test_nats_cluster_faults.py, with a topology
of their own.
"""

from __future__ import annotations

import pytest

from sandbox.launcher import System
from tests.faults.measure import Measure
from tests.faults.nats_support import SERVER_ERRORS, Burst, noticed_nats_down

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_nats_server_killed_mid_burst_and_started_again(world: System, fault: Measure) -> None:
    burst = Burst(world, "nk", 12)
    fault.inject(
        world, fault="nats-server SIGKILL mid-burst, started again on its store", workload=burst.workload
    )
    burst.start()
    await burst.in_flight(created=4)
    await world.kill("nats-server")
    # The rest are created while NATS is away (the hub publishes them later); hub and agents
    # notice and say so, then the server comes back on the same port and store.
    await burst.done()
    await noticed_nats_down(world.hub_health_url)
    for site in world.sites:
        await noticed_nats_down(world.agent_health_urls[site])
    await world.start_again("nats-server")
    await fault.lifted(world)
    await fault.converges(world, allowed_errors=[SERVER_ERRORS])
