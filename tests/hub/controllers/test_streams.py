"""A Site onboarded before any control plane is placed there gets its NATS topology from the
hub: its stream ``KB_SITE_<site>`` with the hub's consumer, and its agent's consumer on the
intents stream, so the agent can start and its heartbeats land (a real nats-server, the hub's
controller on the management cluster's emulator)."""

from __future__ import annotations

from common import bus
from common.bus import errors
from common.kube import resources
from protocol import streams
from tests import helpers
from tests.hub.conftest import World, site_obj

NEW = "site-c"


async def _topology(world: World, site: str) -> tuple[bus.ConsumerState, bus.ConsumerState] | None:
    """The hub's and the agent's consumers of ``site``, or None while either is missing."""
    hub = streams.hub_consumer(site, prefix=world.prefix)
    agent = streams.agent_consumer(site, prefix=world.prefix)
    try:
        return (
            await bus.consumer_info(world.conn, hub.stream, hub.durable_name),
            await bus.consumer_info(world.conn, agent.stream, agent.durable_name),
        )
    except errors.NotFound:
        return None


async def test_a_site_without_control_planes_gets_its_stream_and_consumers(world: World) -> None:
    world.start_hub()
    # A name Kubernetes allows but no stream can have: left out, it keeps no other site waiting.
    await world.mgmt.create(resources.SITE, site_obj("a.x"))
    await world.mgmt.create(resources.SITE, site_obj(NEW))

    found = await helpers.eventually(lambda: _topology(world, NEW), within=20, what=f"{NEW}'s topology")
    assert found is not None
    hub, agent = found
    assert (hub.stream, hub.name) == (f"{world.prefix.upper()}_SITE_{NEW}", "hub")
    assert (agent.stream, agent.name) == (f"{world.prefix.upper()}_INTENTS", f"agent-{NEW}")
    assert agent.filter_subject == streams.agent_consumer(NEW, prefix=world.prefix).filter_subject
