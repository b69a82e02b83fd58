"""agent.apply.applying: which calls an intent costs the site's API, seen from the emulator.

The apply and status loops are wired as ``agent.main`` wires them (``known=status.known``) on
the API emulator and a real nats-server; the test plays the hub. What the agent asked the API
is read from the emulator's request counts (``kubeapi.Server.requests``), never from our client.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.apply import applying
from agent.apply import loop as apply_loop
from agent.status import loop as status_loop
from agent.tcp import managed
from common import bus
from common import kube as ckube
from common.kube import resources
from protocol import messages, streams, subjects
from sandbox import kubeapi
from tests import helpers
from tests.agent import wiring
from tests.agent.conftest import NAMESPACE, SITE, Hub, intent, with_version

TCP = resources.TENANT_CONTROL_PLANE
PLURAL = "tenantcontrolplanes"


class Calls:
    """The agent's calls on TCPs the emulator counted since this was made (the test's own are
    made before it, or after reading it)."""

    def __init__(self, cluster: kubeapi.Server) -> None:
        self.cluster = cluster
        self.before = collections.Counter(cluster.requests)

    def _since(self, method: str, name: str, namespace: str = NAMESPACE) -> int:
        key = kubeapi.Request(method, PLURAL, namespace, name)
        return self.cluster.requests[key] - self.before[key]

    def reads(self, name: str = "cp1", *, namespace: str = NAMESPACE) -> int:
        """GETs of the TCP ``name`` itself (a list or a watch is a GET of the collection)."""
        return self._since("GET", name, namespace)

    def creates(self) -> int:
        return self._since("POST", "")

    def patches(self, name: str = "cp1") -> int:
        return self._since("PATCH", name)


@pytest.fixture
async def site(kube: ckube.Kube) -> ckube.Kube:
    """The site without the Kamaji simulator: its reconciles read TCPs too, which would be
    counted with ours."""
    await kube.create(resources.NAMESPACE, {"metadata": {"name": NAMESPACE}})
    return kube


class Agent:
    """The apply loop, told by the status loop's cache (``known``) which TCPs exist."""

    def __init__(
        self, conn: bus.Connection, kube: ckube.Kube, hub: Hub, *, known: applying.Known | None = None
    ) -> None:
        deps = wiring.deps(conn, kube, hub.public, prefix=hub.prefix)
        self.metrics = deps.metrics
        settings = wiring.settings(prefix=hub.prefix, status_min_interval=0.1, namespace_retry=0.5)
        self.status = status_loop.StatusLoop(settings, deps)
        self.apply = apply_loop.ApplyLoop(
            settings,
            deps,
            on_delete=self.status.deleting,
            known=known or self.status.known,
            bind_retry=0.2,
        )
        self.hub = hub

    def count(self, op: str, result: str) -> float:
        value = self.metrics.registry.get_sample_value("kb_agent_intents_total", {"op": op, "result": result})
        return value or 0.0

    async def settled(self, seq: int) -> None:
        """Every intent up to ``seq`` acknowledged or terminated (none left to redeliver)."""

        async def done() -> bool:
            stream = streams.stream_name(subjects.Kind.INTENT, prefix=self.hub.prefix)
            state = await bus.consumer_info(self.hub.conn, stream, f"agent-{SITE}")
            return state.num_ack_pending == 0 and state.ack_floor_stream_seq >= seq

        await helpers.eventually(done, within=15, what=f"intent seq {seq} settled")


@contextlib.asynccontextmanager
async def running(
    conn: bus.Connection,
    kube: ckube.Kube,
    hub: Hub,
    *,
    synced: bool = True,
    known: applying.Known | None = None,
) -> AsyncIterator[Agent]:
    """The agent's apply loop, and its status loop when ``synced`` (else the cache stays
    incomplete: ``known`` answers None); ``known`` replaces the cache's answer altogether."""
    agent = Agent(conn, kube, hub, known=known)
    tasks = [asyncio.create_task(agent.apply.run())]
    if synced:
        tasks.append(asyncio.create_task(agent.status.run()))
        await asyncio.wait_for(agent.status.wait_synced(), timeout=10)
    try:
        yield agent
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_first_provision_creates_without_reading_the_tcp(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, cluster: kubeapi.Server
) -> None:
    async with running(conn, site, hub) as agent:
        assert agent.status.known(NAMESPACE, "cp1") is False
        calls = Calls(cluster)
        first = intent()
        seq = await hub.send(first)
        await agent.settled(seq)
        assert (calls.reads(), calls.creates()) == (0, 1)
        assert agent.count("provision", "applied") == 1
        created = await site.get(TCP, "cp1", namespace=NAMESPACE)
        assert created["metadata"]["annotations"][managed.INTENT_SEQ] == str(seq)

        # Once the cache shows the TCP, the next intent reads it first and patches it.
        await helpers.eventually(lambda: agent.status.known(NAMESPACE, "cp1") is True)
        calls = Calls(cluster)
        await agent.settled(await hub.send(with_version(first, "v1.32.0")))
        assert (calls.reads(), calls.creates(), calls.patches()) == (1, 0, 1)
        patched = await site.get(TCP, "cp1", namespace=NAMESPACE)
        assert patched["spec"]["kubernetes"]["version"] == "v1.32.0"


def unmanaged(name: str) -> dict[str, Any]:
    """A TCP of that name nobody manages (no labels)."""
    return {**managed.desired(intent(name), seq=1), "metadata": {"name": name, "namespace": NAMESPACE}}


def another_sites(name: str) -> dict[str, Any]:
    """A TCP of that name the agent of site-b manages: not in this site's cache either."""
    return managed.desired(intent(name, site="site-b"), seq=1)


