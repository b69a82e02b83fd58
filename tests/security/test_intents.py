"""What the agent does with hostile intents on its own subjects.

The attacker holds the hub's NATS credentials (``hub.nk``, a raw nats-py client), so the server
lets it publish anything on ``kb.intent.site-a.tenants.<tcp>``; it does not hold the hub's
signing key, but it may reuse any genuinely signed intent it has seen. One agent (its real
apply and status loops, with the site's generated identity) runs through every case of this
module, against an emulated site with the Kamaji simulator.

Each case asserts: the agent refused the message with the specific reason
(``kb_agent_intents_rejected_total{reason}``) and terminated it (settled once, never
redelivered), logged the refusal on one line naming the subject and nothing of the payload,
published nothing for it, created or changed no TCP, and is still alive and still applies a
good intent sent afterwards.
"""

from __future__ import annotations

import base64
import itertools
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import nacl.signing
import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client

from agent.apply import intake
from common import bus
from protocol import keys, messages, signing, streams
from sandbox import natsd
from tests import helpers
from tests.security import site_support as s

pytestmark = pytest.mark.asyncio(loop_scope="module")

CANARY = "kb-canary-3f9a1c0d77e2"
"""Planted in every payload that has room for it: it must show up in no log line or metric."""
OTHER_KEY = keys.new_signing_key()
NINE = {"controlPlane": {"deployment": {"replicas": 9}}}
"""A key pair the agent does not trust (the attacker's own)."""
BYSTANDER = "bystander"
_names = itertools.count()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    secured_nats: tuple[natsd.NatsServer, Path], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[s.World]:
    server, conf = secured_nats
    async with s.world(server, conf, tmp_path_factory.mktemp("intents")) as w:
        w.start_agent(namespaces=(s.NAMESPACE,))
        await send_good(w, BYSTANDER)
        yield w


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def attacker(secured_nats: tuple[natsd.NatsServer, Path]) -> AsyncIterator[Client]:
    async with s.stolen_hub_identity(*secured_nats) as nc:
        yield nc


def genuine(w: s.World, name: str, **kw: Any) -> messages.Intent:
    """An intent as the hub would sign it (with the canary where a spec may carry anything)."""
    spec = {
        "controlPlane": {"deployment": {"replicas": 2}, "service": {"serviceType": "LoadBalancer",
                         "additionalMetadata": {"annotations": {"note": CANARY}}}},
        "kubernetes": {"version": "v1.31.0", "kubelet": {"cgroupfs": "systemd"}},
    }  # fmt: skip
    signer = kw.pop("signer", w.signer)
    i = helpers.intent(
        site=kw.pop("site", s.SITE), namespace=kw.pop("namespace", s.NAMESPACE), name=name,
        spec=kw.pop("spec", spec), generation=kw.pop("generation", 1), **kw,
    )  # fmt: skip
    return signing.sign(i, signer)


async def send_good(w: s.World, name: str) -> None:
    """A genuine intent through the hub's own connection; returns once the site runs the TCP."""
    await bus.publish(
        w.hub_conn, s.intent_subject(name), messages.encode(genuine(w, name)), msg_id=uuid.uuid4().hex
    )

    async def created() -> bool:
        return await w.tcp(name) is not None

    await helpers.eventually(created, within=15, every=0.05)


def document(w: s.World, name: str, **kw: Any) -> dict[str, Any]:
    return dict(msgspec.json.decode(messages.encode(genuine(w, name, **kw))))


def edit(w: s.World, tcp: str, /, *, drop: tuple[str, ...] = (), **changes: Any) -> bytes:
    """A genuinely signed intent, changed after signing (``drop``: fields removed)."""
    d = {**document(w, tcp), **changes}
    for key in drop:
        d.pop(key)
    return msgspec.json.encode(d)


def signed_by(
    signer: nacl.signing.SigningKey, *, claim: str | None = None
) -> Callable[[s.World, str], bytes]:
    def build(w: s.World, name: str) -> bytes:
        d = dict(msgspec.json.decode(messages.encode(genuine(w, name, signer=signer))))
        if claim == "trusted":
            d["key_id"] = keys.key_id(bytes(w.signer.verify_key))  # a forged signature under our key id
        return msgspec.json.encode(d)

    return build


def owner(w: s.World, name: str) -> dict[str, Any]:
    return dict(document(w, name)["owner"])


