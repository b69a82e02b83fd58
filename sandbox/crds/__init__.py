"""The sandbox's compact CustomResourceDefinitions, shipped as package data.

Owns ``tenantcontrolplane.yaml`` (Kamaji's TenantControlPlane), ``cluster.yaml`` (Cluster API's
Cluster) and, for ClusterClass-based Clusters, ``clusterclass.yaml`` with CAPD's
``dockercluster.yaml`` and ``dockerclustertemplate.yaml`` (the example class's infrastructure),
``standincluster*.yaml``, a test stand-in InfraCluster for Cluster API's own controllers, and
``certmanager-*.yaml``, cert-manager's Issuer and Certificate kinds for clusterctl:
the third-party kinds a sandbox cluster needs, typed only where kamaji-broker (or the sandbox's
topology simulator) reads or writes them. Talks to nothing; ``sandbox.kamaji.crds.install`` puts
them on a cluster.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "ALL",
    "CERT_MANAGER",
    "CLUSTER",
    "CLUSTER_CLASS",
    "DOCKER_CLUSTER",
    "DOCKER_CLUSTER_TEMPLATE",
    "STAND_IN_CLUSTER",
    "TENANT_CONTROL_PLANE",
    "TOPOLOGY",
]

_HERE = Path(__file__).resolve().parent

TENANT_CONTROL_PLANE: Path = _HERE / "tenantcontrolplane.yaml"
"""TenantControlPlane, ``kamaji.clastix.io/v1alpha1`` (what a site cluster runs)."""

CLUSTER: Path = _HERE / "cluster.yaml"
"""Cluster API ``Cluster``, ``cluster.x-k8s.io/v1beta1`` (what the management cluster holds)."""

CLUSTER_CLASS: Path = _HERE / "clusterclass.yaml"
"""Cluster API ``ClusterClass``, ``cluster.x-k8s.io/v1beta1``."""

DOCKER_CLUSTER: Path = _HERE / "dockercluster.yaml"
"""CAPD's ``DockerCluster``, ``infrastructure.cluster.x-k8s.io/v1beta1`` (no controller runs for it)."""

DOCKER_CLUSTER_TEMPLATE: Path = _HERE / "dockerclustertemplate.yaml"
"""CAPD's ``DockerClusterTemplate``, what the example ClusterClass names as its infrastructure."""

STAND_IN_CLUSTER: tuple[Path, ...] = (_HERE / "standincluster.yaml", _HERE / "standinclustertemplate.yaml")
"""``StandInCluster`` and its template, ``infrastructure.cluster.x-k8s.io/v1beta2``: a test
stand-in InfraCluster of Cluster API's v1beta2 contract, for its real controllers
(``sandbox.capi.infra`` calls it provisioned)."""

CERT_MANAGER: tuple[Path, ...] = (_HERE / "certmanager-issuer.yaml", _HERE / "certmanager-certificate.yaml")
"""cert-manager's ``Issuer`` and ``Certificate`` (``cert-manager.io/v1``, kept whole): what
clusterctl init checks before it installs cert-manager, and what providers' components create;
nothing issues them (a test stand-in)."""

TOPOLOGY: tuple[Path, ...] = (CLUSTER_CLASS, DOCKER_CLUSTER, DOCKER_CLUSTER_TEMPLATE)
"""What the management cluster needs for ClusterClass-based Clusters, beside ``CLUSTER``."""

ALL: tuple[Path, ...] = (TENANT_CONTROL_PLANE, CLUSTER)
"""The kinds kamaji-broker itself reads or writes (``TOPOLOGY`` is the sandbox's only)."""
