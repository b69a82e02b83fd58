"""The observer (``kamaji-broker status``'s read-only user, ``permissions.for_observer``) attacks
the bus with a raw nats-py client and the credential ``nats-config`` wrote for it: it must read
counts and heartbeats, and nothing else — no intent, status or sealed secret, no write, no
consumer or stream administration, no pull or ack, no other inbox, no credential service.

Every refusal is the server's permission violation naming the subject, with no reply, no
stream or consumer changed, and the server and every connection alive; the last cases are the
controls (each grant works, and a request body on the heartbeat's Direct Get reads nothing else).
Both kinds of identity (static users and operator-mode JWTs) are attacked.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from protocol import messages, permissions, streams, subjects
from sandbox import natsd
from tests import helpers
from tests.security import nats_support as ns

INTENTS = streams.intents_stream_name()
SITE_B = streams.site_stream_name("site-b")
AGENT_B = streams.agent_consumer("site-b").durable_name
HUB = streams.HUB_CONSUMER
B_INTENT = subjects.intent("site-b", "tenants", "cp1")
B_STATUS = subjects.status("site-b", "tenants", "cp1")
B_SECRET = subjects.secret("site-b", "tenants", "cp1")
B_BEAT = subjects.heartbeat("site-b")
PULL = json.dumps({"batch": 5, "expires": 2_000_000_000}).encode()
CONSUMER = json.dumps({"stream_name": INTENTS, "config": {"durable_name": "spy"}}).encode()

PUBLISH = [
    # data subjects: it writes nothing
    ("intent", B_INTENT, b"{}"),
    ("status", B_STATUS, b"{}"),
    ("secret", B_SECRET, b"{}"),
    ("heartbeat", B_BEAT, b"{}"),
    # message content: intents, statuses and sealed secrets stay unreadable
    ("direct-get-intent", f"$JS.API.DIRECT.GET.{INTENTS}.{B_INTENT}", b""),
    ("direct-get-status", f"$JS.API.DIRECT.GET.{SITE_B}.{B_STATUS}", b""),
    ("direct-get-secret", f"$JS.API.DIRECT.GET.{SITE_B}.{B_SECRET}", b""),
    ("direct-get-stream-wide", f"$JS.API.DIRECT.GET.{SITE_B}", json.dumps({"seq": 1}).encode()),
    ("msg-get", f"$JS.API.STREAM.MSG.GET.{SITE_B}", json.dumps({"seq": 1}).encode()),
    ("pull-agent", f"$JS.API.CONSUMER.MSG.NEXT.{INTENTS}.{AGENT_B}", PULL),
    ("pull-hub", f"$JS.API.CONSUMER.MSG.NEXT.{SITE_B}.{HUB}", PULL),
    # administration
    ("create-consumer", f"$JS.API.CONSUMER.CREATE.{INTENTS}.spy", CONSUMER),
    ("durable-create", f"$JS.API.CONSUMER.DURABLE.CREATE.{INTENTS}.spy", CONSUMER),
    ("delete-consumer", f"$JS.API.CONSUMER.DELETE.{INTENTS}.{AGENT_B}", b""),
    ("reset-consumer", f"$JS.API.CONSUMER.RESET.{INTENTS}.{AGENT_B}", b'{"seq":1}'),
    (
        "pause-consumer",
        f"$JS.API.CONSUMER.PAUSE.{INTENTS}.{AGENT_B}",
        b'{"pause_until":"2099-01-01T00:00:00Z"}',
    ),
    ("stream-info", f"$JS.API.STREAM.INFO.{SITE_B}", b""),
    ("stream-names", "$JS.API.STREAM.NAMES", b""),
    ("purge", f"$JS.API.STREAM.PURGE.{SITE_B}", b""),
    ("delete-stream", f"$JS.API.STREAM.DELETE.{SITE_B}", b""),
    ("account-info", "$JS.API.INFO", b""),
    # settling someone's deliveries
    ("ack", f"$JS.ACK.{INTENTS}.{AGENT_B}.1.1.1.1.0", b"+ACK"),
    ("next-on-ack", f"$JS.ACK.{INTENTS}.{AGENT_B}.1.1.1.1.0", b"+NXT"),
    # the credential service
    ("bootstrap", subjects.service(subjects.Service.BOOTSTRAP, "site-b"), b"{}"),
    ("renew", subjects.service(subjects.Service.RENEW, "site-b"), b"{}"),
    ("system", "$SYS.REQ.SERVER.PING", b""),
]

SUBSCRIBE = [
    ">",
    "_INBOX.>",
    "_INBOX_site-b.>",
    "kb.>",
    B_BEAT,
    "kb.bootstrap.*",
    "$JS.API.>",
    "$JS.ACK.>",
    "$SYS.>",
]


@pytest.fixture
async def observer(attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw) -> AsyncIterator[ns.Raw]:
    server, conf = attacked
    identity = helpers.identity_file(conf, "observer")
    raw = await ns.connect(server, identity, inbox_prefix=permissions.OBSERVER_INBOX)
    yield raw
    await raw.close()


@pytest.mark.parametrize(("subject", "payload"), [pytest.param(s, p, id=i) for i, s, p in PUBLISH])
async def test_the_observer_cannot_publish(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, observer: ns.Raw, subject: str, payload: bytes
) -> None:
    js = hub.nc.jetstream()
    before = await ns.snapshot(js)
    inbox = observer.inbox()
    await observer.listen(inbox)

    await observer.publish(subject, payload, reply=inbox)

    await observer.denied("publish", subject)
    assert observer.received == []
    assert await ns.snapshot(js) == before
    await ns.alive(attacked[0], hub, observer)


@pytest.mark.parametrize("subject", SUBSCRIBE)
async def test_the_observer_cannot_subscribe(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, observer: ns.Raw, subject: str
) -> None:
    await observer.subscribe(subject)

    await observer.denied("subscribe", subject)
    await ns.alive(attacked[0], hub, observer)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(json.dumps({"seq": 1}).encode(), id="by-sequence"),
        pytest.param(json.dumps({"last_by_subj": B_SECRET}).encode(), id="last-by-secret-subject"),
        pytest.param(json.dumps({"seq": 1, "next_by_subj": B_STATUS}).encode(), id="next-by-status-subject"),
        pytest.param(json.dumps({"multi_last": ["kb.>"], "batch": 10}).encode(), id="multi-last"),
    ],
)
async def test_a_request_body_on_the_heartbeat_direct_get_reads_nothing_else(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, observer: ns.Raw, body: bytes
) -> None:
    """Allowed, so no violation: the server refuses the body (408), never answering with a status
    or a sealed secret."""
    js = hub.nc.jetstream()
    before = await ns.snapshot(js)
    inbox = observer.inbox()
    await observer.listen(inbox)

    await observer.publish(f"$JS.API.DIRECT.GET.{SITE_B}.{B_BEAT}", body, reply=inbox)

    async def answered() -> bool:
        return bool(observer.received)

    await helpers.eventually(answered)
    (reply,) = observer.received
    assert (reply.headers or {}).get("Status") == "408" and reply.data == b""
    assert observer.violations == []
    assert await ns.snapshot(js) == before


async def test_the_observer_reads_counts_and_heartbeats(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, observer: ns.Raw
) -> None:
    """The control: every grant works, and reads what ``kamaji-broker status`` needs."""
    js = hub.nc.jetstream()
    before = await ns.snapshot(js)
    for site in ns.SITES:
        agent = streams.agent_consumer(site)
        info = json.loads(
            (await observer.ask(f"$JS.API.CONSUMER.INFO.{agent.stream}.{agent.durable_name}")).data
        )
        assert info["name"] == agent.durable_name and info["num_pending"] == len(ns.CONTROL_PLANES), info
        stream = streams.site_stream_name(site)
        hub_info = json.loads((await observer.ask(f"$JS.API.CONSUMER.INFO.{stream}.{HUB}")).data)
        assert hub_info["name"] == HUB, hub_info
        beat = await observer.ask(f"$JS.API.DIRECT.GET.{stream}.{subjects.heartbeat(site)}")
        assert (beat.headers or {}).get("Nats-Subject") == subjects.heartbeat(site)
        assert messages.decode_heartbeat(beat.data).site == site
    await observer.subscribe(f"{permissions.OBSERVER_INBOX}.anything")
    assert observer.violations == []
    assert await ns.snapshot(js) == before
    await ns.alive(attacked[0], hub, observer)
