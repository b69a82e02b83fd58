"""``kamaji-broker status`` against the running topology, as an operator runs it in an incident:
healthy, a site's agent stopped, a Site with no agent, the observer's credential swapped for
another, the bus unreachable, and flags it cannot work with."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from sandbox import ports
from sandbox.launcher import System
from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

STATUS = [sys.executable, "-m", "kamaji_broker.cli", "status"]


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str


async def run(*command: str, stdin: str = "") -> Done:
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 60)
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


def flags(world: System, *, creds: str | None = None, url: str | None = None, told: bool = True) -> list[str]:
    """``told``: with ``--heartbeat-interval`` (else status learns it from the heartbeats)."""
    interval = ["--heartbeat-interval", str(world.options.heartbeat_interval)] if told else []
    return [
        "--kubeconfig", str(world.mgmt_kubeconfig),
        "--nats-url", url or ",".join(world.nats_urls),
        "--nats-creds", creds or str(world.observer_credential()),
        "--nats-ca-file", str(world.nats_ca_file),
        *interval,
    ]  # fmt: skip


async def status(*args: str) -> Done:
    return await run(*STATUS, *args)


async def as_json(world: System, *, quiet: bool = True, **given: Any) -> tuple[int, dict[str, Any]]:
    done = await status(*flags(world, **given), "-o", "json")
    assert done.stderr == "" or not quiet, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, doc


async def kubectl(world: System, *args: str, stdin: str = "") -> None:
    binary = helpers.kubectl()
    done = await run(binary, "--kubeconfig", str(world.mgmt_kubeconfig), *args, stdin=stdin)
    assert done.returncode == 0, done.stderr


async def until_status(world: System, *, healthy: bool) -> Done:
    """Run ``status`` until its verdict is ``healthy``; the last run."""
    runs: list[Done] = []

    async def verdict() -> bool:
        runs.append(await status(*flags(world)))
        return (runs[-1].returncode == 0) is healthy

    await helpers.eventually(verdict, within=60, every=0.5)
    return runs[-1]


def row(done: Done, site: str) -> list[str]:
    return next(line.split() for line in done.stdout.splitlines() if line.startswith(f"  {site} "))


async def test_a_healthy_fleet_exits_zero_with_every_site_on_one_screen(world: System) -> None:
    done = await until_status(world, healthy=True)
    lines = done.stdout.splitlines()
    assert lines[0] == "kamaji-broker status: 2 sites, 4/4 control planes Ready; healthy"
    assert lines[1] == "  (read from the management cluster and bus)"
    site_b = row(done, "site-b")
    assert site_b[1] == "yes" and site_b[3] == "0" and site_b[-2:] == ["2", "Ready"]
    assert "  all 4 control planes are Ready" in lines and "Problems:" not in lines

    # The hub writes what an agent says of itself once its poller has read the heartbeat, which
    # may be a moment after the bus shows the site alive.
    def reported(result: tuple[int, dict[str, Any]]) -> bool:
        return all(site["agentVersion"] and site["trustedKeyIds"] for site in result[1]["sites"])

    code, doc = await helpers.eventually(lambda: as_json(world), reported, within=30, every=0.5)
    assert code == 0 and doc["healthy"] is True and doc["busRead"] is True and doc["problems"] == []
    for site in doc["sites"]:
        assert site["connected"] is True and site["backlog"] == 0 and site["hubPending"] == 0
        assert site["heartbeatAgeSeconds"] < 3 * world.options.heartbeat_interval
        assert site["agentVersion"] and site["trustedKeyIds"] and site["controlPlanes"] == {"Ready": 2}
    assert {(c["name"], c["ready"]) for c in doc["controlPlanes"]} == {
        ("site-a-1", True), ("site-a-2", True), ("site-b-1", True), ("site-b-2", True),
    }  # fmt: skip


async def test_a_stopped_agent_is_reported_then_its_recovery(world: System) -> None:
    world.pause("agent-site-b")
    try:
        done = await until_status(world, healthy=False)
    finally:
        world.resume("agent-site-b")
    assert done.stdout.splitlines()[0].startswith("kamaji-broker status: 2 sites, ")
    assert row(done, "site-b")[1] == "NO" and row(done, "site-a")[1] == "yes"
    problems = done.stdout.split("Problems:\n", 1)[1]
    assert "  site site-b: agent not connected: its last heartbeat is " in problems
    assert "site site-a" not in problems
    await until_status(world, healthy=True)


def counted_and_listed(done: Done) -> tuple[int, int]:
    """The problems the header counts, and those listed under it (a cut list says how many more)."""
    head = done.stdout.splitlines()[0]
    counted = int(head.split("UNHEALTHY: ")[1].split()[0]) if "UNHEALTHY: " in head else 0
    listed = done.stdout.split("Problems:\n", 1)[1].splitlines() if "Problems:\n" in done.stdout else []
    more = [int(line.split()[2]) for line in listed if line.startswith("  ... and ")]
    return counted, len(listed) - len(more) + sum(more)


async def test_untold_it_learns_each_agents_interval_from_its_heartbeats(world: System) -> None:
    """The agents beat every 2 s; ``status`` without ``--heartbeat-interval`` judges them by that,
    not by production's 10 s, and whatever it finds, it lists as many problems as it counts."""
    _, doc = await as_json(world, told=False)
    intervals = {s["name"]: s["heartbeatIntervalSeconds"] for s in doc["sites"]}
    assert intervals == {
        "site-a": world.options.heartbeat_interval,
        "site-b": world.options.heartbeat_interval,
    }
    runs: list[Done] = []

    async def gone() -> bool:
        runs.append(await status(*flags(world, told=False)))
        return row(runs[-1], "site-b")[1] == "NO"

    world.pause("agent-site-b")
    try:
        await helpers.eventually(gone, within=60, every=0.5)
    finally:
        world.resume("agent-site-b")
    # Every look on the way, also those where only the control planes' conditions had turned.
    miscounted = [done.stdout for done in runs if len(set(counted_and_listed(done))) > 1]
    assert miscounted == []
    problems = runs[-1].stdout.split("Problems:\n", 1)[1]
    assert f"(it beats every {world.options.heartbeat_interval:g}s)" in problems
    await until_status(world, healthy=True)


