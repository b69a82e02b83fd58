"""hub.api.cluster: the Cluster read in either served shape, and the version watched (tables)."""

from __future__ import annotations

from typing import Any

import pytest

from hub.api import cluster

NETWORK = {
    "apiServerPort": 7443,
    "services": {"cidrBlocks": ["10.96.0.0/16"]},
    "pods": {"cidrBlocks": ["10.244.0.0/16"]},
    "serviceDomain": "cluster.local",
}
V1BETA1 = {
    "apiVersion": "cluster.x-k8s.io/v1beta1",
    "kind": "Cluster",
    "metadata": {"name": "c1", "namespace": "default"},
    "spec": {
        "paused": True,
        "clusterNetwork": NETWORK,
        "controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443},
        "controlPlaneRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1",
                            "kind": "RemoteKamajiControlPlane", "name": "cp1", "namespace": "default"},
        "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
                              "kind": "FooCluster", "name": "foo", "namespace": "default"},
    },
}  # fmt: skip
V1BETA2 = {
    "apiVersion": "cluster.x-k8s.io/v1beta2",
    "kind": "Cluster",
    "metadata": {"name": "c1", "namespace": "default"},
    "spec": {
        "paused": True,
        "clusterNetwork": NETWORK,
        "controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443},
        "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "RemoteKamajiControlPlane",
                            "name": "cp1"},
        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FooCluster",
                              "name": "foo"},
    },
}  # fmt: skip


@pytest.mark.parametrize(
    ("obj", "version"), [(V1BETA1, "v1alpha1"), (V1BETA2, "")], ids=["v1beta1", "v1beta2"]
)
def test_both_shapes_read_the_same(obj: dict[str, Any], version: str) -> None:
    c = cluster.Cluster.parse(obj)
    assert c.paused
    assert c.spec.cluster_network is not None and c.spec.cluster_network.api_server_port == 7443
    assert c.spec.control_plane_endpoint == cluster.Endpoint(host="10.0.0.1", port=6443)
    cp, infra = c.spec.control_plane_ref, c.spec.infrastructure_ref
    assert cp is not None and infra is not None
    assert (cp.group, cp.kind, cp.name) == (
        "controlplane.cluster.x-k8s.io",
        "RemoteKamajiControlPlane",
        "cp1",
    )
    assert (infra.group, infra.version, infra.kind, infra.name) == (
        "infrastructure.cluster.x-k8s.io",
        version,
        "FooCluster",
        "foo",
    )


@pytest.mark.parametrize(
    ("spec", "annotations", "paused"),
    [
        ({}, {}, False),  # v1beta2 leaves the pointer out
        ({"paused": False}, {}, False),
        ({"paused": True}, {}, True),
        ({}, {"cluster.x-k8s.io/paused": ""}, True),
    ],
)
def test_paused(spec: dict[str, Any], annotations: dict[str, str], paused: bool) -> None:
    obj = {"metadata": {"name": "c1", "annotations": annotations}, "spec": spec}
    assert cluster.Cluster.parse(obj).paused is paused


@pytest.mark.parametrize(
    ("served", "watched"),
    [
        (("v1beta2", "v1beta1"), "v1beta2"),  # CAPI >= 1.11
        (("v1beta1", "v1beta2"), "v1beta2"),  # whichever is preferred
        (("v1beta1",), "v1beta1"),  # CAPI < 1.11
        (("v1beta1", "v1alpha4"), "v1beta1"),
        ((), "v1beta1"),  # CAPI not installed yet: the watch waits for the group
    ],
)
def test_served_version(served: tuple[str, ...], watched: str) -> None:
    assert cluster.served_version(served) == watched
    assert cluster.resource(watched).path("ns") == f"/apis/cluster.x-k8s.io/{watched}/namespaces/ns/clusters"
