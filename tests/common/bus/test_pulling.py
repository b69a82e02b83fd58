"""common.bus.pulling: one pull request serves many fetches, against a real nats-server.

The pull requests are counted by a second subscriber on the consumer's MSG.NEXT subject (what
the server receives), not by looking inside the client."""

from __future__ import annotations

import asyncio
import json
import uuid

import msgspec
import nats
import pytest

from common import bus
from common.bus import consuming, errors, pulling
from protocol import messages, streams, subjects
from sandbox import natsd
from tests import helpers


@pytest.mark.parametrize(
    ("owed", "expires_at", "reconnects", "want"),
    [
        (0, 100.0, 0, 16),  # nothing owed: a whole batch
        (16, 100.0, 0, 0),  # a whole batch owed: nothing
        (9, 100.0, 0, 0),  # more than half owed: nothing yet
        (8, 100.0, 0, 8),  # half owed: top up to a batch
        (3, 100.0, 0, 13),
        (16, 10.0, 0, 16),  # expired (no 408 seen): it is over, a whole batch
        (16, 100.0, 1, 16),  # the connection came back since: the server forgot it
        (-2, 100.0, 0, 16),  # more arrived than counted (overlapping requests): a whole batch
    ],
)
def test_what_a_fetch_asks_for(owed: int, expires_at: float, reconnects: int, want: int) -> None:
    open_ = pulling.Open(owed=owed, expires_at=expires_at, reconnects=0)
    assert open_.wants(16, now=50.0, reconnects=reconnects) == want


