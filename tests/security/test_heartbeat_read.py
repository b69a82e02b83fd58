"""A site reads back its own latest heartbeat by Direct Get (what ``doctor agent`` does with the
agent's credential), and nothing else of its stream: not its statuses nor its sealed secrets,
not another site's heartbeat, not a longer subject, not by a request body.

The same raw clients and seeded messages as tests/security/test_nats_attacks.py, for both kinds
of identity (static NKey users and operator-mode JWTs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from protocol import messages, permissions, streams, subjects
from sandbox import natsd
from tests import helpers
from tests.security import nats_support as ns

OWN_STREAM = streams.site_stream_name("site-a")
B_STREAM = streams.site_stream_name("site-b")
OWN_BEAT = permissions.heartbeat_read("site-a")

DENIED = [
    ("site-b-heartbeat", f"$JS.API.DIRECT.GET.{B_STREAM}.{subjects.heartbeat('site-b')}"),
    ("site-b-heartbeat-from-own-stream", f"$JS.API.DIRECT.GET.{OWN_STREAM}.{subjects.heartbeat('site-b')}"),
    ("own-status", f"$JS.API.DIRECT.GET.{OWN_STREAM}.{subjects.status('site-a', 'tenants', 'cp1')}"),
    ("own-secret", f"$JS.API.DIRECT.GET.{OWN_STREAM}.{subjects.secret('site-a', 'tenants', 'cp1')}"),
    ("own-heartbeat-extended", f"{OWN_BEAT}.extra"),
    ("own-stream-wide", f"$JS.API.DIRECT.GET.{OWN_STREAM}"),
    ("own-stream-wildcard", f"$JS.API.DIRECT.GET.{OWN_STREAM}.kb.>"),
]


async def test_site_a_reads_back_its_own_heartbeat(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, site_a: ns.Raw
) -> None:
    js = hub.nc.jetstream()
    before = await ns.snapshot(js)

    reply = await site_a.ask(OWN_BEAT)

    assert (reply.headers or {}).get("Nats-Subject") == subjects.heartbeat("site-a")
    assert messages.decode_heartbeat(reply.data).site == "site-a"
    assert site_a.violations == []
    assert await ns.snapshot(js) == before  # a read: nothing moved
    await ns.alive(attacked[0], hub, site_a)


@pytest.mark.parametrize("subject", [pytest.param(s, id=i) for i, s in DENIED])
async def test_site_a_reads_nothing_else_of_the_site_streams(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, site_a: ns.Raw, subject: str
) -> None:
    inbox = site_a.inbox()
    await site_a.listen(inbox)
    body = json.dumps({"last_by_subj": subjects.secret("site-a", "tenants", "cp1")}).encode()

    await site_a.publish(subject, body, reply=inbox)

    await site_a.denied("publish", subject)
    assert site_a.received == []
    await ns.alive(attacked[0], hub, site_a)


async def test_a_request_body_on_the_heartbeat_subject_reads_nothing_else(
    attacked: tuple[natsd.NatsServer, Path], hub: ns.Raw, site_a: ns.Raw
) -> None:
    """The grant is allowed, so no violation: a body that would pick a sealed secret is refused
    (a body selects messages only on the stream-wide subject)."""
    inbox = site_a.inbox()
    await site_a.listen(inbox)
    body = json.dumps({"last_by_subj": subjects.secret("site-a", "tenants", "cp1")}).encode()

    await site_a.publish(OWN_BEAT, body, reply=inbox)

    async def answered() -> bool:
        return bool(site_a.received)

    await helpers.eventually(answered)
    (reply,) = site_a.received
    assert (reply.headers or {}).get("Status") == "408" and reply.data == b""
    assert site_a.violations == []
    await ns.alive(attacked[0], hub, site_a)
