"""Cluster API's ``cluster.x-k8s.io`` Cluster as the hub reads it, and its ``APIEndpoint``.

A read-only view: only the fields the hub uses (paused, the cluster network for the
TenantControlPlane's, the control-plane endpoint and reference); everything else is ignored.
``Endpoint`` is shared with ``hub.api``, whose spec carries one too. Pure: talks to nothing.
"""

from __future__ import annotations

from typing import Annotated

import pydantic

from hub import apimachinery

WATCH_FILTER_LABEL = "cluster.x-k8s.io/watch-filter"
"""The label a provider's ``--watch-filter`` value selects on (CAPI's ``clusterv1.WatchLabel``)."""


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
        return self.spec.paused or "cluster.x-k8s.io/paused" in self.metadata.annotations
