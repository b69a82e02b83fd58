"""What the hub reads from the streams for a control plane: a new one costs no read of
its intent, status or box subject (``hub.ingest.held``: what KB_INTENTS and the site's stream hold
is known from their subject lists; ``hub.ingest.sealed``: the box delivered is kept until written); one
that was there before the hub started is read.

Reads are heard by a subscription of the test's own on the JetStream API subjects (the server
answers them; the test only listens) and kept when they name a subject of this test's prefix.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from common import bus
from protocol import streams, subjects
from tests import helpers
from tests.hub.conftest import RKCP, SITE, World, create_pair, until_ready


class Reads:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.subjects: list[str] = []
        self.listed: list[str] = []
        """Streams whose subject list was asked for."""

    async def heard(self, msg: bus.Message) -> None:
        if msg.subject.startswith("$JS.API.STREAM.INFO."):
            if b"subjects_filter" in (msg.data or b""):
                self.listed.append(msg.subject.removeprefix("$JS.API.STREAM.INFO."))
            return
        if msg.subject.startswith("$JS.API.DIRECT.GET.") and not msg.data:
            subject = msg.subject.split(".", 5)[-1]  # the subject is in the API subject
        else:
            try:
                subject = json.loads(msg.data or b"{}").get("last_by_subj", "")
            except ValueError:
                return
        if subject.startswith(f"{self.prefix}."):
            self.subjects.append(subject)

    def of(self, kind: subjects.Kind, name: str = "cp1") -> int:
        return self.subjects.count(subjects.control_plane(kind, SITE, "tenants", name, prefix=self.prefix))


@pytest.fixture
async def reads(world: World) -> AsyncIterator[Reads]:
    spy = Reads(world.prefix)
    subs = [
        await world.conn.subscribe("$JS.API.STREAM.MSG.GET.>", spy.heard),
        await world.conn.subscribe("$JS.API.DIRECT.GET.>", spy.heard),
        await world.conn.subscribe("$JS.API.STREAM.INFO.>", spy.heard),
    ]
    yield spy
    for sub in subs:
        await sub.unsubscribe()


async def test_a_new_control_plane_costs_no_read_of_its_subjects(world: World, reads: Reads) -> None:
    world.start_hub()
    world.start_agent()
    # The hub's consumer of the site's stream has bound and listed it (an RKCP looked at before
    # that is read, once: a hub's first moments).
    await helpers.eventually(lambda: streams.site_stream_name(SITE, prefix=world.prefix) in reads.listed)
    await create_pair(world)
    await until_ready(world)
    await world.conn.sync()
    kinds = (subjects.Kind.INTENT, subjects.Kind.STATUS, subjects.Kind.SECRET)
    assert [reads.of(k) for k in kinds] == [0, 0, 0]  # the box written is the one kept (hub.ingest.sealed)


async def test_a_control_plane_from_before_a_restart_is_read_and_deleted(world: World, reads: Reads) -> None:
    """The restarted hub finds cp1's intent subject in KB_INTENTS' list, so it reads it rather
    than take it for empty; deleting the RKCP then publishes the delete intent fenced on it."""
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    provisioned = await world.last_intent_seq()
    await world.stop("hub")

    world.start_hub()
    await helpers.eventually(
        lambda: reads.of(subjects.Kind.INTENT) >= 1 and reads.of(subjects.Kind.STATUS) >= 1
    )
    await world.mgmt.delete(RKCP, "cp1", namespace="default")

    async def gone() -> bool:
        return await world.rkcp() is None

    await helpers.eventually(gone, within=30)
    assert [i.op for i in await world.intents() if i.name == "cp1"] in ([], ["delete"])
    assert await world.last_intent_seq() != provisioned  # the delete intent replaced it (or purged)


async def test_an_intent_written_after_the_list_was_taken_is_found_by_the_fence(
    world: World, reads: Reads
) -> None:
    """Another writer puts a message on cp2's intent subject after the hub took KB_INTENTS' list:
    the hub takes cp2's subject for empty, its publish fenced on "no message" is refused, and it
    reads the subject and publishes over what it found. cp2 still ends Ready, with no loop."""
    world.start_hub()
    world.start_agent()
    await create_pair(world)
    await until_ready(world)
    assert any(s.endswith("_INTENTS") for s in reads.listed)
    cp2 = subjects.intent(SITE, "tenants", "cp2", prefix=world.prefix)
    await bus.publish(world.conn, cp2, b"{}", msg_id="another-writer")
    await create_pair(world, "cp2")
    await until_ready(world, "cp2")
    assert reads.of(subjects.Kind.INTENT, "cp2") >= 1
    assert [i.op for i in await world.intents() if i.name == "cp2"] == ["provision"]
