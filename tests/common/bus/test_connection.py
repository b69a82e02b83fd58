"""common.bus against a real nats-server: round trips, de-duplication, fencing, compaction,
redelivery and durability across a server restart."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from common import bus
from common.bus import errors
from common.bus import topology as bus_topology
from protocol import messages, streams, subjects
from sandbox import natsd, ports
from tests import helpers

K = subjects.Kind


async def test_topology_is_idempotent(conn: bus.Connection, prefix: str) -> None:
    first = await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix)
    second = await bus.ensure_topology(conn, sites=["site-a", "site-b"], prefix=prefix)
    assert first == {f"{prefix.upper()}_INTENTS": "created", f"{prefix.upper()}_SITE_site-a": "created"}
    assert second == {
        f"{prefix.upper()}_INTENTS": "unchanged",
        f"{prefix.upper()}_SITE_site-a": "unchanged",
        f"{prefix.upper()}_SITE_site-b": "created",
    }
    for kind in K:
        info = await bus.stream_info(conn, helpers.stream(kind, prefix, site="site-b"))
        assert info.config.max_msgs_per_subject == 1
        assert info.config.max_consumers == streams.MAX_CONSUMERS
        assert info.config.storage == "file"
        assert info.config.max_msg_size == streams.MAX_MSG_SIZE
    state = await bus.consumer_info(conn, helpers.stream(K.INTENT, prefix), "agent-site-b")
    assert state.filter_subject == f"{prefix}.intent.site-b.*.*"
    hub = await bus.consumer_info(conn, helpers.stream(K.STATUS, prefix, site="site-b"), streams.HUB_CONSUMER)
    assert hub.filter_subjects == (
        f"{prefix}.status.site-b.*.*",
        f"{prefix}.secret.site-b.*.*",
        f"{prefix}.site.site-b",
    )


async def test_a_site_stream_carries_its_quota(conn: bus.Connection, prefix: str) -> None:
    limits = streams.SiteLimits(max_msg_size=2048, max_msgs=3, max_bytes=8192)
    await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix, limits=limits)
    config = (await bus.stream_info(conn, helpers.stream(K.STATUS, prefix))).config
    assert (config.max_msg_size, config.max_msgs, config.max_bytes, config.discard) == (2048, 3, 8192, "new")
    # Raising the quota later updates the stream in place.
    outcome = await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix)
    assert outcome[helpers.stream(K.STATUS, prefix)] == "updated"
    config = (await bus.stream_info(conn, helpers.stream(K.STATUS, prefix))).config
    assert (config.max_msgs, config.max_bytes) == (streams.SITE_MAX_MSGS, streams.SITE_MAX_BYTES)


QUOTA = streams.SiteLimits(max_msg_size=1024, max_msgs=3, max_bytes=4096)


async def test_a_site_at_its_quota_is_refused_naming_the_limit(conn: bus.Connection, prefix: str) -> None:
    await bus.ensure_topology(conn, sites=["site-a", "site-b"], prefix=prefix, limits=QUOTA)

    def status(name: str) -> str:
        return subjects.status("site-a", "tenants", name, prefix=prefix)

    with pytest.raises(errors.QuotaExceeded) as too_big:
        await bus.publish(conn, status("big"), b"x" * 2000, msg_id="big")
    assert too_big.value.limit == "max_msg_size"
    assert "message size exceeds maximum allowed" in str(too_big.value)
    for name in ("cp1", "cp2", "cp3"):
        await bus.publish(conn, status(name), b"x" * 100, msg_id=name)
    with pytest.raises(errors.QuotaExceeded) as full:
        await bus.publish(conn, status("cp4"), b"x" * 100, msg_id="cp4")
    assert (full.value.limit, full.value.subject) == ("max_msgs", status("cp4"))
    assert "maximum messages exceeded" in str(full.value)
    # An update of a subject already stored replaces its message: it still fits.
    again = await bus.publish(conn, status("cp1"), b"y" * 100, msg_id="cp1-again")
    assert again.seq == 4
    # Another site's stream is its own.
    other = subjects.status("site-b", "tenants", "cp4", prefix=prefix)
    assert (await bus.publish(conn, other, b"x" * 100, msg_id="b4")).seq == 1


async def test_a_site_over_its_bytes_is_refused_naming_the_limit(conn: bus.Connection, prefix: str) -> None:
    limits = streams.SiteLimits(max_msg_size=1024, max_msgs=10, max_bytes=2500)
    await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix, limits=limits)
    for i in range(2):
        subject = subjects.secret("site-a", "tenants", f"cp{i}", prefix=prefix)
        await bus.publish(conn, subject, b"x" * 900, msg_id=f"s{i}")
    with pytest.raises(errors.QuotaExceeded) as full:
        await bus.publish(conn, subjects.heartbeat("site-a", prefix=prefix), b"x" * 900, msg_id="h")
    assert full.value.limit == "max_bytes"
    assert "maximum bytes exceeded" in str(full.value)


async def test_the_server_max_payload_is_named(secured_nats: tuple[natsd.NatsServer, Path]) -> None:
    """nats-config's server takes at most MAX_PAYLOAD per message; the refusal names the limit."""
    server, conf = secured_nats
    conn = await bus.connect(
        helpers.options(server.url, seed_file=helpers.identity_file(conf, "hub")), deadline=10
    )
    try:
        assert conn.max_payload == streams.MAX_PAYLOAD
        with pytest.raises(errors.QuotaExceeded) as exc:
            subject = subjects.intent("site-a", "tenants", "cp1")
            await bus.publish(conn, subject, b"x" * (streams.MAX_PAYLOAD + 1), msg_id="x")
        assert exc.value.limit == "max_payload"
        assert f"the server takes at most {streams.MAX_PAYLOAD}" in str(exc.value)
    finally:
        await conn.close()


