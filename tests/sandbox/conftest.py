"""Fixtures for the sandbox tests: the API server of a contract test (``backend``: the emulator or
the real kube-apiserver, see ``tests.sandbox.kubeapi.backends``), clients bound to it, a namespace
of the test's own, the real Kamaji CRD."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client as aclient

from sandbox import kubeapi
from tests import helpers
from tests.sandbox.kubeapi import backends

BACKENDS = ("emulator", "real")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "emulator_only(reason): a contract test run against the emulator only; the reason says why "
        "(the emulator's own internals, or a deviation of sandbox.kubeapi.DEVIATIONS, quoted)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that uses ``backend`` runs against both servers, unless ``emulator_only``."""
    if "backend" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("emulator_only")
    if marker is not None and not (marker.kwargs.get("reason") or marker.args):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: emulator_only needs a reason")
    if marker is None and "kube_server" in metafunc.fixturenames:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid} uses the emulator itself (kube_server): mark it emulator_only"
        )
    metafunc.parametrize("backend_name", ["emulator"] if marker else list(BACKENDS), indirect=True)


@pytest.fixture
def backend_name(request: pytest.FixtureRequest) -> str:
    """Which server ``backend`` is; the real cluster starts here, outside any event loop (the
    session fixture runs its own), at the first test that needs it."""
    if request.param == "real":
        request.getfixturevalue("real_cluster")
    return str(request.param)


@pytest.fixture
async def backend(
    backend_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[backends.Backend]:
    """The API server of this run of the test: ``emulator`` (a Server of its own) or ``real``
    (the session's real cluster)."""
    directory = tmp_path / "backend"
    directory.mkdir()
    if backend_name == "real":
        async with backends.real(directory, request.getfixturevalue("real_cluster")) as real:
            yield real
    else:
        async with backends.emulator(directory) as emulator:
            yield emulator


@pytest.fixture
def kube_server(backend: backends.Backend) -> kubeapi.Server:
    """The emulator itself, for ``emulator_only`` tests of what only it has."""
    assert backend.server is not None
    return backend.server


@pytest.fixture
async def namespace(backend: backends.Backend) -> str:
    """A fresh namespace of this test's own (on the shared real cluster, names never collide)."""
    return await backend.new_namespace()


@pytest.fixture
def kubeconfig(backend: backends.Backend, namespace: str, tmp_path: Path) -> Path:
    """The admin's kubeconfig, its context in ``namespace``."""
    return backend.kubeconfig(tmp_path / "kubeconfig", namespace=namespace)


@pytest.fixture
def api_client(backend: backends.Backend) -> aclient.ApiClient:
    return backend.api


@pytest.fixture(scope="session")
def kamaji_crd() -> dict[str, Any]:
    return helpers.kamaji_crd()


@pytest.fixture
async def with_kamaji(backend: backends.Backend, kamaji_crd: dict[str, Any]) -> backends.Backend:
    await backend.apply_crd(kamaji_crd)
    return backend


def _meta(name: str, namespace: str | None, **rest: Any) -> dict[str, Any]:
    """Metadata naming ``namespace`` only when given: else the request's (or kubectl's) namespace."""
    return {"name": name, **({"namespace": namespace} if namespace else {}), **rest}


def tcp(
    name: str, *, namespace: str | None = None, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A TenantControlPlane valid against the real Kamaji schema (``spec`` entries override),
    its CEL rules included: one of them reads ``networkProfile`` on every update of a LoadBalancer
    TenantControlPlane and fails to evaluate without it ("no such key"), so it is there."""
    body: dict[str, Any] = {
        "apiVersion": "kamaji.clastix.io/v1alpha1",
        "kind": "TenantControlPlane",
        "metadata": _meta(name, namespace, labels=labels or {}),
        "spec": {
            "controlPlane": {"deployment": {"replicas": 2}, "service": {"serviceType": "LoadBalancer"}},
            "kubernetes": {"version": "v1.30.0", "kubelet": {"cgroupfs": "systemd"}},
            "networkProfile": {},
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


def widget(name: str, *, namespace: str | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": _meta(name, namespace),
        "spec": dict(spec),
    }


@pytest.fixture
async def with_widgets(backend: backends.Backend) -> backends.Backend:
    await backend.apply_crd(WIDGET_CRD)
    return backend
