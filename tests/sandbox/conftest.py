"""Fixtures for the sandbox tests: an emulated cluster per test, clients bound to it, the real Kamaji CRD."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as aclient

from sandbox import kubeapi
from tests import helpers


@pytest.fixture
async def kube_server() -> AsyncIterator[kubeapi.Server]:
    server = kubeapi.Server(name="test")
    await server.start(port=0)
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def kubeconfig(kube_server: kubeapi.Server, tmp_path: Path) -> Path:
    return kube_server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
async def api_client(kube_server: kubeapi.Server) -> AsyncIterator[aclient.ApiClient]:
    config = aclient.Configuration(host=kube_server.url)
    async with aclient.ApiClient(config) as api:
        yield api


@pytest.fixture(scope="session")
def kamaji_crd() -> dict[str, Any]:
    return helpers.kamaji_crd()


@pytest.fixture
async def with_kamaji(kube_server: kubeapi.Server, kamaji_crd: dict[str, Any]) -> kubeapi.Server:
    await kube_server.apply_crd(kamaji_crd)
    return kube_server


def tcp(
    name: str, *, namespace: str = "default", labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A TenantControlPlane valid against the real Kamaji schema (``spec`` entries override)."""
    body: dict[str, Any] = {
        "apiVersion": "kamaji.clastix.io/v1alpha1",
        "kind": "TenantControlPlane",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "controlPlane": {"deployment": {"replicas": 2}, "service": {"serviceType": "LoadBalancer"}},
            "kubernetes": {"version": "v1.30.0", "kubelet": {"cgroupfs": "systemd"}},
        },
    }
    body["spec"].update(spec)
    return body


#: A small CRD with status and scale subresources, for tests that need no Kamaji schema.
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.selector",
                    },
                },
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "replicas": {"type": "integer", "minimum": 0, "default": 1},
                                    "color": {"type": "string", "enum": ["red", "blue"]},
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "replicas": {"type": "integer"},
                                    "selector": {"type": "string"},
                                    "phase": {"type": "string"},
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


def widget(name: str, *, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": dict(spec),
    }


@pytest.fixture
async def with_widgets(kube_server: kubeapi.Server) -> kubeapi.Server:
    await kube_server.apply_crd(WIDGET_CRD)
    return kube_server
