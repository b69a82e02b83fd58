"""Watches: resume from a list's resourceVersion, synthetic ADDED, 410 and relist, bookmarks, selectors.

On the real backend a fresh namespace holds the ``kube-root-ca.crt`` ConfigMap of its
controllers: tests that count what they see watch Secrets (none there) or select by label."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import watch as awatch
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox import kubeapi
from tests import helpers
from tests.sandbox.kubeapi import backends

HISTORY_WINDOW = (
    "DEVIATIONS: 'One history window for the whole cluster (not one watch cache per resource)' "
    "(a real server's window cannot be made to expire within a test)"
)


def _secret(name: str) -> aclient.V1Secret:
    return aclient.V1Secret(metadata=aclient.V1ObjectMeta(name=name))


def _cm(
    name: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None
) -> aclient.V1ConfigMap:
    return aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name=name, labels=labels), data=data)


async def _collect(
    func: Callable[..., Any],
    *args: Any,
    count: int,
    then: Callable[[], Awaitable[None]] | None = None,
    **kwargs: Any,
) -> list[tuple[str, str]]:
    """(type, name) of the first ``count`` events of a watch (which must end by its own timeout
    otherwise); ``then`` runs once the first event is in, when the watch is surely open."""
    seen: list[tuple[str, str]] = []
    async with awatch.Watch().stream(func, *args, timeout_seconds=5, **kwargs) as stream:
        async for event in stream:
            seen.append((event["type"], event["raw_object"]["metadata"].get("name", "")))
            if len(seen) == 1 and then is not None:
                await then()
            if len(seen) == count:
                stream.stop()
    return seen


async def test_watch_resumes_from_list_resource_version_without_gaps(
    api_client: aclient.ApiClient, namespace: str
) -> None:
    core = aclient.CoreV1Api(api_client)
    for name in ("a", "b"):
        await core.create_namespaced_secret(namespace, _secret(name))
    listed = await core.list_namespaced_secret(namespace)
    assert [c.metadata.name for c in listed.items] == ["a", "b"]
    await core.create_namespaced_secret(namespace, _secret("c"))
    await core.patch_namespaced_secret("a", namespace, {"metadata": {"labels": {"k": "v"}}})
    await core.delete_namespaced_secret("b", namespace)
    await core.create_namespaced_config_map(namespace, _cm("other"))
    events = await _collect(
        core.list_namespaced_secret, namespace, count=3, resource_version=listed.metadata.resource_version
    )
    assert events == [("ADDED", "c"), ("MODIFIED", "a"), ("DELETED", "b")]


async def test_watch_without_resource_version_starts_with_synthetic_added(
    api_client: aclient.ApiClient, namespace: str
) -> None:
    core = aclient.CoreV1Api(api_client)
    await core.create_namespaced_secret(namespace, _secret("x"))

    async def change() -> None:  # "y" arrives as a live event
        await core.create_namespaced_secret(namespace, _secret("y"))

    events = await _collect(core.list_namespaced_secret, namespace, count=2, then=change)
    assert events == [("ADDED", "x"), ("ADDED", "y")]


@pytest.mark.emulator_only(reason=HISTORY_WINDOW)
async def test_expired_resource_version_is_410_and_a_relist_recovers() -> None:
    server = kubeapi.Server(name="small", history=4)
    await server.start()
    try:
        config = aclient.Configuration(host=server.url)
        async with aclient.ApiClient(config) as api:
            core = aclient.CoreV1Api(api)
            first = await core.list_namespaced_config_map("default")
            for i in range(6):
                await core.create_namespaced_config_map("default", _cm(f"c{i}"))
            with pytest.raises(ApiException) as info:
                await _collect(
                    core.list_namespaced_config_map,
                    "default",
                    count=1,
                    resource_version=first.metadata.resource_version,
                )
            assert info.value.status == 410
            relisted = await core.list_namespaced_config_map("default")
            assert len(relisted.items) == 6

            async def change_later() -> None:
                await helpers.eventually(lambda: server.store.history.watcher_count == 1, what="the watch")
                await core.delete_namespaced_config_map("c0", "default")

            changer = asyncio.create_task(change_later())
            events = await _collect(
                core.list_namespaced_config_map,
                "default",
                count=1,
                resource_version=relisted.metadata.resource_version,
            )
            await changer
            assert events == [("DELETED", "c0")]
    finally:
        await server.stop()


@pytest.mark.emulator_only(reason=HISTORY_WINDOW)
async def test_expired_watch_is_an_error_event_in_a_200_stream() -> None:
    server = kubeapi.Server(name="small", history=2)
    await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            for i in range(4):
                await http.post(
                    f"{server.url}/api/v1/namespaces/default/configmaps", json={"metadata": {"name": f"c{i}"}}
                )
            url = f"{server.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1"
            async with http.get(url) as resp:
                assert resp.status == 200
                line = await resp.content.readline()
        event = json.loads(line)
        assert event["type"] == "ERROR"
        assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"
    finally:
        await server.stop()


@pytest.mark.emulator_only(
    reason="DEVIATIONS: 'BOOKMARKs (when allowed) come after every 10 s of idleness' (made 0.1 s "
    "here; a real server's come 2 s before the watch's timeout or after a minute)"
)
async def test_bookmarks_carry_the_current_resource_version(
    kube_server: kubeapi.Server, api_client: aclient.ApiClient, namespace: str
) -> None:
    kube_server.settings.bookmark_interval = 0.1
    core = aclient.CoreV1Api(api_client)
    await core.create_namespaced_secret(namespace, _secret("s"))
    seen = []
    async with awatch.Watch().stream(
        core.list_namespaced_config_map,
        namespace,
        resource_version=str(kube_server.store.rv),
        allow_watch_bookmarks=True,
        timeout_seconds=5,
    ) as stream:
        async for event in stream:
            seen.append(event)
            stream.stop()
    assert seen[0]["type"] == "BOOKMARK"
    assert seen[0]["raw_object"]["metadata"]["resourceVersion"] == str(kube_server.store.rv)


async def test_timeout_seconds_ends_the_stream(backend: backends.Backend, namespace: str) -> None:
    async with backend.http() as http:
        url = (
            f"{backend.url}/api/v1/namespaces/{namespace}/secrets?watch=1&timeoutSeconds=1&resourceVersion=0"
        )
        async with http.get(url) as resp:
            body = await asyncio.wait_for(resp.read(), timeout=10)
    assert body == b""


async def test_selector_watch_sees_objects_leave_and_enter(
    api_client: aclient.ApiClient, namespace: str
) -> None:
    core = aclient.CoreV1Api(api_client)
    await core.create_namespaced_config_map(namespace, _cm("m", {"app": "web"}))
    listed = await core.list_namespaced_config_map(namespace, label_selector="app=web")
    await core.patch_namespaced_config_map("m", namespace, {"metadata": {"labels": {"app": "db"}}})
    await core.patch_namespaced_config_map("m", namespace, {"data": {"ignored": "yes"}})
    await core.patch_namespaced_config_map("m", namespace, {"metadata": {"labels": {"app": "web"}}})
    events = await _collect(
        core.list_namespaced_config_map,
        namespace,
        count=2,
        label_selector="app=web",
        resource_version=listed.metadata.resource_version,
    )
    assert events == [("DELETED", "m"), ("ADDED", "m")]


async def test_send_initial_events_ends_with_an_annotated_bookmark(
    backend: backends.Backend, namespace: str
) -> None:
    async with backend.http() as http:
        await http.post(
            f"{backend.url}/api/v1/namespaces/{namespace}/secrets", json={"metadata": {"name": "a"}}
        )
        url = (
            f"{backend.url}/api/v1/namespaces/{namespace}/secrets?watch=1&sendInitialEvents=true"
            "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"
        )
        async with http.get(url) as resp:
            lines = [json.loads(line) for line in (await resp.read()).splitlines()]
    assert [e["type"] for e in lines[:2]] == ["ADDED", "BOOKMARK"]
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_legacy_watch_path(backend: backends.Backend, namespace: str) -> None:
    base = f"{backend.url}/api/v1/namespaces/{namespace}/configmaps"
    async with backend.http() as http:
        await http.post(base, json={"metadata": {"name": "a"}})
        await http.post(base, json={"metadata": {"name": "b"}})
        url = f"{backend.url}/api/v1/watch/namespaces/{namespace}/configmaps/b?timeoutSeconds=1"
        async with http.get(url) as resp:
            lines = [json.loads(line) for line in (await resp.read()).splitlines()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "b")]


@pytest.mark.emulator_only(reason="the emulator's own shutdown")
async def test_stopping_the_server_ends_open_watches() -> None:
    server = kubeapi.Server(name="stopping")
    await server.start()
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{server.url}/api/v1/namespaces?watch=true") as resp,
    ):
        for _ in range(4):  # the four initial namespaces
            await resp.content.readline()
        stopper = asyncio.create_task(server.stop())
        rest = await asyncio.wait_for(resp.content.read(), timeout=10)
        await stopper
    assert rest == b""
    assert server.store.history.watcher_count == 0


async def test_watch_fans_out_to_many_watchers(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    rv = (await core.list_namespaced_config_map(namespace)).metadata.resource_version
    watchers = [
        asyncio.create_task(
            _collect(core.list_namespaced_config_map, namespace, count=3, resource_version=rv)
        )
        for _ in range(5)
    ]
    for name in ("a", "b", "c"):
        await core.create_namespaced_config_map(namespace, _cm(name))
    results = await asyncio.gather(*watchers)
    assert all(r == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")] for r in results)


@pytest.mark.emulator_only(reason="the emulator's own bookkeeping of watchers")
async def test_a_watch_whose_client_left_is_released(kube_server: kubeapi.Server) -> None:
    async with aiohttp.ClientSession() as http:
        resp = await http.get(f"{kube_server.url}/api/v1/namespaces?watch=true")
        await resp.content.readline()
        assert kube_server.store.history.watcher_count == 1
        resp.close()
    # The server notices the closed connection asynchronously.
    await helpers.eventually(
        lambda: kube_server.store.history.watcher_count == 0, what="the watcher released"
    )
