"""Deletion: finalizers and deletionTimestamp, ownerReference cascades (GC), namespaces and CRDs."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox import kubeapi
from tests.sandbox.conftest import WIDGET_CRD, widget

W = ("example.com", "v1", "default", "widgets")
MERGE: dict[str, Any] = {"_content_type": "application/merge-patch+json"}


async def _exists(core: aclient.CoreV1Api, name: str, namespace: str = "default") -> bool:
    try:
        await core.read_namespaced_config_map(name, namespace)
    except ApiException as exc:
        assert exc.status == 404
        return False
    return True


def _owner(obj: dict[str, Any]) -> aclient.V1OwnerReference:
    meta = obj["metadata"]
    return aclient.V1OwnerReference(
        api_version=obj["apiVersion"], kind=obj["kind"], name=meta["name"], uid=meta["uid"], controller=True
    )


async def test_finalizer_flow(with_widgets: kubeapi.Server, api_client: aclient.ApiClient) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    created = await custom.create_namespaced_custom_object(
        *W, {**widget("w"), "metadata": {"name": "w", "finalizers": ["example.com/hold"]}}
    )
    deleting = await custom.delete_namespaced_custom_object(*W, "w")
    assert deleting["metadata"]["deletionTimestamp"]
    assert deleting["metadata"]["generation"] == created["metadata"]["generation"] + 1
    still = await custom.get_namespaced_custom_object(*W, "w")
    assert still["metadata"]["finalizers"] == ["example.com/hold"]
    again = await custom.delete_namespaced_custom_object(*W, "w")  # idempotent while terminating
    assert again["metadata"]["resourceVersion"] == still["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as info:  # no new finalizers on a terminating object
        await custom.patch_namespaced_custom_object(
            *W, "w", {"metadata": {"finalizers": ["example.com/hold", "x.io/new"]}}, **MERGE
        )
    assert info.value.status == 422
    await custom.patch_namespaced_custom_object(*W, "w", {"metadata": {"finalizers": None}}, **MERGE)
    with pytest.raises(ApiException) as gone:
        await custom.get_namespaced_custom_object(*W, "w")
    assert gone.value.status == 404


async def test_owner_reference_cascade(api_client: aclient.ApiClient) -> None:
    core = aclient.CoreV1Api(api_client)
    owner = await core.create_namespaced_config_map(
        "default", aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="owner"))
    )
    ref = aclient.V1OwnerReference(api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid)
    await core.create_namespaced_config_map(
        "default", aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="child", owner_references=[ref]))
    )
    child_ref = aclient.V1OwnerReference(
        api_version="v1",
        kind="ConfigMap",
        name="child",
        uid=(await core.read_namespaced_config_map("child", "default")).metadata.uid,
    )
    await core.create_namespaced_config_map(
        "default",
        aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="grandchild", owner_references=[child_ref])),
    )
    await core.delete_namespaced_config_map("owner", "default")
    assert not await _exists(core, "child")
    assert not await _exists(core, "grandchild")


async def test_cascade_waits_for_the_owner_finalizers(
    with_widgets: kubeapi.Server, api_client: aclient.ApiClient
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    core = aclient.CoreV1Api(api_client)
    owner = await custom.create_namespaced_custom_object(
        *W, {**widget("w"), "metadata": {"name": "w", "finalizers": ["example.com/hold"]}}
    )
    await core.create_namespaced_secret(
        "default",
        aclient.V1Secret(metadata=aclient.V1ObjectMeta(name="w-ca", owner_references=[_owner(owner)])),
    )
    await custom.delete_namespaced_custom_object(*W, "w")
    assert (await core.read_namespaced_secret("w-ca", "default")).metadata.name == "w-ca"
    await custom.patch_namespaced_custom_object(*W, "w", {"metadata": {"finalizers": []}}, **MERGE)
    with pytest.raises(ApiException) as info:
        await core.read_namespaced_secret("w-ca", "default")
    assert info.value.status == 404


async def test_dependent_with_another_live_owner_survives(api_client: aclient.ApiClient) -> None:
    core = aclient.CoreV1Api(api_client)
    a = await core.create_namespaced_config_map(
        "default", aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="a"))
    )
    b = await core.create_namespaced_config_map(
        "default", aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="b"))
    )
    refs = [
        aclient.V1OwnerReference(api_version="v1", kind="ConfigMap", name="a", uid=a.metadata.uid),
        aclient.V1OwnerReference(api_version="v1", kind="ConfigMap", name="b", uid=b.metadata.uid),
    ]
    await core.create_namespaced_config_map(
        "default", aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="c", owner_references=refs))
    )
    await core.delete_namespaced_config_map("a", "default")
    child = await core.read_namespaced_config_map("c", "default")
    assert [r.name for r in child.metadata.owner_references] == ["b"]


async def test_orphan_propagation_keeps_dependents(api_client: aclient.ApiClient) -> None:
    core = aclient.CoreV1Api(api_client)
    owner = await core.create_namespaced_config_map(
        "default", aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="o"))
    )
    ref = aclient.V1OwnerReference(api_version="v1", kind="ConfigMap", name="o", uid=owner.metadata.uid)
    await core.create_namespaced_config_map(
        "default", aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="d", owner_references=[ref]))
    )
    await core.delete_namespaced_config_map("o", "default", propagation_policy="Orphan")
    kept = await core.read_namespaced_config_map("d", "default")
    assert kept.metadata.owner_references is None


async def test_foreground_deletes_dependents_first(
    with_widgets: kubeapi.Server, api_client: aclient.ApiClient
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    core = aclient.CoreV1Api(api_client)
    owner = await custom.create_namespaced_custom_object(*W, widget("w"))
    await core.create_namespaced_config_map(
        "default",
        aclient.V1ConfigMap(
            metadata=aclient.V1ObjectMeta(
                name="dep", owner_references=[_owner(owner)], finalizers=["example.com/hold"]
            )
        ),
    )
    deleting = await custom.delete_namespaced_custom_object(*W, "w", propagation_policy="Foreground")
    assert deleting["metadata"]["finalizers"] == ["foregroundDeletion"]
    dep = await core.read_namespaced_config_map("dep", "default")
    assert dep.metadata.deletion_timestamp is not None
    await core.patch_namespaced_config_map("dep", "default", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as info:
        await custom.get_namespaced_custom_object(*W, "w")
    assert info.value.status == 404


async def test_object_whose_owner_is_absent_is_collected(api_client: aclient.ApiClient) -> None:
    core = aclient.CoreV1Api(api_client)
    ref = aclient.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="ghost", uid="00000000-dead-beef-0000-000000000000"
    )
    await core.create_namespaced_config_map(
        "default", aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="orphan", owner_references=[ref]))
    )
    assert not await _exists(core, "orphan")


async def test_namespace_deletion_terminates_then_removes(api_client: aclient.ApiClient) -> None:
    core = aclient.CoreV1Api(api_client)
    await core.create_namespace(aclient.V1Namespace(metadata=aclient.V1ObjectMeta(name="team")))
    await core.create_namespaced_config_map(
        "team", aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="plain"))
    )
    await core.create_namespaced_config_map(
        "team",
        aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="held", finalizers=["example.com/hold"])),
    )
    await core.delete_namespace("team")
    assert (await core.read_namespace("team")).status.phase == "Terminating"
    assert not await _exists(core, "plain", "team")
    with pytest.raises(ApiException) as info:
        await core.create_namespaced_config_map(
            "team", aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="new"))
        )
    assert info.value.status == 403
    await core.patch_namespaced_config_map("held", "team", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        await core.read_namespace("team")
    assert gone.value.status == 404


async def test_crd_deletion_removes_its_objects_and_resource(
    with_widgets: kubeapi.Server, api_client: aclient.ApiClient
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    await custom.create_namespaced_custom_object(*W, widget("w"))
    ext = aclient.ApiextensionsV1Api(api_client)
    await ext.delete_custom_resource_definition(WIDGET_CRD["metadata"]["name"])
    with pytest.raises(ApiException) as info:
        await custom.list_namespaced_custom_object(*W)
    assert info.value.status == 404
    crds = await ext.list_custom_resource_definition()
    assert crds.items == []


async def test_delete_preconditions(api_client: aclient.ApiClient) -> None:
    core = aclient.CoreV1Api(api_client)
    await core.create_namespaced_config_map(
        "default", aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="p"))
    )
    with pytest.raises(ApiException) as info:
        await core.delete_namespaced_config_map(
            "p", "default", body=aclient.V1DeleteOptions(preconditions=aclient.V1Preconditions(uid="other"))
        )
    assert info.value.status == 409
    status = await core.delete_namespaced_config_map("p", "default")
    assert status.status == "Success"  # built-ins answer a Status, custom resources the object


async def test_updating_a_terminating_namespace_does_not_remove_it(api_client: aclient.ApiClient) -> None:
    core = aclient.CoreV1Api(api_client)
    await core.create_namespace(aclient.V1Namespace(metadata=aclient.V1ObjectMeta(name="slow")))
    await core.create_namespaced_config_map(
        "slow",
        aclient.V1ConfigMap(metadata=aclient.V1ObjectMeta(name="held", finalizers=["example.com/hold"])),
    )
    await core.delete_namespace("slow")
    await core.patch_namespace("slow", {"metadata": {"labels": {"touched": "yes"}}})
    ns = await core.read_namespace("slow")
    assert ns.status.phase == "Terminating" and ns.spec.finalizers == ["kubernetes"]
