"""hub.ingest.record on the real nats-server: a box the hub recorded is written without reading it again.

The reads are counted by the server (``tests.hub.reads``: a client of its own on the JetStream
API), never by patching our calls. ``reads.mark`` returns the subjects read since the last mark.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
import pytest

from common import bus
from hub.ingest import observations, sealed
from protocol import messages, streams, subjects
from sandbox import natsd
from tests import helpers
from tests.hub import reads as stream_reads
from tests.hub.ingest.test_consumer import Hub, new_hub, publish, publish_sealed, running, settled
from tests.hub.ingest.test_observations import CP1, HUB, PAYLOAD, STRANGER, sealed_to

RENEWED = messages.encode(msgspec.structs.replace(PAYLOAD, kubeconfig="renewed"))


@pytest.fixture
async def reads(nats_server: natsd.NatsServer, topology: str) -> AsyncIterator[stream_reads.StreamReads]:
    stream = streams.site_stream_name("site-a", prefix=topology)
    async with stream_reads.watching(nats_server.url, stream) as r:
        yield r


@pytest.fixture
async def hub(conn: bus.Connection, topology: str) -> AsyncIterator[Hub]:
    async with running(new_hub(conn, topology)) as h:
        yield h


def secret_subject(prefix: str) -> str:
    return subjects.secret(*CP1, prefix=prefix)


async def delivered(hub: Hub, seq: int) -> None:
    """The hub's consumer recorded the box at ``seq``."""

    def recorded() -> bool:
        held = hub.obs.get(CP1)
        return held is not None and held.sealed_seq == seq

    await helpers.eventually(recorded, what=f"the box at seq {seq} recorded")


async def test_a_box_delivered_by_the_consumer_is_written_without_a_stream_read(
    conn: bus.Connection, hub: Hub, reads: stream_reads.StreamReads
) -> None:
    prefix = hub.intake.prefix
    box = sealed_to(HUB)
    seq = await publish_sealed(conn, prefix, box)
    await delivered(hub, seq)
    kept = hub.obs.boxes.peek(CP1)
    assert kept is not None and (kept.seq, kept.sealed) == (seq, box)  # the ciphertext, still sealed
    assert await reads.mark(conn) == []

    opened = await hub.intake.open_latest(CP1)
    assert opened is not None and opened[1] == PAYLOAD
    assert await reads.mark(conn) == []  # opened from the kept box
    assert (len(hub.obs.boxes), hub.obs.boxes.bytes) == (0, 0)  # dropped once opened to be written

    # Nothing kept any more: the next write reads the stream (and the count sees it), keeping nothing.
    opened = await hub.intake.open_latest(CP1)
    assert opened is not None and opened[1] == PAYLOAD
    assert await reads.mark(conn) == [secret_subject(prefix)]
    assert len(hub.obs.boxes) == 0


async def test_a_box_over_the_budget_is_read_from_the_stream_and_written(
    conn: bus.Connection, topology: str, reads: stream_reads.StreamReads
) -> None:
    box = sealed_to(HUB)
    async with running(new_hub(conn, topology, box_budget=sealed.size(box) - 1)) as hub:
        seq = await publish_sealed(conn, topology, box)
        await delivered(hub, seq)
        assert hub.obs.boxes.peek(CP1) is None  # larger than the budget alone: not kept
        await reads.mark(conn)
        opened = await hub.intake.open_latest(CP1)
        assert opened is not None and opened[1] == PAYLOAD
        assert await reads.mark(conn) == [secret_subject(topology)]


async def test_the_newer_of_two_boxes_is_kept_and_written(
    conn: bus.Connection, hub: Hub, reads: stream_reads.StreamReads
) -> None:
    prefix = hub.intake.prefix
    await publish_sealed(conn, prefix, sealed_to(HUB))
    newer = await publish_sealed(conn, prefix, sealed_to(HUB, plaintext=RENEWED))
    await delivered(hub, newer)
    kept = hub.obs.boxes.peek(CP1)
    assert kept is not None and kept.seq == newer and len(hub.obs.boxes) == 1
    await reads.mark(conn)
    opened = await hub.intake.open_latest(CP1)
    assert opened is not None and opened[1].kubeconfig == "renewed"
    assert await reads.mark(conn) == []


