"""sandbox.kamaji.crds: installing CRD files through the REST API, as on any cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from common import kube
from sandbox import crds as crd_files
from sandbox import kubeapi
from sandbox.kamaji import crds


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Any]:
    server = kubeapi.Server(name="crds")
    await server.start(port=0)
    api_client = await kube.api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "crds.kubeconfig"))
    try:
        yield api_client
    finally:
        await api_client.close()
        await server.stop()


async def test_install_creates_then_replaces_and_serves(api: Any, tmp_path: Path) -> None:
    names = await crds.install(api, crd_files.ALL)
    assert names == ["tenantcontrolplanes.kamaji.clastix.io", "clusters.cluster.x-k8s.io"]
    extensions = client.ApiextensionsV1Api(api)
    first = await extensions.read_custom_resource_definition(names[0])

    # Installing an edited file again replaces the CRD in place (kubectl apply's outcome).
    edited = tmp_path / "tcp.yaml"
    edited.write_text(
        crd_files.TENANT_CONTROL_PLANE.read_text().replace("categories: [kamaji]", "categories: [kb]")
    )
    assert await crds.install(api, [edited]) == names[:1]
    second = await extensions.read_custom_resource_definition(names[0])
    assert second.metadata.uid == first.metadata.uid
    assert second.spec.names.categories == ["kb"]

    custom = client.CustomObjectsApi(api)
    for group, version, plural in (
        ("kamaji.clastix.io", "v1alpha1", "tenantcontrolplanes"),
        ("cluster.x-k8s.io", "v1beta1", "clusters"),
    ):
        listed = await custom.list_cluster_custom_object(group, version, plural)
        assert listed["items"] == []


async def test_the_compact_cluster_crd_accepts_what_the_hub_reads(api: Any) -> None:
    await crds.install(api, [crd_files.CLUSTER])
    await client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name="capi"))
    )
    cluster = {
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "metadata": {"name": "c1", "namespace": "capi"},
        "spec": {
            "paused": False,
            "clusterNetwork": {
                "apiServerPort": 6443,
                "services": {"cidrBlocks": ["10.96.0.0/12"]},
                "pods": {"cidrBlocks": ["10.244.0.0/16"]},
                "serviceDomain": "cluster.local",
            },
            "controlPlaneRef": {
                "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1",
                "kind": "RemoteKamajiControlPlane",
                "name": "c1",
                "namespace": "capi",
            },
            "infrastructureRef": {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "X",
                "name": "c1",
            },
            "topology": {"class": "kept-by-preserve-unknown-fields", "version": "v1.31.0"},
        },
    }
    custom = client.CustomObjectsApi(api)
    created = await custom.create_namespaced_custom_object(
        "cluster.x-k8s.io", "v1beta1", "capi", "clusters", cluster
    )
    assert created["spec"] == cluster["spec"]
    bad = {
        **cluster,
        "metadata": {"name": "c2", "namespace": "capi"},
        "spec": {"controlPlaneEndpoint": {"host": "h"}},
    }
    with pytest.raises(client.ApiException) as caught:
        await custom.create_namespaced_custom_object("cluster.x-k8s.io", "v1beta1", "capi", "clusters", bad)
    assert caught.value.status == 422
    assert "spec.controlPlaneEndpoint.port" in str(caught.value.body)
