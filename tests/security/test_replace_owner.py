"""The agent deletes another owner's TCP only when the hub's signed intent names that
owner (``replaces``), the owner of a deletion the hub released; never for anyone else.

The attacker holds the hub's NATS credentials (``hub.nk``), not its signing key: it can publish
on any intent subject and republish any genuinely signed intent it has seen. Intents "as the hub
would sign them" stand for what a hub could have published at some time (a new owner's intent
that names nobody, or names someone else). The hub and the agent run as their real loops, on the
secured nats-server, against emulated clusters with the Kamaji simulator.
What the attacker saw is read off the test's wiretap (``site_support.wiretap``), which gets every
message published on a subject: the most an eavesdropper could have kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from nats.aio.client import Client

from agent.tcp import managed
from common.kube import resources
from protocol import messages, signing
from sandbox import natsd
from tests import helpers
from tests.security import site_support as s
from tests.security.replay_support import (
    Tap,
    Watch,
    annotation,
    provisioned,
    replicas,
    settled,
    status_subject,
)


@pytest.fixture
async def world(secured_nats: tuple[natsd.NatsServer, Path], tmp_path: Path) -> AsyncIterator[s.World]:
    server, conf = secured_nats
    async with s.world(server, conf, tmp_path) as w:
        yield w


@pytest.fixture
async def attacker(secured_nats: tuple[natsd.NatsServer, Path]) -> AsyncIterator[Client]:
    async with s.stolen_hub_identity(*secured_nats) as nc:
        yield nc


def newcomer(w: s.World, current: messages.Intent, *replaced: str) -> messages.Intent:
    """Another owner's provision at the same coordinates, as the hub would sign it."""
    owner = messages.Owner(uid="newcomer-uid", namespace=s.NAMESPACE, name="newcomer", cluster="newcomer")
    return signing.sign(
        msgspec.structs.replace(current, owner=owner, replaces=replaced, key_id="", signature=""), w.signer
    )


def untouched(seen: list[dict[str, Any]], tcp: dict[str, Any]) -> bool:
    """Every version the watch saw is the same object, never marked for deletion."""
    return bool(seen) and all(
        t["metadata"]["uid"] == tcp["metadata"]["uid"] and not t["metadata"].get("deletionTimestamp")
        for t in seen
    )


async def test_an_intent_that_does_not_name_the_owner_never_deletes_its_tcp(
    world: s.World, attacker: Client, wiretap: Client
) -> None:
    w = world
    w.start_hub(intent_check_interval=1.0)  # the forged intent leaves no answer: found by the check
    w.start_agent()
    name = "held"
    first, current, _ = await provisioned(w, name, replicas_=2)
    tcp = await w.tcp(name)
    assert tcp is not None
    owner_uid = first["metadata"]["uid"]
    watch = Watch(w, name)
    tap = await Tap().start(wiretap, status_subject(name))
    genuine_nobody = messages.encode(newcomer(w, current))
    genuine_someone_else = messages.encode(newcomer(w, current, "someone-else"))
    # Signed naming nobody, then the owner's uid added after signing: a forgery.
    forged = msgspec.json.decode(genuine_nobody)
    forged["replaces"] = [owner_uid]
    js = attacker.jetstream()
    acks: list[int] = []
    # One at a time: the subject keeps one message, so a burst would mostly be compacted away.
    for data in (genuine_nobody, genuine_someone_else):
        seq = (await js.publish(s.intent_subject(name), data)).seq
        acks.append(seq)
        answer = await answered(tap, seq)
        assert (answer.phase, answer.reason) == ("Rejected", "Conflict")
    refused = w.rejected("bad_signature")
    acks.append((await js.publish(s.intent_subject(name), msgspec.json.encode(forged))).seq)
    await helpers.eventually(lambda: w.rejected("bad_signature") > refused, within=20)
    assert tap.answering(acks[2]) is None  # refused unread: its signature does not cover what it says

    async def republished() -> bool:
        stored = await w.stored_intent(name)
        return stored is not None and stored.seq > acks[-1]

    await helpers.eventually(republished, within=20)
    await tap.stop()
    seen = await watch.stop()
    assert untouched(seen, tcp)
    assert annotation(await w.tcp(name), managed.OWNER_UID) == owner_uid
    assert w.dead() == []


async def test_replayed_intents_of_a_replacement_never_delete_the_new_owners_tcp(
    world: s.World, attacker: Client, wiretap: Client
) -> None:
    """The whole replacement path through the real hub, then every intent the subject ever held replayed."""
    w = world
    w.start_hub()
    w.start_agent()
    name = "recreated"
    intents_tap = await Tap().start(wiretap, s.intent_subject(name))
    cl = await w.mgmt.create(resources.CLUSTER, s.cluster_obj(f"{name}-cluster"), namespace=s.NAMESPACE)
    await w.mgmt.create(
        s.RKCP, s.rkcp_obj(name, cl, replicas=2, siteUnavailableDeletionTimeout="1s"), namespace=s.NAMESPACE
    )
    old_rkcp, _, _ = await settled(w, name, replicas_=2)
    old_uid = old_rkcp["metadata"]["uid"]
    await w.stop("agent")  # the site goes dark
    await w.mgmt.delete(s.RKCP, name, namespace=s.NAMESPACE)

    async def released() -> bool:
        return await w.mgmt.get_or_none(s.RKCP, name, namespace=s.NAMESPACE) is None

    await helpers.eventually(released, within=30)
    await w.mgmt.create(s.RKCP, s.rkcp_obj(name, cl, replicas=3), namespace=s.NAMESPACE)
    apply = w.start_agent()

    async def replaced() -> bool:
        tcp = await w.tcp(name)
        return (
            tcp is not None
            and annotation(tcp, managed.OWNER_UID) not in ("", old_uid)
            and replicas(tcp) == 3
            and (tcp.get("status") or {}).get("kubernetesResources", {}).get("version", {}).get("status")
            == "Ready"
        )

    await helpers.eventually(replaced, within=40)
    tcp = await w.tcp(name)
    assert tcp is not None
    await intents_tap.stop()
    history = list(intents_tap.seen)
    ops = [(messages.decode_intent(d).op, messages.decode_intent(d).owner.uid == old_uid) for d in history]
    assert ("delete", True) in ops and ("provision", False) in ops
    watch = Watch(w, name)
    tap = await Tap().start(wiretap, status_subject(name))
    js = attacker.jetstream()
    for data, (op, was_old) in zip(history, ops, strict=True):
        seq = (await js.publish(s.intent_subject(name), data)).seq

        async def handled(seq: int = seq) -> bool:
            return bool(apply.last_seq >= seq and apply.in_flight == 0)

        await helpers.eventually(handled, within=20)
        if was_old:
            # The released owner's intents answer for that owner only: its TCP is gone already.
            answer = await answered(tap, seq)
            assert answer.owner_uid == old_uid
            assert (answer.phase, answer.reason) == (
                ("Rejected", "Conflict") if op == "provision" else ("Deleted", "Deleted")
            )
    await tap.stop()
    seen = await watch.stop()
    assert untouched(seen, tcp)
    assert annotation(await w.tcp(name), managed.OWNER_UID) == annotation(tcp, managed.OWNER_UID)
    assert w.dead() == []


async def answered(tap: Tap, seq: int) -> messages.Status:
    """The site's status answering intent ``seq``, once it came."""

    async def came() -> bool:
        return tap.answering(seq) is not None

    await helpers.eventually(came, within=20)
    answer = tap.answering(seq)
    assert answer is not None
    return answer
