"""Faults of a site's agent process: SIGKILL mid-burst, SIGSTOP
past the heartbeat timeout, offline across several changes of one RKCP, and a replayed intent.

Real processes throughout (``world``); each scenario injects its fault, lifts it and waits with
``fault.converges`` for the invariants of ``sandbox.launcher.invariants``. The test reads the
``agent-<site>`` consumer with the hub's NATS identity (the hub may use the whole JetStream
API) to inject at the right moment: when the agent holds intents it fetched and has not settled.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from agent.tcp import managed
from common import bus
from common.kube import resources
from protocol import streams, subjects
from sandbox.launcher import System, invariants
from tests import helpers, systems
from tests.faults.measure import Measure

pytestmark = [pytest.mark.asyncio(loop_scope="module"), systems.BOTH]

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE
NS = "default"
BURST = 12
"""Control planes created in one burst at one site (the brief's 10-20)."""
RESTART_BOUND = 20.0
"""Seconds from an agent started again to convergence after a SIGKILL mid-burst (see its use)."""


@contextlib.asynccontextmanager
async def _hub_bus(world: System) -> AsyncIterator[bus.Connection]:
    """A NATS connection with the hub's identity: consumer info, last messages, publishing intents."""
    conn = await bus.connect(
        bus.Options(
            servers=(world.nats_url,),
            creds_file=world.hub_credential(),
            ca_file=world.nats_ca_file,
            name="faults-test",
        ),
        deadline=10,
    )
    try:
        yield conn
    finally:
        await conn.close()


async def _consumer(conn: bus.Connection, site: str) -> bus.ConsumerState:
    d = streams.agent_consumer(site)
    return await bus.consumer_info(conn, d.stream, d.durable_name)


async def _rkcp(world: System, name: str) -> dict[str, Any]:
    return await world.mgmt.get(RKCP, name, namespace=NS)


def _condition(obj: dict[str, Any], kind: str) -> tuple[str, str]:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c["type"] == kind:
            return str(c["status"]), str(c.get("reason") or "")
    return "", ""


async def _all_ready(world: System, names: Sequence[str]) -> None:
    async def ready() -> bool:
        for name in names:
            obj = await world.mgmt.get_or_none(RKCP, name, namespace=NS)
            if obj is None or invariants.conditions(obj).get("Ready") != "True":
                return False
        return True

    await helpers.eventually(ready, within=90, every=0.3)


async def _tcp(world: System, name: str, site: str) -> dict[str, Any]:
    return await world.site_kube(site).get(TCP, name, namespace=world.namespace)


async def test_agent_killed_mid_burst_converges_after_restart(world: System, fault: Measure) -> None:
    site, agent = "site-a", "agent-site-a"
    names = [f"burst-{i}" for i in range(BURST)]
    async with _hub_bus(world) as nc:
        before = await _consumer(nc, site)
        # Paused while the hub publishes the burst, so that on SIGCONT the agent fetches all of
        # it in one batch: the kill then finds intents fetched and not yet settled.
        fault.inject(world, fault=f"{agent} SIGKILL mid-burst, started again")
        world.pause(agent)
        for name in names:
            await world.create_control_plane(name, site=site)

        async def published() -> bool:
            state = await _consumer(nc, site)
            return state.num_pending + state.num_ack_pending >= BURST

        await helpers.eventually(published, within=60, every=0.2)
        world.resume(agent)

        async def fetched() -> bool:
            return (await _consumer(nc, site)).num_pending == 0

        await helpers.eventually(fetched, within=30, every=0.01)
        await world.kill(agent)
        held = (await _consumer(nc, site)).num_ack_pending
        applied = len(
            [
                t
                for t in (await world.site_kube(site).list(TCP, namespace=world.namespace)).items
                if t["metadata"]["name"] in names
            ]
        )
        fault.workload = (
            f"{BURST} RKCPs created at {site}; at the kill {held} intent(s) fetched and not settled, "
            f"{applied} TCP(s) created"
        )
        await world.start_again(agent)
        await fault.lifted(world)
        # A bound on convergence, not on speed: the intents the dead agent held
        # come back once the consumer's ack wait (5 s) has passed since their delivery; with the
        # former 30 s they came back about 25 s after the restart, past this bound.
        await fault.converges(world, within=RESTART_BOUND)
        after = await _consumer(nc, site)
    assert after.num_ack_pending == 0 and after.delivered_stream_seq > before.delivered_stream_seq
    for name in names:
        # Created once at the intent's spec: a redelivered intent the dead agent had applied
        # changed nothing (the invariants also count TCPs per owner: no duplicates).
        assert (await _tcp(world, name, site))["metadata"]["generation"] == 1
    await systems.delete_all(world, names, site)


async def test_agent_paused_past_the_heartbeat_timeout_shows_the_site_unavailable_then_converges(
    world: System, fault: Measure
) -> None:
    site, agent = "site-b", "agent-site-b"
    names = ["paused-1", "paused-2"]
    for name in names:
        await world.create_control_plane(name, site=site)
    await _all_ready(world, names)

    fault.inject(world, fault=f"{agent} SIGSTOP past the heartbeat timeout, then SIGCONT")
    world.pause(agent)
    try:
        # An edit while the agent cannot answer: applied once it continues.
        await systems.update_control_plane(world, names[0], replicas=3)

        async def unavailable() -> bool:
            for name in names:
                obj = await _rkcp(world, name)
                if _condition(obj, "SiteConnected") != ("False", "HeartbeatMissing"):
                    return False
                if _condition(obj, "StatusFresh") != ("False", "SiteSilent"):
                    return False
            return True

        # The hub calls a site unavailable after 3 missed heartbeats (2 s each here).
        await helpers.eventually(unavailable, within=60, every=0.3)
        fault.workload = f"{len(names)} Ready RKCPs at {site}, one edited (replicas 3) while stopped"
    finally:
        world.resume(agent)
    await fault.lifted(world)
    await fault.converges(world)
    for name in names:
        assert _condition(await _rkcp(world, name), "SiteConnected") == ("True", "HeartbeatReceived")
    replicas = (await _tcp(world, names[0], site))["spec"]["controlPlane"]["deployment"]["replicas"]
    assert replicas == 3
    await systems.delete_all(world, names, site)


CHANGES: tuple[dict[str, Any], ...] = (
    {"version": "v1.31.1"},
    {"replicas": 3},
    {"version": "v1.32.0", "replicas": 1},
    {"replicas": 4},
    {"version": "v1.32.1"},
)
"""Changes of one RKCP while its site's agent is down; the last one is what the site must run."""


async def test_agent_offline_across_several_changes_applies_only_the_last(
    world: System, fault: Measure
) -> None:
    site, agent, name = "site-a", "agent-site-a", "offline"
    await world.create_control_plane(name, site=site)
    await _all_ready(world, [name])
    generation = (await _tcp(world, name, site))["metadata"]["generation"]

    fault.inject(
        world,
        fault=f"{agent} killed across {len(CHANGES)} changes of one RKCP, then started",
        workload=f"1 RKCP at {site}: version and replicas changed {len(CHANGES)} times",
    )
    await world.kill(agent)
    stream, subject = streams.intents_stream_name(), subjects.intent(site, world.namespace, name)
    async with _hub_bus(world) as nc:
        last_seq = 0
        for change in CHANGES:
            await systems.update_control_plane(world, name, **change)
            # Each change is published before the next, so the agent could have seen each one.

            async def published(seen: int = last_seq) -> bool:
                stored = await bus.last_message(nc, stream, subject)
                return stored is not None and stored.seq > seen

            await helpers.eventually(published, within=30, every=0.1)
            stored = await bus.last_message(nc, stream, subject)
            assert stored is not None
            last_seq = stored.seq
        await world.start_again(agent)
        await fault.lifted(world)
        await fault.converges(world)
        latest = await bus.last_message(nc, stream, subject)
    assert latest is not None and latest.seq >= last_seq
    tcp = await _tcp(world, name, site)
    spec = tcp["spec"]
    assert (spec["kubernetes"]["version"], spec["controlPlane"]["deployment"]["replicas"]) == ("v1.32.1", 4)
    # One spec change: the stream keeps only the latest intent per control plane, so no
    # intermediate spec was ever applied, before or after the final one.
    assert tcp["metadata"]["generation"] == generation + 1
    assert tcp["metadata"]["annotations"][managed.INTENT_SEQ] == str(latest.seq)
    await systems.delete_all(world, [name], site)


async def test_replayed_identical_intent_changes_nothing(world: System, fault: Measure) -> None:
    site, name = "site-b", "replayed"
    await world.create_control_plane(name, site=site)
    await _all_ready(world, [name])
    before = await _tcp(world, name, site)
    stream, subject = streams.intents_stream_name(), subjects.intent(site, world.namespace, name)
    async with _hub_bus(world) as nc:
        stored = await bus.last_message(nc, stream, subject)
        assert stored is not None
        fault.inject(
            world,
            fault="the latest intent published again, byte for byte (a replay)",
            workload=f"1 Ready RKCP at {site}",
        )
        replayed = await bus.publish(nc, subject, stored.data, msg_id=f"replay-{stored.seq}")
        assert replayed.seq > stored.seq
        await fault.lifted(world)

        async def answered() -> bool:
            # The agent settled the replay (the hub may answer it by publishing its intent again).
            state = await _consumer(nc, site)
            return (
                state.num_pending == 0
                and state.num_ack_pending == 0
                and (state.ack_floor_stream_seq >= replayed.seq)
            )

        await helpers.eventually(answered, within=30, every=0.2)
    await fault.converges(world)
    after = await _tcp(world, name, site)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["spec"] == before["spec"]
    await systems.delete_all(world, [name], site)
