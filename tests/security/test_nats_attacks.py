"""Site-a, with the credentials `kamaji-broker site add` wrote, attacks the bus with a raw
nats-py client: other sites' and the hub's consumers, other sites' subjects and inboxes, stream
administration, Direct Get and MSG.GET of others' messages, extended subjects on its own grants,
and settling (``+NXT``, ``+WPI``, ``+TERM``, ``+ACK``, ``-NAK``) others' deliveries.

Every case asserts the server's permission violation naming the subject, that no reply came,
that no stream sequence or consumer state changed, and that nats-server and both connections
are alive. The last cases are the controls: what the server answers on site-a's own grants
carries site-a's messages only, and site-a can do every operation its agent needs (the grants
are not simply empty).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol import messages, streams, subjects
from sandbox import natsd
from tests import helpers
from tests.security import nats_support as ns

K = subjects.Kind
INTENTS = streams.stream_name(K.INTENT)
# One inbound stream per site: site-b's holds the statuses, sealed secrets
# and heartbeat that site-a must not reach; site-a's own is still the hub's to read and administer.
STATUS = streams.site_stream_name("site-b")
SECRETS = streams.site_stream_name("site-a")
SITES_STREAM = STATUS
OWN = streams.agent_consumer("site-a").durable_name
B = streams.agent_consumer("site-b").durable_name
HUB_STATUS = HUB_SECRETS = streams.HUB_CONSUMER  # the hub's consumer on each site's stream

B_INTENT = subjects.intent("site-b", "tenants", "cp1")
B_STATUS = subjects.status("site-b", "tenants", "cp1")
B_SECRET = subjects.secret("site-b", "tenants", "cp1")
A_INTENT = subjects.intent("site-a", "tenants", "cp1")

LAST_B_INTENT = json.dumps({"last_by_subj": B_INTENT}).encode()
LAST_B_SECRET = json.dumps({"last_by_subj": B_SECRET}).encode()
PAUSE = json.dumps({"pause_until": "2099-01-01T00:00:00Z"}).encode()
PULL = json.dumps({"batch": 5, "expires": 2_000_000_000}).encode()


def consumer_config(name: str, filter_subject: str) -> bytes:
    return json.dumps(
        {"config": {"durable_name": name, "filter_subject": filter_subject, "ack_policy": "explicit"}}
    ).encode()


def stream_config(name: str, subject_list: list[str], **extra: object) -> bytes:
    return json.dumps({"name": name, "subjects": subject_list, "storage": "memory", **extra}).encode()


EVIL_ALL = consumer_config("evil", "kb.intent.>")


def op(verb: str) -> bytes:
    return verb.encode()


# (id, subject, payload): every one must be refused by the server.
PUBLISH = [
    # another consumer's JetStream API: fetch, bind (info), delete, pause, step down
    ("fetch-agent-site-b", f"$JS.API.CONSUMER.MSG.NEXT.{INTENTS}.{B}", PULL),
    ("fetch-hub-status", f"$JS.API.CONSUMER.MSG.NEXT.{STATUS}.{HUB_STATUS}", PULL),
    ("fetch-hub-secrets", f"$JS.API.CONSUMER.MSG.NEXT.{SECRETS}.{HUB_SECRETS}", PULL),
    ("bind-agent-site-b", f"$JS.API.CONSUMER.INFO.{INTENTS}.{B}", b""),
    ("info-hub-status", f"$JS.API.CONSUMER.INFO.{STATUS}.{HUB_STATUS}", b""),
    ("info-hub-secrets", f"$JS.API.CONSUMER.INFO.{SECRETS}.{HUB_SECRETS}", b""),
    ("delete-agent-site-b", f"$JS.API.CONSUMER.DELETE.{INTENTS}.{B}", b""),
    ("reset-agent-site-b", f"$JS.API.CONSUMER.RESET.{INTENTS}.{B}", b'{"seq":1}'),
    ("reset-hub-status", f"$JS.API.CONSUMER.RESET.{STATUS}.{HUB_STATUS}", b'{"seq":1}'),
    ("delete-hub-status", f"$JS.API.CONSUMER.DELETE.{STATUS}.{HUB_STATUS}", b""),
    ("delete-own-consumer", f"$JS.API.CONSUMER.DELETE.{INTENTS}.{OWN}", b""),
    (
        "pause-agent-site-b",
        f"$JS.API.CONSUMER.PAUSE.{INTENTS}.{B}",
        b'{"pause_until":"2099-01-01T00:00:00Z"}',
    ),
    ("stepdown-agent-site-b", f"$JS.API.CONSUMER.LEADER.STEPDOWN.{INTENTS}.{B}", b""),
    # creating consumers: a new one on site-b's intents, rebinding site-b's, widening its own
    (
        "create-filtered-on-site-b",
        f"$JS.API.CONSUMER.CREATE.{INTENTS}.evil.kb.intent.site-b.>",
        consumer_config("evil", "kb.intent.site-b.>"),
    ),
    ("create-named", f"$JS.API.CONSUMER.CREATE.{INTENTS}.evil", EVIL_ALL),
    (
        "create-durable",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{INTENTS}.evil",
        consumer_config("evil", "kb.intent.>"),
    ),
    (
        "update-agent-site-b",
        f"$JS.API.CONSUMER.CREATE.{INTENTS}.{B}.kb.intent.>",
        consumer_config(B, "kb.intent.>"),
    ),
    (
        "widen-own-consumer",
        f"$JS.API.CONSUMER.CREATE.{INTENTS}.{OWN}.kb.intent.>",
        consumer_config(OWN, "kb.intent.>"),
    ),
    ("create-ephemeral-on-status", f"$JS.API.CONSUMER.CREATE.{STATUS}", b'{"config":{"ack_policy":"none"}}'),
    (
        "create-durable-on-secrets",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{SECRETS}.evil",
        consumer_config("evil", ">"),
    ),
    ("consumer-list", f"$JS.API.CONSUMER.LIST.{INTENTS}", b""),
    ("consumer-names", f"$JS.API.CONSUMER.NAMES.{INTENTS}", b""),
    # stream administration
    ("stream-info-intents", f"$JS.API.STREAM.INFO.{INTENTS}", b""),
    ("stream-info-secrets", f"$JS.API.STREAM.INFO.{SECRETS}", b'{"subjects_filter":">"}'),
    ("stream-purge-site-b", f"$JS.API.STREAM.PURGE.{INTENTS}", b'{"filter":"kb.intent.site-b.>"}'),
    ("stream-purge-status", f"$JS.API.STREAM.PURGE.{STATUS}", b""),
    ("stream-delete-secrets", f"$JS.API.STREAM.DELETE.{SECRETS}", b""),
    ("stream-delete-sites", f"$JS.API.STREAM.DELETE.{SITES_STREAM}", b""),
    ("stream-update-intents", f"$JS.API.STREAM.UPDATE.{INTENTS}", stream_config(INTENTS, [">"])),
    ("stream-create-catch-all", "$JS.API.STREAM.CREATE.EVIL", stream_config("EVIL", ["kb.intent.site-b.>"])),
    (
        "stream-create-mirror",
        "$JS.API.STREAM.CREATE.EVIL_MIRROR",
        json.dumps({"name": "EVIL_MIRROR", "mirror": {"name": INTENTS}, "storage": "memory"}).encode(),
    ),
    ("stream-list", "$JS.API.STREAM.LIST", b""),
    ("stream-names", "$JS.API.STREAM.NAMES", b""),
    (
        "stream-msg-get-intent",
        f"$JS.API.STREAM.MSG.GET.{INTENTS}",
        json.dumps({"last_by_subj": B_INTENT}).encode(),
    ),
    (
        "stream-msg-get-secret",
        f"$JS.API.STREAM.MSG.GET.{SECRETS}",
        json.dumps({"last_by_subj": B_SECRET}).encode(),
    ),
    ("stream-msg-delete", f"$JS.API.STREAM.MSG.DELETE.{INTENTS}", b'{"seq":1}'),
    ("stream-snapshot", f"$JS.API.STREAM.SNAPSHOT.{SECRETS}", b'{"deliver_subject":"_INBOX_site-a.snap"}'),
    ("stream-stepdown", f"$JS.API.STREAM.LEADER.STEPDOWN.{INTENTS}", b""),
    ("account-info", "$JS.API.INFO", b""),
    ("meta-stepdown", "$JS.API.META.LEADER.STEPDOWN", b""),
    ("system-ping", "$SYS.REQ.SERVER.PING", b""),
    # Direct Get of other sites' messages, and the stream-wide form that picks any by body
    ("direct-get-site-b-intent", f"$JS.API.DIRECT.GET.{INTENTS}.{B_INTENT}", b""),
    ("direct-get-site-b-status", f"$JS.API.DIRECT.GET.{STATUS}.{B_STATUS}", b""),
    ("direct-get-site-b-secret", f"$JS.API.DIRECT.GET.{SECRETS}.{B_SECRET}", b""),
    ("direct-get-own-status", f"$JS.API.DIRECT.GET.{STATUS}.kb.status.site-a.tenants.cp1", b""),
    (
        "direct-get-stream-wide",
        f"$JS.API.DIRECT.GET.{INTENTS}",
        json.dumps({"last_by_subj": B_INTENT}).encode(),
    ),
    ("direct-get-own-extended", f"$JS.API.DIRECT.GET.{INTENTS}.{A_INTENT}.extra", b""),
    ("direct-get-own-wildcard", f"$JS.API.DIRECT.GET.{INTENTS}.kb.intent.site-a.>", b""),
    # data subjects: other sites', intents (the hub's), and its own extended or shortened
    ("publish-site-b-status", B_STATUS, messages.encode(helpers.status(site="site-b"))),
    ("publish-site-b-secret", B_SECRET, messages.encode(helpers.sealed(site="site-b"))),
    ("publish-site-b-heartbeat", "kb.site.site-b", messages.encode(helpers.heartbeat(site="site-b"))),
    ("publish-own-intent", A_INTENT, messages.encode(helpers.intent())),
    ("publish-site-b-intent", B_INTENT, messages.encode(helpers.intent(site="site-b"))),
    ("publish-name-prefix-site", "kb.status.site-a-b.tenants.cp1", b"{}"),
    ("publish-own-status-extended", "kb.status.site-a.tenants.cp1.extra", b"{}"),
    ("publish-own-secret-extended", "kb.secret.site-a.tenants.cp1.extra", b"{}"),
    ("publish-own-status-short", "kb.status.site-a.tenants", b"{}"),
    ("publish-own-heartbeat-extended", "kb.site.site-a.extra", b"{}"),
    # settling others' deliveries; the first three pull through a crafted ack subject
    ("nxt-hub-status-crafted", f"$JS.ACK.{STATUS}.{HUB_STATUS}.{INTENTS}.{OWN}.1.1.1", b"+NXT " + PULL),
    ("nxt-hub-secrets-crafted", f"$JS.ACK.{SECRETS}.{HUB_SECRETS}.{INTENTS}.{OWN}.1.1.1", b"+NXT " + PULL),
    ("nxt-agent-site-b-crafted", f"$JS.ACK.{INTENTS}.{B}.{INTENTS}.{OWN}.1.1.1", b"+NXT " + PULL),
    ("nxt-agent-site-b", f"$JS.ACK.{INTENTS}.{B}.1.1.1.1.1", b"+NXT " + PULL),
    ("wpi-hub-status", f"$JS.ACK.{STATUS}.{HUB_STATUS}.1.1.1.1.1", op("+WPI")),
    ("term-hub-secrets", f"$JS.ACK.{SECRETS}.{HUB_SECRETS}.1.1.1.1.1", op("+TERM")),
    ("ack-agent-site-b", f"$JS.ACK.{INTENTS}.{B}.1.1.1.1.1", op("+ACK")),
    ("nak-hub-status", f"$JS.ACK.{STATUS}.{HUB_STATUS}.1.1.1.1.1", op("-NAK")),
    ("nxt-own-extended", f"$JS.ACK.{INTENTS}.{OWN}.1.1.1.1.1.extra", b"+NXT " + PULL),
    ("nxt-own-domain-form", f"$JS.ACK.hub.acc.{INTENTS}.{OWN}.1.1.1.1.1.r", b"+NXT " + PULL),
    ("ack-own-short", f"$JS.ACK.{INTENTS}.{OWN}", op("+ACK")),
    ("flow-control-agent-site-b", f"$JS.FC.{INTENTS}.{B}.x", b""),
]

SUBSCRIBE = [
    ">",
    "*.>",
    "_INBOX.>",
    "_INBOX_site-b.>",
    "_INBOX_site-b.x",
    "$JS.API.>",
    f"$JS.API.CONSUMER.MSG.NEXT.{INTENTS}.{B}",
    "$JS.ACK.>",
    f"$JS.ACK.{INTENTS}.{B}.>",
    "$JS.EVENT.>",
    "$SYS.>",
    "kb.intent.site-b.>",
    "kb.intent.site-a.>",
    "kb.status.>",
    "kb.secret.site-b.*.*",
    "kb.site.*",
]


@pytest.mark.parametrize(("subject", "payload"), [pytest.param(s, p, id=i) for i, s, p in PUBLISH])
async def test_site_a_cannot_publish(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, site_a: ns.Raw, subject: str, payload: bytes
) -> None:
    js = hub.nc.jetstream()
    before = await ns.snapshot(js)
    inbox = site_a.inbox()
    await site_a.listen(inbox)

    await site_a.publish(subject, payload, reply=inbox)

    await site_a.denied("publish", subject)
    assert site_a.received == []
    assert await ns.snapshot(js) == before
    await ns.alive(attacked[0], hub, site_a)


@pytest.mark.parametrize("subject", SUBSCRIBE)
async def test_site_a_cannot_subscribe(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, site_a: ns.Raw, subject: str
) -> None:
    js = hub.nc.jetstream()
    before = await ns.snapshot(js)

    await site_a.subscribe(subject)

    await site_a.denied("subscribe", subject)
    assert await ns.snapshot(js) == before
    await ns.alive(attacked[0], hub, site_a)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(json.dumps({"seq": 3}).encode(), id="by-sequence"),
        pytest.param(json.dumps({"last_by_subj": B_INTENT}).encode(), id="last-by-other-subject"),
        pytest.param(json.dumps({"seq": 1, "next_by_subj": B_INTENT}).encode(), id="next-by-other-subject"),
        pytest.param(json.dumps({"multi_last": ["kb.intent.>"], "batch": 10}).encode(), id="multi-last"),
        pytest.param(json.dumps({"start_time": "2020-01-01T00:00:00Z"}).encode(), id="by-time"),
    ],
)
async def test_a_request_body_on_its_own_direct_get_subject_reads_nothing_else(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, site_a: ns.Raw, body: bytes
) -> None:
    """The grant is allowed, so no violation: the server must answer with a refusal (a body
    selects messages only on the stream-wide subject), never with another site's message."""
    js = hub.nc.jetstream()
    before = await ns.snapshot(js)
    inbox = site_a.inbox()
    await site_a.listen(inbox)

    await site_a.publish(f"$JS.API.DIRECT.GET.{INTENTS}.{A_INTENT}", body, reply=inbox)

    async def answered() -> bool:
        return bool(site_a.received)

    await helpers.eventually(answered)
    (reply,) = site_a.received
    assert (reply.headers or {}).get("Status") == "408" and reply.data == b""
    assert site_a.violations == []
    assert await ns.snapshot(js) == before
    await ns.alive(attacked[0], hub, site_a)


