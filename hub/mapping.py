"""RemoteKamajiControlPlane (+ its owner Cluster) → TenantControlPlane spec, and where it lives.

Owns the field mapping of DESIGN §2, which follows the reference provider
(clastix/cluster-api-control-plane-provider-kamaji): ``tcp_spec`` is the exact ``spec`` the hub
puts into a provision intent, and ``coordinates`` is the (site, namespace, name) it goes to.
Pure and deterministic: equal inputs give equal dicts, so the hub can compare the desired spec
with the one it last published and stay silent on a resync.

Mapping choices that are ours (the reference provider's Go structs decide them implicitly):

- ``networkProfile``, ``kubernetes.kubelet`` and ``controlPlane.service`` are always present, so
  Kamaji's CRD defaults (port 6443, CIDRs, cluster.local) apply inside them, and the kubelet
  settings the hub sends are the ones the site runs.
- Optional fields left empty (certSANs, service labels/annotations, dataStoreName) are left
  out rather than sent empty, as Go's ``omitempty`` would.
- ``admissionControllers`` is sent only when set: unset means Kamaji's default list, while an
  explicit ``[]`` asks for none.
- Addons are sent only when at least one is enabled; an enabled addon may be ``{}``.
- Only the first CIDR block of services and pods is used (Kamaji's single-stack fields), as the
  reference provider does.
"""

from __future__ import annotations

from typing import Any

from hub import api, apimachinery, cluster_api
from protocol.coordinates import Coordinates


class InvalidCoordinates(ValueError):
    """The RKCP's defaults give a name the site cannot use (the message says which field to set)."""


def coordinates(rkcp: api.RemoteKamajiControlPlane) -> Coordinates:
    """(site, namespace, name) of the TenantControlPlane at the site.

    The namespace defaults to the RKCP's own namespace, the name to the RKCP's name. An RKCP name
    may be a DNS-1123 subdomain (dots, a leading digit) that Kamaji refuses as a TCP name: then
    this raises InvalidCoordinates asking for ``spec.tenantControlPlaneName``.
    """
    spec = rkcp.spec
    namespace = spec.target_namespace or rkcp.metadata.namespace
    name = spec.tenant_control_plane_name or rkcp.metadata.name
    if not namespace or not apimachinery.dns1123_label(namespace):
        raise InvalidCoordinates(
            f"target namespace {namespace!r} is not a DNS-1123 label: set spec.targetNamespace"
        )
    if not apimachinery.dns1035_label(name):
        raise InvalidCoordinates(
            f"TenantControlPlane name {name!r} is not a DNS-1035 label (a letter, then lower-case letters, "
            "digits or '-', at most 63): set spec.tenantControlPlaneName"
        )
    return Coordinates(spec.site, namespace, name)


def kubernetes_version(version: str) -> str:
    """``1.31.0`` → ``v1.31.0`` (Kamaji wants the ``v``); ``v1.31.0`` unchanged."""
    return version if version.startswith("v") else f"v{version}"


def _service(network: api.Network) -> dict[str, Any]:
    service: dict[str, Any] = {"serviceType": network.service_type}
    metadata: dict[str, Any] = {}
    if network.service_labels:
        metadata["labels"] = dict(network.service_labels)
    if network.service_annotations:
        metadata["annotations"] = dict(network.service_annotations)
    if metadata:
        service["additionalMetadata"] = metadata
    return service


def _network_profile(network: api.Network, cluster: cluster_api.Cluster | None) -> dict[str, Any]:
    profile: dict[str, Any] = {}
    if network.service_address:
        profile["address"] = network.service_address
    if network.advertise_address:
        profile["advertiseAddress"] = network.advertise_address
    if network.cert_sans:
        profile["certSANs"] = list(network.cert_sans)
    cluster_network = cluster.spec.cluster_network if cluster is not None else None
    if cluster_network is not None:
        if cluster_network.api_server_port:
            profile["port"] = cluster_network.api_server_port
        if cluster_network.services is not None and cluster_network.services.cidr_blocks:
            profile["serviceCidr"] = cluster_network.services.cidr_blocks[0]
        if cluster_network.pods is not None and cluster_network.pods.cidr_blocks:
            profile["podCidr"] = cluster_network.pods.cidr_blocks[0]
        if cluster_network.service_domain:
            profile["clusterDomain"] = cluster_network.service_domain
    return profile


def _kubernetes(spec: api.Spec) -> dict[str, Any]:
    kubernetes: dict[str, Any] = {
        "version": kubernetes_version(spec.version),
        # Model defaults fill what the user left out: DESIGN's kubelet default, field by field.
        "kubelet": spec.kubelet.to_dict(),
    }
    if spec.admission_controllers is not None:
        kubernetes["admissionControllers"] = list(spec.admission_controllers)
    return kubernetes


def tcp_spec(rkcp: api.RemoteKamajiControlPlane, cluster: cluster_api.Cluster | None) -> dict[str, Any]:
    """The TenantControlPlane ``spec`` for ``rkcp``, with the network fields of its owner ``cluster``.

    ``cluster`` None (no owner Cluster yet) maps the RKCP alone; the hub waits for the owner before
    publishing, this only keeps the function total.
    """
    spec = rkcp.spec
    tcp: dict[str, Any] = {
        "controlPlane": {
            "deployment": {"replicas": spec.replicas},
            "service": _service(spec.network),
        },
        "kubernetes": _kubernetes(spec),
        "networkProfile": _network_profile(spec.network, cluster),
    }
    if spec.data_store_name:
        tcp["dataStore"] = spec.data_store_name
    addons = spec.addons.to_dict()
    if addons:
        tcp["addons"] = addons
    return tcp
