"""How an RKCP's tenant API server is exposed: ``spec.network`` (Service, Ingress, Gateway, load balancer).

Owns the pydantic models of the RemoteKamajiControlPlane's ``network``, in the Kamaji CAPI
provider's field names and shapes (KamajiControlPlane ``spec.network``), so a spec moves over
unchanged; and the provider's CEL rules on it, which the CRD carries as
``x-kubernetes-validations``. ``hub.api`` puts it into the spec; ``hub.mapping_network`` turns
it into the TenantControlPlane's ``networkProfile`` and ``controlPlane`` service, ingress and
gateway. Pure: talks to nothing.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import pydantic

from hub import apimachinery

ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]


NonEmpty = Annotated[str, pydantic.Field(min_length=1)]

# The provider's rules on its NetworkComponent, for the same reasons: Kamaji refuses a load
# balancer setting on another Service type, and a loadBalancerClass set or unset later.
NETWORK_RULES: Final[list[pydantic.JsonValue]] = [
    apimachinery.rule(
        "!has(self.loadBalancerConfig) || !has(self.loadBalancerConfig.loadBalancerSourceRanges)"
        " || size(self.loadBalancerConfig.loadBalancerSourceRanges) == 0"
        " || self.serviceType == 'LoadBalancer'",
        "loadBalancerSourceRanges are supported only with the LoadBalancer service type",
    ),
    apimachinery.rule(
        "!has(self.loadBalancerConfig) || !has(self.loadBalancerConfig.loadBalancerClass)"
        " || self.serviceType == 'LoadBalancer'",
        "loadBalancerClass is supported only with the LoadBalancer service type",
    ),
    apimachinery.rule(
        "self.serviceType != 'LoadBalancer' || oldSelf.serviceType != 'LoadBalancer'"
        " || (has(self.loadBalancerConfig) && has(self.loadBalancerConfig.loadBalancerClass))"
        " == (has(oldSelf.loadBalancerConfig) && has(oldSelf.loadBalancerConfig.loadBalancerClass))",
        "loadBalancerClass cannot be set or unset at runtime",
    ),
    # Kamaji's own rule on controlPlane: a TCP is exposed by an Ingress or a Gateway, not both.
    apimachinery.rule(
        "!(has(self.ingress) && has(self.gateway))", "ingress and gateway are mutually exclusive"
    ),
]


class Ingress(apimachinery.Model):
    """An Ingress in front of the tenant API server (Kamaji ``controlPlane.ingress``)."""

    class_name: str | None = None
    """Ingress class of the Ingress object."""
    hostname: NonEmpty
    """Host of the Ingress (``host`` or ``host:port``); its host is added to the certificate SANs."""
    extra_labels: dict[str, str] | None = None
    """Labels added to the Ingress."""
    extra_annotations: dict[str, str] | None = None
    """Annotations added to the Ingress (TLS passthrough and other controller options)."""


class Gateway(apimachinery.Model):
    """A Gateway API route to the tenant API server (Kamaji ``controlPlane.gateway``)."""

    name: NonEmpty
    """Name of the parent Gateway."""
    namespace: NonEmpty
    """Namespace of the parent Gateway."""
    hostname: NonEmpty
    """Host of the route (``host`` or ``host:port``); its host is added to the certificate SANs."""
    section_name: str | None = None
    """Listener of the Gateway to attach to."""
    port: Annotated[apimachinery.Int32, pydantic.Field(ge=1, le=65535)] | None = None
    """Port of the Gateway to attach to."""
    extra_labels: dict[str, str] | None = None
    """Labels added to the route."""
    extra_annotations: dict[str, str] | None = None
    """Annotations added to the route."""


_IMMUTABLE_CLASS: Final = apimachinery.immutable("loadBalancerClass")


class LoadBalancerConfig(apimachinery.Model):
    """Settings of the LoadBalancer Service (only with ``serviceType: LoadBalancer``)."""

    load_balancer_source_ranges: Annotated[list[str], pydantic.Field(max_length=16)] | None = None
    """CIDRs allowed to reach the Service; unset: everyone."""
    load_balancer_class: (
        Annotated[str, pydantic.Field(min_length=1, json_schema_extra=_IMMUTABLE_CLASS)] | None
    ) = None
    """Load balancer implementation to use; set at creation or never."""


class Network(apimachinery.Model):
    """How the tenant API server is exposed at the site."""

    model_config = pydantic.ConfigDict(json_schema_extra={"x-kubernetes-validations": NETWORK_RULES})

    service_type: ServiceType = "LoadBalancer"
    """Type of the TCP's Service: ClusterIP, NodePort or LoadBalancer."""
    service_address: str | None = None
    """Address of the Service (a LoadBalancer IP to request, or the address in front of it)."""
    advertise_address: str | None = None
    """IP the API server advertises to the tenant's members (Kamaji ``networkProfile.advertiseAddress``)."""
    cert_sans: list[str] = pydantic.Field(default_factory=list, alias="certSANs")
    """Extra Subject Alternative Names for the API server certificate."""
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
