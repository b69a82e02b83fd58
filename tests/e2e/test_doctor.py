"""`kamaji-broker doctor hub|agent` with exactly the flags the sandbox's launcher runs hub and agent
with (operator mode, TLS, the agent's identity Secret at its site): healthy, then with the NATS
server stopped. And the agent's /readyz, which doctor reads: it answers while a check is bad."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from sandbox.launcher import Topology
from tests import helpers, topologies
from tests.cli.test_doctor import Run

pytestmark = pytest.mark.e2e


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Topology]:
    directory = tmp_path_factory.mktemp("doctor") / "sandbox"
    async with topologies.running(directory, sites=("site-a",), base=[("site-a-1", "site-a")]) as topology:
        yield topology


async def doctor(world: Topology, process: str, *extra: str) -> Run:
    """doctor with the process's own command line: ``... kamaji-broker <role> FLAGS`` →
    ``... kamaji-broker doctor <role> FLAGS``."""
    args = list(world.child(process).args)
    role = args.index("hub" if process == "hub" else "agent")
    command = [sys.executable, *args[1:role], "doctor", *args[role:], *extra]
    proc = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=100)
    return Run(proc.returncode if proc.returncode is not None else -1, out.decode(), err.decode())


READYZ_BOUND = 5.0
"""Seconds within which a running agent's /readyz must answer: it is computed from state."""


async def readyz(world: Topology, site: str) -> tuple[int, str]:
    """The agent's /readyz; a TimeoutError when it does not answer within ``READYZ_BOUND``."""
    timeout = aiohttp.ClientTimeout(total=READYZ_BOUND)
    url = f"{world.agent_health_urls[site]}/readyz"
    async with aiohttp.ClientSession(timeout=timeout) as s, s.get(url) as response:
        return response.status, await response.text()


@pytest.mark.asyncio(loop_scope="module")
async def test_readyz_answers_and_says_so_while_the_sites_api_server_hangs(world: Topology) -> None:
    """The site's API server stopped (SIGSTOP): it takes connections and answers nothing. The
    agent's /readyz answers at once, every time, and within a probe's bound says why it is not
    ready, instead of the "reachable" of its last answer."""
    world.pause("kubeapi-site-a")
    try:
        status, text = await helpers.eventually(
            lambda: readyz(world, "site-a"),
            lambda got: "[-] kubernetes" in got[1],
            within=60,
            every=0.5,
            what="/readyz saying the API server does not answer",
        )
    finally:
        world.resume("kubeapi-site-a")
    assert status == 503, text
    assert "[-] kubernetes: API server: no answer within 10s" in text, text
    assert "[+] nats: connected" in text, text
    await helpers.eventually(lambda: readyz(world, "site-a"), lambda got: got[0] == 200, within=60)


@pytest.mark.asyncio(loop_scope="module")
async def test_doctor_in_the_sandbox(world: Topology) -> None:
    hub = await doctor(world, "hub")
    assert hub.code == 0, hub.out + hub.err
    assert hub.out.endswith("13 PASS, 0 WARN, 0 FAIL, 1 SKIP\n"), hub.out  # 1: the grants not probed
    assert "minted from" in hub.line("PASS", "credential valid")
    agent = await doctor(world, "agent-site-a")
    assert agent.code == 0, agent.out + agent.err
    assert agent.out.endswith("13 PASS, 0 WARN, 0 FAIL, 1 SKIP\n"), agent.out
    assert "Secret default/" in agent.line("PASS", "credential valid")

    for name in world.nats_names:
        await world.kill(name)
    agent = await doctor(world, "agent-site-a")
    assert agent.code == 1
    line = agent.line("FAIL", "nats reachable")
    assert "refused: " in line and "fix: nothing listens at --nats-url" in line
    assert agent.line("SKIP", "consumer bound") == "SKIP consumer bound needs permission granted (SKIP)\n"
    agent.line("PASS", "rbac")  # what does not need NATS is still checked
