"""The apply loop on a real nats-server and the emulated site with the Kamaji simulator; the
test plays the hub."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest

from agent.apply import loop
from agent.tcp import managed
from common import bus
from common import kube as ckube
from common.bus import topology
from common.kube import resources
from protocol import keys, messages, signing, streams, subjects
from sandbox import natsd
from tests import helpers
from tests.agent import wiring
from tests.agent.conftest import NAMESPACE, SITE, Hub, intent, with_version

TCP = resources.TENANT_CONTROL_PLANE


class Agent:
    """An ApplyLoop wired as the agent wires it, but for the status loop: what it tells that
    loop is recorded, and that loop's cache is never complete (``known`` answers None)."""

    def __init__(self, conn: bus.Connection, kube: ckube.Kube, hub: Hub, **ctx: Any) -> None:
        deps = wiring.deps(conn, kube, hub.public, prefix=hub.prefix)
        self.metrics, self.readiness = deps.metrics, deps.readiness
        self.deleting: list[tuple[str, str, int]] = []
        """(namespace, name, intent seq) of each TCP deleted for a delete intent (``on_delete``)."""
        settings = wiring.settings(
            prefix=hub.prefix,
            namespaces=ctx.pop("namespaces", ()),
            namespace_retry=ctx.pop("namespace_retry", 0.5),
        )
        # No status loop here: its cache cannot say which TCPs exist, so each intent reads its
        # TCP first (creating without reading is tests/agent/apply/test_applying.py's).
        self.loop = loop.ApplyLoop(
            settings, deps, on_delete=self._deleting, known=lambda namespace, name: None, bind_retry=0.2
        )
        self.task: asyncio.Task[None] | None = None

    def _deleting(self, namespace: str, name: str, intent_seq: int) -> None:
        self.deleting.append((namespace, name, intent_seq))

    def start(self) -> None:
        self.task = asyncio.create_task(self.loop.run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
            self.task = None

    def count(self, op: str, result: str) -> float:
        value = self.metrics.registry.get_sample_value("kb_agent_intents_total", {"op": op, "result": result})
        return value or 0.0


@pytest.fixture
async def agent(conn: bus.Connection, site: ckube.Kube, hub: Hub) -> AsyncIterator[Agent]:
    a = Agent(conn, site, hub)
    a.start()
    yield a
    await a.stop()


async def tcp_where(
    kube: ckube.Kube, name: str, check: Callable[[dict[str, Any] | None], bool]
) -> dict[str, Any] | None:
    found: list[dict[str, Any] | None] = []

    async def probe() -> bool:
        obj = await kube.get_or_none(TCP, name, namespace=NAMESPACE)
        found[:] = [obj]
        return check(obj)

    await helpers.eventually(probe, within=15)
    return found[0]


async def test_provision_creates_the_tcp_with_the_exact_spec_labels_and_annotations(
    agent: Agent, hub: Hub, site: ckube.Kube
) -> None:
    sent = intent(generation=3)
    seq = await hub.send(sent)
    obj = await tcp_where(site, "cp1", lambda o: o is not None)
    assert obj is not None
    assert obj["metadata"]["labels"] == {managed.MANAGED_BY: "kamaji-broker", managed.SITE: SITE}
    notes = obj["metadata"]["annotations"]
    assert notes[managed.OWNER_UID] == sent.owner.uid and notes[managed.INTENT_SEQ] == str(seq)
    assert notes[managed.GENERATION] == "3" and notes[managed.OWNER] == "default/cp1"
    assert managed.drift(sent.spec, obj) == []
    await helpers.eventually(lambda: agent.count("provision", "applied") == 1)
    await helpers.eventually(lambda: agent.readiness.ready)


async def test_update_patches_and_delete_waits_for_kamaji(agent: Agent, hub: Hub, site: ckube.Kube) -> None:
    first = intent()
    await hub.send(first)
    await tcp_where(site, "cp1", lambda o: o is not None and _phase(o) == "Ready")
    await hub.send(with_version(first, "v1.32.0", replicas=3))
    updated = await tcp_where(
        site, "cp1", lambda o: o is not None and o["spec"]["kubernetes"]["version"] == "v1.32.0"
    )
    assert updated is not None and updated["spec"]["controlPlane"]["deployment"]["replicas"] == 3
    assert updated["metadata"]["generation"] == 2
    await tcp_where(
        site,
        "cp1",
        lambda o: _phase(o) == "Upgrading" or (_phase(o) == "Ready" and _version(o) == "v1.32.0"),
    )
    seq = await hub.send(msgspec.structs.replace(first, op="delete", spec={}, generation=3))
    # The status loop, told before the delete, reports the Deleted once the TCP is gone
    # (tests/agent/status/test_loop.py); the apply loop acks once it is gone.
    await helpers.eventually(lambda: agent.count("delete", "deleted") == 1, within=15)
    assert agent.deleting == [(NAMESPACE, "cp1", seq)]
    assert await site.get_or_none(TCP, "cp1", namespace=NAMESPACE) is None


async def test_fields_removed_from_the_intent_are_removed_from_the_tcp(
    agent: Agent, hub: Hub, site: ckube.Kube
) -> None:
    """The certSANs, the address, service labels and the dataStore the RKCP no longer
    has leave the TCP; what the CRD's defaulting or Kamaji set stays."""
    full = msgspec.json.decode(msgspec.json.encode(intent().spec))
    full["controlPlane"]["service"]["additionalMetadata"] = {"labels": {"team.example.com/owner": "a"}}
    full["networkProfile"] = {"certSANs": ["cp1.example.com"], "address": "10.0.0.9"}
    full["dataStore"] = "etcd-1"
    first = intent(spec=full)
    await hub.send(first)
    created = await tcp_where(site, "cp1", lambda o: o is not None and _phase(o) == "Ready")
    assert created is not None and created["spec"]["networkProfile"]["port"] == 6443  # the CRD's default

    await hub.send(msgspec.structs.replace(intent(), generation=2))
    after = await tcp_where(
        site, "cp1", lambda o: o is not None and o["metadata"]["annotations"][managed.GENERATION] == "2"
    )
    assert after is not None
    assert "dataStore" not in after["spec"]
    assert "additionalMetadata" not in after["spec"]["controlPlane"]["service"]
    network = after["spec"]["networkProfile"]
    assert "certSANs" not in network and "address" not in network and network["port"] == 6443
    assert managed.drift(intent().spec, after) == [] and not managed.drifted(after, intent().spec)


async def test_propagated_labels_and_annotations_merge_with_what_others_set(
    agent: Agent, hub: Hub, site: ckube.Kube
) -> None:
    """The RKCP's labels and annotations go on the TCP beside the agent's own; a
    key removed from the RKCP leaves the TCP only if the agent set it; an intent that would
    overwrite the agent's own keys is refused, and the TCP stays as it is."""
    first = msgspec.structs.replace(
        intent(), labels={"team": "blue", "env": "prod"}, annotations={"example.com/note": "n1"}
    )
    await hub.send(first)
    created = await tcp_where(site, "cp1", lambda o: o is not None and _phase(o) == "Ready")
    assert created is not None
    assert created["metadata"]["labels"] == {
        "team": "blue",
        "env": "prod",
        managed.MANAGED_BY: "kamaji-broker",
        managed.SITE: SITE,
    }
    assert created["metadata"]["annotations"]["example.com/note"] == "n1"
    # Somebody else labels the TCP at the site: not ours to remove.
    await site.patch(
        TCP,
        "cp1",
        {"metadata": {"labels": {"site-admin": "x"}, "annotations": {"theirs": "y"}}},
        namespace=NAMESPACE,
    )

    second = msgspec.structs.replace(first, generation=2, labels={"team": "red"}, annotations={})
    await hub.send(second)
    after = await tcp_where(
        site, "cp1", lambda o: o is not None and o["metadata"]["annotations"][managed.GENERATION] == "2"
    )
    assert after is not None
    assert after["metadata"]["labels"] == {
        "team": "red",
        "site-admin": "x",
        managed.MANAGED_BY: "kamaji-broker",
        managed.SITE: SITE,
    }
    notes = after["metadata"]["annotations"]
    assert notes["theirs"] == "y" and "example.com/note" not in notes
    assert notes[managed.OWNER_UID] == first.owner.uid

    hijack = msgspec.structs.replace(second, generation=3, labels={managed.SITE: "site-b"})
    await hub.send(hijack)
    refused = await hub.status_is("cp1", "Rejected", "InvalidMetadata")
    assert "label key 'kamaji-broker.io/site'" in refused.message
    still = await site.get(TCP, "cp1", namespace=NAMESPACE)
    assert still["metadata"]["labels"][managed.SITE] == SITE
    assert still["metadata"]["annotations"][managed.GENERATION] == "2"


async def test_delete_of_an_absent_tcp_is_deleted_at_once(agent: Agent, hub: Hub) -> None:
    await hub.send(msgspec.structs.replace(intent("never"), op="delete", spec={}))
    await hub.status_is("never", "Deleted")


async def test_delete_with_another_owner_uid_leaves_the_tcp(agent: Agent, hub: Hub, site: ckube.Kube) -> None:
    await hub.send(intent())
    before = await tcp_where(site, "cp1", lambda o: o is not None)
    assert before is not None
    stale = msgspec.structs.replace(
        intent(), op="delete", spec={}, owner=msgspec.structs.replace(intent().owner, uid="old-uid")
    )
    await hub.send(stale)
    await helpers.eventually(lambda: agent.count("delete", "stale") == 1)
    after = await site.get(TCP, "cp1", namespace=NAMESPACE)
    assert after["metadata"]["uid"] == before["metadata"]["uid"] and not after["metadata"].get(
        "deletionTimestamp"
    )


async def test_bad_intents_are_terminated_and_the_agent_lives_on(
    agent: Agent, hub: Hub, site: ckube.Kube
) -> None:
    await hub.send(intent("forged"), signer=keys.new_signing_key())
    await hub.send_raw("garbage", b"{not json")
    other_site = intent("elsewhere", site="site-b")
    # A validly signed intent for site-b, put on this site's subject: refused by subject and site.
    wrong = subjects.intent(SITE, NAMESPACE, "elsewhere", prefix=hub.prefix)
    await bus.publish(
        hub.conn, wrong, messages.encode(signing.sign(other_site, hub.signer)), msg_id="wrong-site"
    )
    await helpers.eventually(
        lambda: (
            agent.count("unknown", "bad_signature") == 1
            and agent.count("unknown", "undecodable") == 1
            and agent.count("unknown", "wrong_subject") == 1
        )
    )
    for name in ("forged", "garbage", "elsewhere"):
        assert await site.get_or_none(TCP, name, namespace=NAMESPACE) is None
    await hub.send(intent("fine"))
    await tcp_where(site, "fine", lambda o: o is not None)

    async def unsettled() -> int:
        stream = streams.stream_name(subjects.Kind.INTENT, prefix=hub.prefix)
        return (await bus.consumer_info(hub.conn, stream, f"agent-{SITE}")).num_ack_pending

    # Terminated, not left to redeliver forever (settlements are flushed with their batch).
    await helpers.eventually(unsettled, lambda pending: pending == 0, what="every intent settled")


async def test_rejections_are_reported_and_acked(agent: Agent, hub: Hub, site: ckube.Kube) -> None:
    await site.create(
        TCP,
        {**managed.desired(intent("theirs"), seq=1), "metadata": {"name": "theirs", "namespace": NAMESPACE}},
        namespace=NAMESPACE,
    )
    await hub.send(intent("theirs"))
    conflict = await hub.status_is("theirs", "Rejected", "Conflict")
    assert "not managed by kamaji-broker" in conflict.message
    untouched = await site.get(TCP, "theirs", namespace=NAMESPACE)
    assert managed.MANAGED_BY not in (untouched["metadata"].get("labels") or {})

    bad = intent(
        "invalid",
        spec={
            "controlPlane": {"service": {"serviceType": "Foo"}},
            "kubernetes": {"version": "v1.31.0", "kubelet": {}},
        },
    )
    await hub.send(bad)
    invalid = await hub.status_is("invalid", "Rejected", "Invalid")
    assert "serviceType" in invalid.message


async def test_missing_namespace_is_reported_then_applied_once_created(
    agent: Agent, hub: Hub, site: ckube.Kube
) -> None:
    await hub.send(intent("cp1", namespace="later"))
    found: list[messages.Status] = []

    async def rejected() -> bool:
        stream = streams.stream_name(subjects.Kind.STATUS, site=SITE, prefix=hub.prefix)
        stored = await bus.last_message(
            hub.conn, stream, subjects.status(SITE, "later", "cp1", prefix=hub.prefix)
        )
        if stored:
            found.append(messages.decode_status(stored.data))
        return bool(found) and found[-1].reason == "NamespaceNotFound"

    await helpers.eventually(rejected)
    assert found[-1].phase == "Rejected" and "later" in found[-1].message
    await site.create(resources.NAMESPACE, {"metadata": {"name": "later"}})
    await helpers.eventually(lambda: _exists(site, "cp1", "later"), within=15)


async def test_stopped_before_ack_converges_with_one_write(
    conn: bus.Connection, site: ckube.Kube, hub: Hub
) -> None:
    seq = await hub.send(intent())
    first = Agent(conn, site, hub)
    consumer = await bus.bind(conn, first.loop.definition)
    [delivery] = await consumer.fetch(1, timeout=5)
    verified = signing.verify(delivery.data, hub.public.verify_keys())
    decision = await first.loop.applier.process(verified, delivery)
    assert decision.result == "applied"  # applied, then the agent "dies" before acking
    await consumer.unsubscribe()
    created = await site.get(TCP, "cp1", namespace=NAMESPACE)

    second = Agent(conn, site, hub)
    second.start()
    try:
        await helpers.eventually(lambda: second.count("provision", "unchanged") == 1, within=15)
        again = await site.get(TCP, "cp1", namespace=NAMESPACE)
        assert again["metadata"]["generation"] == created["metadata"]["generation"] == 1
        assert again["metadata"]["annotations"][managed.INTENT_SEQ] == str(seq)
        assert second.count("provision", "applied") == 0
    finally:
        await second.stop()


async def test_offline_agent_applies_only_the_latest_of_three(
    conn: bus.Connection, site: ckube.Kube, hub: Hub
) -> None:
    base = intent()
    for generation, version in ((1, "v1.30.0"), (2, "v1.31.0"), (3, "v1.32.0")):
        last = await hub.send(with_version(base, version, generation=generation))
    a = Agent(conn, site, hub)
    a.start()
    try:
        obj = await tcp_where(site, "cp1", lambda o: o is not None)
        assert obj is not None and obj["spec"]["kubernetes"]["version"] == "v1.32.0"
        assert obj["metadata"]["annotations"][managed.INTENT_SEQ] == str(last)
        await helpers.eventually(lambda: a.count("provision", "applied") == 1)
        assert obj["metadata"]["generation"] == 1  # created once at the last spec, never patched
    finally:
        await a.stop()


async def test_an_older_sequence_after_a_newer_one_is_ignored(
    conn: bus.Connection, site: ckube.Kube, hub: Hub
) -> None:
    a = Agent(conn, site, hub)
    consumer = await bus.bind(conn, a.loop.definition)
    await hub.send(intent())
    [old] = await consumer.fetch(1, timeout=5)
    newer = with_version(intent(), "v1.32.0")
    await hub.send(newer)
    [new] = await consumer.fetch(1, timeout=5)
    trusted = hub.public.verify_keys()
    assert (await a.loop.applier.process(signing.verify(new.data, trusted), new)).result == "applied"
    assert (await a.loop.applier.process(signing.verify(old.data, trusted), old)).result == "stale"
    obj = await site.get(TCP, "cp1", namespace=NAMESPACE)
    assert obj["spec"]["kubernetes"]["version"] == "v1.32.0"
    await consumer.unsubscribe()


async def test_an_older_generation_at_a_newer_sequence_is_refused_and_reported(
    agent: Agent, hub: Hub, site: ckube.Kube
) -> None:
    old = with_version(intent(), "v1.31.0", replicas=3, generation=3)
    new = with_version(intent(), "v1.31.0", replicas=5, generation=4)
    await hub.send(old)
    applied = await hub.send(new)
    before = await tcp_where(
        site,
        "cp1",
        lambda o: o is not None and o["metadata"]["annotations"][managed.INTENT_SEQ] == str(applied),
    )
    replayed = await hub.send(old)  # the same signed intent again: a higher sequence, an older generation
    refused = await hub.status_is("cp1", "Rejected", "StaleGeneration")
    assert refused.intent_seq == replayed and refused.observed_generation == 4
    assert "generation 3" in refused.message and "generation 4" in refused.message
    after = await site.get(TCP, "cp1", namespace=NAMESPACE)
    assert before is not None and after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["spec"]["controlPlane"]["deployment"]["replicas"] == 5
    assert after["metadata"]["annotations"][managed.INTENT_SEQ] == str(applied)

    async def settled() -> bool:
        # The status goes out before the message is settled and counted: wait for those too.
        state = await bus.consumer_info(
            hub.conn, streams.stream_name(subjects.Kind.INTENT, prefix=hub.prefix), f"agent-{SITE}"
        )
        return state.num_ack_pending == 0 and state.ack_floor_stream_seq >= replayed

    await helpers.eventually(settled, within=10)
    await helpers.eventually(lambda: agent.count("provision", "stale_generation") == 1, within=10)
    rejected = agent.metrics.registry.get_sample_value(
        "kb_agent_intents_rejected_total", {"reason": "stale_generation"}
    )
    assert rejected == 1


async def test_missing_consumer_is_not_ready_until_the_hub_creates_it(
    conn: bus.Connection, site: ckube.Kube, prefix: str, hub_keys: Any
) -> None:
    await bus.ensure_topology(conn, sites=[], prefix=prefix)
    signer, sealer, public = hub_keys
    hub = Hub(conn=conn, prefix=prefix, signer=signer, sealer=sealer, public=public)
    a = Agent(conn, site, hub)
    a.start()
    try:
        await helpers.eventually(lambda: "does not exist" in a.readiness.checks[loop.READY_CHECK][1])
        assert not a.readiness.ready
        await topology.ensure_consumer(conn, streams.agent_consumer(SITE, prefix=prefix))
        await helpers.eventually(lambda: a.readiness.ready, within=10)
    finally:
        await a.stop()


def _phase(obj: dict[str, Any] | None) -> str:
    return str(
        (((obj or {}).get("status") or {}).get("kubernetesResources") or {}).get("version", {}).get("status")
        or ""
    )


def _version(obj: dict[str, Any] | None) -> str:
    return str(
        (((obj or {}).get("status") or {}).get("kubernetesResources") or {}).get("version", {}).get("version")
        or ""
    )


async def _exists(kube: ckube.Kube, name: str, namespace: str) -> bool:
    return await kube.get_or_none(TCP, name, namespace=namespace) is not None


async def test_nats_restart_mid_run_loses_nothing(
    restartable_nats: natsd.NatsServer, site: ckube.Kube, prefix: str, hub_keys: Any
) -> None:
    conn = await bus.connect(helpers.options(restartable_nats.url), deadline=10)
    try:
        await bus.ensure_topology(conn, sites=[SITE], prefix=prefix)
        signer, sealer, public = hub_keys
        hub = Hub(conn=conn, prefix=prefix, signer=signer, sealer=sealer, public=public)
        a = Agent(conn, site, hub)
        a.start()
        await hub.send(intent("before"))
        await tcp_where(site, "before", lambda o: o is not None)
        await asyncio.to_thread(restartable_nats.restart)
        await helpers.eventually(lambda: conn.connected, within=20)
        await hub.send(intent("after"))
        await tcp_where(site, "after", lambda o: o is not None)
        await helpers.eventually(lambda: a.count("provision", "applied") == 2, within=20)
        await a.stop()
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("failures", "expected"),
    [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (5, 5.0), (60, 5.0)],
)
def test_retry_delay_grows_to_bind_retry(failures: int, expected: float) -> None:
    """A lost NATS node costs a leader election of seconds: the first retries come soon."""
    assert loop.retry_delay(failures, cap=5.0, jitter=False) == expected
    assert expected / 2 <= loop.retry_delay(failures, cap=5.0) <= expected
