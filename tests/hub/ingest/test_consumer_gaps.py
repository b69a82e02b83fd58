"""hub.ingest.consumer and hub.ingest.record on the real nats-server, without acks: a gap in the consumer's
deliveries makes the hub read the site again, and a control plane the site's stream holds
nothing about costs no stream read.

The test binds the hub's consumer itself and hands the hub what it fetched; a delivery it does
not hand over is one lost in flight (or taken by another process).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from common import bus
from protocol import streams, subjects
from protocol.coordinates import Coordinates
from tests import helpers
from tests.hub.ingest.test_consumer import CP2, Hub, new_hub, publish_status, running
from tests.hub.ingest.test_observations import CP1

CP3 = Coordinates("site-a", "tenants", "cp3")


class Reads:
    """Every request for a stored message of ``stream`` the server is sent, heard by a
    subscription of the test's own on the JetStream API subjects (the server answers them;
    the test only listens)."""

    def __init__(self) -> None:
        self.subjects: list[str] = []

    async def listen(self, conn: bus.Connection, stream: str) -> list[bus.Subscription]:
        async def heard(msg: bus.Message) -> None:
            self.subjects.append(msg.subject)

        return [
            await conn.subscribe(f"$JS.API.STREAM.MSG.GET.{stream}", heard),
            await conn.subscribe(f"$JS.API.DIRECT.GET.{stream}.>", heard),
            await conn.subscribe(f"$JS.API.DIRECT.GET.{stream}", heard),
        ]


@pytest.fixture
async def consumer(conn: bus.Connection, topology: str) -> AsyncIterator[bus.Consumer]:
    bound = await bus.bind(conn, streams.hub_consumer("site-a", prefix=topology))
    yield bound
    await bound.unsubscribe()


async def fetch_one(consumer: bus.Consumer) -> bus.Delivery:
    (delivery,) = await consumer.fetch(1, timeout=5.0)
    return delivery


async def bound_hub(conn: bus.Connection, topology: str, consumer: bus.Consumer) -> Hub:
    hub = new_hub(conn, topology)
    hub.mapped.add(CP3)
    await hub.ingest.bound(consumer.definition.stream, consumer.delivered)
    return hub


def phase(hub: Hub, coords: Coordinates) -> str | None:
    held = hub.obs.get(coords)
    return held.status.phase if held is not None and held.status is not None else None


async def test_a_delivery_that_skips_one_makes_the_hub_read_the_site_again(
    conn: bus.Connection, topology: str, consumer: bus.Consumer, caplog: pytest.LogCaptureFixture
) -> None:
    hub = await bound_hub(conn, topology, consumer)
    await publish_status(conn, topology, helpers.status(phase="Provisioning"))
    await hub.ingest.handle(await fetch_one(consumer))
    assert (phase(hub, CP1), hub.changes) == ("Provisioning", [CP1])

    ready = await publish_status(conn, topology, helpers.status(phase="Ready"))
    await fetch_one(consumer)  # lost: the hub never sees it
    await publish_status(conn, topology, helpers.status(name="cp2"))
    with caplog.at_level(logging.WARNING, logger="hub.ingest.consumer"):
        await hub.ingest.handle(await fetch_one(consumer))

    assert "messages went by unseen (delivery 3 follows 1)" in caplog.text
    assert hub.changes == [CP1, CP1, CP2]  # cp1 announced again: its RKCP looks again
    assert not hub.obs.loaded(CP1) and phase(hub, CP1) is None  # forgotten, not left stale
    loaded = await hub.intake.load(CP1)
    assert loaded is not None and loaded.status is not None
    assert (loaded.status.phase, loaded.status_seq) == ("Ready", ready)
    assert phase(hub, CP2) == helpers.status().phase


async def test_deliveries_that_follow_on_forget_nothing(
    conn: bus.Connection, topology: str, consumer: bus.Consumer
) -> None:
    hub = await bound_hub(conn, topology, consumer)
    await publish_status(conn, topology, helpers.status(phase="Provisioning"))
    await publish_status(conn, topology, helpers.status(name="cp2"))
    await hub.ingest.handle(await fetch_one(consumer))
    await hub.ingest.handle(await fetch_one(consumer))
    # A new binding that follows on from what this hub saw: nothing went elsewhere.
    await hub.ingest.bound(consumer.definition.stream, (await consumer.info()).delivered_consumer_seq)
    assert hub.changes == [CP1, CP2]
    assert (phase(hub, CP1), phase(hub, CP2)) == ("Provisioning", helpers.status().phase)


async def test_a_binding_after_deliveries_went_elsewhere_reads_the_site_again(
    conn: bus.Connection, topology: str, consumer: bus.Consumer
) -> None:
    hub = await bound_hub(conn, topology, consumer)
    await publish_status(conn, topology, helpers.status(phase="Provisioning"))
    await hub.ingest.handle(await fetch_one(consumer))
    ready = await publish_status(conn, topology, helpers.status(phase="Ready"))
    await fetch_one(consumer)  # another process (same credentials) took it
    await hub.ingest.bound(consumer.definition.stream, (await consumer.info()).delivered_consumer_seq)
    assert hub.changes == [CP1, CP1]
    loaded = await hub.intake.load(CP1)
    assert loaded is not None and loaded.status is not None and loaded.status_seq == ready


async def test_a_control_plane_the_stream_holds_nothing_about_needs_no_read(
    conn: bus.Connection, topology: str, consumer: bus.Consumer
) -> None:
    stream = consumer.definition.stream
    reads = Reads()
    listening = await reads.listen(conn, stream)
    try:
        old = await publish_status(conn, topology, helpers.status(phase="Ready"))
        hub = await bound_hub(conn, topology, consumer)  # learns what the stream holds: cp1

        fresh = await hub.intake.load(CP2)
        assert fresh is None and hub.obs.loaded(CP2)
        await conn.sync()
        assert reads.subjects == []

        known = await hub.intake.load(CP1)
        assert known is not None and known.status_seq == old
        await helpers.eventually(lambda: len(reads.subjects) == 2)  # its status and its box

        # A message that lands later is delivered, and that subject is read from then on.
        await hub.ingest.handle(await fetch_one(consumer))  # cp1's, held already
        await publish_status(conn, topology, helpers.status(name="cp3"))
        await hub.ingest.handle(await fetch_one(consumer))
        hub.obs.unload(CP3)
        again = await hub.intake.load(CP3)
        assert again is not None and again.status is not None and again.status.name == "cp3"
        await helpers.eventually(lambda: len(reads.subjects) == 4)
    finally:
        for sub in listening:
            await sub.unsubscribe()


async def test_a_message_not_yet_delivered_arrives_by_the_consumer(
    conn: bus.Connection, topology: str, consumer: bus.Consumer
) -> None:
    """Published after the hub learnt what the stream holds, looked at before its delivery:
    not read (the stream held nothing then), recorded when the consumer delivers it."""
    hub = await bound_hub(conn, topology, consumer)
    seq = await publish_status(conn, topology, helpers.status(name="cp2", phase="Ready"))
    assert await hub.intake.load(CP2) is None
    await hub.ingest.handle(await fetch_one(consumer))
    held = hub.obs.get(CP2)
    assert held is not None and held.status_seq == seq and hub.changes == [CP2]


async def test_after_a_gap_the_stream_is_read_for_what_was_known_empty(
    conn: bus.Connection, topology: str, consumer: bus.Consumer
) -> None:
    """cp2 had nothing when the hub learnt the stream; its first status went by unseen. The
    gap makes the hub learn the stream again, so cp2's first look reads it."""
    hub = await bound_hub(conn, topology, consumer)
    await publish_status(conn, topology, helpers.status())
    await hub.ingest.handle(await fetch_one(consumer))
    seq = await publish_status(conn, topology, helpers.status(name="cp2", phase="Ready"))
    await fetch_one(consumer)  # lost
    await publish_status(conn, topology, helpers.status(name="cp3"))
    await hub.ingest.handle(await fetch_one(consumer))
    loaded = await hub.intake.load(CP2)
    assert loaded is not None and loaded.status_seq == seq
    subject = subjects.status(*CP2, prefix=topology)
    assert subject in await bus.subjects_of(conn, consumer.definition.stream, ">")


