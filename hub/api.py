"""The management-cluster API of a control plane: RemoteKamajiControlPlane (DESIGN §2).

Owns the pydantic v2 models of ``controlplane.cluster.x-k8s.io/v1alpha1``
``RemoteKamajiControlPlane`` (spec, status, and the object around them), its names and the
condition types it shows. They are the single source of truth for the CRD: ``hub.crdgen``
turns ``Spec`` and ``Status`` into the structural OpenAPI schema in ``deploy/crds/``, and a test
keeps the two from drifting. Every field has its wire (camelCase) alias and its Python
(snake_case) name; both parse (``populate_by_name``), ``to_dict`` writes the wire form.
Attribute docstrings become the CRD's field descriptions. The base models and name checks are
``hub.apimachinery``'s; the Cluster API Cluster the hub reads is ``hub.cluster_api``'s.

Parsing is lenient where the API server is the authority: unknown fields are ignored (a newer
CRD may add some) except in the free-form objects (addons, kubelet), which keep them so they reach
the TenantControlPlane. Pure: talks to nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Final, Literal

import pydantic

from common import durations
from hub import apimachinery, cluster_api
from protocol import names

NAMES: Final = apimachinery.Names(
    group="controlplane.cluster.x-k8s.io",
    version="v1alpha1",
    kind="RemoteKamajiControlPlane",
    categories=("cluster-api",),
    short_names=("rkcp",),
)
API_VERSION: Final = NAMES.api_version
KIND: Final = NAMES.kind

# Condition types an RKCP shows (DESIGN §2; Paused and Ready from issue 5).
AVAILABLE: Final = "Available"
"""Mirrors ``status.ready``: the control plane serves."""
READY: Final = "Ready"
"""The summary of the others (False with reason Conflict when two RKCPs claim one TCP)."""
INTENT_DELIVERED: Final = "IntentDelivered"
"""The site acknowledged the latest intent."""
SITE_CONNECTED: Final = "SiteConnected"
"""The site's heartbeat is recent."""
STATUS_FRESH: Final = "StatusFresh"
"""The TCP status from the site is recent enough to trust."""
TENANT_CONTROL_PLANE_READY: Final = "TenantControlPlaneReady"
"""The TCP at the site is Ready (or Upgrading)."""
SECRETS_SYNCED: Final = "SecretsSynced"
"""``<cluster>-kubeconfig`` and ``<cluster>-ca`` hold the site's latest secrets."""
DELETING: Final = "Deleting"
"""Deletion is in progress (negative polarity: True is not healthy)."""
PAUSED: Final = "Paused"
"""The owner Cluster is paused (negative polarity)."""

# ^...$ for the CRD's schema, as apimachinery's DNS1035_PATTERN explains.
VERSION_PATTERN: Final = r"^v?[0-9]+\.[0-9]+\.[0-9]+$"
"""``v1.31.0`` or ``1.31.0``; [0-9] rather than \\d, which is Unicode-wide in pydantic's regex engine."""
DURATION_PATTERN: Final = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h|d))+$"
"""What ``common.durations.parse`` accepts with units: ``90s``, ``10m``, ``1h30m``, ``2d``."""

ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer"]
AddressType = Literal["InternalIP", "ExternalIP", "Hostname", "InternalDNS", "ExternalDNS"]
CgroupDriver = Literal["systemd", "cgroupfs"]
DeletionPolicy = Literal["Delete", "Orphan"]
# Kamaji's own enum (kamaji.clastix.io AdmissionControllers), so a name it does not know is
# refused here rather than at the site.
AdmissionController = Literal[
    "AlwaysAdmit",
    "AlwaysDeny",
    "AlwaysPullImages",
    "CertificateApproval",
    "CertificateSigning",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DefaultStorageClass",
    "DefaultTolerationSeconds",
    "DenyEscalatingExec",
    "DenyExecOnPrivileged",
    "DenyServiceExternalIPs",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "ImagePolicyWebhook",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "MutatingAdmissionWebhook",
    "NamespaceAutoProvision",
    "NamespaceExists",
    "NamespaceLifecycle",
    "NodeRestriction",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "PersistentVolumeLabel",
    "PodNodeSelector",
    "PodSecurity",
    "PodSecurityPolicy",
    "PodTolerationRestriction",
    "Priority",
    "ResourceQuota",
    "RuntimeClass",
    "SecurityContextDeny",
    "ServiceAccount",
    "StorageObjectInUseProtection",
    "TaintNodesByCondition",
    "ValidatingAdmissionWebhook",
]

