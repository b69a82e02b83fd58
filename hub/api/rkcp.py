"""The management-cluster API of a control plane: RemoteKamajiControlPlane.

Owns the pydantic v2 models of ``controlplane.cluster.x-k8s.io/v1alpha1``
``RemoteKamajiControlPlane`` (spec, status, and the object around them), its names and the
condition types it shows. They are the single source of truth for the CRD: ``hub.api.crds``
turns ``Spec`` and ``Status`` into the structural OpenAPI schema in ``deploy/crds/``, and a test
keeps the two from drifting. Every field has its wire (camelCase) alias and its Python
(snake_case) name; both parse (``populate_by_name``), ``to_dict`` writes the wire form.
Attribute docstrings become the CRD's field descriptions. The base models and name checks are
``hub.api.machinery``'s; the Cluster API Cluster the hub reads is ``hub.api.cluster``'s.

Parsing is lenient where the API server is the authority: unknown fields are ignored (a newer
CRD may add some) except in the free-form objects (addons, kubelet), which keep them so they reach
the TenantControlPlane. Pure: talks to nothing.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

import pydantic

from common import durations
from hub.api import cluster, components, machinery
from hub.api import network as api_network
from protocol import names

NAMES: Final = machinery.Names(
    group="controlplane.cluster.x-k8s.io",
    version="v1alpha1",
    kind="RemoteKamajiControlPlane",
    categories=("cluster-api",),
    short_names=("rkcp",),
)
API_VERSION: Final = NAMES.api_version
KIND: Final = NAMES.kind
OWNER_UID_ANNOTATION: Final = "kamaji-broker.io/owner-uid"
"""The owner identity the site knows the control plane by: the uid the hub first saw, stamped
once; ``clusterctl move`` carries it to the new object (``hub.reconcile.rkcp.owner``)."""

# Condition types an RKCP shows (Paused, Ready, RollingOut, ScalingUp and ScalingDown as CAPI
# v1beta2 names them).
AVAILABLE: Final = "Available"
"""The control plane serves (``status.ready``, not deleting); False: reason NotAvailable, the cause."""
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
"""Reconciliation is paused: the Cluster's ``spec.paused`` or the ``cluster.x-k8s.io/paused``
annotation on this object (negative polarity)."""
ROLLING_OUT: Final = "RollingOut"
"""API server pods at the site are not up to date, or the version moves (negative polarity)."""
SCALING_UP: Final = "ScalingUp"
"""Fewer API server pods at the site than ``spec.replicas`` (negative polarity)."""
SCALING_DOWN: Final = "ScalingDown"
"""More API server pods at the site than ``spec.replicas`` (negative polarity)."""

# ^...$ for the CRD's schema, as k8s.io/apimachinery's DNS1035_PATTERN explains.
VERSION_PATTERN: Final = r"^v?[0-9]+\.[0-9]+\.[0-9]+$"
"""``v1.31.0`` or ``1.31.0``, as a KamajiControlPlane takes it: the TenantControlPlane and
``status.version`` always carry the ``v`` (``hub.mapping.tcp.kubernetes_version``), and Cluster API
compares ``spec.version`` with ``status.version`` as semantic versions, so the two forms agree.
[0-9] rather than \\d, which is Unicode-wide in pydantic's regex engine."""
DURATION_PATTERN: Final = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h|d))+$"
"""What ``common.durations.parse`` accepts with units: ``90s``, ``10m``, ``1h30m``, ``2d``."""

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

# Spec ---------------------------------------------------------------------------------------


def _fixed(field: str) -> pydantic.JsonValue:
    """A spec-level rule: an optional ``field`` is neither added, changed nor removed after creation
    (a field-level ``self == oldSelf`` would still let it be added or removed)."""
    return machinery.rule(
        f"has(self.{field}) == has(oldSelf.{field})"
        f" && (!has(self.{field}) || self.{field} == oldSelf.{field})",
        f"{field} cannot be added, changed or removed after creation",
    )


# Coordinates fixed at creation: a change would move the control plane to other coordinates and
# leave the first TCP behind. The DataStore user and schema: Kamaji refuses their removal.
SPEC_RULES: Final[list[pydantic.JsonValue]] = [
    _fixed("targetNamespace"),
    _fixed("tenantControlPlaneName"),
    machinery.rule(
        "!has(oldSelf.dataStoreSchema) || has(self.dataStoreSchema)", "dataStoreSchema cannot be removed"
    ),
    machinery.rule(
        "!has(oldSelf.dataStoreUsername) || has(self.dataStoreUsername)",
        "dataStoreUsername cannot be removed",
    ),
]


