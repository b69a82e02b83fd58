"""Deletion: finalizers and deletionTimestamp, ownerReference cascades (GC), namespaces and CRDs.

The real server's garbage collector, namespace controller and CRD cleanup act a moment after the
write that calls for them (the emulator's within it): what they do is waited for (``eventually``)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio.client.exceptions import ApiException

from tests.helpers import eventually
from tests.sandbox.conftest import WIDGET_CRD, widget
from tests.sandbox.kubeapi import backends

MERGE: dict[str, Any] = {"_content_type": "application/merge-patch+json"}
HOLD = "example.com/hold"


def _w(namespace: str) -> tuple[str, str, str, str]:
    return ("example.com", "v1", namespace, "widgets")


def _cm(name: str, **meta: Any) -> aclient.V1ConfigMap:
    return aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name=name, **meta))


async def _absent(read: Callable[[], Awaitable[Any]]) -> bool:
    try:
        await read()
    except ApiException as exc:
        assert exc.status == 404
        return True
    return False


async def _gone(read: Callable[[], Awaitable[Any]], what: str) -> None:
    await eventually(lambda: _absent(read), within=30, what=f"{what} gone")


async def _delete(core: aclient.CoreV1Api, name: str, namespace: str, **options: Any) -> dict[str, Any]:
    """DELETE a ConfigMap and read the answer as it is: the object while finalizers hold it (the
    client would read it as a Status, a ConfigMap's answer once it is gone)."""
    answer: Any = await core.delete_namespaced_config_map(name, namespace, _preload_content=False, **options)
    body: dict[str, Any] = json.loads(await answer.read())
    return body


def _owner(obj: dict[str, Any], *, block: bool | None = None) -> aclient.V1OwnerReference:
    meta = obj["metadata"]
    return aclient.V1OwnerReference(
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        name=meta["name"],
        uid=meta["uid"],
        controller=True,
        block_owner_deletion=block,
    )


async def test_finalizer_flow(
    with_widgets: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    w = _w(namespace)
    created = await custom.create_namespaced_custom_object(
        *w, {**widget("w"), "metadata": {"name": "w", "finalizers": [HOLD]}}
    )
    deleting = await custom.delete_namespaced_custom_object(*w, "w")
    assert deleting["metadata"]["deletionTimestamp"]
    assert deleting["metadata"]["generation"] == created["metadata"]["generation"] + 1
    still = await custom.get_namespaced_custom_object(*w, "w")
    assert still["metadata"]["finalizers"] == [HOLD]
    again = await custom.delete_namespaced_custom_object(*w, "w")  # idempotent while terminating
    assert again["metadata"]["resourceVersion"] == still["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as info:  # no new finalizers on a terminating object
        await custom.patch_namespaced_custom_object(
            *w, "w", {"metadata": {"finalizers": [HOLD, "x.io/new"]}}, **MERGE
        )
    assert info.value.status == 422
    await custom.patch_namespaced_custom_object(*w, "w", {"metadata": {"finalizers": None}}, **MERGE)
    with pytest.raises(ApiException) as gone:
        await custom.get_namespaced_custom_object(*w, "w")
    assert gone.value.status == 404


async def test_owner_reference_cascade(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    owner = await core.create_namespaced_config_map(namespace, _cm("owner"))
    ref = aclient.V1OwnerReference(api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid)
    child = await core.create_namespaced_config_map(namespace, _cm("child", owner_references=[ref]))
    child_ref = aclient.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="child", uid=child.metadata.uid
    )
    await core.create_namespaced_config_map(namespace, _cm("grandchild", owner_references=[child_ref]))
    await core.delete_namespaced_config_map("owner", namespace)
    await _gone(lambda: core.read_namespaced_config_map("child", namespace), "the child")
    await _gone(lambda: core.read_namespaced_config_map("grandchild", namespace), "the grandchild")


async def _owner_map(core: aclient.CoreV1Api, namespace: str, name: str, **meta: Any) -> dict[str, Any]:
    """A ConfigMap to own others, as a dict. (An owner of a kind the real garbage collector has
    not yet met, a new CRD's, would be noticed only at its next resync, up to 30 s later.)"""
    made = await core.create_namespaced_config_map(namespace, _cm(name, **meta))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "uid": made.metadata.uid}}


async def test_cascade_waits_for_the_owner_finalizers(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    owner = await _owner_map(core, namespace, "w", finalizers=[HOLD])
    await core.create_namespaced_secret(
        namespace,
        aclient.V1Secret(metadata=aclient.V1ObjectMeta(name="w-ca", owner_references=[_owner(owner)])),
    )
    await core.delete_namespaced_config_map("w", namespace)
    assert (await core.read_namespaced_secret("w-ca", namespace)).metadata.name == "w-ca"
    await core.patch_namespaced_config_map("w", namespace, {"metadata": {"finalizers": None}})
    await _gone(lambda: core.read_namespaced_secret("w-ca", namespace), "the dependent")


async def test_dependent_with_another_live_owner_survives(
    api_client: aclient.ApiClient, namespace: str
) -> None:
    core = aclient.CoreV1Api(api_client)
    a = await core.create_namespaced_config_map(namespace, _cm("a"))
    b = await core.create_namespaced_config_map(namespace, _cm("b"))
    refs = [
        aclient.V1OwnerReference(api_version="v1", kind="ConfigMap", name="a", uid=a.metadata.uid),
        aclient.V1OwnerReference(api_version="v1", kind="ConfigMap", name="b", uid=b.metadata.uid),
    ]
    await core.create_namespaced_config_map(namespace, _cm("c", owner_references=refs))
    await core.delete_namespaced_config_map("a", namespace)

    async def owners() -> list[str]:
        child = await core.read_namespaced_config_map("c", namespace)
        return [r.name for r in child.metadata.owner_references]

    await eventually(owners, lambda names: names == ["b"], within=30, what="the dangling reference dropped")


async def test_orphan_propagation_keeps_dependents(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    owner = await core.create_namespaced_config_map(namespace, _cm("o"))
    ref = aclient.V1OwnerReference(api_version="v1", kind="ConfigMap", name="o", uid=owner.metadata.uid)
    await core.create_namespaced_config_map(namespace, _cm("d", owner_references=[ref]))
    await core.delete_namespaced_config_map("o", namespace, propagation_policy="Orphan")
    await _gone(lambda: core.read_namespaced_config_map("o", namespace), "the owner")
    kept = await core.read_namespaced_config_map("d", namespace)
    assert kept.metadata.owner_references is None


async def test_foreground_deletes_dependents_first(api_client: aclient.ApiClient, namespace: str) -> None:
    """The owner waits for the dependents whose reference blocks it; the others are deleted too."""
    core = aclient.CoreV1Api(api_client)
    owner = await _owner_map(core, namespace, "w")
    blocking = _cm("dep", owner_references=[_owner(owner, block=True)], finalizers=[HOLD])
    await core.create_namespaced_config_map(namespace, blocking)
    other = _cm("other", owner_references=[_owner(owner)], finalizers=[HOLD])
    await core.create_namespaced_config_map(namespace, other)
    deleting = await _delete(core, "w", namespace, propagation_policy="Foreground")
    assert deleting["metadata"]["finalizers"] == ["foregroundDeletion"]

    async def deleting_both() -> bool:
        deps = [await core.read_namespaced_config_map(n, namespace) for n in ("dep", "other")]
        return all(d.metadata.deletion_timestamp is not None for d in deps)

    await eventually(deleting_both, within=30, what="the dependents terminating")
    await core.patch_namespaced_config_map("other", namespace, {"metadata": {"finalizers": None}})
    assert (await core.read_namespaced_config_map("w", namespace)).metadata.finalizers == [
        "foregroundDeletion"
    ]
    await core.patch_namespaced_config_map("dep", namespace, {"metadata": {"finalizers": None}})
    await _gone(lambda: core.read_namespaced_config_map("w", namespace), "the owner")


async def test_foreground_without_blocking_dependents_deletes_the_owner(
    api_client: aclient.ApiClient, namespace: str
) -> None:
    core = aclient.CoreV1Api(api_client)
    owner = await core.create_namespaced_config_map(namespace, _cm("lone"))
    # The finalizer is set whatever the dependents (so the answer is the object, not a Status);
    # the collector then finds none to wait for.
    deleting = await _delete(core, "lone", namespace, propagation_policy="Foreground")
    assert deleting["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert deleting["metadata"]["uid"] == owner.metadata.uid
    await _gone(lambda: core.read_namespaced_config_map("lone", namespace), "the owner")


async def test_object_whose_owner_is_absent_is_collected(
    api_client: aclient.ApiClient, namespace: str
) -> None:
    core = aclient.CoreV1Api(api_client)
    ref = aclient.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="ghost", uid="00000000-dead-beef-0000-000000000000"
    )
    await core.create_namespaced_config_map(namespace, _cm("orphan", owner_references=[ref]))
    await _gone(lambda: core.read_namespaced_config_map("orphan", namespace), "the orphan")


async def test_namespace_deletion_terminates_then_removes(
    backend: backends.Backend, api_client: aclient.ApiClient
) -> None:
    core = aclient.CoreV1Api(api_client)
    team = await backend.new_namespace("team")
    await core.create_namespaced_config_map(team, _cm("plain"))
    await core.create_namespaced_config_map(team, _cm("held", finalizers=[HOLD]))
    await core.delete_namespace(team)
    assert (await core.read_namespace(team)).status.phase == "Terminating"
    await _gone(lambda: core.read_namespaced_config_map("plain", team), "the plain ConfigMap")
    with pytest.raises(ApiException) as info:
        await core.create_namespaced_config_map(team, _cm("new"))
    assert info.value.status == 403
    await core.patch_namespaced_config_map("held", team, {"metadata": {"finalizers": None}})
    await _gone(lambda: core.read_namespace(team), "the namespace")


async def test_crd_deletion_removes_its_objects_and_resource(
    backend: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    crd = backend.own_crd(WIDGET_CRD)  # the shared one stays for the other tests
    group, name = crd["spec"]["group"], crd["metadata"]["name"]
    await backend.apply_crd(crd)
    custom = aclient.CustomObjectsApi(api_client)
    w = (group, "v1", namespace, "widgets")
    await custom.create_namespaced_custom_object(*w, {**widget("w"), "apiVersion": f"{group}/v1"})
    ext = aclient.ApiextensionsV1Api(api_client)
    await ext.delete_custom_resource_definition(name)
    await _gone(lambda: custom.list_namespaced_custom_object(*w), "the resource")
    await _gone(lambda: ext.read_custom_resource_definition(name), "the CRD")
    crds = await ext.list_custom_resource_definition()
    assert name not in [c.metadata.name for c in crds.items]


async def test_delete_preconditions(api_client: aclient.ApiClient, namespace: str) -> None:
    core = aclient.CoreV1Api(api_client)
    await core.create_namespaced_config_map(namespace, _cm("p"))
    with pytest.raises(ApiException) as info:
        await core.delete_namespaced_config_map(
            "p", namespace, body=aclient.V1DeleteOptions(preconditions=aclient.V1Preconditions(uid="other"))
        )
    assert info.value.status == 409
    status = await core.delete_namespaced_config_map("p", namespace)
    assert status.status == "Success"  # built-ins answer a Status, custom resources the object


async def test_updating_a_terminating_namespace_does_not_remove_it(
    backend: backends.Backend, api_client: aclient.ApiClient
) -> None:
    core = aclient.CoreV1Api(api_client)
    slow = await backend.new_namespace("slow")
    await core.create_namespaced_config_map(slow, _cm("held", finalizers=[HOLD]))
    await core.delete_namespace(slow)
    await core.patch_namespace(slow, {"metadata": {"labels": {"touched": "yes"}}})
    ns = await core.read_namespace(slow)
    assert ns.status.phase == "Terminating" and ns.spec.finalizers == ["kubernetes"]
    await core.patch_namespaced_config_map("held", slow, {"metadata": {"finalizers": None}})


async def test_the_initial_namespaces_may_not_be_deleted(api_client: aclient.ApiClient) -> None:
    core = aclient.CoreV1Api(api_client)
    for name in ("default", "kube-system", "kube-public"):
        with pytest.raises(ApiException) as info:
            await core.delete_namespace(name)
        assert info.value.status == 403
        status = backends.status_of(info.value)
        assert status["reason"] == "Forbidden"
        assert status["message"] == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
