"""`kamaji-broker doctor agent` beside a real agent process started with the same flags: a live
agent passes every check; a stopped one (SIGSTOP: its connections stay open, it answers
nothing) fails on its heartbeat's age and on its /readyz not answering in time, with the lines
that say so, and exit code 1."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from common import bus
from protocol import streams, subjects
from sandbox import kubeapi, natsd
from tests import helpers
from tests.cli.doctor_support import Setup, doctor, prepare

pytestmark = pytest.mark.timeout(120)

INTERVAL = 1.0
"""The agent's --heartbeat-interval here: doctor, given the same flags, judges by it."""


@pytest.fixture
async def setup(
    secured_nats: tuple[natsd.NatsServer, Path], cluster: kubeapi.Server, tmp_path: Path
) -> Setup:
    return await prepare(secured_nats, cluster, tmp_path)


def flags(setup: Setup) -> list[str]:
    return setup.agent(over={"--heartbeat-interval": f"{INTERVAL:g}"})


@pytest.fixture
async def agent(setup: Setup, tmp_path: Path) -> AsyncIterator[helpers.CliProcess]:
    """The agent of site-a, ready (bound to its consumer, beating)."""
    proc = helpers.CliProcess("agent", flags(setup), log=tmp_path / "agent.log")
    try:
        await proc.readyz(lambda status, _: status == 200)
        yield proc
    finally:
        if proc.p.poll() is None:
            proc.p.send_signal(signal.SIGCONT)  # a stopped process would hold SIGTERM pending
        # Off the loop: the agent talks to the emulator this test's loop serves.
        assert await asyncio.to_thread(proc.stop) == 0


async def heartbeat_age(setup: Setup) -> float:
    """Seconds since site-a's latest heartbeat reached the bus (read with the hub's user)."""
    hub = await bus.connect(helpers.options(setup.url, seed_file=setup.conf / "hub.creds"), deadline=10)
    try:
        stored = await bus.last_message(
            hub, streams.site_stream_name("site-a"), subjects.heartbeat("site-a", prefix=setup.prefix)
        )
    finally:
        await hub.close()
    assert stored is not None and stored.time is not None
    return time.time() - stored.time.timestamp()


async def test_a_live_agent_passes(setup: Setup, agent: helpers.CliProcess) -> None:
    run = await doctor("agent", *flags(setup))
    assert run.code == 0, run.out + run.err
    checks = ("settings", "hub keys", "kubernetes reachable", "rbac", "crds installed", "credential valid",
              "credential permissions", "nats reachable", "tls verified", "consumer bound",
              "heartbeat fresh", "readyz answered")  # fmt: skip
    for check in checks:
        run.line("PASS", check)
    assert run.out.endswith("15 PASS, 0 WARN, 0 FAIL, 1 SKIP\n"), run.out
    assert "exactly what site site-a needs (10 publish, 1 subscribe)" in run.line(
        "PASS", "credential permissions"
    )
    assert run.lines("PASS", "permission granted") == [
        "PASS permission granted publish to $JS.API.CONSUMER.INFO.KB_INTENTS.agent-site-a\n",
        # No intent there: the server answers 404, and let the request through.
        "PASS permission granted publish to $JS.API.DIRECT.GET.KB_INTENTS.kb.intent.site-a.doctor.doctor\n",
        "PASS permission granted subscribe to _INBOX_site-a.doctor\n",
    ]
    # The grants a probe would use up or change state with are said, not implied; the read of
    # the heartbeat is the heartbeat check's.
    assert run.line("SKIP", "permission not probed") == (
        "SKIP permission not probed would change state: publish kb.status.site-a.*.*; "
        "publish kb.secret.site-a.*.*; publish kb.site.site-a; "
        "publish $JS.API.CONSUMER.MSG.NEXT.KB_INTENTS.agent-site-a; "
        "publish $JS.API.CONSUMER.RESET.KB_INTENTS.agent-site-a; "
        "publish $JS.ACK.KB_INTENTS.agent-site-a.*.*.*.*.*; publish kb.renew.site-a\n"
    )
    assert f"ago, interval {INTERVAL:g}s; agent started " in run.line("PASS", "heartbeat fresh")
    url = f"http://127.0.0.1:{setup.health_port}/readyz"
    assert (
        run.line("PASS", "readyz answered")
        == f"PASS readyz answered {url}: ready (consumer, kubernetes, nats)\n"
    )
    # Never a secret: the creds file's seed and JWT stay out of the report.
    assert helpers.seed_of(setup.conf / "sites" / "site-a.creds") not in run.out
    assert helpers.creds_jwt(setup.conf / "sites" / "site-a.creds") not in run.out


async def test_a_stopped_agent_fails_on_its_heartbeat_and_its_readyz(
    setup: Setup, agent: helpers.CliProcess
) -> None:
    agent.p.send_signal(signal.SIGSTOP)
    # Until its last beat is older than the three intervals a running agent never lets pass.
    await helpers.eventually(
        lambda: heartbeat_age(setup), lambda age: age > 3 * INTERVAL + 1, within=30, what="an old beat"
    )
    run = await doctor("agent", *flags(setup))
    assert run.code == 1, run.out + run.err
    assert run.failed() == ["heartbeat fresh", "readyz answered"], run.out
    line = run.line("FAIL", "heartbeat fresh")
    assert "FAIL heartbeat fresh agent not running or stalled: last heartbeat " in line
    assert f"s ago, interval {INTERVAL:g}s (the agent started " in line
    assert "fix: a running agent beats every --heartbeat-interval: is its process running, and not " in line
    line = run.line("FAIL", "readyz answered")
    assert f"readyz answered http://127.0.0.1:{setup.health_port}/readyz did not answer within 5s: " in line
    assert "fix: a running process answers /readyz at once: is it stopped (state T in `ps`" in line
    # Its connection and consumer are still there: what looked healthy before.
    run.line("PASS", "consumer bound")
    run.line("PASS", "nats reachable")
