"""A replayed older intent must not roll a control plane back, and the hub
must notice when its intent subject no longer holds what it published.

The attacker holds the hub's NATS credentials (``hub.nk``), not its signing key: it can publish
on any intent subject and purge, and it can republish any genuinely signed intent it has seen.
The hub and the agent run as their real loops, on the secured nats-server, against emulated
clusters with the Kamaji simulator.
What the attacker saw is read off the test's wiretap (``site_support.wiretap``), which gets every
message published on a subject: the most an eavesdropper could have kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
from nats.aio.client import Client

from agent.tcp import managed
from common.kube import resources
from protocol import messages, streams
from sandbox import natsd
from tests import helpers
from tests.security import site_support as s
from tests.security.replay_support import (
    Tap,
    Watch,
    annotation,
    provisioned,
    replicas,
    rkcp_ready_at,
    settled,
    status_subject,
    warning_events,
)


@pytest.fixture
async def world(secured_nats: tuple[natsd.NatsServer, Path], tmp_path: Path) -> AsyncIterator[s.World]:
    server, conf = secured_nats
    async with s.world(server, conf, tmp_path) as w:
        yield w


@pytest.fixture
async def attacker(secured_nats: tuple[natsd.NatsServer, Path]) -> AsyncIterator[Client]:
    """A raw nats-py client with the hub's stolen NATS identity."""
    async with s.stolen_hub_identity(*secured_nats) as nc:
        yield nc


async def test_a_replayed_older_intent_never_rolls_the_tcp_back_and_the_hub_publishes_again(
    world: s.World, attacker: Client, wiretap: Client
) -> None:
    w = world
    w.start_hub()
    w.start_agent()
    _, old_intent, old_seq = await provisioned(w, "replay", replicas_=3)
    old = await w.stored_intent("replay")
    assert old is not None and old.seq == old_seq  # the genuinely signed intent an attacker saw
    await w.mgmt.patch(s.RKCP, "replay", {"spec": {"replicas": 5}}, namespace=s.NAMESPACE)
    obj, current, current_seq = await settled(w, "replay", replicas_=5)
    generation = obj["metadata"]["generation"]
    assert (
        old_intent.generation
        < current.generation
        == int(annotation(await w.tcp("replay"), managed.GENERATION))
    )

    watch = Watch(w, "replay")
    tap = await Tap().start(wiretap, status_subject("replay"))
    published_before = w.hub_metrics.registry.get_sample_value(
        "kb_hub_intents_published_total", {"site": s.SITE, "op": "provision"}
    )

    # The attack: the old, genuinely signed bytes again, on the same subject.
    ack = await attacker.jetstream().publish(s.intent_subject("replay"), old.data)
    assert ack.seq > current_seq  # the stream-sequence fence cannot tell it is old

    # The agent settles it without touching the TCP ...
    async def settled_by_agent() -> bool:
        state = await attacker.jetstream().consumer_info(
            s.intent_stream(), streams.agent_consumer_name(s.SITE)
        )
        return bool(state.ack_floor.stream_seq >= ack.seq and state.num_ack_pending == 0)

    await helpers.eventually(settled_by_agent, within=15)
    tcp = await w.tcp("replay")
    assert replicas(tcp) == 5 and annotation(tcp, managed.GENERATION) == str(current.generation)
    # ... refuses it (terminated, counted) and says so in a Status naming both generations.
    assert w.rejected("stale_generation") == 1

    await helpers.eventually(lambda: tap.answering(ack.seq) is not None, within=15)
    refused = tap.answering(ack.seq)
    assert refused is not None
    assert (refused.phase, refused.reason) == ("Rejected", "StaleGeneration")
    assert refused.observed_generation == current.generation
    assert f"generation {old_intent.generation}" in refused.message
    assert f"generation {current.generation}" in refused.message

    # The hub notices and publishes the current intent again, fenced on the replayed message.
    async def republished() -> bool:
        stored = await w.stored_intent("replay")
        return stored is not None and stored.seq > ack.seq

    await helpers.eventually(republished, within=15)
    again = await w.stored_intent("replay")
    assert again is not None
    fresh = messages.decode_intent(again.data)
    assert fresh.generation == generation and replicas({"spec": fresh.spec}) == 5
    assert fresh.owner.uid == current.owner.uid
    final = await rkcp_ready_at(w, "replay", seq=again.seq)
    assert final["status"]["observedGeneration"] == generation
    assert (
        w.hub_metrics.registry.get_sample_value(
            "kb_hub_intents_published_total", {"site": s.SITE, "op": "provision"}
        )
        == (published_before or 0) + 1
    )
    [event] = await warning_events(w, "IntentDisplaced")
    assert f"generation {old_intent.generation} (seq {ack.seq})" in event["message"]

    # The TCP never went to 3 replicas, nor to any other spec than the current one.
    await tap.stop()
    seen = await watch.stop()
    assert seen and {replicas(t) for t in seen} == {5}
    assert {annotation(t, managed.GENERATION) for t in seen} == {str(current.generation)}
    tcp = await w.tcp("replay")
    assert replicas(tcp) == 5 and annotation(tcp, managed.INTENT_SEQ) == str(again.seq)
    assert w.dead() == []


