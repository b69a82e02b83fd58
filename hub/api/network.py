"""How an RKCP's tenant API server is exposed: ``spec.network`` (Service, Ingress, Gateway, load balancer).

Owns the pydantic models of the RemoteKamajiControlPlane's ``network``, in the Kamaji CAPI
provider's field names and shapes (KamajiControlPlane ``spec.network``), so a spec moves over
unchanged; and the provider's CEL rules on it, which the CRD carries as
``x-kubernetes-validations``. ``hub.api.rkcp`` puts it into the spec; ``hub.mapping.network`` turns
it into the TenantControlPlane's ``networkProfile`` and ``controlPlane`` service, ingress and
gateway. Pure: talks to nothing.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Final, Literal

import pydantic

from hub.api import machinery

ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]


NonEmpty = Annotated[str, pydantic.Field(min_length=1)]

# The provider's rules on its NetworkComponent, for the same reasons: Kamaji refuses a load
# balancer setting on another Service type, and a loadBalancerClass set or unset later.
NETWORK_RULES: Final[list[pydantic.JsonValue]] = [
    machinery.rule(
        "!has(self.loadBalancerConfig) || !has(self.loadBalancerConfig.loadBalancerSourceRanges)"
        " || size(self.loadBalancerConfig.loadBalancerSourceRanges) == 0"
        " || self.serviceType == 'LoadBalancer'",
        "loadBalancerSourceRanges are supported only with the LoadBalancer service type",
    ),
    machinery.rule(
        "!has(self.loadBalancerConfig) || !has(self.loadBalancerConfig.loadBalancerClass)"
        " || self.serviceType == 'LoadBalancer'",
        "loadBalancerClass is supported only with the LoadBalancer service type",
    ),
    machinery.rule(
        "!has(self.allocateLoadBalancerNodePorts) || self.serviceType == 'LoadBalancer'",
        "allocateLoadBalancerNodePorts is supported only with the LoadBalancer service type",
    ),
    machinery.rule(
        "self.serviceType != 'LoadBalancer' || oldSelf.serviceType != 'LoadBalancer'"
        " || (has(self.loadBalancerConfig) && has(self.loadBalancerConfig.loadBalancerClass))"
        " == (has(oldSelf.loadBalancerConfig) && has(oldSelf.loadBalancerConfig.loadBalancerClass))",
        "loadBalancerClass cannot be set or unset at runtime",
    ),
    # Kamaji's own rule on controlPlane: a TCP is exposed by an Ingress or a Gateway, not both.
    machinery.rule("!(has(self.ingress) && has(self.gateway))", "ingress and gateway are mutually exclusive"),
]


# A certificate SAN is a DNS name (a leading "*." allowed) or an IP address. The API server
# checks the pattern; the model says which entry and why (a host:port, which Kamaji would put
# into the certificate as it is: clastix/kamaji#679, refused by the provider too).
_DNS: Final = r"(\*\.)?[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*"
_IPV6: Final = r"[0-9A-Fa-f.]*:[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*"
SAN_PATTERN: Final = f"^({_DNS}|{_IPV6})$"
_SAN: Final = re.compile(_DNS)
CertSAN = Annotated[str, pydantic.Field(json_schema_extra={"pattern": SAN_PATTERN, "maxLength": 253})]


def _host_port(entry: str) -> bool:
    """Whether Go's ``net.SplitHostPort`` takes ``entry`` apart (the provider's test)."""
    if entry.startswith("["):
        _, sep, rest = entry[1:].partition("]")
        return bool(sep) and rest.startswith(":") and ":" not in rest[1:]
    return entry.count(":") == 1


def san_problem(entry: str) -> str | None:
    """Why ``entry`` cannot be a certificate SAN, or None."""
    try:
        ipaddress.ip_address(entry)
        return None
    except ValueError:
        pass
    if _host_port(entry):
        return "is a host:port: a SAN is a host name or an IP address, without a port"
    if len(entry) > 253 or not _SAN.fullmatch(entry):
        return "is neither an IP address nor a DNS name (letters, digits, '-' and '.', maybe after '*.')"
    return None


class AdditionalPort(machinery.Model):
    """One more port on the TCP's Service (Kamaji ``controlPlane.service.additionalPorts``):
    a sidecar of the API server (a CSR signer, ...) reached through the same Service."""

    name: Annotated[
        str, pydantic.Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    ]
    """A DNS label, unique, neither ``kube-apiserver`` nor ``konnectivity-server`` (Kamaji's)."""
    port: Annotated[machinery.Int32, pydantic.Field(ge=1, le=65535)]
    """The Service's port."""
    target_port: Annotated[int | str, pydantic.Field(json_schema_extra={"x-kubernetes-int-or-string": True})]
    """The pods' port: a number or a container port's name."""
    protocol: Literal["TCP", "UDP", "SCTP"] | None = None
    """The IP protocol; unset: TCP (written out to the TCP, as Kamaji's CRD would default it)."""
    app_protocol: str | None = None
    """Application protocol hint of the port."""


class Ingress(machinery.Model):
    """An Ingress in front of the tenant API server (Kamaji ``controlPlane.ingress``)."""

    class_name: str | None = None
    """Ingress class of the Ingress object."""
    hostname: NonEmpty
    """Host of the Ingress (``host`` or ``host:port``); its host is added to the certificate SANs."""
    extra_labels: dict[str, str] | None = None
    """Labels added to the Ingress."""
    extra_annotations: dict[str, str] | None = None
    """Annotations added to the Ingress (TLS passthrough and other controller options)."""


class Gateway(machinery.Model):
    """A Gateway API route to the tenant API server (Kamaji ``controlPlane.gateway``)."""

    name: NonEmpty
    """Name of the parent Gateway."""
    namespace: NonEmpty
    """Namespace of the parent Gateway."""
    hostname: NonEmpty
    """Host of the route (``host`` or ``host:port``); its host is added to the certificate SANs."""
    section_name: str | None = None
    """Listener of the Gateway to attach to."""
    port: Annotated[machinery.Int32, pydantic.Field(ge=1, le=65535)] | None = None
    """Port of the Gateway to attach to."""
    extra_labels: dict[str, str] | None = None
    """Labels added to the route."""
    extra_annotations: dict[str, str] | None = None
    """Annotations added to the route."""


_IMMUTABLE_CLASS: Final = machinery.immutable("loadBalancerClass")


class LoadBalancerConfig(machinery.Model):
    """Settings of the LoadBalancer Service (only with ``serviceType: LoadBalancer``)."""

    load_balancer_source_ranges: Annotated[list[str], pydantic.Field(max_length=16)] | None = None
    """CIDRs allowed to reach the Service; unset: everyone."""
    load_balancer_class: (
        Annotated[str, pydantic.Field(min_length=1, json_schema_extra=_IMMUTABLE_CLASS)] | None
    ) = None
    """Load balancer implementation to use; set at creation or never."""


class Network(machinery.Model):
    """How the tenant API server is exposed at the site."""

    model_config = pydantic.ConfigDict(json_schema_extra={"x-kubernetes-validations": NETWORK_RULES})

    service_type: ServiceType = "LoadBalancer"
    """Type of the TCP's Service: ClusterIP, NodePort or LoadBalancer."""
    service_address: str | None = None
    """Address of the Service (a LoadBalancer IP to request, or the address in front of it)."""
    advertise_address: str | None = None
    """IP the API server advertises to the tenant's members (Kamaji ``networkProfile.advertiseAddress``)."""
    cert_sans: list[CertSAN] = pydantic.Field(default_factory=list, alias="certSANs")
    """Extra Subject Alternative Names for the API server certificate: host names or IPs."""
    allocate_load_balancer_node_ports: bool | None = None
    """Whether the LoadBalancer Service also gets node ports; unset: Kubernetes' default (yes)."""
    additional_service_ports: list[AdditionalPort] | None = None
    """More ports on the TCP's Service, for sidecars of the API server."""
    service_labels: dict[str, str] = pydantic.Field(default_factory=dict)
    """Labels added to the TCP's Service."""
    service_annotations: dict[str, str] = pydantic.Field(default_factory=dict)
    """Annotations added to the TCP's Service (load balancer settings, typically)."""
    load_balancer_config: LoadBalancerConfig | None = None
    """Source ranges and class of the LoadBalancer Service."""
    ingress: Ingress | None = None
    """Expose the API server through an Ingress at the site too."""
    gateway: Gateway | None = None
    """Expose the API server through a Gateway API route at the site too."""
    # At most 8, as Kamaji's networkProfile.dnsServiceIPs.
    dns_service_ips: Annotated[list[str], pydantic.Field(max_length=8)] | None = pydantic.Field(
        default=None, alias="dnsServiceIPs"
    )
    """IPs of the tenant's DNS Service; unset: Kamaji derives it from the service CIDR.
    ``addons.coreDNS.dnsServiceIPs`` wins when the CoreDNS addon is set."""

    @pydantic.field_validator("cert_sans")
    @classmethod
    def _hosts_or_ips(cls, sans: list[str]) -> list[str]:
        for index, entry in enumerate(sans):
            if (why := san_problem(entry)) is not None:
                raise ValueError(f"network.certSANs[{index}] {entry!r} {why}")
        return sans
