"""What an RKCP says about the TenantControlPlane's parts: addons, kubelet, components, Deployment.

Owns the pydantic models of the RemoteKamajiControlPlane's ``addons``, ``kubelet``,
``apiServer``/``controllerManager``/``scheduler``/``kine``, ``dataStoreOverrides`` and
``deployment``, in the Kamaji CAPI provider's field names and shapes (KamajiControlPlane), so a
spec moves over by changing ``kind`` and adding ``site``. Kubernetes core types the TCP carries
as they are (resources, volume mounts, containers, volumes, affinity, tolerations, strategy)
are free-form here: Kamaji's CRD at the site is the one that knows their schema, and
``tests/hub/mapping/test_tcp.py`` proves each reaches it. ``hub.api.rkcp`` puts them into the spec;
``hub.mapping.deployment`` maps them. Pure: talks to nothing.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import pydantic

from hub.api import machinery

AddressType = Literal["InternalIP", "ExternalIP", "Hostname", "InternalDNS", "ExternalDNS"]
CgroupDriver = Literal["systemd", "cgroupfs"]
DEFAULT_ADDRESS_TYPES: Final[tuple[AddressType, ...]] = ("InternalIP", "ExternalIP", "Hostname")

Object = dict[str, Any]
"""A Kubernetes core object passed through (a ResourceRequirements, an Affinity, ...)."""
Objects = list[dict[str, Any]]
"""A list of them (containers, volumes, volume mounts, tolerations, ...)."""


class ImageAddon(machinery.FreeForm):
    """An addon deployed into the tenant cluster; present (even empty) means enabled."""

    image_repository: str | None = None
    """Repository of the addon's image; default: Kamaji's."""
    image_tag: str | None = None
    """Tag of the addon's image; default: Kamaji's for the Kubernetes version."""


class CoreDNS(ImageAddon):
    """The CoreDNS addon, and the IPs of its Service (the provider's ``addons.coreDNS``)."""

    dns_service_ips: list[str] | None = pydantic.Field(default=None, alias="dnsServiceIPs")
    """IPs of the DNS Service; they replace ``network.dnsServiceIPs`` (unset here clears them, as
    in the provider); unset: Kamaji derives it from the service CIDR."""


class Konnectivity(machinery.FreeForm):
    """The Konnectivity addon (server next to the API server, agent in the tenant cluster)."""

    agent: dict[str, Any] | None = None
    """Kamaji's ``addons.konnectivity.agent`` (image, version, mode, tolerations, ...)."""
    server: dict[str, Any] | None = None
    """Kamaji's ``addons.konnectivity.server`` (image, version, port, resources, ...)."""


class Addons(machinery.Model):
    """Tenant-cluster addons Kamaji manages; an absent addon is not installed."""

    core_dns: CoreDNS | None = pydantic.Field(default=None, alias="coreDNS")
    """CoreDNS in the tenant cluster."""
    kube_proxy: ImageAddon | None = None
    """kube-proxy in the tenant cluster."""
    konnectivity: Konnectivity | None = None
    """Konnectivity, for API server to node traffic across networks."""


def _unique(values: list[AddressType]) -> list[AddressType]:
    if len(set(values)) != len(values):
        raise ValueError("preferredAddressTypes must not repeat an address type")
    return values


class Kubelet(machinery.FreeForm):
    """How the tenant API server reaches kubelets, and the cgroup driver the kubelets use."""

    preferred_address_types: Annotated[
        list[AddressType],
        pydantic.AfterValidator(_unique),
        pydantic.Field(min_length=1, json_schema_extra={"x-kubernetes-list-type": "set"}),
    ] = list(DEFAULT_ADDRESS_TYPES)
    """Node address types to try, in order, when connecting to a kubelet."""
    cgroupfs: CgroupDriver = "systemd"
    """The kubelets' cgroup driver."""


Count = Annotated[machinery.Int32, pydantic.Field(ge=0)]


class Probe(machinery.Model):
    """Timings of one probe of the control-plane containers (Kamaji's ``ProbeSpec``)."""

    initial_delay_seconds: Count | None = None
    timeout_seconds: Annotated[machinery.Int32, pydantic.Field(ge=1)] | None = None
    period_seconds: Annotated[machinery.Int32, pydantic.Field(ge=1)] | None = None
    success_threshold: Annotated[machinery.Int32, pydantic.Field(ge=1)] | None = None
    failure_threshold: Annotated[machinery.Int32, pydantic.Field(ge=1)] | None = None


class ProbeSet(machinery.Model):
    """Liveness, readiness and startup probe timings (Kamaji's ``ProbeSet``): relaxed for a
    resource-constrained site, typically."""

    liveness: Probe | None = None
    readiness: Probe | None = None
    startup: Probe | None = None


class Kine(machinery.Model):
    """The kine container (only when the site's Kamaji stores in a kine-backed DataStore)."""

    extra_args: list[str] | None = None
    """Extra command-line arguments of kine."""
    resources: Object | None = None
    """Resource requests and limits of kine (a ResourceRequirements)."""


class Component(Kine):
    """One control-plane container: kube-apiserver, kube-controller-manager or kube-scheduler."""

    extra_volume_mounts: Objects | None = None
    """Volume mounts added to the container (VolumeMounts of ``deployment.extraVolumes``)."""
    container_image_name: Annotated[str, pydantic.Field(min_length=1)] | None = None
    """Image name under ``registry`` instead of the default (``kube-apiserver``, ...)."""
    probes: ProbeSet | None = None
    """Probe timings of this container, over ``deployment.probes``."""


class DataStoreOverride(machinery.Model):
    """Kubernetes resources kept in another DataStore (events in their own etcd, typically)."""

    resource: Annotated[str, pydantic.Field(min_length=1)]
    """The resource, as kube-apiserver's ``--etcd-servers-overrides`` names it (``/events``)."""
    data_store: Annotated[str, pydantic.Field(min_length=1)]
    """The Kamaji DataStore that keeps it."""


class AdditionalMetadata(machinery.Model):
    """Labels and annotations added to an object Kamaji creates."""

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class Deployment(machinery.Model):
    """The Deployment of the control-plane pods at the site (Kamaji ``controlPlane.deployment``)."""

    node_selector: dict[str, str] | None = None
    """Nodes of the site the control-plane pods may run on."""
    runtime_class_name: str | None = None
    """RuntimeClass of the pods."""
    additional_metadata: AdditionalMetadata | None = None
    """Labels and annotations of the Deployment."""
    pod_additional_metadata: AdditionalMetadata | None = None
    """Labels and annotations of its pods."""
    service_account_name: str | None = None
    """ServiceAccount of the pods; default: Kamaji's (``default``)."""
    strategy: Object | None = None
    """The Deployment's strategy (a DeploymentStrategy); default: Kamaji's blue/green rollout."""
    affinity: Object | None = None
    """Affinity of the pods."""
    tolerations: Objects | None = None
    """Tolerations of the pods."""
    topology_spread_constraints: Objects | None = None
    """Topology spread constraints of the pods."""
    extra_init_containers: Objects | None = None
    """Init containers added to the pods."""
    extra_containers: Objects | None = None
    """Containers added to the pods."""
    extra_volumes: Objects | None = None
    """Volumes added to the pods (mounted through a component's ``extraVolumeMounts``)."""
    probes: ProbeSet | None = None
    """Probe timings of every control-plane container (a component's ``probes`` win)."""
