"""Cluster API's ``cluster.x-k8s.io`` Cluster as the hub reads it, in v1beta1 or v1beta2 shape.

A read-only view: only the fields the hub uses (paused, the cluster network for the
TenantControlPlane's, the control-plane endpoint, the control-plane and infrastructure
references); everything else is ignored. The two served versions differ there only in the
references: v1beta1's are ObjectReferences (``apiVersion``, ``kind``, ``name``, ``namespace``),
v1beta2's ContractVersionedObjectReferences (``apiGroup``, ``kind``, ``name``: the version is
whatever the provider's contract says, the namespace the Cluster's). ``Reference`` reads both.
``served_version`` picks the version to watch from what the server serves. ``Endpoint`` is shared
with ``hub.api.rkcp``, whose spec carries one too. ``pause_message`` is CAPI's pause rule for a
provider's object (util/paused). Pure: talks to nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Final

import pydantic

from common.kube import resources
from hub.api import machinery

WATCH_FILTER_LABEL = "cluster.x-k8s.io/watch-filter"
"""The label a provider's ``--watch-filter`` value selects on (CAPI's ``clusterv1.WatchLabel``)."""
PAUSED_ANNOTATION: Final = "cluster.x-k8s.io/paused"
"""On a Cluster API object: its controllers keep their hands off it (any value)."""
GROUP: Final = resources.CLUSTER.group
V1BETA2: Final = "v1beta2"


def served_version(versions: Iterable[str]) -> str:
    """The version of Cluster to watch: v1beta2 where the server serves it (CAPI ≥ 1.11), v1beta1
    otherwise (also when the group is not served yet: the watch waits for it in CAPI's oldest
    contract the hub reads)."""
    return V1BETA2 if V1BETA2 in set(versions) else resources.CLUSTER.version


def resource(version: str) -> resources.Resource:
    """The ``clusters`` resource at ``version``."""
    c = resources.CLUSTER
    return resources.Resource(c.group, version, c.plural, c.kind, namespaced=c.namespaced)


class Endpoint(machinery.Model):
    """A host and port of an API server (Cluster API's APIEndpoint).

    ``{host: "", port: 0}`` is how Cluster API writes "not set yet", hence no lower bounds.
    """

    host: Annotated[str, pydantic.Field(max_length=512)]
    """Host name or IP address."""
    port: Annotated[machinery.Int32, pydantic.Field(ge=0, le=65535)]
    """TCP port."""

    @property
    def is_set(self) -> bool:
        return bool(self.host) and self.port > 0


class Reference(machinery.Model):
    """A reference of a Cluster to a provider's object, in either version's shape."""

    api_version: str = ""
    """v1beta1: ``group/version``."""
    api_group: str = ""
    """v1beta2: the group only."""
    kind: str = ""
    name: str = ""
    namespace: str = ""
    """v1beta1 only (and always the Cluster's own)."""

    @property
    def group(self) -> str:
        if self.api_group:
            return self.api_group
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        """The version the reference names ("" in v1beta2: the group's preferred one is used)."""
        return self.api_version.rpartition("/")[2] if self.api_version and not self.api_group else ""


class NetworkRanges(machinery.Model):
    cidr_blocks: list[str] = pydantic.Field(default_factory=list)


class ClusterNetwork(machinery.Model):
    api_server_port: int | None = None
    services: NetworkRanges | None = None
    pods: NetworkRanges | None = None
    service_domain: str | None = None


class ClusterSpec(machinery.Model):
    paused: bool | None = None
    """A pointer in v1beta2 (absent: not paused)."""
    cluster_network: ClusterNetwork | None = None
    control_plane_endpoint: Endpoint | None = None
    control_plane_ref: Reference | None = None
    infrastructure_ref: Reference | None = None


class Cluster(machinery.Object):
    """The fields of a ``cluster.x-k8s.io`` Cluster the hub reads (everything else is ignored)."""

    api_version: str = "cluster.x-k8s.io/v1beta1"
    kind: str = "Cluster"
    spec: ClusterSpec = pydantic.Field(default_factory=ClusterSpec)

    @property
    def paused(self) -> bool:
        """``spec.paused`` or the ``cluster.x-k8s.io/paused`` annotation (either pauses providers)."""
        return bool(self.spec.paused) or PAUSED_ANNOTATION in self.metadata.annotations


def pause_message(cluster: Cluster | None, obj: machinery.Object) -> str:
    """Why ``obj``'s provider must keep its hands off it, "" when it need not (CAPI's pause).

    Cluster API pauses a provider's object through its Cluster's ``spec.paused`` and the
    ``cluster.x-k8s.io/paused`` annotation on the object itself (``clusterctl move`` sets the
    first); the Cluster's own annotation pauses it here too, as it always did. The message is
    CAPI's Paused condition's, one part per cause."""
    causes = []
    if cluster is not None and cluster.spec.paused:
        causes.append("Cluster spec.paused is set to true")
    if cluster is not None and PAUSED_ANNOTATION in cluster.metadata.annotations:
        causes.append(f"Cluster has the {PAUSED_ANNOTATION} annotation")
    if PAUSED_ANNOTATION in obj.metadata.annotations:
        causes.append(f"{obj.kind} has the {PAUSED_ANNOTATION} annotation")
    return ", ".join(causes)