class Spec(machinery.Model):
    """Desired state of a RemoteKamajiControlPlane: the TenantControlPlane and where it runs."""

    model_config = pydantic.ConfigDict(json_schema_extra={"x-kubernetes-validations": SPEC_RULES})

    site: Annotated[machinery.DNS1123Label, pydantic.Field(json_schema_extra=machinery.immutable("site"))]
    """The site (control-plane cluster) that runs the TenantControlPlane; immutable."""
    target_namespace: machinery.DNS1123Label | None = None
    """Namespace of the TenantControlPlane at the site; default: this object's namespace; immutable."""
    tenant_control_plane_name: machinery.DNS1035Label | None = None
    """Name of the TenantControlPlane at the site; default: this object's name; immutable."""
    version: Annotated[str, pydantic.Field(pattern=VERSION_PATTERN)]
    """Kubernetes version of the control plane: ``v1.31.0`` (or ``1.31.0``: the ``v`` is added)."""
    replicas: Annotated[machinery.Int32, pydantic.Field(ge=0)] = 2
    """Number of API server replicas."""
    data_store_name: str | None = None
    """Kamaji DataStore to use; default: the site's Kamaji default."""
    data_store_schema: (
        Annotated[str, pydantic.Field(json_schema_extra=machinery.immutable("dataStoreSchema"))] | None
    ) = None
    """Database name (relational DataStores) or key prefix (etcd); default: Kamaji's; immutable."""
    data_store_username: (
        Annotated[str, pydantic.Field(json_schema_extra=machinery.immutable("dataStoreUsername"))] | None
    ) = None
    """Database user (relational DataStores); default: Kamaji's, from namespace and name; immutable."""
    data_store_overrides: list[components.DataStoreOverride] | None = None
    """Resources kept in other DataStores."""
    registry: str | None = None
    """Registry of the control-plane images (air-gapped sites); default: Kamaji's, registry.k8s.io."""
    api_server: components.Component | None = None
    """kube-apiserver: extra arguments, resources, volume mounts, image name."""
    controller_manager: components.Component | None = None
    """kube-controller-manager: extra arguments, resources, volume mounts, image name."""
    scheduler: components.Component | None = None
    """kube-scheduler: extra arguments, resources, volume mounts, image name."""
    kine: components.Kine | None = None
    """kine: extra arguments and resources (kine-backed DataStores only)."""
    deployment: components.Deployment | None = None
    """The control-plane Deployment at the site: placement, metadata, extra containers and volumes."""
    # default {} in the CRD: the API server then fills the nested defaults (serviceType,
    # kubelet settings) too, so `kubectl get -o yaml` shows what the TCP will get.
    network: api_network.Network = pydantic.Field(
        default_factory=api_network.Network, json_schema_extra={"default": {}}
    )
    addons: components.Addons = pydantic.Field(default_factory=components.Addons)
    kubelet: components.Kubelet = pydantic.Field(
        default_factory=components.Kubelet, json_schema_extra={"default": {}}
    )
    admission_controllers: list[AdmissionController] | None = None
    """Admission plugins to enable; default: Kamaji's default list."""
    kubeconfig_secret_key: Annotated[str, pydantic.Field(min_length=1)] = names.ADMIN_KUBECONFIG_KEY
    """Key of the TCP's admin kubeconfig Secret copied into ``<cluster>-kubeconfig``."""
    control_plane_endpoint: cluster.Endpoint | None = None
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


class Initialization(machinery.Model):
    """Cluster API v1beta2 contract: initialization milestones."""

    control_plane_initialized: bool = False
    """The control plane has been Ready once (never goes back to false)."""


class Status(machinery.Model):
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
    replicas: Annotated[machinery.Int32, pydantic.Field(ge=0)] = 0
    """API server pods the TCP's Deployment has."""
    ready_replicas: Annotated[machinery.Int32, pydantic.Field(ge=0)] = 0
    """API server pods that are ready."""
    available_replicas: Annotated[machinery.Int32, pydantic.Field(ge=0)] = 0
    """v1beta2: API server pods that are available."""
    up_to_date_replicas: Annotated[machinery.Int32, pydantic.Field(ge=0)] = 0
    """v1beta2: API server pods with the desired spec."""
    updated_replicas: Annotated[machinery.Int32, pydantic.Field(ge=0)] = 0
    """v1beta1: API server pods with the desired spec."""
    unavailable_replicas: Annotated[machinery.Int32, pydantic.Field(ge=0)] = 0
    """v1beta1: API server pods that are not available."""
    selector: str | None = None
    """Label selector of the API server pods at the site, ``kamaji.clastix.io/name=<tcp>`` (Kamaji's
    Deployment selector), for the scale subresource."""
    observed_generation: Annotated[int, pydantic.Field(ge=0)] | None = None
    """The ``metadata.generation`` this status was computed for."""
    conditions: machinery.Conditions = pydantic.Field(default_factory=list)
    """Available, Ready, IntentDelivered, SiteConnected, StatusFresh, TenantControlPlaneReady,
    SecretsSynced, RollingOut, ScalingUp, ScalingDown, Deleting, Paused."""
    # What is the site's rather than this control plane's (its heartbeat time, its intent
    # backlog) is on the Site (``kubectl get site``), not here: it would rewrite the status of
    # every control plane of the site at each change (a burst moves the backlog at each intent).


# Object -------------------------------------------------------------------------------------


class RemoteKamajiControlPlane(machinery.Object):
    """A Kamaji TenantControlPlane run at a remote site, for a Cluster API Cluster."""

    api_version: str = API_VERSION
    kind: str = KIND
    spec: Spec
    status: Status = pydantic.Field(default_factory=Status)

    @property
    def owner_uid_claim(self) -> str:
        """The owner identity the annotation claims ("" none); believed as
        ``hub.reconcile.rkcp.owner`` says."""
        return self.metadata.annotations.get(OWNER_UID_ANNOTATION, "")