async def test_a_purged_intent_subject_is_noticed_and_published_again(
    world: s.World, attacker: Client
) -> None:
    w = world
    w.start_hub(intent_check_interval=1.0)
    w.start_agent()
    obj, current, seq = await provisioned(w, "purged", replicas_=2)
    tcp_uid = (await w.tcp("purged") or {})["metadata"]["uid"]

    # Behind the hub's back: the control plane's intent subject is emptied.
    await attacker.jetstream().purge_stream(s.intent_stream(), subject=s.intent_subject("purged"))
    assert await w.stored_intent("purged") is None

    async def republished() -> bool:
        stored = await w.stored_intent("purged")
        return stored is not None and stored.seq > seq

    await helpers.eventually(republished, within=15)
    again = await w.stored_intent("purged")
    assert again is not None
    fresh = messages.decode_intent(again.data)
    assert fresh.generation == obj["metadata"]["generation"]
    assert msgspec.json.encode(fresh.spec, order="sorted") == msgspec.json.encode(
        current.spec, order="sorted"
    )
    await rkcp_ready_at(w, "purged", seq=again.seq)
    [event] = await warning_events(w, "IntentDisplaced")
    assert f"purged) while the site applied intent {seq}" in event["message"]
    tcp = await w.tcp("purged")
    assert tcp is not None and tcp["metadata"]["uid"] == tcp_uid  # the same TCP, never recreated
    assert w.dead() == []


async def test_an_unsigned_copy_over_the_hubs_intent_is_replaced(world: s.World, attacker: Client) -> None:
    w = world
    w.start_hub(intent_check_interval=1.0)
    w.start_agent()
    obj, current, seq = await provisioned(w, "forged", replicas_=2)
    # The current intent, word for word, without the signature: the agent terminates it (and
    # its anti-entropy will not trust it); the hub must not take it for its own.
    forged = msgspec.structs.replace(current, signature="", key_id="")
    ack = await attacker.jetstream().publish(s.intent_subject("forged"), messages.encode(forged))

    async def replaced() -> bool:
        stored = await w.stored_intent("forged")
        return stored is not None and stored.seq > ack.seq

    await helpers.eventually(replaced, within=15)
    again = await w.stored_intent("forged")
    assert again is not None
    fresh = messages.decode_intent(again.data)
    assert fresh.signature and fresh.generation == obj["metadata"]["generation"]
    assert w.rejected("unsigned") == 1
    await rkcp_ready_at(w, "forged", seq=again.seq)
    [event] = await warning_events(w, "IntentDisplaced")
    assert f"(seq {ack.seq}) not signed by the hub's current key" in event["message"]
    assert seq < ack.seq and w.dead() == []


@pytest.mark.parametrize("op", ["provision", "delete"])
async def test_a_replayed_intent_of_a_previous_owner_leaves_the_new_tcp_and_the_hub_publishes_again(
    world: s.World, attacker: Client, wiretap: Client, op: str
) -> None:
    w = world
    w.start_hub()
    w.start_agent()
    name = f"owner-{op}"
    intents_tap = await Tap().start(wiretap, s.intent_subject(name))
    cl = await w.mgmt.create(resources.CLUSTER, s.cluster_obj(f"{name}-cluster"), namespace=s.NAMESPACE)
    await w.mgmt.create(s.RKCP, s.rkcp_obj(name, cl, replicas=2), namespace=s.NAMESPACE)
    first, _, _ = await settled(w, name, replicas_=2)
    await w.mgmt.delete(s.RKCP, name, namespace=s.NAMESPACE)

    async def gone() -> bool:
        return (
            await w.mgmt.get_or_none(s.RKCP, name, namespace=s.NAMESPACE) is None
            and await w.tcp(name) is None
        )

    await helpers.eventually(gone, within=30)
    # What the attacker kept of the previous owner: its genuinely signed intent of this op.
    old_uid = first["metadata"]["uid"]
    [old] = [
        d for d in intents_tap.seen if (i := messages.decode_intent(d)).op == op and i.owner.uid == old_uid
    ]
    await intents_tap.stop()

    await w.mgmt.create(s.RKCP, s.rkcp_obj(name, cl, replicas=4), namespace=s.NAMESPACE)
    second, current, current_seq = await settled(w, name, replicas_=4)
    assert second["metadata"]["uid"] != old_uid
    tcp = await w.tcp(name)
    assert tcp is not None
    watch = Watch(w, name)
    tap = await Tap().start(wiretap, status_subject(name))

    ack = await attacker.jetstream().publish(s.intent_subject(name), old)
    assert ack.seq > current_seq

    # The agent leaves the new owner's TCP alone and answers for the old owner only.
    await helpers.eventually(lambda: tap.answering(ack.seq) is not None, within=15)
    answer = tap.answering(ack.seq)
    assert answer is not None and answer.owner_uid == old_uid
    assert (answer.phase, answer.reason) == (
        ("Rejected", "Conflict") if op == "provision" else ("Deleted", "Deleted")
    )

    async def republished() -> bool:
        stored = await w.stored_intent(name)
        return stored is not None and stored.seq > ack.seq

    await helpers.eventually(republished, within=15)
    again = await w.stored_intent(name)
    assert again is not None
    fresh = messages.decode_intent(again.data)
    assert (fresh.op, fresh.owner.uid) == ("provision", current.owner.uid)
    assert replicas({"spec": fresh.spec}) == 4
    final = await rkcp_ready_at(w, name, seq=again.seq)
    assert fresh.generation == final["metadata"]["generation"] >= current.generation
    await tap.stop()
    seen = await watch.stop()
    assert seen and {(t["metadata"]["uid"], replicas(t), annotation(t, managed.OWNER_UID)) for t in seen} == {
        (tcp["metadata"]["uid"], 4, current.owner.uid)
    }
    assert not any(t["metadata"].get("deletionTimestamp") for t in seen)
    assert w.dead() == []
