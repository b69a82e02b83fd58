"""hub.api.rkcp: the models parse real objects (camelCase), accept Python names, and write the wire form."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pydantic
import pytest

from hub import conditions
from hub.api import cluster, components, machinery, rkcp
from hub.api import network as api_network

T0 = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)

STORED: dict[str, Any] = {
    "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha1",
    "kind": "RemoteKamajiControlPlane",
    "metadata": {
        "name": "cp1",
        "namespace": "default",
        "uid": "8d1c-uid",
        "generation": 3,
        "resourceVersion": "42",
        "creationTimestamp": "2026-11-30T12:00:00Z",
        "finalizers": ["kamaji-broker.io/finalizer"],
        "ownerReferences": [
            {
                "apiVersion": "cluster.x-k8s.io/v1beta1",
                "kind": "Cluster",
                "name": "cp1",
                "uid": "c-uid",
                "controller": True,
            }
        ],
        "managedFields": [{"manager": "kubectl"}],
    },
    "spec": {
        "site": "site-a",
        "tenantControlPlaneName": "tcp1",
        "version": "v1.31.0",
        "replicas": 2,
        "network": {"serviceType": "LoadBalancer", "certSANs": ["a.example.com"]},
        "addons": {"coreDNS": {"imageTag": "v1.11.1"}},
        "kubelet": {"preferredAddressTypes": ["InternalIP"], "cgroupfs": "systemd"},
        "kubeconfigSecretKey": "admin.conf",
        "deletionPolicy": "Delete",
        "siteUnavailableDeletionTimeout": "10m",
        "controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443},
    },
    "status": {
        "initialization": {"controlPlaneInitialized": True},
        "initialized": True,
        "ready": True,
        "externalManagedControlPlane": True,
        "readyReplicas": 2,
        "upToDateReplicas": 2,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "observedGeneration": 3,
                "lastTransitionTime": "2026-11-30T12:00:00Z",
                "reason": "AsExpected",
                "message": "",
            }
        ],
        "someNewerField": "ignored",
    },
}


def test_parses_a_stored_object() -> None:
    r = rkcp.RemoteKamajiControlPlane.parse(STORED)
    assert (r.metadata.name, r.metadata.generation, r.metadata.owner_references[0].kind) == (
        "cp1",
        3,
        "Cluster",
    )
    assert r.metadata.creation_timestamp == T0
    assert r.spec.tenant_control_plane_name == "tcp1"
    assert r.spec.network.cert_sans == ["a.example.com"]
    assert r.spec.addons.core_dns == components.CoreDNS(image_tag="v1.11.1")
    assert r.spec.control_plane_endpoint == cluster.Endpoint(host="10.0.0.1", port=6443)
    assert r.spec.site_unavailable_deletion_timeout_seconds == 600.0
    assert r.status.initialization.control_plane_initialized is True
    assert r.status.up_to_date_replicas == 2
    available = conditions.get(r.status.conditions, rkcp.AVAILABLE)
    assert available is not None and available.status == conditions.TRUE


def test_what_an_older_hub_wrote_of_the_site_is_dropped() -> None:
    """The site's heartbeat time and backlog are the Site's (``kubectl get site``); on every RKCP
    of the site they rewrote each status at rest (the time) and at each intent of a burst (the
    backlog)."""
    older = {
        **STORED,
        "status": {**STORED["status"], "site": {"lastHeartbeatTime": "2026-11-30T12:00:00Z", "backlog": 0}},
    }
    r = rkcp.RemoteKamajiControlPlane.parse(older)
    assert "site" not in r.to_dict()["status"]
    assert r == rkcp.RemoteKamajiControlPlane.parse(STORED)


def test_spec_and_status_round_trip_to_the_wire_form() -> None:
    r = rkcp.RemoteKamajiControlPlane.parse(STORED)
    wire = r.to_dict()
    assert wire["spec"] == {
        **STORED["spec"],
        "network": {**STORED["spec"]["network"], "serviceLabels": {}, "serviceAnnotations": {}},
    }
    status = {k: v for k, v in STORED["status"].items() if k != "someNewerField"}
    assert wire["status"] == {
        **status,
        "replicas": 0,
        "availableReplicas": 0,
        "updatedReplicas": 0,
        "unavailableReplicas": 0,
    }
    assert rkcp.RemoteKamajiControlPlane.parse(wire) == r


def test_python_names_work_too() -> None:
    spec = rkcp.Spec(
        site="site-a", version="1.31.0", tenant_control_plane_name="tcp1", data_store_name="etcd"
    )
    assert spec.to_dict() == {
        "site": "site-a",
        "tenantControlPlaneName": "tcp1",
        "version": "1.31.0",
        "replicas": 2,
        "dataStoreName": "etcd",
        "network": {
            "serviceType": "LoadBalancer",
            "certSANs": [],
            "serviceLabels": {},
            "serviceAnnotations": {},
        },
        "addons": {},
        "kubelet": {"preferredAddressTypes": ["InternalIP", "ExternalIP", "Hostname"], "cgroupfs": "systemd"},
        "kubeconfigSecretKey": "admin.conf",
        "deletionPolicy": "Delete",
    }


def test_defaults_are_not_shared_between_instances() -> None:
    a = rkcp.Spec(site="site-a", version="1.31.0")
    b = rkcp.Spec(site="site-a", version="1.31.0")
    a.kubelet.preferred_address_types.append("InternalDNS")
    a.network.cert_sans.append("x")
    assert b.kubelet.preferred_address_types == ["InternalIP", "ExternalIP", "Hostname"]
    assert b.network.cert_sans == []


def test_duplicate_address_types_are_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="must not repeat"):
        components.Kubelet.model_validate({"preferredAddressTypes": ["Hostname", "Hostname"]})


@pytest.mark.parametrize(
    ("meta", "spec", "paused"),
    [
        pytest.param({}, {}, False, id="running"),
        pytest.param({}, {"paused": True}, True, id="spec-paused"),
        pytest.param({"annotations": {"cluster.x-k8s.io/paused": ""}}, {}, True, id="annotation"),
    ],
)
def test_cluster_paused(meta: dict[str, Any], spec: dict[str, Any], paused: bool) -> None:
    c = cluster.Cluster.parse({"metadata": {"name": "c", **meta}, "spec": spec})
    assert c.paused is paused


def test_cluster_parses_capi_objects_with_an_unset_endpoint() -> None:
    c = cluster.Cluster.parse(
        {
            "metadata": {"name": "c"},
            "spec": {
                "controlPlaneEndpoint": {"host": "", "port": 0},
                "clusterNetwork": {"pods": {"cidrBlocks": ["10.0.0.0/16"]}},
                "topology": {"class": "ignored"},
            },
        }
    )
    assert c.spec.control_plane_endpoint is not None
    assert c.spec.control_plane_endpoint.is_set is False
    assert c.spec.cluster_network is not None
    assert c.spec.cluster_network.pods == cluster.NetworkRanges(cidr_blocks=["10.0.0.0/16"])


@pytest.mark.parametrize(
    ("value", "label1123", "label1035"),
    [
        ("cp1", True, True),
        ("1cp", True, False),
        ("cp.1", False, False),
        ("Cp1", False, False),
        ("a" * 63, True, True),
        ("a" * 64, False, False),
        ("", False, False),
    ],
)
def test_label_predicates(value: str, label1123: bool, label1035: bool) -> None:
    assert (machinery.dns1123_label(value), machinery.dns1035_label(value)) == (label1123, label1035)


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ("cp1.example.com", None),
        ("*.tenants.example.com", None),
        ("203.0.113.7", None),
        ("fd00::7", None),
        ("CP1.Example.com", None),
        ("cp1.example.com:6443", "network.certSANs[1] 'cp1.example.com:6443' is a host:port"),
        ("[fd00::7]:6443", "network.certSANs[1] '[fd00::7]:6443' is a host:port"),
        ("10.0.0.1:", "is a host:port"),
        ("https://cp1.example.com", "is a host:port"),
        ("a b", "network.certSANs[1] 'a b' is neither an IP address nor a DNS name"),
        ("-a.example.com", "is neither an IP address nor a DNS name"),
        ("a." * 127 + "a", "is neither an IP address nor a DNS name"),
    ],
)
def test_cert_sans_are_hosts_or_ips(entry: str, words: str | None) -> None:
    """The provider refuses a host:port SAN when it maps (clastix/kamaji#679); the RKCP refuses
    it, and anything else that is no host name or IP, when it is written."""
    network = {"certSANs": ["ok.example.com", entry]}
    if words is None:
        assert api_network.Network.model_validate(network).cert_sans == ["ok.example.com", entry]
        return
    with pytest.raises(pydantic.ValidationError) as info:
        api_network.Network.model_validate(network)
    assert words in str(info.value)