def duplicate_spec(w: s.World, name: str) -> bytes:
    """A second ``spec`` member after the signed one: whichever a parser keeps, it is not signed."""
    raw = messages.encode(genuine(w, name))
    return raw[:-1] + b',"spec":{"controlPlane":{"deployment":{"replicas":9}}}}'


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def nested_spec(w: s.World, name: str) -> bytes:
    raw = edit(w, name, spec={"deep": 0})
    return raw.replace(b'{"deep":0}', b'{"deep":' + nested(10_000) + b"}")


def oversized(w: s.World, name: str, *, size: int) -> bytes:
    d = document(w, name)
    pad = size - len(msgspec.json.encode(d)) - len(',"x":""')
    return msgspec.json.encode({**d, "x": CANARY + "a" * (pad - len(CANARY))})


Builder = Callable[[s.World, str], bytes]


CASES: list[tuple[str, Builder, str]] = [
    # id, payload on kb.intent.site-a.tenants.<name> (None: built in the test), refusal reason
    ("forged signature under the trusted key id", signed_by(OTHER_KEY, claim="trusted"), "bad_signature"),
    ("signed by another key", signed_by(OTHER_KEY), "untrusted_key"),
    ("unknown key id", lambda w, n: edit(w, n, key_id="ffffffffffffffff"), "untrusted_key"),
    ("spec tampered after signing", lambda w, n: edit(w, n, spec=NINE),
     "bad_signature"),
    ("generation raised after signing", lambda w, n: edit(w, n, generation=99), "bad_signature"),
    ("owner uid changed after signing", lambda w, n: edit(w, n, owner={**owner(w, n), "uid": "evil"}),
     "bad_signature"),
    ("provision turned into delete", lambda w, n: edit(w, n, op="delete", spec={}), "bad_signature"),
    ("field added after signing", lambda w, n: edit(w, n, extra=CANARY), "bad_signature"),
    ("agent's own label added after signing",
     lambda w, n: edit(w, n, labels={"kamaji-broker.io/site": "site-b"}), "bad_signature"),
    ("labels as a list", lambda w, n: edit(w, n, labels=[CANARY]), "invalid"),
    ("an annotation key over 317 characters", lambda w, n: edit(w, n, annotations={"k" * 318: CANARY}),
     "invalid"),
    ("duplicate spec member", duplicate_spec, "bad_signature"),
    ("signature not base64", lambda w, n: edit(w, n, signature="%%%not-base64"), "bad_signature"),
    ("signature truncated", lambda w, n: edit(w, n, signature=base64.b64encode(b"\x00" * 32).decode()),
     "bad_signature"),
    ("unsigned", lambda w, n: edit(w, n, signature="", key_id=""), "unsigned"),
    ("signature removed, key id kept", lambda w, n: edit(w, n, signature=""), "unsigned"),
    ("key id missing", lambda w, n: edit(w, n, drop=("key_id",)), "unsigned"),
    ("genuine intent of another TCP (wrong subject)",
     lambda w, n: messages.encode(genuine(w, f"{n}-other")), "wrong_subject"),
    ("genuine intent of another namespace (wrong subject)",
     lambda w, n: messages.encode(genuine(w, n, namespace="kube-system")), "wrong_subject"),
    ("genuine intent of site-b (wrong site in body)",
     lambda w, n: messages.encode(genuine(w, n, site="site-b")), "wrong_site"),
    ("genuine intent of a look-alike site", lambda w, n: messages.encode(genuine(w, n, site="site-a-evil")),
     "wrong_site"),
    ("spec nested 10,000 deep", nested_spec, "undecodable"),
    ("document nested 10,000 deep", lambda w, n: nested(10_000), "undecodable"),
    ("non-UTF-8 bytes", lambda w, n: edit(w, n, name="x").replace(b'"name":"x"', b'"name":"\xff\xfe"'),
     "undecodable"),
    ("not JSON", lambda w, n: b"provision " + CANARY.encode(), "undecodable"),
    ("empty payload", lambda w, n: b"", "undecodable"),
    ("a JSON array", lambda w, n: msgspec.json.encode([document(w, n)]), "invalid"),
    ("JSON null", lambda w, n: b"null", "invalid"),
    ("another schema version", lambda w, n: edit(w, n, schema="kamaji-broker.io/v2"), "unsupported_schema"),
    ("op missing", lambda w, n: edit(w, n, drop=("op",)), "invalid"),
    ("owner missing", lambda w, n: edit(w, n, drop=("owner",)), "invalid"),
    ("unknown op", lambda w, n: edit(w, n, op="destroy"), "invalid"),
    ("generation as a string", lambda w, n: edit(w, n, generation="4"), "invalid"),
    ("spec as a list", lambda w, n: edit(w, n, spec=[CANARY]), "invalid"),
    ("negative generation", lambda w, n: edit(w, n, generation=-1), "invalid"),
    # A 30-digit generation decodes (msgspec's integers go beyond 64 bits); no signature covers it.
    ("generation beyond 64 bits", lambda w, n: edit(w, n, generation=10**30), "bad_signature"),
    ("generation of 5,000 digits", lambda w, n: edit(w, n, generation=0).replace(b'"generation":0',
     b'"generation":' + b"9" * 5000), "undecodable"),
    ("name with a dot", lambda w, n: edit(w, n, name=f"{n}.x"), "invalid"),
    ("name with '*'", lambda w, n: edit(w, n, name="*"), "invalid"),
    ("name with '>'", lambda w, n: edit(w, n, name=">"), "invalid"),
    ("namespace with a space", lambda w, n: edit(w, n, namespace="ten ants"), "invalid"),
    ("name with a newline", lambda w, n: edit(w, n, name=f"{n}\nINFO forged log line"), "invalid"),
    ("site with a dot", lambda w, n: edit(w, n, site="site-a.tenants"), "invalid"),
]  # fmt: skip