async def test_topology_deletes_the_shared_streams_of_earlier_releases(
    conn: bus.Connection, prefix: str
) -> None:
    upper = prefix.upper()
    for suffix, subject in (("STATUS", "status.*.*.*"), ("SECRETS", "secret.*.*.*"), ("SITES", "site.*")):
        legacy = streams.StreamDef(name=f"{upper}_{suffix}", subjects=(f"{prefix}.{subject}",))
        assert await bus_topology.ensure_stream(conn, legacy) == "created"
    outcome = await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix)
    assert outcome[f"{upper}_STATUS"] == outcome[f"{upper}_SECRETS"] == outcome[f"{upper}_SITES"] == "deleted"
    assert outcome[f"{upper}_SITE_site-a"] == "created"


async def test_topology_updates_a_drifted_stream(conn: bus.Connection, prefix: str) -> None:
    await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix)
    name = helpers.stream(K.STATUS, prefix)
    drifted = msgspec.structs.replace((await bus.stream_info(conn, name)).config, max_msgs_per_subject=5)
    assert await bus_topology.ensure_stream(conn, drifted) == "updated"
    assert (await bus.stream_info(conn, name)).config.max_msgs_per_subject == 5
    outcome = await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix)
    assert outcome[name] == "updated"
    assert (await bus.stream_info(conn, name)).config.max_msgs_per_subject == 1


async def test_topology_creates_again_a_hub_consumer_of_an_earlier_release(
    conn: bus.Connection, prefix: str
) -> None:
    """The hub's consumer used to acknowledge; the server cannot change an ack policy in place,
    so the topology deletes it and creates it again, without acks (the hub's grants have none)."""
    await bus.ensure_topology(conn, sites=[], prefix=prefix)
    await bus_topology.ensure_stream(conn, streams.site_stream("site-a", prefix=prefix))
    now = streams.hub_consumer("site-a", prefix=prefix)
    earlier = msgspec.structs.replace(now, ack_policy="explicit")
    await bus_topology.ensure_consumer(conn, earlier)

    async def ack_policy() -> str:
        info = await conn.jetstream(
            lambda js: js.consumer_info(now.stream, now.durable_name), subjects=["$JS.API.>"], what="info"
        )
        assert info.config.filter_subjects == list(now.filter_subjects)
        return str(getattr(info.config.ack_policy, "value", info.config.ack_policy))

    assert await ack_policy() == "explicit"
    await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix)
    assert await ack_policy() == "none"


ROUND_TRIPS: list[tuple[str, K, Callable[[], Any], Callable[[bytes], Any]]] = [
    ("intent", K.INTENT, helpers.intent, messages.decode_intent),
    ("status", K.STATUS, helpers.status, messages.decode_status),
    ("sealed", K.SECRET, helpers.sealed, messages.decode_sealed_secrets),
    ("heartbeat", K.SITE, helpers.heartbeat, messages.decode_heartbeat),
]


