"""Cluster API's ``cluster.x-k8s.io`` Cluster as the hub reads it, and its ``APIEndpoint``.

A read-only view: only the fields the hub uses (paused, the cluster network for the
TenantControlPlane's, the control-plane endpoint and reference); everything else is ignored.
``Endpoint`` is shared with ``hub.api``, whose spec carries one too. ``pause_message`` is CAPI's
pause rule for a provider's object (util/paused). Pure: talks to nothing.
"""

from __future__ import annotations

from typing import Annotated, Final

import pydantic

from hub import apimachinery

WATCH_FILTER_LABEL = "cluster.x-k8s.io/watch-filter"
"""The label a provider's ``--watch-filter`` value selects on (CAPI's ``clusterv1.WatchLabel``)."""
PAUSED_ANNOTATION: Final = "cluster.x-k8s.io/paused"
"""On a Cluster API object: its controllers keep their hands off it (any value)."""


class Endpoint(apimachinery.Model):
    """A host and port of an API server (Cluster API's APIEndpoint).

    ``{host: "", port: 0}`` is how Cluster API writes "not set yet", hence no lower bounds.
    """

    host: Annotated[str, pydantic.Field(max_length=512)]
    """Host name or IP address."""
    port: Annotated[apimachinery.Int32, pydantic.Field(ge=0, le=65535)]
    """TCP port."""

    @property
    def is_set(self) -> bool:
        return bool(self.host) and self.port > 0


class NetworkRanges(apimachinery.Model):
    cidr_blocks: list[str] = pydantic.Field(default_factory=list)


class ClusterNetwork(apimachinery.Model):
    api_server_port: int | None = None
    services: NetworkRanges | None = None
    pods: NetworkRanges | None = None
    service_domain: str | None = None


class ClusterSpec(apimachinery.Model):
    paused: bool = False
    cluster_network: ClusterNetwork | None = None
    control_plane_endpoint: Endpoint | None = None
    control_plane_ref: apimachinery.ObjectReference | None = None


class Cluster(apimachinery.Object):
    """The fields of a ``cluster.x-k8s.io`` Cluster the hub reads (everything else is ignored)."""

    api_version: str = "cluster.x-k8s.io/v1beta1"
    kind: str = "Cluster"
    spec: ClusterSpec = pydantic.Field(default_factory=ClusterSpec)

    @property
    def paused(self) -> bool:
        """``spec.paused`` or the ``cluster.x-k8s.io/paused`` annotation (either pauses providers)."""
        return self.spec.paused or PAUSED_ANNOTATION in self.metadata.annotations


def pause_message(cluster: Cluster | None, obj: apimachinery.Object) -> str:
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