DEFAULT_ADDRESS_TYPES: Final[tuple[AddressType, ...]] = ("InternalIP", "ExternalIP", "Hostname")


# Spec ---------------------------------------------------------------------------------------


class Network(apimachinery.Model):
    """How the tenant API server is exposed at the site."""

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


class ImageAddon(apimachinery.FreeForm):
    """An addon deployed into the tenant cluster; present (even empty) means enabled."""

    image_repository: str | None = None
    """Repository of the addon's image; default: Kamaji's."""
    image_tag: str | None = None
    """Tag of the addon's image; default: Kamaji's for the Kubernetes version."""


class Konnectivity(apimachinery.FreeForm):
    """The Konnectivity addon (server next to the API server, agent in the tenant cluster)."""

    agent: dict[str, Any] | None = None
    """Kamaji's ``addons.konnectivity.agent`` (image, version, mode, tolerations, ...)."""
    server: dict[str, Any] | None = None
    """Kamaji's ``addons.konnectivity.server`` (image, version, port, resources, ...)."""


class Addons(apimachinery.Model):
    """Tenant-cluster addons Kamaji manages; an absent addon is not installed."""

    core_dns: ImageAddon | None = pydantic.Field(default=None, alias="coreDNS")
    """CoreDNS in the tenant cluster."""
    kube_proxy: ImageAddon | None = None
    """kube-proxy in the tenant cluster."""
    konnectivity: Konnectivity | None = None
    """Konnectivity, for API server to node traffic across networks."""


def _unique(values: list[AddressType]) -> list[AddressType]:
    if len(set(values)) != len(values):
        raise ValueError("preferredAddressTypes must not repeat an address type")
    return values


class Kubelet(apimachinery.FreeForm):
    """How the tenant API server reaches kubelets, and the cgroup driver the kubelets use."""

    preferred_address_types: Annotated[
        list[AddressType],
        pydantic.AfterValidator(_unique),
        pydantic.Field(min_length=1, json_schema_extra={"x-kubernetes-list-type": "set"}),
    ] = list(DEFAULT_ADDRESS_TYPES)
    """Node address types to try, in order, when connecting to a kubelet."""
    cgroupfs: CgroupDriver = "systemd"
    """The kubelets' cgroup driver."""


class Spec(apimachinery.Model):
    """Desired state of a RemoteKamajiControlPlane: the TenantControlPlane and where it runs."""

    site: apimachinery.DNS1123Label
    """The site (control-plane cluster) that runs the TenantControlPlane."""
    target_namespace: apimachinery.DNS1123Label | None = None
    """Namespace of the TenantControlPlane at the site; default: this object's namespace."""
    tenant_control_plane_name: apimachinery.DNS1035Label | None = None
    """Name of the TenantControlPlane at the site; default: this object's name."""
    version: Annotated[str, pydantic.Field(pattern=VERSION_PATTERN)]
    """Kubernetes version of the control plane (``v1.31.0``; a missing ``v`` is added)."""
    replicas: Annotated[apimachinery.Int32, pydantic.Field(ge=0)] = 2
    """Number of API server replicas."""
    data_store_name: str | None = None
    """Kamaji DataStore to use; default: the site's Kamaji default."""
    # default {} in the CRD: the API server then fills the nested defaults (serviceType,
    # kubelet settings) too, so `kubectl get -o yaml` shows what the TCP will get.
    network: Network = pydantic.Field(default_factory=Network, json_schema_extra={"default": {}})
    addons: Addons = pydantic.Field(default_factory=Addons)
    kubelet: Kubelet = pydantic.Field(default_factory=Kubelet, json_schema_extra={"default": {}})
    admission_controllers: list[AdmissionController] | None = None
    """Admission plugins to enable; default: Kamaji's default list."""
    kubeconfig_secret_key: Annotated[str, pydantic.Field(min_length=1)] = names.ADMIN_KUBECONFIG_KEY
    """Key of the TCP's admin kubeconfig Secret copied into ``<cluster>-kubeconfig``."""
    control_plane_endpoint: cluster_api.Endpoint | None = None
    """Endpoint of the tenant API server; written by the hub once the site reports it."""
    deletion_policy: DeletionPolicy = "Delete"
    """``Delete`` removes the TenantControlPlane at the site; ``Orphan`` leaves it running."""
    site_unavailable_deletion_timeout: Annotated[str, pydantic.Field(pattern=DURATION_PATTERN)] | None = None
    """How long a deletion waits for a silent site (``10m``, ``1h``) before the finalizer is
    removed anyway; unset: wait forever, so a TCP is never lost silently."""

    @property
    def site_unavailable_deletion_timeout_seconds(self) -> float | None:
        """``site_unavailable_deletion_timeout`` in seconds, or None (wait forever)."""
        if self.site_unavailable_deletion_timeout is None:
            return None
        return durations.parse(self.site_unavailable_deletion_timeout)


