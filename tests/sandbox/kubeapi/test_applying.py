"""Server-side apply and managedFields on each backend (the real server is the ground truth):
what a manager's Apply owns, what it removes, what another manager's Update takes, conflicts
and force, on Kamaji's real TenantControlPlane CRD."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from common import kube as ckube
from common.kube import errors, resources
from tests.sandbox.conftest import tcp
from tests.sandbox.kubeapi import backends

TCP = resources.TENANT_CONTROL_PLANE
AGENT = "kamaji-broker-agent"


def config(namespace: str, **spec: Any) -> dict[str, Any]:
    body = tcp("cp", namespace=namespace, labels={"site": "a"}, **spec)
    body["spec"]["addons"] = {"coreDNS": {}}
    body["spec"]["networkProfile"] = {"certSANs": ["a.example.com"], "address": "10.0.0.9"}
    body["spec"]["controlPlane"]["service"]["additionalMetadata"] = {"labels": {"tier": "gold"}}
    return body


def owned(obj: dict[str, Any], manager: str, operation: str = "Apply") -> dict[str, Any] | None:
    for entry in obj["metadata"].get("managedFields") or ():
        if (entry["manager"], entry["operation"], entry.get("subresource", "")) == (manager, operation, ""):
            fields: dict[str, Any] = entry["fieldsV1"]
            return fields
    return None


@pytest.fixture
def kube(with_kamaji: backends.Backend) -> ckube.Kube:
    return ckube.Kube(with_kamaji.api)  # the backend closes its ApiClient


async def update(kube: ckube.Kube, namespace: str, patch: dict[str, Any], manager: str) -> dict[str, Any]:
    """A merge patch as ``manager`` (kubectl patch records itself as kubectl-patch)."""
    found: dict[str, Any] = await kube._call(
        "PATCH",
        TCP.path(namespace, "cp"),
        query=[("fieldManager", manager)],
        body=patch,
        content_type=ckube.MERGE_PATCH,
    )
    return found


async def test_an_apply_owns_the_leaves_it_sets(kube: ckube.Kube, namespace: str) -> None:
    obj = await kube.apply(TCP, config(namespace), manager=AGENT, namespace=namespace)
    assert [(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]] == [(AGENT, "Apply")]
    assert owned(obj, AGENT) == {
        "f:metadata": {"f:labels": {"f:site": {}}},
        "f:spec": {
            "f:addons": {"f:coreDNS": {}},
            "f:controlPlane": {
                "f:deployment": {"f:replicas": {}},
                "f:service": {"f:additionalMetadata": {"f:labels": {"f:tier": {}}}, "f:serviceType": {}},
            },
            "f:kubernetes": {"f:kubelet": {"f:cgroupfs": {}}, "f:version": {}},
            "f:networkProfile": {"f:address": {}, "f:certSANs": {}},
        },
    }


async def test_a_field_no_longer_applied_is_removed_with_the_maps_it_leaves_empty(
    kube: ckube.Kube, namespace: str
) -> None:
    await kube.apply(TCP, config(namespace), manager=AGENT, namespace=namespace)
    less = config(namespace)
    del (
        less["spec"]["networkProfile"]["certSANs"],
        less["spec"]["controlPlane"]["service"]["additionalMetadata"],
    )
    del less["metadata"]["labels"]
    obj = await kube.apply(TCP, less, manager=AGENT, namespace=namespace)
    assert "certSANs" not in obj["spec"]["networkProfile"]
    assert obj["spec"]["controlPlane"]["service"] == {"serviceType": "LoadBalancer"}
    assert "labels" not in obj["metadata"]
    # What the CRD's defaulting set stays: nobody owns it, nobody applied it.
    assert obj["spec"]["networkProfile"]["port"] == 6443


async def test_an_update_takes_the_fields_it_changes_and_a_forced_apply_takes_them_back(
    kube: ckube.Kube, namespace: str
) -> None:
    body = config(namespace)
    await kube.apply(TCP, body, manager=AGENT, namespace=namespace)
    edit = {
        "spec": {
            "controlPlane": {"deployment": {"replicas": 3}},
            "networkProfile": {"dnsServiceIPs": ["10.96.0.10"]},
        }
    }
    obj = await update(kube, namespace, edit, "kubectl-patch")
    assert owned(obj, "kubectl-patch", "Update") == {
        "f:spec": {
            "f:controlPlane": {"f:deployment": {"f:replicas": {}}},
            "f:networkProfile": {"f:dnsServiceIPs": {}},
        }
    }
    assert "f:deployment" not in (owned(obj, AGENT) or {})["f:spec"]["f:controlPlane"]

    with pytest.raises(errors.Conflict) as info:
        await kube.apply(TCP, body, manager=AGENT, namespace=namespace, force=False)
    assert info.value.message == (
        'Apply failed with 1 conflict: conflict with "kubectl-patch" using kamaji.clastix.io/v1alpha1: '
        ".spec.controlPlane.deployment.replicas"
    )

    obj = await kube.apply(TCP, body, manager=AGENT, namespace=namespace)
    assert obj["spec"]["controlPlane"]["deployment"]["replicas"] == 2
    # The field beside ours that the other manager set stays, and stays theirs.
    assert obj["spec"]["networkProfile"]["dnsServiceIPs"] == ["10.96.0.10"]
    assert owned(obj, "kubectl-patch", "Update") == {"f:spec": {"f:networkProfile": {"f:dnsServiceIPs": {}}}}


async def test_a_field_another_manager_owns_too_stays_when_no_longer_applied(
    kube: ckube.Kube, namespace: str
) -> None:
    body = config(namespace)
    await kube.apply(TCP, body, manager=AGENT, namespace=namespace)
    other = copy.deepcopy(body)
    other["spec"] = {"networkProfile": {"certSANs": ["a.example.com"]}}
    del other["metadata"]["labels"]
    await kube.apply(TCP, other, manager="site-admin", namespace=namespace, force=False)
    less = copy.deepcopy(body)
    del less["spec"]["networkProfile"]["certSANs"]
    obj = await kube.apply(TCP, less, manager=AGENT, namespace=namespace)
    assert obj["spec"]["networkProfile"]["certSANs"] == ["a.example.com"]
    assert "f:certSANs" not in (owned(obj, AGENT) or {})["f:spec"]["f:networkProfile"]


async def test_two_conflicts_are_listed_by_manager(kube: ckube.Kube, namespace: str) -> None:
    body = config(namespace)
    await kube.apply(TCP, body, manager=AGENT, namespace=namespace)
    await update(kube, namespace, {"spec": {"controlPlane": {"deployment": {"replicas": 3}}}}, "kubectl-edit")
    theirs = copy.deepcopy(body)
    theirs["spec"]["kubernetes"]["version"] = "v1.31.0"
    with pytest.raises(errors.Conflict) as info:
        await kube.apply(TCP, theirs, manager="other", namespace=namespace, force=False)
    assert info.value.message == (
        f'Apply failed with 2 conflicts: conflicts with "{AGENT}":\n- .spec.kubernetes.version\n'
        'conflicts with "kubectl-edit" using kamaji.clastix.io/v1alpha1:\n'
        "- .spec.controlPlane.deployment.replicas"
    )


async def test_an_apply_needs_a_field_manager(kube: ckube.Kube, namespace: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        await kube._call(
            "PATCH", TCP.path(namespace, "cp"), body=config(namespace), content_type=ckube.APPLY_PATCH
        )
    assert info.value.message == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch'
    )


async def test_an_apply_naming_a_uid_applies_only_to_that_object(kube: ckube.Kube, namespace: str) -> None:
    # The agent's apply to a TCP it observed names that TCP's uid: it never takes over another
    # object of the same name, created after the one it saw was deleted, nor creates one.
    first = await kube.apply(TCP, config(namespace), manager=AGENT, namespace=namespace)
    body = config(namespace)
    body["metadata"]["uid"] = first["metadata"]["uid"]
    again = await kube.apply(TCP, body, manager=AGENT, namespace=namespace)
    assert again["metadata"]["uid"] == first["metadata"]["uid"]
    await kube.delete(TCP, "cp", namespace=namespace)
    with pytest.raises(errors.Conflict) as absent:
        await kube.apply(TCP, body, manager=AGENT, namespace=namespace)
    assert f"uid mismatch: the provided object specified uid {first['metadata']['uid']}" in str(absent.value)
    assert await kube.get_or_none(TCP, "cp", namespace=namespace) is None
    second = await kube.create(TCP, tcp("cp", namespace=namespace), namespace=namespace)
    with pytest.raises(errors.Invalid) as other:
        await kube.apply(TCP, body, manager=AGENT, namespace=namespace)
    assert "metadata.uid" in str(other.value) and "field is immutable" in str(other.value)
    found = await kube.get(TCP, "cp", namespace=namespace)
    assert found["metadata"]["uid"] == second["metadata"]["uid"] and owned(found, AGENT) is None
    with pytest.raises(errors.Invalid):  # the same for a merge patch
        await update(kube, namespace, {"metadata": {"uid": first["metadata"]["uid"]}}, "kubectl-patch")


async def test_managed_fields_a_patch_sets_are_taken_as_given(kube: ckube.Kube, namespace: str) -> None:
    # What handing an older client's fields over to an Apply relies on (client-go's csaupgrade):
    # a patch that sets managedFields (and nothing else) stores them as given, and the next
    # apply owns, and removes, what they give its manager.
    body = config(namespace)
    created: dict[str, Any] = await kube._call(
        "POST", TCP.path(namespace), query=[("fieldManager", "older")], body=body
    )
    [entry] = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("older", "Update")
    handed = {**entry, "manager": AGENT, "operation": "Apply"}
    meta = created["metadata"]
    patch = {
        "metadata": {
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "managedFields": [handed],
        }
    }
    patched = await kube.patch(TCP, "cp", patch, namespace=namespace)
    assert [(e["manager"], e["operation"]) for e in patched["metadata"]["managedFields"]] == [
        (AGENT, "Apply")
    ]
    with pytest.raises(errors.Conflict):  # the resourceVersion read is a precondition
        await kube.patch(TCP, "cp", patch, namespace=namespace)
    smaller = config(namespace)
    del smaller["spec"]["networkProfile"]["certSANs"]
    applied = await kube.apply(TCP, smaller, manager=AGENT, namespace=namespace)
    assert "certSANs" not in applied["spec"]["networkProfile"]
    assert applied["spec"]["networkProfile"]["address"] == "10.0.0.9"
    assert [(e["manager"], e["operation"]) for e in applied["metadata"]["managedFields"]] == [
        (AGENT, "Apply")
    ]


async def test_a_stale_resource_version_is_answered_before_another_uid(
    kube: ckube.Kube, namespace: str
) -> None:
    # The precondition first (409), then validation (the uid is immutable: 422).
    live = await kube.apply(TCP, config(namespace), manager=AGENT, namespace=namespace)
    stale = {"metadata": {"uid": "not-its-uid", "resourceVersion": "1"}}
    with pytest.raises(errors.Conflict):
        await kube.patch(TCP, "cp", stale, namespace=namespace)
    fresh = {"metadata": {"uid": "not-its-uid", "resourceVersion": live["metadata"]["resourceVersion"]}}
    with pytest.raises(errors.Invalid):
        await kube.patch(TCP, "cp", fresh, namespace=namespace)
    replaced = [{"op": "replace", "path": "/metadata/uid", "value": "not-its-uid"}]
    with pytest.raises(errors.Invalid):
        await kube.patch(TCP, "cp", replaced, namespace=namespace, content_type=ckube.JSON_PATCH)


async def test_managed_fields_given_with_an_unreadable_entry_are_ignored(
    kube: ckube.Kube, namespace: str
) -> None:
    live = await kube.apply(TCP, config(namespace), manager=AGENT, namespace=namespace)
    before = [(e["manager"], e["operation"]) for e in live["metadata"]["managedFields"]]
    unreadable = {"manager": "someone", "operation": "Borrow", "fieldsType": "FieldsV1", "fieldsV1": {}}
    patch = {"metadata": {"managedFields": [*live["metadata"]["managedFields"], unreadable]}}
    patched = await kube.patch(TCP, "cp", patch, namespace=namespace)
    assert [(e["manager"], e["operation"]) for e in patched["metadata"]["managedFields"]] == before