class Requests:
    """The pull requests the server receives for one consumer."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    async def __call__(self, msg: bus.Message) -> None:
        self.batches.append(json.loads(msg.data)["batch"])


async def watch_requests(conn: bus.Connection, stream: str, consumer: str) -> Requests:
    requests = Requests()
    await conn.subscribe(pulling.next_subject(stream, consumer), requests)
    return requests


async def publish_intent(conn: bus.Connection, prefix: str, i: int) -> None:
    subject = subjects.intent("site-a", "tenants", f"cp{i}", prefix=prefix)
    await bus.publish(conn, subject, messages.encode(helpers.intent(name=f"cp{i}")), msg_id=f"m{i}")


async def test_messages_trickling_in_share_one_request(conn: bus.Connection, topology: str) -> None:
    d = streams.agent_consumer("site-a", prefix=topology)
    requests = await watch_requests(conn, d.stream, d.durable_name)
    consumer = await bus.bind(conn, d)
    try:
        got = []
        for i in range(6):
            await publish_intent(conn, topology, i)
            (delivery,) = await consumer.fetch(16, timeout=5)
            got.append(delivery.subject)
            await delivery.ack()
        await conn.sync()
        assert got == [subjects.intent("site-a", "tenants", f"cp{i}", prefix=topology) for i in range(6)]
        # nats-py's own fetch sent two requests per message here (a no-wait probe, then a
        # lingering one): twelve. Six fetches of one message each fit in one open request.
        assert requests.batches == [16]
    finally:
        await consumer.unsubscribe()


async def test_a_fetch_asks_for_no_more_than_a_batch_ahead(conn: bus.Connection, topology: str) -> None:
    d = streams.agent_consumer("site-a", prefix=topology)
    for i in range(5):
        await publish_intent(conn, topology, i)
    requests = await watch_requests(conn, d.stream, d.durable_name)
    consumer = await bus.bind(conn, d)
    try:
        got: list[bus.Delivery] = []
        while len(got) < 5:
            batch = await consumer.fetch(2, timeout=5)
            assert 1 <= len(batch) <= 2
            got.extend(batch)
        assert [x.stream_seq for x in got] == [1, 2, 3, 4, 5]
        for x in got:
            await x.ack()
        await conn.sync()
        assert all(b <= 2 for b in requests.batches)
        assert sum(requests.batches) <= 5 + 2
    finally:
        await consumer.unsubscribe()


async def test_an_expired_request_is_renewed(conn: bus.Connection, topology: str) -> None:
    d = streams.agent_consumer("site-a", prefix=topology)
    requests = await watch_requests(conn, d.stream, d.durable_name)
    consumer = await bus.bind(conn, d)
    try:
        assert await consumer.fetch(4, timeout=1.0) == []  # its request expires at the server
        await publish_intent(conn, topology, 1)
        (delivery,) = await consumer.fetch(4, timeout=5)
        await delivery.ack()
        await conn.sync()
        assert requests.batches == [4, 4]
    finally:
        await consumer.unsubscribe()


async def test_a_deleted_consumer_is_named(
    nats_server: natsd.NatsServer, conn: bus.Connection, topology: str
) -> None:
    d = streams.agent_consumer("site-a", prefix=topology)
    requests = await watch_requests(conn, d.stream, d.durable_name)
    consumer = await bus.bind(conn, d)
    fetching = asyncio.ensure_future(consumer.fetch(4, timeout=30))
    try:
        await helpers.eventually(lambda: requests.batches == [4], what="the pull request reached the server")
        admin = await nats.connect(servers=[nats_server.url], **helpers.tls_options(nats_server.url))
        try:
            await admin.jetstream().delete_consumer(d.stream, d.durable_name)
        finally:
            await admin.close()
        with pytest.raises(errors.ConsumerNotFound) as exc:
            await fetching
        assert d.durable_name in str(exc.value) and d.stream in str(exc.value)
    finally:
        fetching.cancel()
        await consumer.unsubscribe()


async def killed_and_back(server: natsd.NatsServer, conn: bus.Connection) -> None:
    """Kill the server and start it again; return once ``conn`` reconnected. Killed, not
    stopped: a stopping server ends its open requests with a 409, a killed one cannot, and the
    one that starts knows nothing of them."""
    reconnects = conn.reconnects
    assert server.process is not None
    server.process.kill()
    server.process.wait()
    server.start()
    await helpers.eventually(lambda: conn.reconnects > reconnects, within=15)


async def test_after_a_reconnect_a_fetch_asks_again(restartable_nats: natsd.NatsServer, prefix: str) -> None:
    conn = await bus.connect(helpers.options(restartable_nats.url), deadline=10)
    try:
        await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix)
        consumer = await bus.bind(conn, streams.agent_consumer("site-a", prefix=prefix))
        await publish_intent(conn, prefix, 0)
        (first,) = await consumer.fetch(4, timeout=60)  # leaves a request for 3 more open 60 s
        await first.ack()
        await killed_and_back(restartable_nats, conn)
        await publish_intent(conn, prefix, 1)
        # The server forgot the open request with the connection; one long fetch gets the
        # message only if the client asks again rather than wait for the forgotten one.
        (delivery,) = await consumer.fetch(4, timeout=30)
        assert delivery.stream_seq == 2
        await delivery.ack()
        await consumer.unsubscribe()
    finally:
        await conn.close()


async def test_a_fetch_waiting_when_the_connection_comes_back_ends_then(
    restartable_nats: natsd.NatsServer, prefix: str
) -> None:
    """Its request died with the connection: it returns (with nothing) rather than wait out its
    timeout, so the caller asks again and checks what a reconnect can lose."""
    conn = await bus.connect(helpers.options(restartable_nats.url), deadline=10)
    try:
        await bus.ensure_topology(conn, sites=["site-a"], prefix=prefix)
        consumer = await bus.bind(conn, streams.agent_consumer("site-a", prefix=prefix))
        fetching = asyncio.create_task(consumer.fetch(4, timeout=3600))
        await killed_and_back(restartable_nats, conn)
        await helpers.eventually(fetching.done, within=15, what="the fetch ended by the reconnect")
        assert fetching.result() == []
        await publish_intent(conn, prefix, 0)
        (delivery,) = await consumer.fetch(4, timeout=30)
        await delivery.ack()
        await consumer.unsubscribe()
    finally:
        await conn.close()


async def test_a_consumer_that_is_not_there_is_unavailable_at_once(
    conn: bus.Connection, topology: str
) -> None:
    """The server answers 503 (no responders) right away: an error at the first answer, never
    a request after request until the fetch's deadline. (Nothing may listen on the subject here:
    a listener would be a responder.)"""
    d = streams.agent_consumer("site-a", prefix=topology)
    consumer = await consuming.attach(conn, msgspec.structs.replace(d, durable_name="nobody"))
    try:
        with pytest.raises(errors.Unavailable, match="no responders"):
            await consumer.fetch(4, timeout=10)
    finally:
        await consumer.unsubscribe()


async def test_a_request_the_consumer_refuses_is_named(
    nats_server: natsd.NatsServer, conn: bus.Connection
) -> None:
    """A consumer that takes batches of at most 2 ends a request for 4 with a 409 at once."""
    admin = await nats.connect(servers=[nats_server.url], **helpers.tls_options(nats_server.url))
    try:
        stream = "PULLTEST" + uuid.uuid4().hex[:6].upper()
        await admin.jetstream().add_stream(name=stream, subjects=[f"{stream}.>"])
        # nats-py's ConsumerConfig has no max_batch: the API request, as the server reads it.
        config = {"durable_name": "small", "ack_policy": "explicit", "max_batch": 2}
        body = json.dumps({"stream_name": stream, "config": config}).encode()
        reply = await admin.request(f"$JS.API.CONSUMER.CREATE.{stream}.small", body, timeout=5)
        assert json.loads(reply.data)["config"]["max_batch"] == 2
    finally:
        await admin.close()
    definition = streams.ConsumerDef(stream=stream, durable_name="small", filter_subjects=())
    consumer = await consuming.attach(conn, definition)
    try:
        with pytest.raises(errors.BusError, match="409 Exceeded MaxRequestBatch of 2"):
            await consumer.fetch(4, timeout=10)
        assert (await consumer.fetch(2, timeout=0.5)) == []  # a batch it takes: asked, nothing there
    finally:
        await consumer.unsubscribe()
