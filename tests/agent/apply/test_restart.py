"""An agent killed with intents fetched and not settled: its successor applies them soon after it
starts, and the redelivered ones it had applied change nothing.

Real nats-server and the emulated site with the Kamaji simulator. The dying agent has a
connection of its own, closed without settling anything: what the server sees of a SIGKILL.
The agent consumer is the one the hub creates (``streams.agent_consumer``), not the fixture's
short-ack-wait one, because its ack wait is what is tested.
"""

from __future__ import annotations

import asyncio

import pytest

from agent.tcp import managed
from common import bus
from common import kube as ckube
from common.bus import topology
from protocol import signing, streams
from sandbox import natsd
from tests import helpers
from tests.agent.apply.test_loop import TCP, Agent
from tests.agent.conftest import NAMESPACE, SITE, Hub, intent

BURST = 12

CONVERGENCE_BOUND = 15.0
"""Seconds from the successor's start until every intent of the burst is applied: a bound on
convergence, not on speed. The killed agent's intents are redelivered once the consumer's ack
wait has passed since their delivery (5 s), so this leaves 10 s for the successor to apply a
dozen intents on a loaded machine; with the former ack wait of 30 s nothing came
back within this bound."""


@pytest.fixture
async def hub_consumer(hub: Hub) -> Hub:
    """The agent consumer as the hub creates it (the ``hub`` fixture shortens its ack wait)."""
    await topology.ensure_consumer(hub.conn, streams.agent_consumer(SITE, prefix=hub.prefix))
    return hub


async def test_intents_fetched_by_a_killed_agent_are_applied_soon_after_the_restart(
    nats_server: natsd.NatsServer, conn: bus.Connection, site: ckube.Kube, hub_consumer: Hub
) -> None:
    hub = hub_consumer
    names = [f"burst-{i}" for i in range(BURST)]
    seqs = {name: await hub.send(intent(name)) for name in names}

    dying_conn = await bus.connect(helpers.options(nats_server.url), deadline=10)
    dying = Agent(dying_conn, site, hub)
    consumer = await bus.bind(dying_conn, dying.loop.definition)
    fetched: list[bus.Delivery] = []
    while len(fetched) < BURST:
        fetched.extend(await consumer.fetch(BURST, timeout=5))
    # The first one is applied and its Status sent, then the agent dies before acking it.
    first = fetched[0]
    decision = await dying.loop.applier.process(signing.verify(first.data, hub.public.verify_keys()), first)
    assert decision.result == "applied"
    applied_first = await site.get(TCP, first.subject.rsplit(".", 1)[-1], namespace=NAMESPACE)
    await dying_conn.close()  # SIGKILL as the server sees it: the connection is gone, nothing settled

    successor = Agent(conn, site, hub)
    successor.start()
    try:

        async def all_applied() -> bool:
            found = await asyncio.gather(*(site.get_or_none(TCP, n, namespace=NAMESPACE) for n in names))
            return all(
                obj is not None and obj["metadata"]["annotations"][managed.INTENT_SEQ] == str(seqs[n])
                for n, obj in zip(names, found, strict=True)
            )

        await helpers.eventually(all_applied, within=CONVERGENCE_BOUND, every=0.2)
        # The redelivered intent the killed agent had applied changes nothing.
        again = await site.get(TCP, applied_first["metadata"]["name"], namespace=NAMESPACE)
        assert again["metadata"]["uid"] == applied_first["metadata"]["uid"]
        assert again["metadata"]["generation"] == applied_first["metadata"]["generation"] == 1

        async def settled() -> bool:
            state = await bus.consumer_info(hub.conn, successor.loop.definition.stream, f"agent-{SITE}")
            return state.num_pending == 0 and state.num_ack_pending == 0

        await helpers.eventually(settled, within=10)
        assert successor.count("provision", "applied") == BURST - 1
        assert successor.count("provision", "unchanged") == 1
    finally:
        await successor.stop()
