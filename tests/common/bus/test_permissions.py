"""Site credentials made by `kamaji-broker site add` on a server configured by
`kamaji-broker nats-config`: each site reaches only its own subjects, and every denial surfaces
as PermissionDenied naming the subject (not as a bare timeout)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from common import bus
from common.bus import consuming, errors
from protocol import messages, streams, subjects
from sandbox import natsd
from tests import helpers

K = subjects.Kind
PREFIX = subjects.DEFAULT_PREFIX


async def subscribe_check(conn: bus.Connection, subject: str) -> None:
    """Subscribe and unsubscribe: PermissionDenied if the server refuses the subscription."""

    async def ignore(_: bus.Message) -> None:
        pass

    sub = await conn.subscribe(subject, ignore)
    await sub.unsubscribe()


@pytest.fixture
async def hub(secured_nats: tuple[natsd.NatsServer, Path]) -> AsyncIterator[bus.Connection]:
    server, conf = secured_nats
    conn = await bus.connect(
        helpers.options(server.url, seed_file=helpers.identity_file(conf, "hub")), deadline=10
    )
    await bus.ensure_topology(conn, sites=["site-a", "site-b"])
    yield conn
    await conn.close()


@pytest.fixture
async def site_a(
    secured_nats: tuple[natsd.NatsServer, Path], hub: bus.Connection
) -> AsyncIterator[bus.Connection]:
    server, conf = secured_nats
    conn = await bus.connect(
        helpers.options(
            server.url,
            seed_file=helpers.identity_file(conf, "sites/site-a"),
            inbox_prefix=bus.site_inbox_prefix("site-a"),
        ),
        deadline=10,
    )
    yield conn
    await conn.close()


async def test_site_cannot_read_another_sites_consumer(site_a: bus.Connection) -> None:
    with pytest.raises(errors.PermissionDenied) as exc:
        await bus.bind(site_a, streams.agent_consumer("site-b"))
    assert exc.value.subject == "$JS.API.CONSUMER.INFO.KB_INTENTS.agent-site-b"
    assert exc.value.operation == "publish"


async def test_site_cannot_fetch_from_another_sites_consumer(site_a: bus.Connection) -> None:
    definition = streams.agent_consumer("site-b")
    consumer = await consuming.attach(site_a, definition)  # bind() would stop at the consumer info
    with pytest.raises(errors.PermissionDenied) as exc:
        await consumer.fetch(1, timeout=30)  # would block 30 s without the permission guard
    assert exc.value.subject == "$JS.API.CONSUMER.MSG.NEXT.KB_INTENTS.agent-site-b"
    await consumer.unsubscribe()


@pytest.mark.parametrize(
    "subject",
    [
        "kb.status.site-b.tenants.cp1",
        "kb.secret.site-b.tenants.cp1",
        "kb.site.site-b",
        "kb.intent.site-a.tenants.cp1",  # a site never writes intents, not even its own
    ],
)
async def test_site_cannot_publish_outside_its_subjects(site_a: bus.Connection, subject: str) -> None:
    with pytest.raises(errors.PermissionDenied) as exc:
        await bus.publish(site_a, subject, b"{}", msg_id="x", attempts=1)
    assert exc.value.subject == subject


@pytest.mark.parametrize("subject", ["kb.intent.>", "kb.intent.site-a.>", "_INBOX.>", "_INBOX_site-b.>"])
async def test_site_cannot_subscribe_outside_its_inbox(site_a: bus.Connection, subject: str) -> None:
    with pytest.raises(errors.PermissionDenied) as exc:
        await subscribe_check(site_a, subject)
    assert exc.value.subject == subject and exc.value.operation == "subscribe"


async def test_site_can_do_all_of_its_own_operations(site_a: bus.Connection, hub: bus.Connection) -> None:
    for name in ("cp1", "cp2", "cp3", "cp4"):
        subject = subjects.intent("site-a", "tenants", name)
        await bus.publish(hub, subject, messages.encode(helpers.intent(name=name)), msg_id=f"own-{name}")
    consumer = await bus.bind(site_a, streams.agent_consumer("site-a"))
    deliveries: list[bus.Delivery] = []
    while len(deliveries) < 4:  # a fetch returns what has arrived: up to the batch, not all of it
        got = await consumer.fetch(4 - len(deliveries), timeout=10)
        assert got, f"the consumer stopped after {len(deliveries)} of its four intents"
        deliveries += got
    ack, nak, term, progress = deliveries
    await progress.in_progress()
    await ack.ack()
    await nak.nak(delay=30)
    await term.term()
    await progress.ack()
    state = await consumer.info()
    assert state.num_ack_pending == 1  # only the nak'ed one waits for redelivery
    await consumer.unsubscribe()

    for kind, message in ((K.STATUS, helpers.status()), (K.SECRET, helpers.sealed())):
        subject = subjects.control_plane(kind, "site-a", "tenants", "cp1")
        ack_ = await bus.publish(site_a, subject, messages.encode(message), msg_id=f"{kind}-own")
        assert ack_.stream == streams.stream_name(kind, site="site-a")
    hb = await bus.publish(
        site_a, subjects.heartbeat("site-a"), messages.encode(helpers.heartbeat()), msg_id="hb"
    )
    assert hb.stream == "KB_SITE_site-a"
    await subscribe_check(site_a, "_INBOX_site-a.anything")


async def test_site_reads_the_latest_intent_of_its_own_subjects_only(
    site_a: bus.Connection, hub: bus.Connection
) -> None:
    own = subjects.intent("site-a", "tenants", "direct")
    await bus.publish(hub, own, messages.encode(helpers.intent(name="direct")), msg_id="direct-own")
    stored = await bus.last_message(site_a, "KB_INTENTS", own, direct=True)
    assert stored is not None and messages.decode_intent(stored.data).name == "direct"
    assert (
        await bus.last_message(
            site_a, "KB_INTENTS", subjects.intent("site-a", "tenants", "none"), direct=True
        )
        is None
    )
    other = subjects.intent("site-b", "tenants", "direct")
    await bus.publish(
        hub, other, messages.encode(helpers.intent(site="site-b", name="direct")), msg_id="direct-b"
    )
    with pytest.raises(errors.PermissionDenied) as exc:
        await bus.last_message(site_a, "KB_INTENTS", other, direct=True)
    assert exc.value.subject == f"$JS.API.DIRECT.GET.KB_INTENTS.{other}"
    with pytest.raises(errors.PermissionDenied):
        await bus.last_message(site_a, "KB_INTENTS", own)  # the stream-wide form is not granted


async def test_site_connected_with_the_default_inbox_is_told_so(
    secured_nats: tuple[natsd.NatsServer, Path],
) -> None:
    server, conf = secured_nats
    conn = await bus.connect(
        helpers.options(server.url, seed_file=helpers.identity_file(conf, "sites/site-a")), deadline=10
    )
    try:
        with pytest.raises(errors.PermissionDenied) as exc:
            await bus.consumer_info(conn, "KB_INTENTS", "agent-site-a")
        assert exc.value.operation == "subscribe" and exc.value.subject.startswith("_INBOX.")
    finally:
        await conn.close()


async def test_hub_cannot_read_a_sites_inbox(hub: bus.Connection) -> None:
    with pytest.raises(errors.PermissionDenied):
        await subscribe_check(hub, "_INBOX_site-a.>")