def desired_state(tcp: dict[str, Any] | None) -> tuple[Any, ...]:
    """What the agent writes on a TCP (Kamaji's simulator keeps writing its status)."""
    assert tcp is not None
    m = tcp["metadata"]
    return m["uid"], m["generation"], m.get("labels"), m.get("annotations"), tcp["spec"]


def metrics_text(w: s.World) -> str:
    from prometheus_client import generate_latest

    return generate_latest(w.agent_metrics.registry).decode()


@pytest.mark.parametrize(("build", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_a_hostile_intent_is_refused_and_the_agent_carries_on(
    world: s.World,
    attacker: Client,
    build: Builder,
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = world
    caplog.set_level(logging.INFO)
    name = f"atk-{next(_names)}"
    subject = s.intent_subject(name)
    payload = build(w, name)
    bystander = await w.tcp(BYSTANDER)
    assert bystander is not None
    before = w.rejected(reason)

    ack = await attacker.jetstream().publish(subject, payload)

    async def counted() -> bool:
        return w.rejected(reason) >= before + 1

    await helpers.eventually(counted, within=15)
    consumer = (s.intent_stream(), streams.agent_consumer_name(s.SITE))

    async def settled() -> bool:
        # The refusal is counted just before the agent's term reaches the server.
        state = await attacker.jetstream().consumer_info(*consumer)
        return bool(state.ack_floor.stream_seq >= ack.seq and state.num_ack_pending == 0)

    await helpers.eventually(settled, within=15)
    state = await attacker.jetstream().consumer_info(*consumer)
    assert w.rejected(reason) == before + 1
    assert state.num_redelivered == 0  # terminated: not redelivered, in this case or any before

    refusals = [
        r for r in caplog.records if r.name == "agent.apply.applying" and r.levelno == logging.WARNING
        and subject in r.getMessage() and f": {reason}: " in r.getMessage()
    ]  # fmt: skip
    assert len(refusals) == 1 and f"seq {ack.seq}" in refusals[0].getMessage()
    assert all("\n" not in r.getMessage() for r in caplog.records)
    assert CANARY not in caplog.text and CANARY not in metrics_text(w)

    assert await w.tcp(name) is None and await w.status(name) is None
    assert desired_state(await w.tcp(BYSTANDER)) == desired_state(bystander)

    assert w.dead() == []
    await send_good(w, f"ok-{name}")


async def test_an_intent_over_the_streams_size_limit_never_reaches_the_agent(
    world: s.World, attacker: Client
) -> None:
    """The intent stream's ``max_msg_size`` refuses it at the server, with the
    limit named; the agent's own bound (``intake.MAX_INTENT_BYTES``, for a stream configured
    larger) is in the intake table of tests/agent/apply/test_intake.py."""
    w = world
    info = await attacker.jetstream().stream_info(s.intent_stream())
    limit = info.config.max_msg_size or 0
    assert 0 < limit <= intake.MAX_INTENT_BYTES
    name = f"atk-{next(_names)}"
    payload = oversized(w, name, size=limit + 1)
    before = info.state.last_seq

    with pytest.raises(nats.js.errors.APIError, match="message size exceeds maximum allowed"):
        await attacker.jetstream().publish(s.intent_subject(name), payload)

    after = await attacker.jetstream().stream_info(s.intent_stream())
    assert after.state.last_seq == before
    assert await w.tcp(name) is None and w.dead() == []
    await send_good(w, f"ok-{name}")
