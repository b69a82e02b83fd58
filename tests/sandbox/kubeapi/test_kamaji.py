"""The real Kamaji TenantControlPlane CRD in the emulator: validation, defaults, pruning, subresources."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio.client.exceptions import ApiException

from sandbox import kubeapi
from tests.sandbox.conftest import tcp

T = ("kamaji.clastix.io", "v1alpha1", "default", "tenantcontrolplanes")
MERGE: dict[str, Any] = {"_content_type": "application/merge-patch+json"}


async def test_invalid_tcp_is_422_with_field_paths(
    with_kamaji: kubeapi.Server, api_client: aclient.ApiClient
) -> None:
    body = tcp("bad")
    del body["spec"]["kubernetes"]["kubelet"]
    body["spec"]["controlPlane"]["service"]["serviceType"] = "Foo"
    with pytest.raises(ApiException) as info:
        await aclient.CustomObjectsApi(api_client).create_namespaced_custom_object(*T, body)
    assert info.value.status == 422
    status = json.loads(info.value.body or b"{}")
    assert status["reason"] == "Invalid"
    assert status["details"]["kind"] == "TenantControlPlane"
    assert status["details"]["group"] == "kamaji.clastix.io"
    causes = {(c["field"], c["message"]) for c in status["details"]["causes"]}
    assert causes == {
        ("spec.kubernetes.kubelet", "Required value"),
        (
            "spec.controlPlane.service.serviceType",
            'Unsupported value: "Foo": supported values: "ClusterIP", "NodePort", "LoadBalancer"',
        ),
    }
    assert status["message"].startswith('TenantControlPlane.kamaji.clastix.io "bad" is invalid: [')


async def test_type_errors_and_bounds(with_kamaji: kubeapi.Server, api_client: aclient.ApiClient) -> None:
    body = tcp("bad")
    body["spec"]["controlPlane"]["deployment"]["replicas"] = "two"
    body["spec"]["kubernetes"]["kubelet"]["preferredAddressTypes"] = []
    with pytest.raises(ApiException) as info:
        await aclient.CustomObjectsApi(api_client).create_namespaced_custom_object(*T, body)
    causes = json.loads(info.value.body or b"{}")["details"]["causes"]
    assert [(c["field"], c["reason"]) for c in causes] == [
        ("spec.controlPlane.deployment.replicas", "FieldValueTypeInvalid"),
        ("spec.kubernetes.kubelet.preferredAddressTypes", "FieldValueInvalid"),
    ]
    assert "must be of type integer" in causes[0]["message"]


async def test_defaults_and_pruning_follow_the_schema(
    with_kamaji: kubeapi.Server, api_client: aclient.ApiClient
) -> None:
    body = tcp("good")
    body["spec"]["notAField"] = {"x": 1}
    created = await aclient.CustomObjectsApi(api_client).create_namespaced_custom_object(*T, body)
    spec = created["spec"]
    assert "notAField" not in spec
    assert spec["kubernetes"]["kubelet"]["preferredAddressTypes"] == ["InternalIP", "ExternalIP", "Hostname"]
    assert "NamespaceLifecycle" in spec["kubernetes"]["admissionControllers"]
    assert spec["controlPlane"]["deployment"]["strategy"]["type"] == "RollingUpdate"
    # A default applies only inside an object that is present: no networkProfile was given.
    assert "networkProfile" not in spec


async def test_status_writes_do_not_change_spec_or_generation(
    with_kamaji: kubeapi.Server, api_client: aclient.ApiClient
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    created = await custom.create_namespaced_custom_object(*T, tcp("t"))
    status = {"kubernetesResources": {"version": {"status": "Ready", "version": "v1.30.0"}}}
    updated = await custom.patch_namespaced_custom_object_status(
        *T, "t", {"spec": {"kubernetes": {"version": "v9.9.9"}}, "status": status}, **MERGE
    )
    assert updated["status"]["kubernetesResources"]["version"]["status"] == "Ready"
    assert updated["spec"] == created["spec"]
    assert updated["metadata"]["generation"] == created["metadata"]["generation"] == 1
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    bumped = await custom.patch_namespaced_custom_object(
        *T, "t", {"spec": {"kubernetes": {"version": "v1.31.0"}}}, **MERGE
    )
    assert bumped["metadata"]["generation"] == 2
    assert bumped["status"] == updated["status"]


async def test_status_is_validated_too(with_kamaji: kubeapi.Server, api_client: aclient.ApiClient) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    await custom.create_namespaced_custom_object(*T, tcp("t"))
    with pytest.raises(ApiException) as info:
        await custom.patch_namespaced_custom_object_status(
            *T, "t", {"status": {"kubernetesResources": {"version": {"status": 5}}}}, **MERGE
        )
    assert info.value.status == 422


async def test_scale_subresource_uses_the_crd_paths(
    with_kamaji: kubeapi.Server, api_client: aclient.ApiClient
) -> None:
    custom = aclient.CustomObjectsApi(api_client)
    await custom.create_namespaced_custom_object(*T, tcp("t"))
    where = {"name": "t", "namespace": "default"}  # required by the schema
    await custom.patch_namespaced_custom_object_status(
        *T,
        "t",
        {"status": {"kubernetesResources": {"deployment": {"replicas": 2, "selector": "app=t", **where}}}},
        **MERGE,
    )
    scale = await custom.get_namespaced_custom_object_scale(*T, "t")
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "app=t"}
    await custom.replace_namespaced_custom_object_scale(*T, "t", {**scale, "spec": {"replicas": 0}})
    obj = await custom.get_namespaced_custom_object(*T, "t")
    assert obj["spec"]["controlPlane"]["deployment"]["replicas"] == 0


async def test_discovery_lists_the_tcp_resource(
    with_kamaji: kubeapi.Server, api_client: aclient.ApiClient
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
    with_kamaji: kubeapi.Server, validation: str, status: int, warning: str | None
) -> None:
    body = tcp("t")
    body["spec"]["bogus"] = 1
    url = f"{with_kamaji.url}/apis/kamaji.clastix.io/v1alpha1/namespaces/default/tenantcontrolplanes"
    query = f"?fieldValidation={validation}" if validation else ""
    async with aiohttp.ClientSession() as http, http.post(url + query, json=body) as resp:
        assert resp.status == status
        assert resp.headers.get("Warning") == warning
        answer = await resp.json()
    if status == 400:
        assert answer["message"] == 'strict decoding error: unknown field "spec.bogus"'
    else:
        assert "bogus" not in answer["spec"]
