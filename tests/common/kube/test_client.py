"""common.kube against the emulator through a kubeconfig: CRUD, patches, subresources, errors,
and the informer loop (resume, relist on 410)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from common import kube as ckube
from common.kube import errors, resources, watching
from sandbox import kubeapi

TCP = resources.TENANT_CONTROL_PLANE


def tcp(name: str, *, namespace: str = "default", version: str = "v1.31.0") -> dict[str, Any]:
    return {
        "apiVersion": TCP.api_version,
        "kind": TCP.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": {"team": "a"}},
        "spec": {
            "controlPlane": {"deployment": {"replicas": 2}, "service": {"serviceType": "LoadBalancer"}},
            "kubernetes": {"version": version, "kubelet": {"cgroupfs": "systemd"}},
        },
    }


@pytest.mark.parametrize(
    ("resource", "namespace", "name", "sub", "path"),
    [
        (resources.SECRET, "ns", "s", None, "/api/v1/namespaces/ns/secrets/s"),
        (resources.NAMESPACE, None, "ns", None, "/api/v1/namespaces/ns"),
        (TCP, "ns", None, None, "/apis/kamaji.clastix.io/v1alpha1/namespaces/ns/tenantcontrolplanes"),
        (TCP, None, None, None, "/apis/kamaji.clastix.io/v1alpha1/tenantcontrolplanes"),
        (
            TCP,
            "ns",
            "t",
            "status",
            "/apis/kamaji.clastix.io/v1alpha1/namespaces/ns/tenantcontrolplanes/t/status",
        ),
    ],
)
def test_paths(
    resource: resources.Resource, namespace: str | None, name: str | None, sub: str | None, path: str
) -> None:
    assert resource.path(namespace, name, sub) == path


async def test_crud_and_patches(kube: ckube.Kube) -> None:
    created = await kube.create(TCP, tcp("cp1"), namespace="default")
    assert created["metadata"]["generation"] == 1
    got = await kube.get(TCP, "cp1", namespace="default")
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    patched = await kube.patch(
        TCP, "cp1", {"spec": {"kubernetes": {"version": "v1.32.0"}}}, namespace="default"
    )
    assert patched["spec"]["kubernetes"]["version"] == "v1.32.0" and patched["metadata"]["generation"] == 2
    json_patched = await kube.patch(
        TCP,
        "cp1",
        [{"op": "replace", "path": "/spec/controlPlane/deployment/replicas", "value": 3}],
        namespace="default",
        content_type=ckube.JSON_PATCH,
    )
    assert json_patched["spec"]["controlPlane"]["deployment"]["replicas"] == 3
    status = await kube.patch(
        TCP,
        "cp1",
        {"status": {"controlPlaneEndpoint": "10.0.0.1:6443"}},
        namespace="default",
        subresource="status",
    )
    assert (
        status["status"]["controlPlaneEndpoint"] == "10.0.0.1:6443" and status["metadata"]["generation"] == 3
    )
    listing = await kube.list(TCP, namespace="default", label_selector="team=a")
    assert [o["metadata"]["name"] for o in listing.items] == ["cp1"] and listing.resource_version
    assert await kube.delete(TCP, "cp1", namespace="default") is not None
    assert await kube.get_or_none(TCP, "cp1", namespace="default") is None
    assert await kube.delete(TCP, "cp1", namespace="default") is None


async def test_errors_are_typed(kube: ckube.Kube) -> None:
    await kube.create(TCP, tcp("cp1"), namespace="default")
    with pytest.raises(errors.Conflict) as conflict:
        await kube.create(TCP, tcp("cp1"), namespace="default")
    assert conflict.value.reason == "AlreadyExists"
    with pytest.raises(errors.NotFound) as missing_ns:
        await kube.create(TCP, tcp("cp1", namespace="nowhere"), namespace="nowhere")
    assert missing_ns.value.kind == "namespaces"
    bad = tcp("cp2")
    bad["spec"]["controlPlane"]["service"]["serviceType"] = "Foo"
    with pytest.raises(errors.Invalid) as invalid:
        await kube.create(TCP, bad, namespace="default")
    assert "spec.controlPlane.service.serviceType" in invalid.value.message
    stale = await kube.get(TCP, "cp1", namespace="default")
    await kube.patch(TCP, "cp1", {"metadata": {"labels": {"x": "1"}}}, namespace="default")
    with pytest.raises(errors.Conflict) as stale_write:
        await kube.replace(TCP, "cp1", stale, namespace="default")
    assert stale_write.value.reason == "Conflict"


async def test_delete_with_a_uid_precondition(kube: ckube.Kube) -> None:
    await kube.create(TCP, tcp("cp1"), namespace="default")
    with pytest.raises(errors.Conflict):
        await kube.delete(TCP, "cp1", namespace="default", uid="not-the-uid")
    assert await kube.get_or_none(TCP, "cp1", namespace="default") is not None


async def test_create_or_replace_creates_then_replaces_in_place(kube: ckube.Kube) -> None:
    created = await kube.create_or_replace(TCP, tcp("cp1"), namespace="default")
    replaced = await kube.create_or_replace(TCP, tcp("cp1", version="v1.32.0"), namespace="default")
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]
    assert replaced["spec"]["kubernetes"]["version"] == "v1.32.0"


async def test_serves_only_what_the_server_has(kube: ckube.Kube) -> None:
    assert await kube.serves(TCP)
    assert await kube.serves(resources.NAMESPACE)
    assert not await kube.serves(resources.Resource("example.com", "v1", "widgets", "Widget"))


WIDGET = resources.Resource("example.com", "v1", "widgets", "Widget")
WIDGET_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
        "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                      "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                          "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}],
    },
}  # fmt: skip
"""A kind whose spec has one field and keeps nothing else."""


async def test_discovery_finds_a_kind_and_strict_patches_refuse_unknown_fields(
    kube: ckube.Kube, cluster: kubeapi.Server
) -> None:
    assert await kube.group_versions("example.com") == ()
    assert await kube.api_resources("example.com", "v1") == ()
    await cluster.apply_crd(WIDGET_CRD)
    assert await kube.group_versions("example.com") == ("v1",)
    entries = await kube.api_resources("example.com", "v1")
    # The kind's resource, not its status subresource (which carries the same kind).
    assert resources.discovered("example.com", "v1", entries, "Widget") == WIDGET
    assert resources.discovered("example.com", "v1", entries, "Gadget") is None
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
    await kube.create(WIDGET, body, namespace="default")
    with pytest.raises(errors.KubeError) as refused:
        await kube.patch(
            WIDGET, "w", {"spec": {"colour": "red"}}, namespace="default", field_validation="Strict"
        )
    assert refused.value.status == 400 and "colour" in refused.value.message
    pruned = await kube.patch(WIDGET, "w", {"spec": {"colour": "red", "size": 2}}, namespace="default")
    assert pruned["spec"] == {"size": 2}


@pytest.mark.parametrize(
    ("entries", "found"),
    [
        (
            [{"name": "foos/status", "kind": "Foo"}, {"name": "foos", "kind": "Foo", "namespaced": True}],
            "foos",
        ),
        ([{"name": "foos/status", "kind": "Foo"}], None),
        ([{"name": "bars", "kind": "Bar"}], None),
        ([], None),
    ],
)
def test_discovered(entries: list[dict[str, Any]], found: str | None) -> None:
    r = resources.discovered("example.com", "v1", entries, "Foo")
    assert (r.plural if r else None) == found
    if r is not None:
        assert r.namespaced and r.api_version == "example.com/v1" and r.kind == "Foo"


async def test_unreachable_server_is_unavailable() -> None:
    from kubernetes_asyncio import client

    async with client.ApiClient(client.Configuration(host="http://127.0.0.1:9")) as api:
        with pytest.raises(errors.Unavailable):
            await ckube.Kube(api).get(resources.NAMESPACE, "default")


async def test_stream_lists_then_watches_and_relists_after_410(
    kube: ckube.Kube, cluster: kubeapi.Server
) -> None:
    await kube.create(TCP, tcp("before"), namespace="default")
    seen: asyncio.Queue[watching.Synced | ckube.WatchEvent] = asyncio.Queue()

    async def consume() -> None:
        async for item in watching.stream(kube, TCP, namespace="default", watch_timeout=1):
            await seen.put(item)

    task = asyncio.create_task(consume())
    try:
        first = await asyncio.wait_for(seen.get(), 10)
        assert isinstance(first, watching.Synced)
        assert [o["metadata"]["name"] for o in first.items] == ["before"]
        await kube.create(TCP, tcp("after"), namespace="default")
        event = await asyncio.wait_for(seen.get(), 10)
        assert isinstance(event, ckube.WatchEvent) and event.type == "ADDED"
        assert event.object["metadata"]["name"] == "after"
        # The server ends the watch (as an API server does at its timeout): the stream resumes
        # from the last version it saw, without relisting.
        cluster.store.history.close_all()
        await kube.create(TCP, tcp("resumed"), namespace="default")
        resumed = await asyncio.wait_for(seen.get(), 10)
        assert isinstance(resumed, ckube.WatchEvent) and resumed.type == "ADDED"
        assert resumed.object["metadata"]["name"] == "resumed"
        # Then push the history window (200) past its version.
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for i in range(250):
            await kube.patch(resources.NAMESPACE, "default", {"metadata": {"labels": {"n": str(i)}}})
        task = asyncio.create_task(_resume_from(kube, event.resource_version, seen))
        # The stream resumes at the old version, gets 410 Gone and relists.
        relisted = await asyncio.wait_for(seen.get(), 10)
        assert isinstance(relisted, watching.Synced)
        assert sorted(o["metadata"]["name"] for o in relisted.items) == ["after", "before", "resumed"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _resume_from(kube: ckube.Kube, version: str, out: asyncio.Queue[Any]) -> None:
    # What a controller holds after a long pause: a version the server no longer has.
    with pytest.raises(errors.Gone):
        async for _ in kube.watch(TCP, resource_version=version, namespace="default", timeout_seconds=1):
            pass
    async for item in watching.stream(
        kube, TCP, namespace="default", resource_version=version, watch_timeout=1
    ):
        await out.put(item)
