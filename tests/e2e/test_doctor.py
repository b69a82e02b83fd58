"""`kamaji-broker doctor hub|agent` with exactly the flags the sandbox's launcher runs hub and agent
with (operator mode, TLS, the agent's identity Secret at its site): healthy, then with the NATS
server stopped. And the agent's /readyz, which doctor reads: it answers while a check is bad."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
import pytest_asyncio

from common import bus
from protocol import streams, subjects
from sandbox.launcher import System
from tests import helpers, systems
from tests.cli.doctor_support import Run

pytestmark = pytest.mark.e2e


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=systems.BACKENDS)
async def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[System]:
    """On both backends: on real clusters doctor's RBAC checks are the real authorizer's
    SelfSubjectAccessReviews, for the ServiceAccounts hub and agent run as."""
    kubernetes = systems.backend(request)
    directory = tmp_path_factory.mktemp("doctor") / "sandbox"
    base = [("site-a-1", "site-a")]
    async with systems.running(directory, sites=("site-a",), base=base, kubernetes=kubernetes) as topology:
        yield topology


async def doctor(world: System, process: str, *extra: str) -> Run:
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


async def readyz(world: System, site: str) -> tuple[int, str]:
    """The agent's /readyz; a TimeoutError when it does not answer within ``READYZ_BOUND``."""
    timeout = aiohttp.ClientTimeout(total=READYZ_BOUND)
    url = f"{world.agent_health_urls[site]}/readyz"
    async with aiohttp.ClientSession(timeout=timeout) as s, s.get(url) as response:
        return response.status, await response.text()


@pytest.mark.asyncio(loop_scope="module")
async def test_readyz_answers_and_says_so_while_the_sites_api_server_hangs(world: System) -> None:
    """The site's API server stopped (SIGSTOP): it takes connections and answers nothing. The
    agent's /readyz answers at once, every time, and within a probe's bound says why it is not
    ready, instead of the "reachable" of its last answer."""
    world.pause(world.api_server("site-a"))
    try:
        status, text = await helpers.eventually(
            lambda: readyz(world, "site-a"),
            lambda got: "[-] kubernetes" in got[1],
            within=60,
            every=0.5,
            what="/readyz saying the API server does not answer",
        )
    finally:
        world.resume(world.api_server("site-a"))
    assert status == 503, text
    assert "[-] kubernetes: API server: no answer within 10s" in text, text
    assert "[+] nats: connected" in text, text
    await helpers.eventually(lambda: readyz(world, "site-a"), lambda got: got[0] == 200, within=60)


async def heartbeat_age(world: System, site: str) -> float:
    """Seconds since ``site``'s latest heartbeat reached the bus (read with the hub's user)."""
    options = bus.Options(
        servers=tuple(world.nats_urls), creds_file=world.hub_credential(), ca_file=world.nats_ca_file
    )
    conn = await bus.connect(options, deadline=10)
    try:
        stored = await bus.last_message(conn, streams.site_stream_name(site), subjects.heartbeat(site))
    finally:
        await conn.close()
    assert stored is not None and stored.time is not None
    return time.time() - stored.time.timestamp()


@pytest.mark.asyncio(loop_scope="module")
async def test_doctor_tells_a_stopped_agent_from_a_live_one(world: System) -> None:
    """SIGSTOP: the agent's connections, its consumer and its pod stay; it answers nothing."""
    interval = world.options.heartbeat_interval
    world.pause("agent-site-a")
    try:
        await helpers.eventually(
            lambda: heartbeat_age(world, "site-a"),
            lambda age: age > 3 * interval + 1,
            within=60,
            every=0.5,
            what="a heartbeat older than three intervals",
        )
        stopped = await doctor(world, "agent-site-a")
    finally:
        world.resume("agent-site-a")
    assert stopped.code == 1, stopped.out + stopped.err
    assert stopped.failed() == ["heartbeat fresh", "readyz answered"], stopped.out
    line = stopped.line("FAIL", "heartbeat fresh")
    assert "agent not running or stalled: last heartbeat " in line, line
    assert f"s ago, interval {interval:g}s (the agent started " in line, line
    readyz_url = f"{world.agent_health_urls['site-a']}/readyz"
    assert f"{readyz_url} did not answer within 5s" in stopped.line("FAIL", "readyz answered")
    stopped.line("PASS", "consumer bound")  # what looked healthy before

    await helpers.eventually(lambda: heartbeat_age(world, "site-a"), lambda age: age < interval, within=60)
    live = await doctor(world, "agent-site-a")
    assert live.code == 0, live.out + live.err
    assert f"interval {interval:g}s; agent started " in live.line("PASS", "heartbeat fresh")
    assert f"{readyz_url}: ready (" in live.line("PASS", "readyz answered")


@pytest.mark.asyncio(loop_scope="module")
async def test_doctor_in_the_sandbox(world: System) -> None:
    hub = await doctor(world, "hub")
    assert hub.code == 0, hub.out + hub.err
    assert hub.out.endswith("13 PASS, 0 WARN, 0 FAIL, 1 SKIP\n"), hub.out  # 1: the grants not probed
    assert "minted from" in hub.line("PASS", "credential valid")
    agent = await doctor(world, "agent-site-a")
    assert agent.code == 0, agent.out + agent.err
    assert agent.out.endswith("15 PASS, 0 WARN, 0 FAIL, 1 SKIP\n"), agent.out
    namespace = world.agent_identity_secret("site-a").split("/")[0]
    assert f"Secret {namespace}/" in agent.line("PASS", "credential valid")

    for name in world.nats_names:
        await world.kill(name)
    agent = await doctor(world, "agent-site-a")
    assert agent.code == 1
    line = agent.line("FAIL", "nats reachable")
    assert "refused: " in line and "fix: nothing listens at --nats-url" in line
    assert agent.line("SKIP", "consumer bound") == "SKIP consumer bound needs permission granted (SKIP)\n"
    agent.line("PASS", "rbac")  # what does not need NATS is still checked