# Status -------------------------------------------------------------------------------------


class Initialization(apimachinery.Model):
    """Cluster API v1beta2 contract: initialization milestones."""

    control_plane_initialized: bool = False
    """The control plane has been Ready once (never goes back to false)."""


class SiteStatus(apimachinery.Model):
    """What the hub knows about the site this control plane runs in."""

    last_heartbeat_time: dt.datetime | None = None
    """When the site's agent last sent a heartbeat."""
    backlog: Annotated[int, pydantic.Field(ge=0)] | None = None
    """Intents the site's consumer has not processed yet (pending plus unacknowledged)."""


class Status(apimachinery.Model):
    """Observed state, in the Cluster API control-plane contract (v1beta2 with the v1beta1 fields)."""

    initialization: Initialization = pydantic.Field(default_factory=Initialization)
    """v1beta2: initialization milestones."""
    initialized: bool = False
    """v1beta1: the control plane has been Ready once."""
    ready: bool = False
    """The TenantControlPlane serves (Ready or Upgrading)."""
    external_managed_control_plane: bool = True
    """Always true: there are no control-plane Machines for Cluster API to look at."""
    version: str | None = None
    """Kubernetes version the control plane runs."""
    replicas: Annotated[apimachinery.Int32, pydantic.Field(ge=0)] = 0
    """API server pods the TCP's Deployment has."""
    ready_replicas: Annotated[apimachinery.Int32, pydantic.Field(ge=0)] = 0
    """API server pods that are ready."""
    available_replicas: Annotated[apimachinery.Int32, pydantic.Field(ge=0)] = 0
    """v1beta2: API server pods that are available."""
    up_to_date_replicas: Annotated[apimachinery.Int32, pydantic.Field(ge=0)] = 0
    """v1beta2: API server pods with the desired spec."""
    updated_replicas: Annotated[apimachinery.Int32, pydantic.Field(ge=0)] = 0
    """v1beta1: API server pods with the desired spec."""
    unavailable_replicas: Annotated[apimachinery.Int32, pydantic.Field(ge=0)] = 0
    """v1beta1: API server pods that are not available."""
    selector: str | None = None
    """Label selector of the API server pods (for the scale subresource)."""
    observed_generation: Annotated[int, pydantic.Field(ge=0)] | None = None
    """The ``metadata.generation`` this status was computed for."""
    conditions: apimachinery.Conditions = pydantic.Field(default_factory=list)
    """Available, Ready, IntentDelivered, SiteConnected, StatusFresh, TenantControlPlaneReady,
    SecretsSynced, Deleting, Paused."""
    site: SiteStatus = pydantic.Field(default_factory=SiteStatus)
    """The site's liveness and backlog, as the hub sees them."""


# Object -------------------------------------------------------------------------------------


class RemoteKamajiControlPlane(apimachinery.Object):
    """A Kamaji TenantControlPlane run at a remote site, for a Cluster API Cluster."""

    api_version: str = API_VERSION
    kind: str = KIND
    spec: Spec
    status: Status = pydantic.Field(default_factory=Status)