@pytest.mark.parametrize(
    ("kind", "make", "decode"), [r[1:] for r in ROUND_TRIPS], ids=[r[0] for r in ROUND_TRIPS]
)
async def test_every_message_type_round_trips(
    conn: bus.Connection, topology: str, kind: K, make: Callable[[], Any], decode: Callable[[bytes], Any]
) -> None:
    message = make()
    if kind is K.SITE:
        subject = subjects.heartbeat("site-a", prefix=topology)
    else:
        subject = subjects.control_plane(kind, "site-a", "tenants", "cp1", prefix=topology)
    ack = await bus.publish(conn, subject, messages.encode(message), msg_id=f"{kind}-1")
    assert ack.seq == 1 and not ack.duplicate
    stored = await bus.last_message(conn, helpers.stream(kind, topology), subject)
    assert stored is not None and stored.seq == 1
    assert decode(stored.data) == message


async def test_fetch_ack_and_settle(conn: bus.Connection, topology: str) -> None:
    subject = subjects.intent("site-a", "tenants", "cp1", prefix=topology)
    await bus.publish(conn, subject, messages.encode(helpers.intent()), msg_id="i-1")
    consumer = await bus.bind(conn, streams.agent_consumer("site-a", prefix=topology))
    [delivery] = await consumer.fetch(10, timeout=2)
    assert delivery.subject == subject and delivery.stream_seq == 1 and delivery.num_delivered == 1
    assert messages.decode_intent(delivery.data) == helpers.intent()
    await delivery.in_progress()
    await delivery.ack()
    assert await consumer.fetch(10, timeout=0.5) == []
    state = await consumer.info()
    assert (state.num_pending, state.num_ack_pending, state.ack_floor_stream_seq) == (0, 0, 1)
    await consumer.unsubscribe()


async def test_duplicate_msg_id_is_stored_once(conn: bus.Connection, topology: str) -> None:
    subject = subjects.status("site-a", "tenants", "cp1", prefix=topology)
    first = await bus.publish(conn, subject, messages.encode(helpers.status()), msg_id="same")
    again = await bus.publish(conn, subject, messages.encode(helpers.status()), msg_id="same")
    assert (first.seq, first.duplicate) == (1, False)
    assert (again.seq, again.duplicate) == (1, True)
    info = await bus.stream_info(conn, helpers.stream(K.STATUS, topology))
    assert info.messages == 1 and info.last_seq == 1


async def test_expected_last_subject_sequence_fences_writers(conn: bus.Connection, topology: str) -> None:
    subject = subjects.intent("site-a", "tenants", "cp1", prefix=topology)
    other = subjects.intent("site-a", "tenants", "cp2", prefix=topology)
    first = await bus.publish(conn, subject, b"{}", msg_id="a", expected_last_subject_seq=0)
    await bus.publish(conn, other, b"{}", msg_id="b")  # another subject does not count
    second = await bus.publish(conn, subject, b"{}", msg_id="c", expected_last_subject_seq=first.seq)
    with pytest.raises(errors.WrongLastSequence) as exc:
        # A second hub replica that still believes the subject is at `first.seq`.
        await bus.publish(conn, subject, b"{}", msg_id="d", expected_last_subject_seq=first.seq)
    assert exc.value.subject == subject and exc.value.expected == first.seq
    stored = await bus.last_message(conn, helpers.stream(K.INTENT, topology), subject)
    assert stored is not None and stored.seq == second.seq


async def test_compaction_keeps_only_the_latest_intent(conn: bus.Connection, topology: str) -> None:
    subject = subjects.intent("site-a", "tenants", "cp1", prefix=topology)
    for generation in (1, 2, 3):
        await bus.publish(
            conn, subject, messages.encode(helpers.intent(generation=generation)), msg_id=f"g{generation}"
        )
    consumer = await bus.bind(conn, streams.agent_consumer("site-a", prefix=topology))
    deliveries = await consumer.fetch(10, timeout=1)
    assert [messages.decode_intent(d.data).generation for d in deliveries] == [3]
    assert deliveries[0].stream_seq == 3
    await deliveries[0].ack()
    await consumer.unsubscribe()


