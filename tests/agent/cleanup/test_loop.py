"""The cleanup loop on a real nats-server and the emulated site with the Kamaji simulator; the
test plays the hub and, where intents must be applied, runs the apply loop beside it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.cleanup import loop, orphans, reading
from agent.tcp import managed
from common import bus
from common import kube as ckube
from common.kube import resources
from protocol import keys, streams, subjects
from tests import helpers
from tests.agent import wiring
from tests.agent.apply.test_loop import Agent, tcp_where
from tests.agent.conftest import NAMESPACE, SITE, Hub, intent, with_version

TCP = resources.TENANT_CONTROL_PLANE
GRACE = 5.0
T = 1000.0
LATE = T + GRACE + 1


class Cleanup:
    """A CleanupLoop wired as the agent wires it, with its own metrics."""

    def __init__(
        self, conn: bus.Connection, kube: ckube.Kube, hub: Hub, *, agent: Agent | None, **kw: Any
    ) -> None:
        deps = wiring.deps(conn, kube, hub.public, prefix=hub.prefix)
        self.metrics = deps.metrics
        self.republished = 0
        definition = streams.agent_consumer(SITE, prefix=hub.prefix)

        async def caught_up() -> bool:
            # Without a running apply loop, only the server's side counts (the test fetches nothing).
            idle = (lambda: agent.loop.idle) if agent is not None else (lambda: True)
            return await reading.consumer_caught_up(conn, definition, idle)

        async def republish() -> None:
            self.republished += 1

        self.caught_up = caught_up
        settings = wiring.settings(
            prefix=hub.prefix,
            namespaces=kw.pop("namespaces", (NAMESPACE,)),
            orphan_policy=kw.pop("policy", "delete"),
            orphan_grace=GRACE,
            resync_interval=kw.pop("interval", 3600.0),
        )
        self.loop = loop.CleanupLoop(
            settings, deps, caught_up=caught_up, republish=kw.pop("republish", republish)
        )

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    @property
    def reverted(self) -> float:
        return self.sample("kb_agent_drift_reverted_total")

    def orphans(self, action: str) -> float:
        return self.sample("kb_agent_orphans_total", action=action)


@pytest.fixture
async def agent(conn: bus.Connection, site: ckube.Kube, hub: Hub) -> AsyncIterator[Agent]:
    a = Agent(conn, site, hub)
    a.start()
    yield a
    await a.stop()


async def applied(site: ckube.Kube, name: str, seq: int) -> dict[str, Any]:
    obj = await tcp_where(
        site,
        name,
        lambda o: o is not None and o["metadata"]["annotations"].get(managed.INTENT_SEQ) == str(seq),
    )
    assert obj is not None
    return obj


async def caught_up(cleanup: Cleanup) -> None:
    await helpers.eventually(cleanup.caught_up, within=15)


async def events(kube: ckube.Kube, reason: str, name: str) -> list[dict[str, Any]]:
    listing = await kube.list(resources.EVENT, namespace=NAMESPACE)
    return [e for e in listing.items if e.get("reason") == reason and e["involvedObject"]["name"] == name]


async def orphan(kube: ckube.Kube, name: str) -> dict[str, Any]:
    """A TCP managed by this site that no intent ever asked for (its subject has no message)."""
    return await kube.create(TCP, managed.desired(intent(name), seq=1), namespace=NAMESPACE)


def version(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("spec") or {}).get("kubernetes", {}).get("version"))


async def test_a_site_admins_edit_is_reverted(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, agent: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    seq = await hub.send(intent())
    before = await applied(site, "cp1", seq)
    await site.patch(
        TCP,
        "cp1",
        {"spec": {"kubernetes": {"version": "v1.20.0"}, "controlPlane": {"deployment": {"replicas": 5}}}},
        namespace=NAMESPACE,
    )
    cleanup = Cleanup(conn, site, hub, agent=agent)
    plan = await cleanup.loop.run_once()
    [action] = plan.actions
    assert isinstance(action, orphans.Reapply)
    assert set(action.fields) == {"kubernetes.version", "controlPlane.deployment.replicas"}
    after = await site.get(TCP, "cp1", namespace=NAMESPACE)
    assert version(after) == "v1.31.0" and after["spec"]["controlPlane"]["deployment"]["replicas"] == 2
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["annotations"][managed.INTENT_SEQ] == str(seq)
    assert cleanup.reverted == 1 and cleanup.republished == 1
    [line] = [r.getMessage() for r in caplog.records if "reverted drift" in r.getMessage()]
    assert "kubernetes.version" in line and "v1.20.0" not in line  # paths, never values
    # In sync now: the next pass has nothing to do.
    assert (await cleanup.loop.run_once()).actions == ()
    assert cleanup.reverted == 1 and cleanup.republished == 2


async def test_two_concurrent_passes_revert_once(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, agent: Agent
) -> None:
    seq = await hub.send(intent())
    await applied(site, "cp1", seq)
    await site.patch(TCP, "cp1", {"spec": {"kubernetes": {"version": "v1.20.0"}}}, namespace=NAMESPACE)
    one, two = Cleanup(conn, site, hub, agent=agent), Cleanup(conn, site, hub, agent=agent)
    # The resourceVersion precondition: whichever patches second finds the TCP changed, reads it
    # again and sees nothing left to revert (or lists after the first patch and sees the same).
    await asyncio.gather(one.loop.run_once(), two.loop.run_once())
    assert one.reverted + two.reverted == 1
    assert version(await site.get(TCP, "cp1", namespace=NAMESPACE)) == "v1.31.0"


async def test_a_newer_pending_intent_is_not_reverted_and_is_applied_later(
    conn: bus.Connection, site: ckube.Kube, hub: Hub
) -> None:
    first = Agent(conn, site, hub)
    first.start()
    seq = await hub.send(intent())
    await applied(site, "cp1", seq)
    await first.stop()
    await site.patch(TCP, "cp1", {"spec": {"kubernetes": {"version": "v1.20.0"}}}, namespace=NAMESPACE)
    newer = await hub.send(with_version(intent(), "v1.32.0"))  # not consumed: the agent is down
    cleanup = Cleanup(conn, site, hub, agent=None)
    assert not await cleanup.caught_up()
    assert (await cleanup.loop.run_once()).actions == ()
    assert version(await site.get(TCP, "cp1", namespace=NAMESPACE)) == "v1.20.0"
    assert cleanup.reverted == 0

    second = Agent(conn, site, hub)
    second.start()
    try:
        obj = await applied(site, "cp1", newer)
        assert version(obj) == "v1.32.0"
        assert (await cleanup.loop.run_once()).actions == ()
    finally:
        await second.stop()


async def test_an_unverifiable_latest_intent_is_never_acted_on(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, agent: Agent
) -> None:
    seq = await hub.send(intent())
    await applied(site, "cp1", seq)
    await site.patch(TCP, "cp1", {"spec": {"kubernetes": {"version": "v1.20.0"}}}, namespace=NAMESPACE)
    await hub.send(intent(), signer=keys.new_signing_key())  # terminated by the apply loop, stays stored
    await helpers.eventually(lambda: agent.count("unknown", "bad_signature") == 1)
    cleanup = Cleanup(conn, site, hub, agent=agent)
    await caught_up(cleanup)
    for now in (T, LATE):
        assert (await cleanup.loop.run_once(now=now)).actions == ()
    obj = await site.get(TCP, "cp1", namespace=NAMESPACE)
    assert version(obj) == "v1.20.0" and not obj["metadata"].get("deletionTimestamp")
    assert cleanup.reverted == 0 and cleanup.orphans("deleted") == 0


async def test_an_orphan_is_deleted_after_the_grace_with_a_warning_event(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, agent: Agent
) -> None:
    created = await orphan(site, "lost")
    kept = await hub.send(intent("kept"))
    await applied(site, "kept", kept)
    cleanup = Cleanup(conn, site, hub, agent=agent)
    await caught_up(cleanup)

    first = await cleanup.loop.run_once(now=T)
    assert first.actions == () and first.waiting == 1
    assert await site.get_or_none(TCP, "lost", namespace=NAMESPACE) is not None

    second = await cleanup.loop.run_once(now=LATE)
    assert [type(a) for a in second.actions] == [orphans.DeleteOrphan]
    await tcp_where(site, "lost", lambda o: o is None)  # through Kamaji's finalizer
    assert cleanup.orphans("deleted") == 1
    [event] = await events(site, orphans.REASON_DELETED, "lost")
    assert event["type"] == "Warning" and event["involvedObject"]["uid"] == created["metadata"]["uid"]
    assert event["involvedObject"]["kind"] == "TenantControlPlane"
    assert "no intent" in event["message"] and "deleting it" in event["message"]
    # The TCP with an intent is untouched.
    assert await site.get_or_none(TCP, "kept", namespace=NAMESPACE) is not None


async def test_a_purged_subject_is_only_reported_once_with_policy_report(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, agent: Agent
) -> None:
    seq = await hub.send(intent())
    await applied(site, "cp1", seq)
    # The hub purges a control plane's subjects when its owner goes away with deletionPolicy Orphan.
    stream = streams.stream_name(subjects.Kind.INTENT, prefix=hub.prefix)
    await bus.purge_subject(hub.conn, stream, subjects.intent(SITE, NAMESPACE, "cp1", prefix=hub.prefix))
    cleanup = Cleanup(conn, site, hub, agent=agent, policy="report")
    await caught_up(cleanup)

    assert (await cleanup.loop.run_once(now=T)).actions == ()
    [action] = (await cleanup.loop.run_once(now=LATE)).actions
    assert isinstance(action, orphans.ReportOrphan)
    for later in (LATE + 1, LATE + 100):
        assert (await cleanup.loop.run_once(now=later)).actions == ()
    obj = await site.get(TCP, "cp1", namespace=NAMESPACE)
    assert not obj["metadata"].get("deletionTimestamp")
    assert cleanup.orphans("reported") == 1 and cleanup.orphans("deleted") == 0
    [event] = await events(site, orphans.REASON_ORPHANED, "cp1")
    assert event["type"] == "Warning" and "orphan policy report" in event["message"]


async def test_no_orphan_is_touched_while_intents_are_pending(
    conn: bus.Connection, site: ckube.Kube, hub: Hub
) -> None:
    await orphan(site, "lost")
    await hub.send(intent("pending"))  # no agent consumes it yet
    cleanup = Cleanup(conn, site, hub, agent=None)
    for now in (T, LATE, LATE + 100):
        assert (await cleanup.loop.run_once(now=now)).actions == ()
    assert await site.get_or_none(TCP, "lost", namespace=NAMESPACE) is not None
    assert cleanup.orphans("deleted") == 0
    assert await events(site, orphans.REASON_DELETED, "lost") == []

    a = Agent(conn, site, hub)
    a.start()
    try:
        await tcp_where(site, "pending", lambda o: o is not None)
        cleanup.loop.caught_up = Cleanup(conn, site, hub, agent=a).caught_up
        await helpers.eventually(cleanup.loop.caught_up, within=15)
        [action] = (await cleanup.loop.run_once(now=LATE + 101)).actions
        assert isinstance(action, orphans.DeleteOrphan) and action.name == "lost"
    finally:
        await a.stop()


async def test_run_passes_at_start_on_trigger_and_survives_a_failing_pass(
    conn: bus.Connection, site: ckube.Kube, hub: Hub
) -> None:
    calls: list[int] = []

    async def republish() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("a bug in the status loop")

    cleanup = Cleanup(conn, site, hub, agent=None, republish=republish, interval=3600.0)
    task = asyncio.create_task(cleanup.loop.run())
    try:
        await helpers.eventually(lambda: cleanup.loop.passes == 1)
        cleanup.loop.trigger()
        await helpers.eventually(lambda: len(calls) == 2)  # the pass that failed
        await cleanup.loop.on_reconnect()
        await helpers.eventually(lambda: cleanup.loop.passes == 2)
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_all_namespaces_lists_cluster_wide(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, agent: Agent
) -> None:
    await site.create(resources.NAMESPACE, {"metadata": {"name": "other"}})
    seq = await hub.send(intent("elsewhere", namespace="other"))
    await tcp_where_ns(site, "elsewhere", "other", seq)
    await site.patch(TCP, "elsewhere", {"spec": {"kubernetes": {"version": "v1.1.0"}}}, namespace="other")
    cleanup = Cleanup(conn, site, hub, agent=agent, namespaces=())
    [action] = (await cleanup.loop.run_once()).actions
    assert isinstance(action, orphans.Reapply) and action.namespace == "other"
    assert version(await site.get(TCP, "elsewhere", namespace="other")) == "v1.31.0"


async def tcp_where_ns(kube: ckube.Kube, name: str, namespace: str, seq: int) -> None:
    async def probe() -> bool:
        obj = await kube.get_or_none(TCP, name, namespace=namespace)
        return obj is not None and obj["metadata"]["annotations"].get(managed.INTENT_SEQ) == str(seq)

    await helpers.eventually(probe, within=15)


async def gone(site: ckube.Kube, name: str) -> None:
    async def absent() -> bool:
        return await site.get_or_none(TCP, name, namespace=NAMESPACE) is None

    await helpers.eventually(absent, within=15)


async def test_restore_recreates_a_tcp_deleted_by_hand_while_its_intent_says_provision(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, agent: Agent
) -> None:
    seq = await hub.send(intent())
    before = await applied(site, "cp1", seq)
    await site.delete(TCP, "cp1", namespace=NAMESPACE)
    await gone(site, "cp1")
    cleanup = Cleanup(conn, site, hub, agent=agent)

    assert await cleanup.loop.restore(NAMESPACE, "cp1", managed.applied(before, site=SITE)) is True
    after = await site.get(TCP, "cp1", namespace=NAMESPACE)
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    assert managed.applied(after, site=SITE) == managed.applied(before, site=SITE)
    assert managed.drift(intent().spec, after) == []
    # Already there (our own, or anyone's): nothing created, the caller reports what it sees.
    assert await cleanup.loop.restore(NAMESPACE, "cp1", managed.applied(before, site=SITE)) is False


async def test_restore_leaves_a_tcp_gone_once_the_intent_says_delete(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, agent: Agent
) -> None:
    seq = await hub.send(intent())
    before = await applied(site, "cp1", seq)
    await hub.send(intent(op="delete", spec={}))
    await gone(site, "cp1")
    cleanup = Cleanup(conn, site, hub, agent=agent)

    assert await cleanup.loop.restore(NAMESPACE, "cp1", managed.applied(before, site=SITE)) is False
    assert await site.get_or_none(TCP, "cp1", namespace=NAMESPACE) is None
    # A subject that never had a message: nothing to restore either.
    assert await cleanup.loop.restore(NAMESPACE, "never", managed.applied(before, site=SITE)) is False


async def test_revert_applies_the_tcps_own_intent_again_and_leaves_a_newer_one_to_the_apply_loop(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, agent: Agent
) -> None:
    seq = await hub.send(intent())
    before = await applied(site, "cp1", seq)
    cleanup = Cleanup(conn, site, hub, agent=agent)
    # In sync: nothing to revert.
    assert await cleanup.loop.revert(NAMESPACE, "cp1") is False
    edit = {"kubernetes": {"version": "v1.20.0"}, "controlPlane": {"service": {"serviceType": "NodePort"}}}
    await site.patch(TCP, "cp1", {"spec": edit}, namespace=NAMESPACE)
    assert managed.drifted(await site.get(TCP, "cp1", namespace=NAMESPACE), intent().spec)

    assert await cleanup.loop.revert(NAMESPACE, "cp1") is True
    after = await site.get(TCP, "cp1", namespace=NAMESPACE)
    assert managed.drift(intent().spec, after) == [] and not managed.drifted(after, intent().spec)
    assert after["metadata"]["uid"] == before["metadata"]["uid"] and cleanup.reverted == 1
    # Gone, or never there: nothing to revert.
    assert await cleanup.loop.revert(NAMESPACE, "never") is False

    # A newer intent is the apply loop's: revert leaves the TCP to it.
    await agent.stop()
    await hub.send(with_version(intent(), "v1.32.0"))
    await site.patch(TCP, "cp1", {"spec": edit}, namespace=NAMESPACE)
    assert await cleanup.loop.revert(NAMESPACE, "cp1") is False
    assert version(await site.get(TCP, "cp1", namespace=NAMESPACE)) == "v1.20.0"
