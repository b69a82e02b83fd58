"""The management-cluster API: RemoteKamajiControlPlane (DESIGN §2), and the Cluster fields we read.

Owns the pydantic v2 models of ``controlplane.cluster.x-k8s.io/v1alpha1``
``RemoteKamajiControlPlane`` (spec, status, and the object around them) and a read-only view of
Cluster API's ``Cluster``. They are the single source of truth for the CRD: ``hub.crdgen``
turns ``Spec`` and ``Status`` into the structural OpenAPI schema in ``deploy/crds/``, and a test
keeps the two from drifting. Every field has its wire (camelCase) alias and its Python
(snake_case) name; both parse (``populate_by_name``), ``to_dict`` writes the wire form.
Attribute docstrings become the CRD's field descriptions.

Parsing is lenient where the API server is the authority: unknown fields are ignored (a newer
CRD may add some) except in the free-form objects (addons, kubelet), which keep them so they reach
the TenantControlPlane. Pure: talks to nothing.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Final, Literal, Self

import pydantic
from pydantic import alias_generators

import common.conditions
from common import durations
from protocol import labels

GROUP: Final = "controlplane.cluster.x-k8s.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "RemoteKamajiControlPlane"
LIST_KIND: Final = "RemoteKamajiControlPlaneList"
PLURAL: Final = "remotekamajicontrolplanes"
SINGULAR: Final = "remotekamajicontrolplane"
SHORT_NAMES: Final = ("rkcp",)
CATEGORIES: Final = ("cluster-api",)

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

# The patterns keep ^...$ because they go into the CRD's OpenAPI schema, where '$' is the end of
# the text (Go RE2, and the Rust engine behind pydantic's ``pattern``). Python's '$' also
# matches before a final newline, so Python code checks names with ``fullmatch``, never ``match``.
DNS1035_PATTERN: Final = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
"""A DNS-1035 label (Kamaji's webhook wants TCP names like this: a letter first)."""
VERSION_PATTERN: Final = r"^v?[0-9]+\.[0-9]+\.[0-9]+$"
"""``v1.31.0`` or ``1.31.0``; [0-9] rather than \\d, which is Unicode-wide in pydantic's regex engine."""
DURATION_PATTERN: Final = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h|d))+$"
"""What ``common.durations.parse`` accepts with units: ``90s``, ``10m``, ``1h30m``, ``2d``."""

_DNS1035: Final = re.compile(DNS1035_PATTERN)


def dns1123_label(value: str) -> bool:
    """Whether ``value`` is a DNS-1123 label (a namespace, a site)."""
    return labels.problem(value) is None


def dns1035_label(value: str) -> bool:
    """Whether ``value`` is a DNS-1035 label (a TenantControlPlane name)."""
    return len(value) <= 63 and _DNS1035.fullmatch(value) is not None


DNS1123Label = Annotated[
    str, pydantic.Field(min_length=1, max_length=labels.MAX_LENGTH, pattern=labels.PATTERN)
]
DNS1035Label = Annotated[str, pydantic.Field(min_length=1, max_length=63, pattern=DNS1035_PATTERN)]
Int32 = Annotated[int, pydantic.Field(json_schema_extra={"format": "int32"})]

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
_MAP_BY_TYPE: Final[dict[str, Any]] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}


class Model(pydantic.BaseModel):
    """Base of every API model: camelCase on the wire, snake_case in Python."""

    model_config = pydantic.ConfigDict(
        alias_generator=alias_generators.to_camel, populate_by_name=True, use_attribute_docstrings=True
    )

    def to_dict(self) -> dict[str, Any]:
        """The wire form: camelCase keys, JSON values, unset (None) fields left out."""
        dumped: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped


class FreeForm(Model):
    """A Kamaji object we pass through: unknown fields are kept (and preserved by the CRD)."""

    model_config = pydantic.ConfigDict(extra="allow")


# Spec ---------------------------------------------------------------------------------------


class Network(Model):
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


class ImageAddon(FreeForm):
    """An addon deployed into the tenant cluster; present (even empty) means enabled."""

    image_repository: str | None = None
    """Repository of the addon's image; default: Kamaji's."""
    image_tag: str | None = None
    """Tag of the addon's image; default: Kamaji's for the Kubernetes version."""


class Konnectivity(FreeForm):
    """The Konnectivity addon (server next to the API server, agent in the tenant cluster)."""

    agent: dict[str, Any] | None = None
    """Kamaji's ``addons.konnectivity.agent`` (image, version, mode, tolerations, ...)."""
    server: dict[str, Any] | None = None
    """Kamaji's ``addons.konnectivity.server`` (image, version, port, resources, ...)."""


class Addons(Model):
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


class Kubelet(FreeForm):
    """How the tenant API server reaches kubelets, and the cgroup driver the kubelets use."""

    preferred_address_types: Annotated[
        list[AddressType],
        pydantic.AfterValidator(_unique),
        pydantic.Field(min_length=1, json_schema_extra={"x-kubernetes-list-type": "set"}),
    ] = list(DEFAULT_ADDRESS_TYPES)
    """Node address types to try, in order, when connecting to a kubelet."""
    cgroupfs: CgroupDriver = "systemd"
    """The kubelets' cgroup driver."""


class Endpoint(Model):
    """A host and port of an API server (Cluster API's APIEndpoint).

    ``{host: "", port: 0}`` is how Cluster API writes "not set yet", hence no lower bounds.
    """

    host: Annotated[str, pydantic.Field(max_length=512)]
    """Host name or IP address."""
    port: Annotated[Int32, pydantic.Field(ge=0, le=65535)]
    """TCP port."""

    @property
    def is_set(self) -> bool:
        return bool(self.host) and self.port > 0


