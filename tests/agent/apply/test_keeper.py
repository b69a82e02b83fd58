"""The keeper: which held deliveries need an in-progress (tables), and on a real nats-server that
held intents are not redelivered however long they are held, while a released one is."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from agent.apply import keeper
from common import bus
from common import kube as ckube
from common.bus import topology
from protocol import streams
from tests import helpers
from tests.agent.apply.test_loop import Agent
from tests.agent.conftest import SITE, Hub, intent


@pytest.mark.parametrize(
    ("ack_wait", "expected"),
    [
        (streams.AGENT_ACK_WAIT_SECONDS, streams.AGENT_ACK_WAIT_SECONDS / 3),
        (30.0, 10.0),
        (2.0, 2.0 / 3),
        (0.1, keeper.MIN_INTERVAL),
    ],
)
def test_interval_is_a_third_of_the_ack_wait_with_a_floor(ack_wait: float, expected: float) -> None:
    assert keeper.interval(ack_wait) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("touched", "now", "every", "expected"),
    [
        ({}, 10.0, 1.0, []),
        ({"a": 9.5}, 10.0, 1.0, []),
        ({"a": 9.0}, 10.0, 1.0, ["a"]),  # exactly one interval old: due
        ({"a": 8.0, "b": 9.9, "c": 5.0}, 10.0, 1.0, ["a", "c"]),
        ({"a": 10.0}, 10.0, 0.0, ["a"]),
    ],
)
def test_due_names_what_was_not_touched_for_an_interval(
    touched: dict[str, float], now: float, every: float, expected: list[str]
) -> None:
    assert keeper.due(touched, now=now, every=every) == expected


def test_agent_consumer_has_the_short_ack_wait() -> None:
    d = streams.agent_consumer(SITE)
    assert d.ack_wait == streams.AGENT_ACK_WAIT_SECONDS < streams.ACK_WAIT_SECONDS
    assert streams.hub_consumer(SITE).ack_wait == streams.ACK_WAIT_SECONDS


async def test_held_intents_are_not_redelivered_and_a_released_one_is(conn: bus.Connection, hub: Hub) -> None:
    ack_wait = 1.0
    short = msgspec.structs.replace(streams.agent_consumer(SITE, prefix=hub.prefix), ack_wait=ack_wait)
    await topology.ensure_consumer(conn, short)
    for name in ("a", "b", "c"):
        await hub.send(intent(name))
    consumer = await bus.bind(conn, short)
    assert consumer.ack_wait == ack_wait  # read from the server, not from the definition
    held: list[bus.Delivery] = []
    while len(held) < 3:
        held.extend(await consumer.fetch(3, timeout=5))
    k = keeper.Keeper(conn)
    k.ack_wait = consumer.ack_wait
    for d in held:
        k.hold(d)
    task = asyncio.create_task(k.run())
    try:
        # Each round touches all three at least a third of the ack wait after the previous one:
        # nine rounds span three ack waits, long after the server would have redelivered.
        await helpers.eventually(lambda: k.touches >= 9 * 3, within=20)
        assert await consumer.fetch(3, timeout=0.5) == []
        assert k.held == 3

        released = held[0]
        k.release(released)
        again: list[bus.Delivery] = []

        async def redelivered() -> bool:
            again.extend(await consumer.fetch(3, timeout=0.5))
            return bool(again)

        await helpers.eventually(redelivered, within=10)
        assert [(d.subject, d.num_delivered) for d in again] == [(released.subject, 2)]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await consumer.unsubscribe()


@pytest.mark.parametrize(
    ("server_ack_wait", "kept_within"),
    [
        (2.0, 2.0),  # the hub's is shorter (the tests' fixture): the server's counts
        (30.0, streams.AGENT_ACK_WAIT_SECONDS),  # an older hub's 30 s: ours, until it updates it
    ],
)
async def test_the_apply_loop_keeps_within_the_shorter_ack_wait(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, server_ack_wait: float, kept_within: float
) -> None:
    definition = streams.agent_consumer(SITE, prefix=hub.prefix)
    await topology.ensure_consumer(conn, msgspec.structs.replace(definition, ack_wait=server_ack_wait))
    a = Agent(conn, site, hub)
    a.start()
    try:
        await helpers.eventually(lambda: a.readiness.ready, within=10)
        assert a.loop.keeper.ack_wait == kept_within
    finally:
        await a.stop()
