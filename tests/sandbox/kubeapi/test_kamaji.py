"""The real Kamaji TenantControlPlane CRD on each backend: validation, defaults, pruning, subresources."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio.client.exceptions import ApiException

from tests.sandbox.conftest import tcp
from tests.sandbox.kubeapi import backends


def _t(namespace: str) -> tuple[str, str, str, str]:
    return ("kamaji.clastix.io", "v1alpha1", namespace, "tenantcontrolplanes")


MERGE: dict[str, Any] = {"_content_type": "application/merge-patch+json"}
RULES_NOT_CHECKED = (
    "<nil>",
    "Invalid value: null: some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation",
)
"""What the real server adds when a failed schema check kept it from running the CEL rules."""


async def test_invalid_tcp_is_422_with_field_paths(
    with_kamaji: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    body = tcp("bad")
    del body["spec"]["kubernetes"]["kubelet"]
    body["spec"]["controlPlane"]["service"]["serviceType"] = "Foo"
    with pytest.raises(ApiException) as info:
        await aclient.CustomObjectsApi(api_client).create_namespaced_custom_object(*_t(namespace), body)
    assert info.value.status == 422
    status = json.loads(info.value.body or b"{}")
    assert status["reason"] == "Invalid"
    assert status["details"]["kind"] == "TenantControlPlane"
    assert status["details"]["group"] == "kamaji.clastix.io"
    causes = [(c["field"], c["message"]) for c in status["details"]["causes"]]
    assert set(causes[:2]) == {  # the schema's causes, in no fixed order
        ("spec.kubernetes.kubelet", "Required value"),
        (
            "spec.controlPlane.service.serviceType",
            'Unsupported value: "Foo": supported values: "ClusterIP", "NodePort", "LoadBalancer"',
        ),
    }
    assert causes[2:] == [RULES_NOT_CHECKED]
    assert status["message"].startswith('TenantControlPlane.kamaji.clastix.io "bad" is invalid: [')


async def test_type_errors_and_bounds(
    with_kamaji: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    body = tcp("bad")
    body["spec"]["controlPlane"]["deployment"]["replicas"] = "two"
    body["spec"]["kubernetes"]["kubelet"]["preferredAddressTypes"] = []
    with pytest.raises(ApiException) as info:
        await aclient.CustomObjectsApi(api_client).create_namespaced_custom_object(*_t(namespace), body)
    causes = [(c["field"], c["message"]) for c in json.loads(info.value.body or b"{}")["details"]["causes"]]
    replicas = "spec.controlPlane.deployment.replicas"
    assert set(causes[:2]) == {  # the schema's causes, in no fixed order
        (replicas, f'Invalid value: "string": {replicas} in body must be of type integer: "string"'),
        (
            "spec.kubernetes.kubelet.preferredAddressTypes",
            "Invalid value: 0: spec.kubernetes.kubelet.preferredAddressTypes in body should have "
            "at least 1 items",
        ),
    }
    # The scale subresource cannot read its replicas either; then the CEL rules were not run.
    assert causes[2:] == [
        (
            f".{replicas}",
            f"Invalid value: 0: .{replicas} accessor error: two is of the type string, expected int64",
        ),
        RULES_NOT_CHECKED,
    ]


async def test_defaults_and_pruning_follow_the_schema(
    with_kamaji: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    body = tcp("good")
    body["spec"]["notAField"] = {"x": 1}
    del body["spec"]["networkProfile"]
    created = await aclient.CustomObjectsApi(api_client).create_namespaced_custom_object(*_t(namespace), body)
    spec = created["spec"]
    assert "notAField" not in spec
    assert spec["kubernetes"]["kubelet"]["preferredAddressTypes"] == ["InternalIP", "ExternalIP", "Hostname"]
    assert "NamespaceLifecycle" in spec["kubernetes"]["admissionControllers"]
    assert spec["controlPlane"]["deployment"]["strategy"]["type"] == "RollingUpdate"
    # A default applies only inside an object that is present: no networkProfile was given.
    assert "networkProfile" not in spec


async def test_status_writes_do_not_change_spec_or_generation(
    with_kamaji: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    created = await custom.create_namespaced_custom_object(*_t(namespace), tcp("t"))
    status = {"kubernetesResources": {"version": {"status": "Ready", "version": "v1.30.0"}}}
    updated = await custom.patch_namespaced_custom_object_status(
        *_t(namespace), "t", {"spec": {"kubernetes": {"version": "v9.9.9"}}, "status": status}, **MERGE
    )
    assert updated["status"]["kubernetesResources"]["version"]["status"] == "Ready"
    assert updated["spec"] == created["spec"]
    assert updated["metadata"]["generation"] == created["metadata"]["generation"] == 1
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    bumped = await custom.patch_namespaced_custom_object(
        *_t(namespace), "t", {"spec": {"kubernetes": {"version": "v1.31.0"}}}, **MERGE
    )
    assert bumped["metadata"]["generation"] == 2
    assert bumped["status"] == updated["status"]


async def test_status_is_validated_too(
    with_kamaji: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    await custom.create_namespaced_custom_object(*_t(namespace), tcp("t"))
    with pytest.raises(ApiException) as info:
        await custom.patch_namespaced_custom_object_status(
            *_t(namespace), "t", {"status": {"kubernetesResources": {"version": {"status": 5}}}}, **MERGE
        )
    assert info.value.status == 422


async def test_scale_subresource_uses_the_crd_paths(
    with_kamaji: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    await custom.create_namespaced_custom_object(*_t(namespace), tcp("t"))
    where = {"name": "t", "namespace": namespace}  # required by the schema
    await custom.patch_namespaced_custom_object_status(
        *_t(namespace),
        "t",
        {"status": {"kubernetesResources": {"deployment": {"replicas": 2, "selector": "app=t", **where}}}},
        **MERGE,
    )
    scale = await custom.get_namespaced_custom_object_scale(*_t(namespace), "t")
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "app=t"}
    await custom.replace_namespaced_custom_object_scale(
        *_t(namespace), "t", {**scale, "spec": {"replicas": 0}}
    )
    obj = await custom.get_namespaced_custom_object(*_t(namespace), "t")
    assert obj["spec"]["controlPlane"]["deployment"]["replicas"] == 0


async def test_discovery_lists_the_tcp_resource(
    with_kamaji: backends.Backend, api_client: aclient.ApiClient, namespace: str
) -> None:
    resources = await aclient.CustomObjectsApi(api_client).get_api_resources("kamaji.clastix.io", "v1alpha1")
    by_name = {r.name: r for r in resources.resources}
    assert by_name["tenantcontrolplanes"].short_names == ["tcp"]
    assert by_name["tenantcontrolplanes"].categories == ["kamaji"]
    assert set(by_name) == {"tenantcontrolplanes", "tenantcontrolplanes/status", "tenantcontrolplanes/scale"}


@pytest.mark.parametrize(
    ("validation", "status", "warning"),
    [
        ("Strict", 400, None),
        ("Warn", 201, '299 - "unknown field \\"spec.bogus\\""'),
        ("", 201, '299 - "unknown field \\"spec.bogus\\""'),  # Warn is the server default
        ("Ignore", 201, None),
    ],
)
async def test_field_validation_of_unknown_fields(
    with_kamaji: backends.Backend, namespace: str, validation: str, status: int, warning: str | None
) -> None:
    body = tcp("t")
    body["spec"]["bogus"] = 1
    url = f"{with_kamaji.url}/apis/kamaji.clastix.io/v1alpha1/namespaces/{namespace}/tenantcontrolplanes"
    query = f"?fieldValidation={validation}" if validation else ""
    async with with_kamaji.http() as http, http.post(url + query, json=body) as resp:
        assert resp.status == status
        assert resp.headers.get("Warning") == warning
        answer = await resp.json()
    if status == 400:
        assert answer["message"] == (
            'TenantControlPlane in version "v1alpha1" cannot be handled as a TenantControlPlane: '
            'strict decoding error: unknown field "spec.bogus"'
        )
    else:
        assert "bogus" not in answer["spec"]