async def test_a_site_no_longer_consumed_is_read_again(conn: bus.Connection, topology: str) -> None:
    """What a stream holds is known only while its consumer follows it: a site the hub stops
    consuming (its Site deleted) is read on the next first look, never taken for empty."""
    sites = ["site-a", "site-b"]
    hub = new_hub(conn, topology, sites=sites)
    stream = streams.site_stream_name("site-a", prefix=topology)
    async with running(hub):
        await helpers.eventually(lambda: hub.intake.knows(stream))
        sites.remove("site-a")
        await helpers.eventually(lambda: not hub.intake.knows(stream))
    seq = await publish_status(conn, topology, helpers.status(name="cp2"))
    loaded = await hub.intake.load(CP2)
    assert loaded is not None and loaded.status_seq == seq


async def test_the_last_message_of_a_quiet_stream_lost_is_noticed_while_idle(
    conn: bus.Connection, topology: str, consumer: bus.Consumer
) -> None:
    """Nothing follows the lost message, so no delivery reveals the gap: the consumer's own
    count does, checked when a fetch comes back empty (at once after a reconnect, otherwise
    every ``check_interval``)."""
    hub = await bound_hub(conn, topology, consumer)
    await publish_status(conn, topology, helpers.status(phase="Provisioning"))
    await hub.ingest.handle(await fetch_one(consumer))
    ready = await publish_status(conn, topology, helpers.status(phase="Ready"))
    await fetch_one(consumer)  # lost, and the site sends nothing more
    await hub.ingest.idle(consumer)
    assert hub.changes == [CP1, CP1] and not hub.obs.loaded(CP1)
    loaded = await hub.intake.load(CP1)
    assert loaded is not None and loaded.status is not None and loaded.status_seq == ready
