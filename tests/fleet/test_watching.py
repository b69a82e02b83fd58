"""fleet.watching: the fleet kept by watching the emulated management cluster (sandbox.kubeapi)
and reading a real nats-server: a look when something shown changed, none at rest, the bus
read again on its own pace."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import bus
from common import kube as ckube
from common.kube import resources
from fleet import verdicts, watching
from hub.api import crds as crdgen
from hub.api import site as site_api
from protocol import messages, subjects
from sandbox import kubeapi
from sandbox.launcher import workload

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
ROOT = Path(__file__).resolve().parents[2]
T = "2026-12-02T08:00:00Z"
READY_CONDITIONS = [
    {"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": T},
    {"type": "SecretsSynced", "status": "True", "reason": "Synced", "message": "", "lastTransitionTime": T},
]
AT_REST = watching.Pace(coalesce=0.05, tick=3600, bus=3600)
"""Looks only when something changes: a look without one is a failure of the test."""


@pytest.fixture
async def mgmt(cluster: kubeapi.Server, kube: ckube.Kube) -> ckube.Kube:
    """``kube`` with the RKCP and Site kinds as the hub's CRDs define them."""
    for name in (crdgen.FILENAME, crdgen.SITE_FILENAME):
        await cluster.apply_crd(yaml.safe_load((ROOT / "deploy" / "crds" / name).read_text()))
    return kube


@contextlib.asynccontextmanager
async def running(w: watching.Watcher) -> AsyncIterator[watching.Watcher]:
    task = asyncio.create_task(w.run())
    try:
        yield w
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def pair(kube: ckube.Kube, name: str, *, site: str = "site-a", ready: bool = True) -> None:
    cluster = await kube.create(
        resources.CLUSTER, workload.cluster(name, namespace="default"), namespace="default"
    )
    body = workload.remote_kamaji_control_plane(
        name, namespace="default", cluster_uid=cluster["metadata"]["uid"], site=site, target_namespace="t"
    )
    await kube.create(RKCP, body, namespace="default")
    if ready:
        await status(kube, name, ready=True, conditions=READY_CONDITIONS, version="v1.31.0")


async def status(kube: ckube.Kube, name: str, **fields: Any) -> None:
    await kube.patch(RKCP, name, {"status": fields}, namespace="default", subresource="status")


async def look(w: watching.Watcher, want: Any, *, what: str) -> verdicts.Fleet:
    """The first look that shows ``want`` (each look waited for, never polled)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    last = None
    while loop.time() < deadline:
        last = await w.next(timeout=deadline - loop.time())
        if last is not None and want(last):
            return last
    raise AssertionError(f"{what}: not shown within 10s; last look: {last!r}")


def phases(f: verdicts.Fleet) -> dict[str, str]:
    return {cp.name: cp.phase for cp in f.control_planes}


async def test_a_change_shows_in_the_next_look_and_nothing_is_looked_at_at_rest(mgmt: ckube.Kube) -> None:
    await mgmt.create(resources.SITE, site_api.manifest("site-a"))
    await pair(mgmt, "cp1")
    scope = watching.Scope(secrets=True, clusters=True)
    async with running(watching.Watcher(mgmt, scope=scope, pace=AT_REST)) as w:
        first = await w.next(timeout=10)
        assert first is not None
        # Ready by its status, but its kubeconfig Secret is not there: done when it is.
        assert phases(first) == {"cp1": "WaitingForKubeconfig"}
        assert [s.name for s in first.sites] == ["site-a"]
        assert await w.next(timeout=0.3) is None, "a look at rest"
        secret = {"metadata": {"name": "cp1-kubeconfig", "labels": {"cluster.x-k8s.io/cluster-name": "cp1"}}}
        await mgmt.create(resources.SECRET, secret, namespace="default")
        await look(w, lambda f: phases(f) == {"cp1": "Ready"}, what="the Secret")
        topology = workload.topology_cluster("cp2", namespace="default", site="site-a", target_namespace="t")
        await mgmt.create(resources.CLUSTER, topology, namespace="default")
        await look(w, lambda f: phases(f).get("cp2") == "WaitingForTopology", what="a Cluster of a class")
        await status(mgmt, "cp1", version="v1.32.0")
        f = await look(w, lambda f: f.control_planes[0].version == "v1.32.0", what="the upgrade")
        assert f.ready == 1
        await mgmt.delete(RKCP, "cp1", namespace="default")
        await look(w, lambda f: "cp1" not in phases(f), what="the deletion")


async def test_unshown_changes_make_no_look(mgmt: ckube.Kube) -> None:
    await pair(mgmt, "cp1")
    async with running(watching.Watcher(mgmt, pace=AT_REST)) as w:
        assert await w.next(timeout=10) is not None
        before = w.recomputes
        await status(mgmt, "cp1", replicas=3)  # no look shows replicas
        assert await w.next(timeout=0.5) is None, "a look for a change no look shows"
        await pair(mgmt, "cp2", ready=False)  # after it on the same watch: seen once this is
        f = await look(w, lambda f: "cp2" in phases(f), what="the second control plane")
        assert w.recomputes == before + 1
        assert phases(f) == {"cp1": "Ready", "cp2": "Requested"}


async def test_the_bus_is_read_again_on_its_own_pace(
    mgmt: ckube.Kube, conn: bus.Connection, topology: str
) -> None:
    await mgmt.create(resources.SITE, site_api.manifest("site-a"))
    pace = watching.Pace(coalesce=0.05, tick=3600, bus=0.2)
    async with running(watching.Watcher(mgmt, conn, scope=watching.Scope(prefix=topology), pace=pace)) as w:
        first = await w.next(timeout=10)
        assert first is not None and first.bus
        assert [(s.name, s.backlog) for s in first.sites] == [("site-a", 0)]  # its consumer, empty
        assert first.sites[0].problems[0].reason == "NoHeartbeat"
        beat = messages.Heartbeat(
            site="site-a", agent_version="0.9.0", started_at=dt.datetime.now(dt.UTC),
            sent_at=dt.datetime.now(dt.UTC), interval=2.0,
        )  # fmt: skip
        subject = subjects.heartbeat("site-a", prefix=topology)
        await bus.publish(conn, subject, messages.encode(beat), msg_id="beat-1")
        f = await look(w, lambda f: f.sites[0].heartbeat_interval == 2.0, what="the heartbeat")
        assert f.sites[0].connected is True
        assert not f.sites[0].problems


async def test_a_site_that_appears_is_read_on_the_bus_at_once(
    mgmt: ckube.Kube, conn: bus.Connection, topology: str
) -> None:
    async with running(
        watching.Watcher(mgmt, conn, scope=watching.Scope(prefix=topology), pace=AT_REST)
    ) as w:
        assert await w.next(timeout=10) is not None
        await mgmt.create(resources.SITE, site_api.manifest("site-b"))
        # Not "not read" until the next read an hour later: the new site is read now.
        f = await look(w, lambda f: f.sites and f.sites[0].backlog == 0, what="site-b's consumer")
        assert [s.name for s in f.sites] == ["site-b"]
