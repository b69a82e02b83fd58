"""common.bus.storage.subjects_since against a real nats-server: the subjects written since a
sequence, only those the filters match, without their payload, and no consumer left behind."""

from __future__ import annotations

import nats

from common import bus
from protocol import streams, subjects
from sandbox import natsd
from tests import helpers

PLANES = [("site-a", "cp1"), ("site-b", "cp2"), ("site-a", "cp3"), ("site-b", "cp4")]


async def test_the_subjects_written_since_a_sequence_that_the_filters_match(
    nats_server: natsd.NatsServer, conn: bus.Connection, topology: str
) -> None:
    prefix = topology
    stream = streams.intents_stream_name(prefix=prefix)
    written = []
    for site, name in PLANES:
        subject = subjects.intent(site, "default", name, prefix=prefix)
        ack = await bus.publish(conn, subject, b"x" * 4096, msg_id=f"{subject}-1")
        written.append((ack.seq, subject))
    site_a = subjects.site_filter(subjects.Kind.INTENT, "site-a", prefix=prefix)
    site_b = subjects.site_filter(subjects.Kind.INTENT, "site-b", prefix=prefix)

    assert await bus.subjects_since(conn, stream, written[1][0], [site_a], limit=10) == [written[2]]
    assert await bus.subjects_since(conn, stream, 1, [site_a, site_b], limit=10) == written
    assert await bus.subjects_since(conn, stream, 1, [site_a, site_b], limit=3) is None  # too many
    assert await bus.subjects_since(conn, stream, 1, [], limit=10) == []

    admin = await nats.connect(servers=[nats_server.url], **helpers.tls_options(nats_server.url))
    try:
        info = await admin.jetstream().stream_info(stream)
        assert info.state.consumer_count == len(("site-a", "site-b"))  # the agents' only
    finally:
        await admin.close()
