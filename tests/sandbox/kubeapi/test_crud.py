"""kubernetes_asyncio against each backend: create/get/list/update/patch, conflicts, selectors, errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox import kubeapi
from tests.sandbox.conftest import widget
from tests.sandbox.kubeapi import backends

#: kubernetes_asyncio sends custom-object patches as JSON patch unless told (as a real server needs too).
MERGE: dict[str, Any] = {"_content_type": "application/merge-patch+json"}


def _status(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body or b"{}")
    return body


def _secret(
    name: str, labels: dict[str, str] | None = None, namespace: str | None = None
) -> aclient.V1Secret:
    return aclient.V1Secret(
        metadata=aclient.V1ObjectMeta(name=name, namespace=namespace, labels=labels),
        string_data={"password": "hunter2"},
    )


async def test_secret_create_get_and_metadata(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    created = await core.create_namespaced_secret(namespace, _secret("s1"))
    assert created.data == {"password": "aHVudGVyMg=="}  # stringData folded into data
    assert created.type == "Opaque"
    assert created.metadata.uid and created.metadata.creation_timestamp is not None
    assert created.metadata.generation is None  # Secrets have no generation, like the real server
    got = await core.read_namespaced_secret("s1", namespace)
    assert got.metadata.resource_version == created.metadata.resource_version


async def test_resource_versions_grow_across_resources(api_client: aclient.ApiClient, namespace: str) -> None:
    """One counter for every resource (etcd's revision on a real server, which the controllers'
    writes advance too: later is larger, not one more)."""
    core = aclient.CoreV1Api(api_client)
    a = await core.create_namespaced_secret(namespace, _secret("a"))
    b = await core.create_namespaced_config_map(
        namespace, aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="b"))
    )
    assert int(b.metadata.resource_version) > int(a.metadata.resource_version)


async def test_already_exists_is_409(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    await core.create_namespaced_secret(namespace, _secret("dup"))
    with pytest.raises(ApiException) as info:
        await core.create_namespaced_secret(namespace, _secret("dup"))
    assert info.value.status == 409
    status = _status(info.value)
    assert status["reason"] == "AlreadyExists"
    assert status["message"] == 'secrets "dup" already exists'
    assert status["kind"] == "Status"


async def test_stale_update_is_409_conflict(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    first = await core.create_namespaced_secret(namespace, _secret("s"))
    first.metadata.labels = {"x": "1"}
    await core.replace_namespaced_secret("s", namespace, first)
    first.metadata.labels = {"x": "2"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as info:
        await core.replace_namespaced_secret("s", namespace, first)
    assert info.value.status == 409
    assert _status(info.value)["reason"] == "Conflict"
    assert "the object has been modified" in _status(info.value)["message"]


async def test_noop_update_keeps_resource_version(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    first = await core.create_namespaced_secret(namespace, _secret("s"))
    again = await core.replace_namespaced_secret("s", namespace, first)
    assert again.metadata.resource_version == first.metadata.resource_version


async def test_missing_namespace_is_404_namespace_not_found(
    api_client: aclient.ApiClient, namespace: str
) -> None:
    core = aclient.CoreV1Api(api_client)
    with pytest.raises(ApiException) as info:
        await core.create_namespaced_secret("nowhere", _secret("s", namespace="nowhere"))
    assert info.value.status == 404
    status = _status(info.value)
    assert status["message"] == 'namespaces "nowhere" not found'
    assert status["details"] == {"name": "nowhere", "kind": "namespaces"}


async def test_get_missing_is_404(api_client: aclient.ApiClient, namespace: str) -> None:
    with pytest.raises(ApiException) as info:
        await aclient.CoreV1Api(api_client).read_namespaced_config_map("nope", namespace)
    assert info.value.status == 404
    assert _status(info.value)["reason"] == "NotFound"


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["a", "b"]),
        ("app==web,tier=front", ["a"]),
        ("app!=web", ["c", "d"]),
        ("tier in (front,back)", ["a", "b", "c"]),
        ("tier notin (front)", ["b", "c", "d"]),
        ("tier", ["a", "b", "c"]),
        ("!tier", ["d"]),
    ],
)
async def test_label_selectors(
    api_client: aclient.ApiClient, namespace: str, selector: str, expected: list[str]
) -> None:
    core = aclient.CoreV1Api(api_client)
    labels = {
        "a": {"app": "web", "tier": "front"},
        "b": {"app": "web", "tier": "back"},
        "c": {"app": "db", "tier": "back"},
        "d": {"app": "db"},
    }
    for name, label in labels.items():
        await core.create_namespaced_secret(namespace, _secret(name, label))
    listed = await core.list_namespaced_secret(namespace, label_selector=selector)
    assert [s.metadata.name for s in listed.items] == expected


async def test_field_selectors_and_all_namespaces(
    backend: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    core = aclient.CoreV1Api(api_client)
    # Lists are in etcd's key order, "<namespace>/<name>": "-" sorts before "/", so this
    # namespace, named after the test's own, comes first.
    other = await backend.new_namespace(namespace)
    mine = {"run": namespace}  # other tests' secrets are in other namespaces of a shared cluster
    await core.create_namespaced_secret(namespace, _secret("x", mine))
    await core.create_namespaced_secret(other, _secret("x", mine))
    await core.create_namespaced_secret(other, _secret("y", mine))
    everywhere = await core.list_secret_for_all_namespaces(label_selector=f"run={namespace}")
    assert [(s.metadata.namespace, s.metadata.name) for s in everywhere.items] == [
        (other, "x"),
        (other, "y"),
        (namespace, "x"),
    ]
    by_name = await core.list_secret_for_all_namespaces(
        field_selector="metadata.name=x", label_selector=f"run={namespace}"
    )
    assert [s.metadata.namespace for s in by_name.items] == [other, namespace]
    by_ns = await core.list_secret_for_all_namespaces(
        field_selector=f"metadata.namespace!={namespace}", label_selector=f"run={namespace}"
    )
    assert [s.metadata.name for s in by_ns.items] == ["x", "y"]
    with pytest.raises(ApiException) as info:
        await core.list_secret_for_all_namespaces(field_selector="spec.nothing=1")
    assert info.value.status == 400


async def test_bad_label_selector_is_400(api_client: aclient.ApiClient, namespace: str) -> None:
    with pytest.raises(ApiException) as info:
        await aclient.CoreV1Api(api_client).list_namespaced_secret(namespace, label_selector="a in b")
    assert info.value.status == 400
    assert _status(info.value)["reason"] == "BadRequest"


async def test_pagination_with_limit_and_continue(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    for i in range(5):
        await core.create_namespaced_secret(namespace, _secret(f"c{i}"))
    first = await core.list_namespaced_secret(namespace, limit=2)
    assert [c.metadata.name for c in first.items] == ["c0", "c1"]
    assert first.metadata.remaining_item_count == 3
    # A page is a snapshot: a change after the first page does not show in the next ones.
    await core.delete_namespaced_secret("c3", namespace)
    second = await core.list_namespaced_secret(namespace, limit=2, _continue=first.metadata._continue)
    third = await core.list_namespaced_secret(namespace, limit=2, _continue=second.metadata._continue)
    assert [c.metadata.name for c in second.items + third.items] == ["c2", "c3", "c4"]
    assert not third.metadata._continue
    assert second.metadata.resource_version == first.metadata.resource_version


@pytest.mark.emulator_only(
    reason="DEVIATIONS: 'One history window for the whole cluster' (the real server's continue "
    "tokens expire with etcd's compaction, every 5 minutes)"
)
async def test_stale_continue_token_is_410(
    kube_server: kubeapi.Server, api_client: aclient.ApiClient, namespace: str
) -> None:
    kube_server.store.history = type(kube_server.store.history)(3)
    core = aclient.CoreV1Api(api_client)
    for i in range(3):
        await core.create_namespaced_config_map(
            namespace, aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name=f"c{i}"))
        )
    first = await core.list_namespaced_config_map(namespace, limit=1)
    for i in range(5):
        await core.create_namespaced_config_map(
            namespace, aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name=f"d{i}"))
        )
    with pytest.raises(ApiException) as info:
        await core.list_namespaced_config_map(namespace, limit=1, _continue=first.metadata._continue)
    assert info.value.status == 410
    assert _status(info.value)["reason"] == "Expired"


async def test_merge_and_json_patch(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    await core.create_namespaced_config_map(
        namespace, aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="cm"), data={"a": "1", "b": "2"})
    )
    merged = await core.patch_namespaced_config_map("cm", namespace, {"data": {"a": None, "c": "3"}})
    assert merged.data == {"b": "2", "c": "3"}
    patched = await core.patch_namespaced_config_map(
        "cm",
        namespace,
        [{"op": "replace", "path": "/data/b", "value": "20"}, {"op": "remove", "path": "/data/c"}],
    )
    assert patched.data == {"b": "20"}
    with pytest.raises(ApiException) as info:
        await core.patch_namespaced_config_map("cm", namespace, [{"op": "remove", "path": "/data/zzz"}])
    assert info.value.status == 422


async def test_patch_with_stale_resource_version_conflicts(
    api_client: aclient.ApiClient, namespace: str
) -> None:
    core = aclient.CoreV1Api(api_client)
    cm = await core.create_namespaced_config_map(
        namespace, aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="cm"))
    )
    await core.patch_namespaced_config_map("cm", namespace, {"data": {"a": "1"}})
    stale = {"metadata": {"resourceVersion": cm.metadata.resource_version}, "data": {"a": "2"}}
    with pytest.raises(ApiException) as info:
        await core.patch_namespaced_config_map("cm", namespace, stale)
    assert info.value.status == 409


async def test_unsupported_patch_type_is_415(
    backend: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    await aclient.CoreV1Api(api_client).create_namespaced_config_map(
        namespace, aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="cm"))
    )
    url = f"{backend.url}/api/v1/namespaces/{namespace}/configmaps/cm"
    async with (
        backend.http() as http,
        http.patch(url, data=b"{}", headers={"Content-Type": "text/plain"}) as resp,
    ):
        assert resp.status == 415
        assert (await resp.json())["reason"] == "UnsupportedMediaType"


async def test_method_not_allowed_is_405(backend: backends.Backend, namespace: str) -> None:
    async with (
        backend.http() as http,
        http.put(f"{backend.url}/api/v1/namespaces/{namespace}/secrets", json={}) as resp,
    ):
        assert resp.status == 405
        assert (await resp.json())["reason"] == "MethodNotAllowed"


async def test_invalid_name_is_422(api_client: aclient.ApiClient, namespace: str) -> None:
    with pytest.raises(ApiException) as info:
        await aclient.CoreV1Api(api_client).create_namespaced_secret(namespace, _secret("Not_Valid"))
    assert info.value.status == 422
    causes = _status(info.value)["details"]["causes"]
    assert [c["field"] for c in causes] == ["metadata.name"]


async def test_generate_name(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    made = await core.create_namespaced_secret(
        namespace, aclient.V1Secret(metadata=aclient.V1ObjectMeta(generate_name="tok-"))
    )
    assert made.metadata.name.startswith("tok-") and len(made.metadata.name) == len("tok-") + 5


async def test_lease_and_events(api_client: aclient.ApiClient, namespace: str) -> None:
    leases = aclient.CoordinationV1Api(api_client)
    lease = aclient.V1Lease(
        metadata=aclient.V1ObjectMeta(name="hub"),
        spec=aclient.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15),
    )
    await leases.create_namespaced_lease(namespace, lease)
    got = await leases.read_namespaced_lease("hub", namespace)
    assert got.spec.holder_identity == "a"
    events = aclient.EventsV1Api(api_client)
    await events.create_namespaced_event(
        namespace,
        aclient.EventsV1Event(
            metadata=aclient.V1ObjectMeta(name="e1"),
            regarding=aclient.V1ObjectReference(kind="Secret", name="y", namespace=namespace),
            # A MicroTime has six fractional digits (the client sends isoformat's, or none at 0).
            event_time=datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
            reason="Tested",
            action="Test",
            reporting_controller="tests",
            reporting_instance="tests-1",
            type="Normal",
        ),
    )
    core_events = aclient.CoreV1Api(api_client)
    await core_events.create_namespaced_event(
        namespace,
        aclient.CoreV1Event(
            metadata=aclient.V1ObjectMeta(name="e2"),
            involved_object=aclient.V1ObjectReference(kind="Secret", name="x", namespace=namespace),
            reason="Tested",
            type="Warning",
        ),
    )
    listed = await core_events.list_namespaced_event(namespace, field_selector="involvedObject.name=x")
    assert [e.metadata.name for e in listed.items] == ["e2"]


async def test_status_subresource_and_generation(
    with_widgets: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    args = ("example.com", "v1", namespace, "widgets")
    created = await custom.create_namespaced_custom_object(
        *args, {**widget("w"), "status": {"phase": "Ignored"}}
    )
    assert "status" not in created  # the status subresource owns status
    assert created["metadata"]["generation"] == 1
    assert created["spec"] == {"replicas": 1}  # schema default
    status = await custom.patch_namespaced_custom_object_status(
        *args,
        "w",
        {"spec": {"replicas": 9}, "status": {"phase": "Ready", "replicas": 1}},
        **MERGE,
    )
    assert status["status"] == {"phase": "Ready", "replicas": 1}
    assert status["spec"] == {"replicas": 1}  # a status write changes only status
    assert status["metadata"]["generation"] == 1
    main = await custom.patch_namespaced_custom_object(
        *args, "w", {"spec": {"color": "red"}, "status": {"phase": "X"}}, **MERGE
    )
    assert main["status"]["phase"] == "Ready"  # a main-resource write ignores status
    assert main["metadata"]["generation"] == 2
    labelled = await custom.patch_namespaced_custom_object(
        *args, "w", {"metadata": {"labels": {"a": "b"}}}, **MERGE
    )
    assert labelled["metadata"]["generation"] == 2  # metadata changes do not bump generation


async def test_scale_subresource(
    with_widgets: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    args = ("example.com", "v1", namespace, "widgets")
    await custom.create_namespaced_custom_object(*args, widget("w", replicas=2))
    await custom.patch_namespaced_custom_object_status(
        *args, "w", {"status": {"replicas": 2, "selector": "app=w"}}, **MERGE
    )
    scale = await custom.get_namespaced_custom_object_scale(*args, "w")
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "app=w"}
    scaled = await custom.patch_namespaced_custom_object_scale(*args, "w", {"spec": {"replicas": 5}}, **MERGE)
    assert scaled["spec"]["replicas"] == 5
    obj = await custom.get_namespaced_custom_object(*args, "w")
    assert obj["spec"]["replicas"] == 5 and obj["metadata"]["generation"] == 2


async def test_custom_resource_validation_error_paths(
    with_widgets: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    with pytest.raises(ApiException) as info:
        await custom.create_namespaced_custom_object(
            "example.com", "v1", namespace, "widgets", widget("w", replicas=-1, color="green")
        )
    assert info.value.status == 422
    status = _status(info.value)
    assert status["reason"] == "Invalid"
    causes = [(c["field"], c["reason"], c["message"]) for c in status["details"]["causes"]]
    # The schema's causes come in no fixed order (the real server walks a map); the scale
    # subresource's own check of its replicas (named by the CRD's path) comes after them.
    assert set(causes[:2]) == {
        (
            "spec.replicas",
            "FieldValueInvalid",
            "Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
        ),
        (
            "spec.color",
            "FieldValueNotSupported",
            'Unsupported value: "green": supported values: "red", "blue"',
        ),
    }
    assert causes[2:] == [
        (".spec.replicas", "FieldValueInvalid", "Invalid value: -1: should be a non-negative integer")
    ]
    assert status["message"].startswith('Widget.example.com "w" is invalid: [')


async def test_unknown_resource_is_404(api_client: aclient.ApiClient, namespace: str) -> None:
    with pytest.raises(ApiException) as info:
        await aclient.CustomObjectsApi(api_client).list_namespaced_custom_object(
            "nope.io", "v1", namespace, "things"
        )
    assert info.value.status == 404


async def test_update_with_another_uid_conflicts(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    cm = await core.create_namespaced_config_map(
        namespace, aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="u"))
    )
    cm.metadata.uid = "someone-else"
    with pytest.raises(ApiException) as info:
        await core.replace_namespaced_config_map("u", namespace, cm)
    assert info.value.status == 409
    assert "Precondition failed: UID in precondition" in _status(info.value)["message"]
