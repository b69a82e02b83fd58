"""RKCP ``network`` (+ the Cluster's ``clusterNetwork``) → the TenantControlPlane's network fields.

Owns ``networkProfile`` and ``controlPlane``'s ``service``, ``ingress`` and ``gateway``, mapped
as the Kamaji CAPI provider maps its KamajiControlPlane (``controllers/
kamajicontrolplane_controller_tcp.go``), except where a comment says why not. ``hub.mapping.tcp``
assembles them into the TCP spec. Pure and deterministic.

- An Ingress's or a Gateway's host (without a port) is added to the certificate SANs.
- ``addons.coreDNS``, when set, replaces ``network.dnsServiceIPs`` with its own (even with none).
- Services and pods: the first CIDR block goes to the single-stack ``serviceCidr``/``podCidr``,
  which every Kamaji reads (the provider sends only the first, only there); with two blocks
  (dual stack) both also go to ``serviceCidrs``/``podCidrs``, which older Kamaji versions lack
  (their API server refuses an apply naming them).
"""

from __future__ import annotations

from typing import Any, Final

from hub.api import cluster as cluster_api
from hub.api import network as api_network
from hub.api import rkcp

GATEWAY_GROUP: Final = "gateway.networking.k8s.io"


def _host(hostname: str) -> str:
    """The host of ``host:port`` or ``[v6]:port``; anything else unchanged (as Go's
    ``net.SplitHostPort`` failing leaves it in the provider)."""
    if hostname.startswith("["):
        inside, sep, rest = hostname[1:].partition("]")
        return inside if sep and rest.startswith(":") and ":" not in rest[1:] else hostname
    host, sep, _ = hostname.partition(":")
    return host if sep and hostname.count(":") == 1 else hostname


def _metadata(labels: dict[str, str] | None, annotations: dict[str, str] | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return metadata


def service(network: api_network.Network) -> dict[str, Any]:
    """``controlPlane.service``."""
    out: dict[str, Any] = {"serviceType": network.service_type}
    metadata = _metadata(network.service_labels, network.service_annotations)
    if metadata:
        out["additionalMetadata"] = metadata
    if network.allocate_load_balancer_node_ports is not None:
        out["allocateLoadBalancerNodePorts"] = network.allocate_load_balancer_node_ports
    if network.additional_service_ports:
        out["additionalPorts"] = [
            {"protocol": "TCP", **p.to_dict()} for p in network.additional_service_ports
        ]
    return out


def ingress(network: api_network.Network) -> dict[str, Any] | None:
    """``controlPlane.ingress``, or None."""
    if network.ingress is None:
        return None
    wanted = network.ingress
    out: dict[str, Any] = {"hostname": wanted.hostname}
    if wanted.class_name:
        out["ingressClassName"] = wanted.class_name
    metadata = _metadata(wanted.extra_labels, wanted.extra_annotations)
    if metadata:
        out["additionalMetadata"] = metadata
    return out


def gateway(network: api_network.Network) -> dict[str, Any] | None:
    """``controlPlane.gateway``: one parent Gateway, the host without a port; or None."""
    if network.gateway is None:
        return None
    wanted = network.gateway
    # group and kind are what Kamaji's CRD would default them to: written out, the site stores
    # the list as sent, and the agent (which compares lists whole) sees no drift in it.
    parent: dict[str, Any] = {
        "group": GATEWAY_GROUP,
        "kind": "Gateway",
        "name": wanted.name,
        "namespace": wanted.namespace,
    }
    if wanted.section_name:
        parent["sectionName"] = wanted.section_name
    if wanted.port is not None:
        parent["port"] = wanted.port
    out: dict[str, Any] = {"hostname": _host(wanted.hostname), "parentRefs": [parent]}
    metadata = _metadata(wanted.extra_labels, wanted.extra_annotations)
    if metadata:
        out["additionalMetadata"] = metadata
    return out


def _cert_sans(network: api_network.Network) -> list[str]:
    sans = list(network.cert_sans)
    for exposed in (network.gateway, network.ingress):
        if exposed is not None:
            sans.append(_host(exposed.hostname))
    return sans


def _dns_service_ips(spec: rkcp.Spec) -> list[str]:
    core_dns = spec.addons.core_dns
    chosen = core_dns.dns_service_ips if core_dns is not None else spec.network.dns_service_ips
    return list(chosen or [])


def _cluster_network(profile: dict[str, Any], cluster_network: cluster_api.ClusterNetwork) -> None:
    if cluster_network.api_server_port:
        profile["port"] = cluster_network.api_server_port
    for ranges, single, every in (
        (cluster_network.services, "serviceCidr", "serviceCidrs"),
        (cluster_network.pods, "podCidr", "podCidrs"),
    ):
        if ranges is not None and ranges.cidr_blocks:
            profile[single] = ranges.cidr_blocks[0]
            # The list only for more than one block (dual stack): Kamaji before the list existed
            # refuses a field its CRD does not declare, and one block says the same in either.
            if len(ranges.cidr_blocks) > 1:
                profile[every] = list(ranges.cidr_blocks)
    if cluster_network.service_domain:
        profile["clusterDomain"] = cluster_network.service_domain


def network_profile(spec: rkcp.Spec, cluster: cluster_api.Cluster | None) -> dict[str, Any]:
    """``networkProfile``: the RKCP's addresses and SANs, the Cluster's port, CIDRs and domain."""
    network = spec.network
    profile: dict[str, Any] = {}
    if network.service_address:
        profile["address"] = network.service_address
    if network.advertise_address:
        profile["advertiseAddress"] = network.advertise_address
    sans = _cert_sans(network)
    if sans:
        profile["certSANs"] = sans
    dns = _dns_service_ips(spec)
    if dns:
        profile["dnsServiceIPs"] = dns
    balancer = network.load_balancer_config
    if balancer is not None and balancer.load_balancer_class:
        profile["loadBalancerClass"] = balancer.load_balancer_class
    if balancer is not None and balancer.load_balancer_source_ranges:
        profile["loadBalancerSourceRanges"] = list(balancer.load_balancer_source_ranges)
    cluster_network = cluster.spec.cluster_network if cluster is not None else None
    if cluster_network is not None:
        _cluster_network(profile, cluster_network)
    return profile
