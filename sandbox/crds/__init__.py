"""The sandbox's compact CustomResourceDefinitions, shipped as package data.

Owns ``tenantcontrolplane.yaml`` (Kamaji's TenantControlPlane) and ``cluster.yaml`` (Cluster API's
Cluster): the third-party kinds a sandbox cluster needs, typed only where kamaji-broker reads or
writes them. Talks to nothing; ``sandbox.kamaji.crds.install`` puts them on a cluster.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ALL", "CLUSTER", "TENANT_CONTROL_PLANE"]

_HERE = Path(__file__).resolve().parent

TENANT_CONTROL_PLANE: Path = _HERE / "tenantcontrolplane.yaml"
"""TenantControlPlane, ``kamaji.clastix.io/v1alpha1`` (what a site cluster runs)."""

CLUSTER: Path = _HERE / "cluster.yaml"
"""Cluster API ``Cluster``, ``cluster.x-k8s.io/v1beta1`` (what the management cluster holds)."""

ALL: tuple[Path, ...] = (TENANT_CONTROL_PLANE, CLUSTER)
