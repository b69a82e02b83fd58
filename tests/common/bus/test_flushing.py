"""A round trip that timed out is left to finish: when its PONG comes late (the server paused,
as a cut link holds it) the connection goes on hearing the server, and nothing is left waiting.
A server gone silent is counted stale after a few unanswered PINGs, and left for a new connection."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from common import bus
from common.bus import errors as bus_errors
from sandbox import natsd
from tests import helpers


async def _pause(pid: int) -> None:
    """SIGSTOP ``pid`` and wait until every thread of it has stopped (a thread busy on the other
    core takes a moment, and could still answer a PING meanwhile)."""
    os.kill(pid, signal.SIGSTOP)

    def state(task: str) -> str:
        return Path(f"/proc/{pid}/task/{task}/stat").read_text().rsplit(")", 1)[1].split()[0]

    async def stopped() -> bool:
        try:
            return all(state(task) in ("T", "t") for task in os.listdir(f"/proc/{pid}/task"))
        except FileNotFoundError:  # a thread ended meanwhile: look again
            return False

    await helpers.eventually(stopped, within=10, every=0.01)


@pytest.fixture
def paused(restartable_nats: natsd.NatsServer) -> Iterator[natsd.NatsServer]:
    """The server, continued at the end whatever the test did to it."""
    yield restartable_nats
    if restartable_nats.process is not None and restartable_nats.process.poll() is None:
        os.kill(restartable_nats.process.pid, signal.SIGCONT)


async def test_a_late_pong_leaves_the_connection_hearing_the_server(paused: natsd.NatsServer) -> None:
    assert paused.process is not None
    conn = await bus.connect(helpers.options(paused.url), deadline=10)
    other = await bus.connect(helpers.options(paused.url), deadline=10)
    try:

        async def answer(message: bus.Message) -> None:
            await other.respond(message, b"still here")

        await other.subscribe("late.ask", answer)
        await _pause(paused.process.pid)
        with pytest.raises(bus_errors.BusTimeout, match="timed out"):  # its caller gives up...
            await conn.call(asyncio.wait_for(conn.sync(), 0.5), subjects=[], what="sync")
        assert conn.flushes.running == 1  # ...and the round trip waits on for its PONG
        os.kill(paused.process.pid, signal.SIGCONT)

        async def answered() -> bool:
            return conn.flushes.running == 0

        await helpers.eventually(answered, within=30, every=0.05)
        # The late PONG was taken: the reader goes on (a cancelled flush would have stopped it,
        # and neither this round trip nor the answer below would be heard).
        await conn.call(conn.sync(), subjects=[], what="sync")
        assert await conn.request("late.ask", b"anyone?", timeout=5) == b"still here"
    finally:
        await conn.close()
        await other.close()


async def test_a_server_gone_silent_is_counted_stale_and_left(paused: natsd.NatsServer) -> None:
    assert paused.process is not None
    options = dataclasses.replace(helpers.options(paused.url), ping_interval=0.2, max_outstanding_pings=2)
    conn = await bus.connect(options, deadline=10)
    try:
        await _pause(paused.process.pid)

        async def stale() -> bool:
            return not conn.connected

        # No PONG for three PINGs: nats-py leaves the connection (nothing else would tell it).
        await helpers.eventually(stale, within=30, every=0.05)
        os.kill(paused.process.pid, signal.SIGCONT)

        async def back() -> bool:
            return conn.reconnects >= 1 and conn.connected

        await helpers.eventually(back, within=30, every=0.05)
        await conn.call(conn.sync(), subjects=[], what="sync")
    finally:
        await conn.close()


async def test_a_round_trip_left_waiting_ends_with_its_connection(paused: natsd.NatsServer) -> None:
    assert paused.process is not None
    conn = await bus.connect(helpers.options(paused.url), deadline=10)
    await _pause(paused.process.pid)
    with pytest.raises(bus_errors.BusTimeout):
        await conn.call(asyncio.wait_for(conn.sync(), 0.5), subjects=[], what="sync")
    assert conn.flushes.running == 1
    paused.process.kill()  # the server gone for good while the PONG is awaited
    paused.process.wait()
    await conn.close()

    async def ended() -> bool:
        return conn.flushes.running == 0

    # Closed, its reader gone: nothing waits for a PONG that cannot come.
    await helpers.eventually(ended, within=10, every=0.05)