async def test_consumer_of_one_site_sees_only_its_intents(conn: bus.Connection, topology: str) -> None:
    for site in ("site-a", "site-b"):
        await bus.publish(
            conn, subjects.intent(site, "tenants", "cp1", prefix=topology), b"{}", msg_id=f"{site}-1"
        )
    consumer = await bus.bind(conn, streams.agent_consumer("site-b", prefix=topology))
    deliveries = await consumer.fetch(10, timeout=1)
    assert [d.subject for d in deliveries] == [subjects.intent("site-b", "tenants", "cp1", prefix=topology)]
    await deliveries[0].term()
    await consumer.unsubscribe()


async def test_unacked_message_is_redelivered_after_ack_wait(conn: bus.Connection, prefix: str) -> None:
    await bus.ensure_topology(conn, sites=[], prefix=prefix)
    short = streams.ConsumerDef(
        stream=helpers.stream(K.INTENT, prefix),
        durable_name="agent-short",
        filter_subjects=(f"{prefix}.intent.short.>",),
        ack_wait=1.0,
    )
    await bus.ensure_topology(conn, sites=[], prefix=prefix)
    await bus.topology.ensure_consumer(conn, short)
    await bus.publish(conn, f"{prefix}.intent.short.ns.cp", b"{}", msg_id="r1")
    consumer = await bus.bind(conn, short)
    [first] = await consumer.fetch(1, timeout=2)
    assert first.num_delivered == 1  # not acked: the server must hand it out again
    redelivered = []
    for _ in range(20):
        redelivered = await consumer.fetch(1, timeout=0.5)
        if redelivered:
            break
    assert [d.stream_seq for d in redelivered] == [first.stream_seq]
    assert redelivered[0].num_delivered == 2
    await redelivered[0].ack()
    await consumer.unsubscribe()


async def test_nak_with_delay_redelivers(conn: bus.Connection, topology: str) -> None:
    subject = subjects.intent("site-a", "tenants", "cp1", prefix=topology)
    await bus.publish(conn, subject, b"{}", msg_id="n1")
    consumer = await bus.bind(conn, streams.agent_consumer("site-a", prefix=topology))
    [d] = await consumer.fetch(1, timeout=2)
    await d.nak(delay=0.3)
    again: list[bus.Delivery] = []
    for _ in range(20):
        again = await consumer.fetch(1, timeout=0.5)
        if again:
            break
    assert again and again[0].stream_seq == d.stream_seq and again[0].num_delivered == 2
    await again[0].ack()
    await consumer.unsubscribe()


async def test_bind_to_missing_consumer_is_consumer_not_found(conn: bus.Connection, topology: str) -> None:
    with pytest.raises(errors.ConsumerNotFound) as exc:
        await bus.bind(conn, streams.agent_consumer("site-zz", prefix=topology))
    assert "agent-site-zz" in str(exc.value)


async def test_purge_subject_and_missing_last_message(conn: bus.Connection, topology: str) -> None:
    subject = subjects.status("site-a", "tenants", "cp1", prefix=topology)
    await bus.publish(conn, subject, b"{}", msg_id="p1")
    name = helpers.stream(K.STATUS, topology)
    assert await bus.last_message(conn, name, subject) is not None
    await bus.purge_subject(conn, name, subject)
    assert await bus.last_message(conn, name, subject) is None


async def test_server_restart_keeps_every_acknowledged_message(
    restartable_nats: natsd.NatsServer, prefix: str
) -> None:
    conn = await bus.connect(helpers.options(restartable_nats.url), deadline=10)
    try:
        await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix)
        published = {}
        for i in range(5):
            subject = subjects.intent("site-a", "tenants", f"cp{i}", prefix=prefix)
            published[subject] = (
                await bus.publish(
                    conn, subject, messages.encode(helpers.intent(name=f"cp{i}")), msg_id=f"m{i}"
                )
            ).seq
        reconnects = conn.reconnects
        restartable_nats.restart()
        await helpers.eventually(lambda: conn.reconnects > reconnects, within=15)
        for subject, seq in published.items():
            stored = await bus.last_message(conn, helpers.stream(K.INTENT, prefix), subject)
            assert stored is not None and stored.seq == seq
        # The durable consumer survived too and still delivers everything.
        consumer = await bus.bind(conn, streams.agent_consumer("site-a", prefix=prefix))
        # A fetch answers with what is ready when it is served: right after a restart the stream
        # may hand over its messages in more than one batch (seen under load), so fetch until
        # nothing more comes.
        got: list[str] = []
        while batch := await consumer.fetch(10, timeout=2):
            got += [d.subject for d in batch]
        assert sorted(got) == sorted(published)
        await consumer.unsubscribe()
    finally:
        await conn.close()


