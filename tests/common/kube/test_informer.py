"""common.kube.informer against the emulator: a list drops only what vanished in its namespace
scope, watch events upsert and delete, and ``synced`` hears of each (re)list once it is applied."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from common import kube as ckube
from common import objects
from common.kube import informer, resources
from sandbox import kubeapi
from tests import helpers

TCP = resources.TENANT_CONTROL_PLANE
Key = objects.Key


def tcp(name: str, *, namespace: str = "default", replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": TCP.api_version,
        "kind": TCP.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "controlPlane": {
                "deployment": {"replicas": replicas},
                "service": {"serviceType": "LoadBalancer"},
            },
            "kubernetes": {"version": "v1.31.0", "kubelet": {"cgroupfs": "systemd"}},
        },
    }


class Cache:
    """A Sink: what it holds, every call it got, and what it held at each ``synced``."""

    def __init__(self, held: dict[Key, dict[str, Any]] | None = None) -> None:
        self.held: dict[Key, dict[str, Any]] = dict(held or {})
        self.calls: list[tuple[str, Key]] = []
        self.at_sync: list[set[Key]] = []

    def known(self) -> list[Key]:
        return list(self.held)

    def upsert(self, key: Key, obj: dict[str, Any]) -> None:
        self.held[key] = obj
        self.calls.append(("upsert", key))

    def delete(self, key: Key) -> None:
        self.held.pop(key, None)
        self.calls.append(("delete", key))

    def synced(self) -> None:
        self.at_sync.append(set(self.held))

    async def holds(self, check: Callable[[dict[Key, dict[str, Any]]], bool], *, within: float = 10) -> None:
        async def now() -> bool:
            return check(self.held)

        await helpers.eventually(now, within=within)


@pytest.fixture
async def running(kube: ckube.Kube) -> AsyncIterator[Callable[..., asyncio.Task[None]]]:
    """Start ``informer.inform`` on TCPs with the given sink and options; cancelled at the end."""
    tasks: list[asyncio.Task[None]] = []

    def start(cache: Cache, **options: Any) -> asyncio.Task[None]:
        task = asyncio.create_task(informer.inform(kube, TCP, cache, synced=cache.synced, **options))
        tasks.append(task)
        return task

    yield start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def synced(cache: Cache, times: int, *, within: float = 10) -> None:
    async def enough() -> bool:
        return len(cache.at_sync) >= times

    await helpers.eventually(enough, within=within)


@pytest.mark.parametrize(
    ("namespace", "left"),
    [
        pytest.param("default", {("default", "cp1"), ("elsewhere", "kept")}, id="one-namespace"),
        pytest.param(None, {("default", "cp1")}, id="every-namespace"),
    ],
)
async def test_a_list_drops_what_vanished_within_its_scope_only(
    kube: ckube.Kube, running: Callable[..., asyncio.Task[None]], namespace: str | None, left: set[Key]
) -> None:
    created = await kube.create(TCP, tcp("cp1"), namespace="default")
    stale = {"metadata": {"name": "cp1", "namespace": "default", "uid": "an-older-one"}}
    cache = Cache({("default", "gone"): {}, ("elsewhere", "kept"): {}, ("default", "cp1"): stale})

    running(cache, namespace=namespace)
    await synced(cache, 1)

    assert cache.at_sync == [left]
    assert set(cache.held) == left
    assert cache.held[("default", "cp1")]["metadata"]["uid"] == created["metadata"]["uid"]
    assert ("delete", ("default", "gone")) in cache.calls
    assert (("delete", ("elsewhere", "kept")) in cache.calls) == (namespace is None)


async def test_events_upsert_and_delete_in_scope(
    kube: ckube.Kube, running: Callable[..., asyncio.Task[None]]
) -> None:
    await kube.create(resources.NAMESPACE, {"metadata": {"name": "elsewhere"}})
    cache = Cache()
    running(cache, namespace="default")
    await synced(cache, 1)
    assert cache.held == {}

    await kube.create(TCP, tcp("other", namespace="elsewhere"), namespace="elsewhere")
    await kube.create(TCP, tcp("cp1"), namespace="default")
    await cache.holds(lambda held: ("default", "cp1") in held)
    assert ("elsewhere", "other") not in cache.held  # out of scope: its event came first, if at all

    await kube.patch(
        TCP, "cp1", {"spec": {"controlPlane": {"deployment": {"replicas": 3}}}}, namespace="default"
    )
    await cache.holds(
        lambda held: held[("default", "cp1")]["spec"]["controlPlane"]["deployment"]["replicas"] == 3
    )

    await kube.delete(TCP, "cp1", namespace="default")
    await cache.holds(lambda held: ("default", "cp1") not in held)
    assert ("delete", ("default", "cp1")) in cache.calls
    assert len(cache.at_sync) == 1  # events, not lists


async def test_synced_follows_each_relist_once_it_is_applied(
    kube: ckube.Kube, cluster: kubeapi.Server, running: Callable[..., asyncio.Task[None]]
) -> None:
    await kube.create(TCP, tcp("cp1"), namespace="default")
    cache = Cache()
    running(cache, namespace="default", watch_timeout=1)
    await synced(cache, 1)
    assert cache.at_sync == [{("default", "cp1")}]

    # Something deleted while the informer was not watching, as the cache knows it.
    cache.held[("default", "ghost")] = {}
    # Push the history window (200 events) past the version the informer resumes from: its next
    # watch (every second) is answered 410 Gone, and it lists again.
    for i in range(250):
        await kube.patch(resources.NAMESPACE, "default", {"metadata": {"labels": {"n": str(i)}}})
    await synced(cache, 2, within=15)

    assert cache.at_sync[1] == {("default", "cp1")}  # the ghost was dropped before synced ran
    assert ("delete", ("default", "ghost")) in cache.calls
