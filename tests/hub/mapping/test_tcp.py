"""hub.mapping.tcp: RKCP (+ Cluster) → TCP spec tables, coordinates, and every spec against Kamaji's real CRD.

A wrong field path would not make Kamaji's API server answer 422: it would be pruned silently.
So each produced spec is created as a TenantControlPlane in an emulated site cluster carrying
the real CRD, and must come back with every field we set still there (and no 422).
CEL rules (x-kubernetes-validations) are not evaluated by the emulator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from common import kube as ckube
from common.kube import resources
from hub.api import cluster as cluster_api
from hub.api import rkcp as api
from hub.mapping import tcp
from protocol import messages
from sandbox import kubeapi
from tests import helpers
from tests.hub import parity

TCP = resources.TENANT_CONTROL_PLANE
DEFAULT_KUBELET = {"preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"], "cgroupfs": "systemd"}


def rkcp(name: str = "cp1", *, namespace: str = "default", **spec: Any) -> api.RemoteKamajiControlPlane:
    return api.RemoteKamajiControlPlane.parse(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"site": "site-a", "version": "v1.31.0", **spec},
        }
    )


def cluster(**network: Any) -> cluster_api.Cluster:
    return cluster_api.Cluster.parse(
        {
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "Cluster",
            "metadata": {"name": "cp1", "namespace": "default"},
            "spec": {"clusterNetwork": network} if network else {},
        }
    )


def expected(
    *,
    replicas: int = 2,
    service: dict[str, Any] | None = None,
    kubernetes: dict[str, Any] | None = None,
    network_profile: dict[str, Any] | None = None,
    **top: Any,
) -> dict[str, Any]:
    return {
        "controlPlane": {
            "deployment": {"replicas": replicas},
            "service": service or {"serviceType": "LoadBalancer"},
        },
        "kubernetes": kubernetes or {"version": "v1.31.0", "kubelet": DEFAULT_KUBELET},
        "networkProfile": network_profile or {},
        **top,
    }


CASES = [
    pytest.param(rkcp(), None, expected(), id="minimal-without-cluster"),
    pytest.param(rkcp(), cluster(), expected(), id="minimal-with-empty-cluster-network"),
    pytest.param(
        rkcp(version="1.30.2"),
        None,
        expected(kubernetes={"version": "v1.30.2", "kubelet": DEFAULT_KUBELET}),
        id="version-gets-a-v",
    ),
    pytest.param(rkcp(replicas=0), None, expected(replicas=0), id="zero-replicas"),
    pytest.param(rkcp(dataStoreName="etcd-a"), None, expected(dataStore="etcd-a"), id="data-store"),
    pytest.param(
        rkcp(
            network={
                "serviceType": "NodePort",
                "serviceAddress": "192.168.1.10",
                "advertiseAddress": "192.168.1.11",
                "certSANs": ["cp1.example.com", "192.168.1.10"],
                "serviceLabels": {"team": "a"},
                "serviceAnnotations": {"lb.example.com/pool": "blue"},
            }
        ),
        None,
        expected(
            service={
                "serviceType": "NodePort",
                "additionalMetadata": {
                    "labels": {"team": "a"},
                    "annotations": {"lb.example.com/pool": "blue"},
                },
            },
            network_profile={
                "address": "192.168.1.10",
                "advertiseAddress": "192.168.1.11",
                "certSANs": ["cp1.example.com", "192.168.1.10"],
            },
        ),
        id="network",
    ),
    pytest.param(
        rkcp(network={"serviceType": "ClusterIP", "serviceLabels": {"team": "a"}}),
        None,
        expected(service={"serviceType": "ClusterIP", "additionalMetadata": {"labels": {"team": "a"}}}),
        id="labels-without-annotations",
    ),
    pytest.param(
        rkcp(),
        cluster(
            apiServerPort=16443,
            services={"cidrBlocks": ["10.128.0.0/12", "fd00:10:96::/112"]},
            pods={"cidrBlocks": ["10.200.0.0/16"]},
            serviceDomain="tenant.local",
        ),
        expected(
            network_profile={
                "port": 16443,
                "serviceCidr": "10.128.0.0/12",
                "serviceCidrs": ["10.128.0.0/12", "fd00:10:96::/112"],
                "podCidr": "10.200.0.0/16",
                "clusterDomain": "tenant.local",
            }
        ),
        id="cluster-network-every-cidr-block-and-the-first-in-the-deprecated-fields-the-list-only-for-two",
    ),
    pytest.param(
        rkcp(),
        cluster(
            services={"cidrBlocks": ["fd00:10:96::/112", "10.96.0.0/16"]},
            pods={"cidrBlocks": ["fd00:10:244::/56", "10.244.0.0/16"]},
        ),
        expected(
            network_profile={
                "serviceCidr": "fd00:10:96::/112",
                "serviceCidrs": ["fd00:10:96::/112", "10.96.0.0/16"],
                "podCidr": "fd00:10:244::/56",
                "podCidrs": ["fd00:10:244::/56", "10.244.0.0/16"],
            }
        ),
        id="dual-stack-ipv6-first",
    ),
    pytest.param(
        rkcp(),
        cluster(services={"cidrBlocks": []}, pods={"cidrBlocks": []}),
        expected(),
        id="empty-cidr-blocks-are-left-to-kamaji",
    ),
    pytest.param(
        rkcp(kubelet={"cgroupfs": "cgroupfs"}),
        None,
        expected(
            kubernetes={
                "version": "v1.31.0",
                "kubelet": {
                    "preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"],
                    "cgroupfs": "cgroupfs",
                },
            }
        ),
        id="kubelet-partial-filled-from-defaults",
    ),
    pytest.param(
        rkcp(kubelet={"preferredAddressTypes": ["Hostname", "InternalDNS"]}),
        None,
        expected(
            kubernetes={
                "version": "v1.31.0",
                "kubelet": {"preferredAddressTypes": ["Hostname", "InternalDNS"], "cgroupfs": "systemd"},
            }
        ),
        id="kubelet-address-types",
    ),
    pytest.param(
        rkcp(admissionControllers=["NamespaceLifecycle", "PodSecurity"]),
        None,
        expected(
            kubernetes={
                "version": "v1.31.0",
                "kubelet": DEFAULT_KUBELET,
                "admissionControllers": ["NamespaceLifecycle", "PodSecurity"],
            }
        ),
        id="admission-controllers",
    ),
    pytest.param(
        rkcp(admissionControllers=[]),
        None,
        expected(kubernetes={"version": "v1.31.0", "kubelet": DEFAULT_KUBELET, "admissionControllers": []}),
        id="admission-controllers-explicitly-none",
    ),
    pytest.param(
        rkcp(
            addons={
                "coreDNS": {},
                "kubeProxy": {"imageRepository": "registry.example.com/kube-proxy", "imageTag": "v1.31.0"},
                "konnectivity": {"server": {"port": 8132}, "agent": {"mode": "Deployment", "replicas": 2}},
            }
        ),
        None,
        expected(
            addons={
                "coreDNS": {},
                "kubeProxy": {"imageRepository": "registry.example.com/kube-proxy", "imageTag": "v1.31.0"},
                "konnectivity": {"server": {"port": 8132}, "agent": {"mode": "Deployment", "replicas": 2}},
            }
        ),
        id="addons",
    ),
    pytest.param(rkcp(addons={}), None, expected(), id="no-addons-no-addons-key"),
    *(
        pytest.param(
            rkcp(**row.kcp), cluster(**row.cluster_network), parity.merged(expected(), row.tcp), id=row.id
        )
        for row in parity.ROWS
    ),
]


@pytest.mark.parametrize(("r", "c", "want"), CASES)
def test_tcp_spec(
    r: api.RemoteKamajiControlPlane, c: cluster_api.Cluster | None, want: dict[str, Any]
) -> None:
    assert tcp.tcp_spec(r, c) == want


def test_tcp_spec_does_not_alias_the_model() -> None:
    r = rkcp(network={"certSANs": ["a"], "serviceLabels": {"k": "v"}})
    spec = tcp.tcp_spec(r, None)
    spec["networkProfile"]["certSANs"].append("b")
    spec["controlPlane"]["service"]["additionalMetadata"]["labels"]["x"] = "y"
    assert tcp.tcp_spec(r, None) == tcp.tcp_spec(
        rkcp(network={"certSANs": ["a"], "serviceLabels": {"k": "v"}}), None
    )


def test_free_form_fields_are_copied_not_shared() -> None:
    # Containers, tolerations, resources are the model's objects: a caller changing the spec it
    # got must not change the RKCP it came from (the hub compares later mappings with it).
    r = rkcp(
        deployment={"tolerations": [{"key": "a", "operator": "Exists"}]},
        apiServer={"resources": {"limits": {"memory": "1Gi"}}},
    )
    spec = tcp.tcp_spec(r, None)
    spec["controlPlane"]["deployment"]["tolerations"][0]["key"] = "b"
    spec["controlPlane"]["deployment"]["resources"]["apiServer"]["limits"]["memory"] = "2Gi"
    assert tcp.tcp_spec(r, None)["controlPlane"]["deployment"] == {
        "replicas": 2,
        "tolerations": [{"key": "a", "operator": "Exists"}],
        "resources": {"apiServer": {"limits": {"memory": "1Gi"}}},
    }


def test_unknown_kubelet_fields_pass_through() -> None:
    spec = tcp.tcp_spec(
        rkcp(kubelet={"configurationJSONPatches": [{"op": "add", "path": "/x", "value": 1}]}), None
    )
    assert spec["kubernetes"]["kubelet"] == {
        **DEFAULT_KUBELET,
        "configurationJSONPatches": [{"op": "add", "path": "/x", "value": 1}],
    }


@pytest.mark.parametrize(
    ("version", "want"),
    [("1.31.0", "v1.31.0"), ("v1.31.0", "v1.31.0"), ("v1.9.10", "v1.9.10")],
)
def test_kubernetes_version(version: str, want: str) -> None:
    assert tcp.kubernetes_version(version) == want


# Coordinates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("r", "want"),
    [
        pytest.param(rkcp("cp1", namespace="team-a"), ("site-a", "team-a", "cp1"), id="defaults"),
        pytest.param(
            rkcp(
                "cp1",
                namespace="team-a",
                site="site-b",
                targetNamespace="tenants",
                tenantControlPlaneName="tcp-9",
            ),
            ("site-b", "tenants", "tcp-9"),
            id="overrides",
        ),
        pytest.param(
            rkcp("my.cluster", tenantControlPlaneName="my-cluster"),
            ("site-a", "default", "my-cluster"),
            id="dotted-name-with-override",
        ),
    ],
)
def test_coordinates(r: api.RemoteKamajiControlPlane, want: tuple[str, str, str]) -> None:
    assert tcp.coordinates(r) == want


@pytest.mark.parametrize(
    ("r", "field"),
    [
        pytest.param(rkcp("my.cluster"), "spec.tenantControlPlaneName", id="dotted-name"),
        pytest.param(rkcp("1st"), "spec.tenantControlPlaneName", id="leading-digit"),
        pytest.param(rkcp("cp1", namespace=""), "spec.targetNamespace", id="no-namespace"),
    ],
)
def test_coordinates_refuse_names_kamaji_refuses(r: api.RemoteKamajiControlPlane, field: str) -> None:
    with pytest.raises(tcp.InvalidCoordinates, match=field):
        tcp.coordinates(r)


# Against Kamaji's real CRD ------------------------------------------------------------------


@pytest.fixture(scope="module")
def kamaji_crd() -> dict[str, Any]:
    return helpers.kamaji_crd()


@pytest.fixture
async def site(kamaji_crd: dict[str, Any], tmp_path: Path) -> AsyncIterator[ckube.Kube]:
    server = kubeapi.Server(name="site", history=100)
    await server.start(port=0)
    server.apply_crd_now(kamaji_crd)
    api_client = await ckube.api_client_from_kubeconfig(server.write_kubeconfig(tmp_path / "kubeconfig"))
    yield ckube.Kube(api_client)
    await api_client.close()
    await server.stop()


def _missing(ours: Any, stored: Any, path: str = "spec") -> list[str]:
    """Paths of ``ours`` that ``stored`` lacks or holds differently (stored may add defaults)."""
    if isinstance(ours, dict) and isinstance(stored, dict):
        return [
            m
            for key, value in ours.items()
            for m in _missing(value, stored.get(key, _ABSENT), f"{path}.{key}")
        ]
    return [] if ours == stored else [f"{path}: sent {ours!r}, stored {stored!r}"]


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()


@pytest.mark.parametrize(("r", "c", "want"), CASES)
async def test_every_spec_is_a_valid_tenant_control_plane(
    site: ckube.Kube, r: api.RemoteKamajiControlPlane, c: cluster_api.Cluster | None, want: dict[str, Any]
) -> None:
    _, _, name = tcp.coordinates(r)
    spec = tcp.tcp_spec(r, c)
    body = {"apiVersion": TCP.api_version, "kind": TCP.kind, "metadata": {"name": name}, "spec": spec}
    created = await site.create(TCP, body, namespace="default")  # a 422 fails the test here
    assert _missing(spec, created["spec"]) == []
    # Kamaji's defaults fill what we leave out, inside the objects we always send.
    assert created["spec"]["networkProfile"]["port"] == spec["networkProfile"].get("port", 6443)
    assert "clusterDomain" in created["spec"]["networkProfile"]


async def test_a_wrong_field_path_is_caught_by_the_subset_check(site: ckube.Kube) -> None:
    # What the check above guards against: the API server prunes a misplaced field without a 422.
    spec = tcp.tcp_spec(rkcp(), None)
    spec["networkProfile"]["certSans"] = ["cp1.example.com"]
    body = {"apiVersion": TCP.api_version, "kind": TCP.kind, "metadata": {"name": "cp1"}, "spec": spec}
    created = await site.create(TCP, body, namespace="default")
    assert _missing(spec, created["spec"]) == [
        "spec.networkProfile.certSans: sent ['cp1.example.com'], stored <absent>"
    ]


# Metadata and hosts -------------------------------------------------------------------------


def test_tcp_metadata_propagates_labels_and_annotations_but_kubectls_last_applied_and_ours() -> None:
    r = api.RemoteKamajiControlPlane.parse(
        {
            "metadata": {
                "name": "cp1",
                "namespace": "default",
                "labels": {"cluster.x-k8s.io/cluster-name": "cp1", "team": "a", "kamaji-broker.io/x": "y"},
                "annotations": {
                    tcp.LAST_APPLIED: '{"kind":"RemoteKamajiControlPlane"}',
                    "note": "x",
                    "kamaji-broker.io/owner-identity": "id",
                    "a.kamaji-broker.io/z": "",
                },
            },
            "spec": {"site": "site-a", "version": "v1.31.0"},
        }
    )
    assert tcp.tcp_metadata(r) == {
        "labels": {"cluster.x-k8s.io/cluster-name": "cp1", "team": "a"},
        "annotations": {"note": "x"},
    }
    assert tcp.tcp_metadata(rkcp()) == {"labels": {}, "annotations": {}}


@pytest.mark.parametrize(
    ("hostname", "san"),
    [
        ("cp1.example.com", "cp1.example.com"),
        ("cp1.example.com:443", "cp1.example.com"),
        ("[fd00::1]:6443", "fd00::1"),
        ("fd00::1", "fd00::1"),
        ("[fd00::1]", "[fd00::1]"),
    ],
)
def test_an_ingress_host_becomes_a_san_without_its_port(hostname: str, san: str) -> None:
    # As Go's net.SplitHostPort in the provider: host of host:port, the whole name otherwise.
    spec = tcp.tcp_spec(rkcp(network={"ingress": {"hostname": hostname}}), None)
    assert spec["networkProfile"]["certSANs"] == [san]
    assert spec["controlPlane"]["ingress"]["hostname"] == hostname


def test_metadata_beyond_what_an_intent_carries_is_a_problem_naming_the_field() -> None:
    many = {f"k{i}": "v" for i in range(messages.MAX_METADATA + 1)}
    assert tcp.metadata_problem({"labels": {}, "annotations": {}}) == ""
    assert tcp.metadata_problem({"labels": many, "annotations": {}}).startswith(
        f"metadata.labels: {messages.MAX_METADATA + 1} entries"
    )
    assert "metadata.annotations" in tcp.metadata_problem({"labels": {}, "annotations": many})


_BUDGET = messages.MAX_INTENT_BODY
# {"a":"…"} is 8 bytes around its value; an empty dict 2: the rows sit exactly at the budget, or one over.


@pytest.mark.parametrize(
    ("spec", "labels", "annotations", "named"),
    [
        ({}, {}, {"a": "x" * (_BUDGET - 12)}, ""),
        ({}, {}, {"a": "x" * (_BUDGET - 11)}, "metadata.annotations"),
        ({"a": "x" * (_BUDGET - 12)}, {}, {}, ""),
        ({"a": "x" * (_BUDGET - 11)}, {}, {}, "spec"),
        # Each part fits alone, together they are one byte (or more) over: the largest is named.
        ({"a": "x" * 1000}, {"l": "v"}, {"a": "x" * (_BUDGET - 1024)}, "metadata.annotations"),
        ({"a": "x" * (_BUDGET // 2 + 1)}, {"l": "v"}, {"a": "x" * (_BUDGET // 2)}, "spec"),
    ],
)
def test_an_intent_larger_than_the_stream_carries_is_a_problem_naming_the_largest_part(
    spec: dict[str, Any], labels: dict[str, str], annotations: dict[str, str], named: str
) -> None:
    problem = tcp.metadata_problem({"labels": labels, "annotations": annotations}, spec)
    if not named:
        assert problem == ""
    else:
        assert problem.startswith(f"{named}: ") and f"more than the {_BUDGET} an intent" in problem