async def test_publish_retries_until_the_server_is_back(
    restartable_nats: natsd.NatsServer, prefix: str
) -> None:
    conn = await bus.connect(helpers.options(restartable_nats.url), deadline=10)
    try:
        await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix)
        subject = subjects.status("site-a", "tenants", "cp1", prefix=prefix)
        restartable_nats.stop()
        publishing = asyncio.create_task(
            bus.publish(conn, subject, b"{}", msg_id="while-down", attempts=100, retry_wait=0.1)
        )
        # The publish starts while the server is down; it is brought back once the client knows.
        await helpers.eventually(lambda: not conn.connected, what="the client saw the server go")
        assert not publishing.done()
        await asyncio.to_thread(restartable_nats.start)
        ack = await publishing
        assert ack.seq == 1
        again = await bus.publish(conn, subject, b"{}", msg_id="while-down")
        assert again.duplicate
    finally:
        await conn.close()


async def test_connect_gives_up_only_at_the_deadline() -> None:
    port = ports.free_port()
    with pytest.raises(errors.Unavailable) as exc:
        await bus.connect(helpers.options(f"nats://127.0.0.1:{port}"), deadline=1.0)
    assert f"127.0.0.1:{port}" in str(exc.value)


async def test_connect_retries_after_a_tls_handshake_that_failed(nats_server: natsd.NatsServer) -> None:
    """The first connection of the client gets INFO in the clear instead of a TLS handshake
    (what nats-server's ``handshake_first: "auto"`` sends when the ClientHello is late, on a
    loaded machine); the next ones reach the real server. nats-py's own first-connect loop hung
    forever after such a failure (nats-io/nats.py#718): the process never connected."""
    import asyncio
    from urllib.parse import urlsplit

    target = urlsplit(nats_server.url)
    attempts: list[int] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            writer.write(b'INFO {"server_id":"fallback","tls_required":true}\r\n')
            await writer.drain()
            await reader.read(65536)  # the ClientHello that came too late; then hang up
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(target.hostname, target.port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    proxy = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = proxy.sockets[0].getsockname()[1]
    try:
        options = helpers.options(f"tls://127.0.0.1:{port}")
        conn = await bus.connect(options, deadline=15)
        try:
            await conn.sync()
            assert conn.connected and len(attempts) >= 2
        finally:
            await conn.close()
    finally:
        proxy.close()


async def test_a_subscription_hears_what_is_published(conn: bus.Connection, topology: str) -> None:
    subject = subjects.status("site-a", "tenants", "cp1", prefix=topology)
    heard: list[bus.Message] = []

    async def hear(message: bus.Message) -> None:
        heard.append(message)

    sub = await conn.subscribe(subjects.site_filter(K.STATUS, "site-a", prefix=topology), hear)
    await bus.publish(conn, subject, b"one", msg_id="one")

    async def arrived() -> bool:
        return len(heard) == 1

    await helpers.eventually(arrived)
    assert (heard[0].subject, heard[0].data, heard[0].headers["Nats-Msg-Id"]) == (subject, b"one", "one")
    await sub.unsubscribe()


async def test_reconnect_connects_again_with_its_subscriptions(nats_server: natsd.NatsServer) -> None:
    """What an agent does after renewing its JWT: leave and connect again (presenting the new
    one); its subscriptions are made again and answer as before."""
    conn = await bus.connect(helpers.options(nats_server.url), deadline=10)
    try:

        async def pong(message: bus.Message) -> None:
            await conn.respond(message, b"pong:" + message.data)

        await conn.subscribe("kbtest.reconnect.ping", pong)
        await conn.reconnect()
        await helpers.eventually(lambda: conn.reconnects, lambda n: n == 1, what="one reconnect")
        await helpers.eventually(lambda: conn.connected, what="connected again")
        assert await conn.request("kbtest.reconnect.ping", b"1") == b"pong:1"
    finally:
        await conn.close()