@pytest.mark.parametrize(
    "box",
    [sealed_to(STRANGER), sealed_to(HUB, checksum="00" * 32)],
    ids=["unknown-key", "checksum-mismatch"],
)
async def test_a_box_that_does_not_open_is_not_kept(
    conn: bus.Connection, hub: Hub, reads: stream_reads.StreamReads, box: messages.SealedSecrets
) -> None:
    prefix = hub.intake.prefix
    seq = await publish_sealed(conn, prefix, box)
    await delivered(hub, seq)
    held = hub.obs.get(CP1)
    assert held is not None and held.secrets_error is not None
    assert (len(hub.obs.boxes), hub.obs.boxes.bytes) == (0, 0)
    await reads.mark(conn)
    assert await hub.intake.open_latest(CP1) is None
    assert await reads.mark(conn) == [secret_subject(prefix)]  # nothing kept: read, and refused again


async def test_a_box_naming_other_coordinates_is_refused_and_not_kept(conn: bus.Connection, hub: Hub) -> None:
    prefix = hub.intake.prefix
    await publish(conn, secret_subject(prefix), messages.encode(sealed_to(HUB, name="cp2")))
    await settled(conn, prefix)
    assert hub.rejected(subjects.Kind.SECRET, observations.Outcome.MISMATCH.value) == 1.0
    assert hub.obs.get(CP1) is None and len(hub.obs.boxes) == 0


async def test_what_no_rkcp_maps_to_any_more_drops_its_kept_box(
    conn: bus.Connection, hub: Hub, reads: stream_reads.StreamReads
) -> None:
    prefix = hub.intake.prefix
    seq = await publish_sealed(conn, prefix, sealed_to(HUB))
    await delivered(hub, seq)
    assert hub.obs.boxes.peek(CP1) is not None
    hub.mapped.discard(CP1)  # the RKCP is gone: retain unloads its coordinates

    await helpers.eventually(lambda: len(hub.obs.boxes) == 0, what="the kept box dropped")
    assert hub.obs.boxes.bytes == 0 and hub.obs.get(CP1) is None
    # An RKCP maps there again: load reads the box back and keeps it, so the write reads nothing more.
    hub.mapped.add(CP1)
    await reads.mark(conn)
    assert await hub.intake.load(CP1) is not None
    assert secret_subject(prefix) in await reads.mark(conn)
    opened = await hub.intake.open_latest(CP1)
    assert opened is not None and opened[1] == PAYLOAD
    assert await reads.mark(conn) == []


async def test_a_restarted_hub_writes_the_box_its_load_read_without_reading_it_again(
    conn: bus.Connection, topology: str, reads: stream_reads.StreamReads
) -> None:
    async with running(new_hub(conn, topology)) as first:
        seq = await publish_sealed(conn, topology, sealed_to(HUB))
        await delivered(first, seq)
        await settled(conn, topology)

    second = new_hub(conn, topology)  # its consumer redelivers nothing; load reads the stream
    loaded = await second.intake.load(CP1)
    assert loaded is not None and loaded.sealed_seq == seq
    await reads.mark(conn)
    opened = await second.intake.open_latest(CP1)
    assert opened is not None and opened[1] == PAYLOAD
    assert await reads.mark(conn) == []


async def test_a_kept_box_is_written_even_after_a_purge_behind_the_hubs_back(
    conn: bus.Connection, hub: Hub, reads: stream_reads.StreamReads
) -> None:
    """Decided (``Intake.open_latest``): the site sent it for this owner and it opens; only the
    hub's own purges (``forget``, ``unload``) drop a kept box."""
    prefix = hub.intake.prefix
    seq = await publish_sealed(conn, prefix, sealed_to(HUB))
    await delivered(hub, seq)
    await bus.purge_subject(conn, streams.site_stream_name("site-a", prefix=prefix), secret_subject(prefix))
    await reads.mark(conn)
    opened = await hub.intake.open_latest(CP1)
    assert opened is not None and opened[1] == PAYLOAD
    assert await reads.mark(conn) == []
    # The hub's own purge (an RKCP's deletion) forgets: nothing kept, nothing to write.
    hub.obs.forget(CP1)
    assert len(hub.obs.boxes) == 0
    assert await hub.intake.open_latest(CP1) is None