async def test_a_site_with_no_agent_says_so(world: System) -> None:
    site = {"apiVersion": "kamaji-broker.io/v1alpha1", "kind": "Site", "metadata": {"name": "site-c"}}
    await kubectl(world, "apply", "-f", "-", stdin=json.dumps(site))
    try:

        async def look() -> dict[str, Any]:
            return (await as_json(world))[1]

        def settled(doc: dict[str, Any]) -> bool:
            site_c = [s for s in doc["sites"] if s["name"] == "site-c"]
            # Until the hub made its stream and consumer, the bus says that too (NoConsumer).
            return bool(site_c) and len(site_c[0]["problems"]) == 1

        doc = await helpers.eventually(look, settled, within=30, every=0.5)
        (site_c,) = [s for s in doc["sites"] if s["name"] == "site-c"]
        assert site_c["connected"] is None and site_c["heartbeatAgeSeconds"] is None
        assert [p["reason"] for p in site_c["problems"]] == ["NoHeartbeat"]
        assert doc["problems"] == [
            "site site-c: no heartbeat from its agent yet: is it running, for this site?"
        ]
    finally:
        await kubectl(world, "delete", "site", "site-c", "--wait=true")


async def test_a_credential_that_is_not_the_observers_is_refused_naming_the_subject(world: System) -> None:
    code, doc = await as_json(world, creds=str(await world.site_credential("site-a")), quiet=False)
    assert code == 1 and doc["healthy"] is False
    site_b = next(s for s in doc["sites"] if s["name"] == "site-b")
    # The hub's view stands in for the bus then; it may still show an earlier test's stopped agent.
    (problem,) = [p for p in site_b["problems"] if p["reason"] == "BusUnreadable"]
    assert "permission" in problem["message"].lower() and "KB_SITE_site-b" in problem["message"]


async def test_an_unreachable_bus_is_a_problem_and_the_hubs_view_is_still_shown(world: System) -> None:
    closed = f"tls://127.0.0.1:{ports.free_port()}"
    done = await status(*flags(world, url=closed), "--nats-timeout", "1")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == "  (read from the management cluster only: the bus could not be read)"
    assert row(done, "site-a")[1] == "yes"
    problems = done.stdout.split("Problems:\n", 1)[1]
    assert problems.startswith("  the bus: ") and "127.0.0.1" in problems


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["--nats-url", "nats://127.0.0.1:4222"],
            "--nats-url needs the observer's identity: --nats-creds or",
        ),
        (["--heartbeat-interval", "0"], "--heartbeat-interval must be more than 0 seconds, got 0"),
        (["--nats-timeout", "-1"], "--nats-timeout must be more than 0 seconds, got -1"),
        (["--prefix", "KB"], "--prefix 'KB': subject prefix token 'KB' is not a DNS-1123 label"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig /nonexistent/kubeconfig: no such file"),
    ],
)
async def test_flags_it_cannot_work_with_exit_2_naming_the_flag(
    world: System, args: list[str], error: str
) -> None:
    done = await status("--kubeconfig", str(world.mgmt_kubeconfig), *args)
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith("kamaji-broker status: error: ") and error in done.stderr


@pytest.mark.parametrize("garbage", ["observer.creds", "nats-server.conf"])
async def test_a_file_that_is_not_a_kubeconfig_is_named(world: System, garbage: str) -> None:
    path = world.nats_dir / garbage
    done = await status("--kubeconfig", str(path))
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith(
        f"kamaji-broker status: error: --kubeconfig {path}: not a usable kubeconfig: "
    )
    assert "Traceback" not in done.stderr