class Spec(Model):
    """Desired state of a RemoteKamajiControlPlane: the TenantControlPlane and where it runs."""

    site: DNS1123Label
    """The site (control-plane cluster) that runs the TenantControlPlane."""
    target_namespace: DNS1123Label | None = None
    """Namespace of the TenantControlPlane at the site; default: this object's namespace."""
    tenant_control_plane_name: DNS1035Label | None = None
    """Name of the TenantControlPlane at the site; default: this object's name."""
    version: Annotated[str, pydantic.Field(pattern=VERSION_PATTERN)]
    """Kubernetes version of the control plane (``v1.31.0``; a missing ``v`` is added)."""
    replicas: Annotated[Int32, pydantic.Field(ge=0)] = 2
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
    kubeconfig_secret_key: Annotated[str, pydantic.Field(min_length=1)] = "admin.conf"
    """Key of the TCP's admin kubeconfig Secret copied into ``<cluster>-kubeconfig``."""
    control_plane_endpoint: Endpoint | None = None
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


class Initialization(Model):
    """Cluster API v1beta2 contract: initialization milestones."""

    control_plane_initialized: bool = False
    """The control plane has been Ready once (never goes back to false)."""


class SiteStatus(Model):
    """What the hub knows about the site this control plane runs in."""

    last_heartbeat_time: dt.datetime | None = None
    """When the site's agent last sent a heartbeat."""
    backlog: Annotated[int, pydantic.Field(ge=0)] | None = None
    """Intents the site's consumer has not processed yet (pending plus unacknowledged)."""


class Status(Model):
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
    replicas: Annotated[Int32, pydantic.Field(ge=0)] = 0
    """API server pods the TCP's Deployment has."""
    ready_replicas: Annotated[Int32, pydantic.Field(ge=0)] = 0
    """API server pods that are ready."""
    available_replicas: Annotated[Int32, pydantic.Field(ge=0)] = 0
    """v1beta2: API server pods that are available."""
    up_to_date_replicas: Annotated[Int32, pydantic.Field(ge=0)] = 0
    """v1beta2: API server pods with the desired spec."""
    updated_replicas: Annotated[Int32, pydantic.Field(ge=0)] = 0
    """v1beta1: API server pods with the desired spec."""
    unavailable_replicas: Annotated[Int32, pydantic.Field(ge=0)] = 0
    """v1beta1: API server pods that are not available."""
    selector: str | None = None
    """Label selector of the API server pods (for the scale subresource)."""
    observed_generation: Annotated[int, pydantic.Field(ge=0)] | None = None
    """The ``metadata.generation`` this status was computed for."""
    conditions: list[common.conditions.Condition] = pydantic.Field(
        default_factory=list, json_schema_extra=_MAP_BY_TYPE
    )
    """Available, Ready, IntentDelivered, SiteConnected, StatusFresh, TenantControlPlaneReady,
    SecretsSynced, Deleting, Paused."""
    site: SiteStatus = pydantic.Field(default_factory=SiteStatus)
    """The site's liveness and backlog, as the hub sees them."""


# Objects ------------------------------------------------------------------------------------


class OwnerReference(Model):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(Model):
    """The ``metadata`` fields the hub reads."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    creation_timestamp: dt.datetime | None = None
    deletion_timestamp: dt.datetime | None = None
    labels: dict[str, str] = pydantic.Field(default_factory=dict)
    annotations: dict[str, str] = pydantic.Field(default_factory=dict)
    owner_references: list[OwnerReference] = pydantic.Field(default_factory=list)
    finalizers: list[str] = pydantic.Field(default_factory=list)


class RemoteKamajiControlPlane(Model):
    """A Kamaji TenantControlPlane run at a remote site, for a Cluster API Cluster."""

    api_version: str = API_VERSION
    kind: str = KIND
    metadata: ObjectMeta = pydantic.Field(default_factory=ObjectMeta)
    spec: Spec
    status: Status = pydantic.Field(default_factory=Status)

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> Self:
        """From the API server's dict; raises pydantic.ValidationError naming the bad fields."""
        return cls.model_validate(obj)


# Cluster API Cluster (read-only view) -------------------------------------------------------


class NetworkRanges(Model):
    cidr_blocks: list[str] = pydantic.Field(default_factory=list)


class ClusterNetwork(Model):
    api_server_port: int | None = None
    services: NetworkRanges | None = None
    pods: NetworkRanges | None = None
    service_domain: str | None = None


class ObjectReference(Model):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    namespace: str = ""
    uid: str = ""


class ClusterSpec(Model):
    paused: bool = False
    cluster_network: ClusterNetwork | None = None
    control_plane_endpoint: Endpoint | None = None
    control_plane_ref: ObjectReference | None = None


class Cluster(Model):
    """The fields of a ``cluster.x-k8s.io`` Cluster the hub reads (everything else is ignored)."""

    api_version: str = "cluster.x-k8s.io/v1beta1"
    kind: str = "Cluster"
    metadata: ObjectMeta = pydantic.Field(default_factory=ObjectMeta)
    spec: ClusterSpec = pydantic.Field(default_factory=ClusterSpec)

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> Self:
        return cls.model_validate(obj)

    @property
    def paused(self) -> bool:
        """``spec.paused`` or the ``cluster.x-k8s.io/paused`` annotation (either pauses providers)."""
        return self.spec.paused or "cluster.x-k8s.io/paused" in self.metadata.annotations