async def test_site_a_can_do_every_operation_of_its_own(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, site_a: ns.Raw
) -> None:
    """The control: with the same raw client, each of site-a's grants works."""
    info = json.loads((await site_a.ask(f"$JS.API.CONSUMER.INFO.{INTENTS}.{OWN}")).data)
    assert info["name"] == OWN and info["config"]["filter_subject"] == "kb.intent.site-a.*.*"

    # Fetch its own intents through the consumer, and settle them on the reply subject.
    batch = json.dumps({"batch": 1, "expires": 2_000_000_000}).encode()
    got = await site_a.ask(f"$JS.API.CONSUMER.MSG.NEXT.{INTENTS}.{OWN}", batch)
    assert got.subject.startswith("kb.intent.site-a.") and got.reply.count(".") == 8
    await site_a.publish(got.reply, b"+WPI")
    # +NXT on its own ack subject acks and pulls the next one: allowed, and still site-a's only.
    following = await site_a.ask(got.reply, b"+NXT " + batch)
    assert following.subject.startswith("kb.intent.site-a.")
    assert (await site_a.ask(following.reply, b"+ACK")).data == b""

    # Reset its own consumer (the agent's replay at start): its own position only.
    reset = json.loads((await site_a.ask(f"$JS.API.CONSUMER.RESET.{INTENTS}.{OWN}", b'{"seq":1}')).data)
    assert reset["name"] == OWN and reset["reset_seq"] == 1, reset

    direct = await site_a.ask(f"$JS.API.DIRECT.GET.{INTENTS}.{A_INTENT}")
    assert (direct.headers or {}).get("Nats-Subject") == A_INTENT

    sjs = site_a.nc.jetstream()
    for subject, payload in (
        (subjects.status("site-a", "tenants", "cp9"), messages.encode(helpers.status(name="cp9"))),
        (subjects.secret("site-a", "tenants", "cp9"), messages.encode(helpers.sealed(name="cp9"))),
        (subjects.heartbeat("site-a"), messages.encode(helpers.heartbeat())),
    ):
        ack = await sjs.publish(subject, payload)
        assert ack.stream in (STATUS, SECRETS, SITES_STREAM)
    await site_a.subscribe("_INBOX_site-a.anything.below")
    await ns.alive(attacked[0], hub, site_a)
    assert site_a.violations == []