@pytest.mark.parametrize("theirs", [unmanaged, another_sites], ids=["unmanaged", "another site's"])
@pytest.mark.parametrize(
    ("synced", "expected"),
    [(True, (1, 1)), (False, (1, 0))],
    ids=["cache complete: created, refused, read", "cache incomplete: read first"],
)
async def test_a_tcp_the_cache_does_not_show_is_refused_as_conflict(
    conn: bus.Connection,
    site: ckube.Kube,
    hub: Hub,
    cluster: kubeapi.Server,
    theirs: Any,
    synced: bool,
    expected: tuple[int, int],
) -> None:
    """The same Rejected/Conflict, word for word, whether the create found it or the GET did."""
    existing = await site.create(TCP, theirs("cp1"), namespace=NAMESPACE)
    async with running(conn, site, hub, synced=synced) as agent:
        assert agent.status.known(NAMESPACE, "cp1") is (False if synced else None)
        calls = Calls(cluster)
        seq = await hub.send(intent())
        await agent.settled(seq)
        assert (calls.reads(), calls.creates()) == expected
        refused = await hub.status_is("cp1", "Rejected", "Conflict")
    assert refused.intent_seq == seq
    assert refused.message == (
        f"TenantControlPlane {NAMESPACE}/cp1 exists and is not managed by kamaji-broker for this site"
    )
    assert agent.count("provision", "conflict") == 1
    untouched = await site.get(TCP, "cp1", namespace=NAMESPACE)
    assert untouched["metadata"]["resourceVersion"] == existing["metadata"]["resourceVersion"]


async def test_before_the_cache_is_complete_a_provision_reads_first(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, cluster: kubeapi.Server
) -> None:
    async with running(conn, site, hub, synced=False) as agent:
        assert agent.status.known(NAMESPACE, "cp1") is None
        calls = Calls(cluster)
        await agent.settled(await hub.send(intent()))
        assert (calls.reads(), calls.creates()) == (1, 1)
        assert agent.count("provision", "applied") == 1


async def test_a_cache_that_lags_costs_a_refused_create_then_reads_and_applies(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, cluster: kubeapi.Server
) -> None:
    """Our own TCP the cache has not seen yet (its watch lagging): AlreadyExists (from the
    create's dry run), then the GET path decides on what is there, as if the cache had not been
    asked. Each create is a dry run then an apply (a PATCH)."""
    first = intent()
    async with running(conn, site, hub, known=lambda namespace, name: False) as agent:
        calls = Calls(cluster)
        await agent.settled(await hub.send(first))
        seq = await hub.send(with_version(first, "v1.32.0"))
        await agent.settled(seq)
        assert (calls.creates(), calls.reads(), calls.patches()) == (2, 1, 2)
        assert agent.count("provision", "applied") == 2
    obj = await site.get(TCP, "cp1", namespace=NAMESPACE)
    assert obj["spec"]["kubernetes"]["version"] == "v1.32.0"
    assert obj["metadata"]["annotations"][managed.INTENT_SEQ] == str(seq)


async def test_known_is_what_the_status_loops_complete_cache_holds(
    conn: bus.Connection, site: ckube.Kube, hub: Hub
) -> None:
    """The seam as ``agent.main`` wires it: None until every watch listed and outside the
    watched namespaces; then whether a managed TCP of this site of that name is there."""
    deps = wiring.deps(conn, site, hub.public, prefix=hub.prefix)
    status = status_loop.StatusLoop(wiring.settings(prefix=hub.prefix, namespaces=(NAMESPACE,)), deps)
    assert status.known(NAMESPACE, "cp1") is None
    await site.create(TCP, unmanaged("theirs"), namespace=NAMESPACE)
    task = asyncio.create_task(status.run())
    try:
        await asyncio.wait_for(status.wait_synced(), timeout=10)
        assert (status.known(NAMESPACE, "cp1"), status.known("elsewhere", "cp1")) == (False, None)
        await site.create(TCP, managed.desired(intent(), seq=1), namespace=NAMESPACE)
        await helpers.eventually(lambda: status.known(NAMESPACE, "cp1") is True)
        assert status.known(NAMESPACE, "theirs") is False
        await site.delete(TCP, "cp1", namespace=NAMESPACE)
        await helpers.eventually(lambda: status.known(NAMESPACE, "cp1") is False)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_missing_namespace_is_reported_as_before_without_a_read(
    conn: bus.Connection, site: ckube.Kube, hub: Hub, cluster: kubeapi.Server
) -> None:
    """The create is what finds the namespace missing, unread as read first (tests/agent/apply/
    test_loop.py): Rejected/NamespaceNotFound, retried until the namespace exists."""
    async with running(conn, site, hub) as agent:
        assert agent.status.known("later", "cp1") is False
        calls = Calls(cluster)
        await hub.send(intent("cp1", namespace="later"))
        stream = streams.stream_name(subjects.Kind.STATUS, site=SITE, prefix=hub.prefix)
        subject = subjects.status(SITE, "later", "cp1", prefix=hub.prefix)

        async def refused() -> messages.Status | None:
            stored = await bus.last_message(hub.conn, stream, subject)
            return messages.decode_status(stored.data) if stored else None

        status = await helpers.eventually(
            refused, lambda s: s is not None and s.reason == "NamespaceNotFound"
        )
        assert status is not None and status.phase == "Rejected"
        assert status.message == f"namespace 'later' does not exist at site {SITE!r}"
        assert calls.reads(namespace="later") == 0
        await site.create(resources.NAMESPACE, {"metadata": {"name": "later"}})
        await helpers.eventually(lambda: agent.count("provision", "applied") == 1, within=15)
