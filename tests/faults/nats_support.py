"""What the NATS fault scenarios share: a burst of control planes to kill a server in the middle
of, and the error lines a killed nats-server explains.

Used by tests/faults/test_nats_faults.py (one server) and test_nats_cluster_faults.py (three).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field

import aiohttp

from common.kube import resources
from sandbox.launcher import System
from tests import helpers

SERVER_ERRORS = re.compile(
    r"^nats-(server|\d+): .*\[ERR\] .*("
    r"Error trying to connect to route|connection refused|connection reset by peer|broken pipe|EOF)"
)
"""nats-server's own [ERR] lines about a peer that is away (the killed node, or the routes of the
one started again): "Error trying to connect to route ... connection refused", a route's writes
failing with "connection reset by peer" / "broken pipe". Nothing else is explained by killing a
server: not a JetStream error of nats-server, not an error line of the hub or an agent (they must
only warn while NATS is away)."""


@dataclass
class Burst:
    """``count`` Cluster + RKCP pairs created one after another, alternating between the sites,
    in a task of their own (creating goes to the management cluster, not to NATS)."""

    world: System
    prefix: str
    count: int
    created: list[str] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def start(self) -> Burst:
        self.task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def _run(self) -> None:
        sites = self.world.sites
        for i in range(self.count):
            name = f"{self.prefix}-{i}"
            await self.world.create_control_plane(name, site=sites[i % len(sites)])
            self.created.append(name)

    async def reached(self, count: int) -> None:
        """Wait until ``count`` of them exist: the middle of the burst."""

        async def enough() -> bool:
            if self.task is not None and self.task.done():
                self.task.result()  # the burst failed: say why
            return len(self.created) >= count

        await helpers.eventually(enough, within=60, every=0.02)

    async def done(self) -> None:
        assert self.task is not None
        await self.task

    @property
    def workload(self) -> str:
        return f"{self.count} RKCPs created at {len(self.world.sites)} sites"

    async def applied(self) -> int:
        """How many of them have their TCP at their site: intents flow."""
        names = set(self.created)
        found = 0
        for site in self.world.sites:
            tcps = await self.world.site_kube(site).list(resources.TENANT_CONTROL_PLANE)
            found += sum(1 for tcp in tcps.items if tcp["metadata"]["name"] in names)
        return found

    async def in_flight(self, *, created: int) -> None:
        """Wait until ``created`` of them exist and at least one was applied at its site: the
        middle of the burst, with intents being published, fetched and applied."""
        await self.reached(created)

        async def flowing() -> bool:
            return await self.applied() >= 1

        await helpers.eventually(flowing, within=60, every=0.05)


async def readiness(url: str) -> tuple[int, str]:
    """A process's /readyz: status and text (what it says it is doing)."""
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session,
        session.get(f"{url}/readyz") as response,
    ):
        return response.status, await response.text()


async def noticed_nats_down(url: str) -> None:
    """Wait until the process at ``url`` says on /readyz that NATS is away (it noticed, so the
    outage spans its retries rather than falling between two of them)."""

    async def down() -> bool:
        status, text = await readiness(url)
        return status != 200 and "nats" in text

    await helpers.eventually(down, within=30, every=0.1)
