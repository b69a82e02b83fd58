"""The sandbox's example objects: one CAPI ``Cluster`` + ``RemoteKamajiControlPlane`` pair per control plane.

Pure builders of the manifests a platform engineer would apply to the management cluster (the
Cluster first, then the RKCP it points at, owned by it), and the sandbox's naming scheme.
Talks to nothing; ``sandbox.launcher.controlplanes`` creates them through ``common.kube``.
"""

from __future__ import annotations

import string
from typing import Any

from common.kube import resources
from hub.controllers import writing

__all__ = ["DEFAULT_VERSION", "cluster", "control_plane_names", "remote_kamaji_control_plane", "site_names"]

DEFAULT_VERSION = "v1.31.0"
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
CLUSTER = resources.CLUSTER


def site_names(count: int) -> tuple[str, ...]:
    """``site-a``, ``site-b``, …, ``site-z``, ``site-aa``, … (DNS labels, in order)."""
    if count < 1:
        raise ValueError(f"the sandbox needs at least one site, got {count}")
    names = []
    for i in range(count):
        letters = ""
        n = i + 1
        while n:  # bijective base 26: a..z, aa..az, ba.. (no "zero" letter)
            n, r = divmod(n - 1, 26)
            letters = string.ascii_lowercase[r] + letters
        names.append(f"site-{letters}")
    return tuple(names)


def control_plane_names(sites: tuple[str, ...], *, per_site: int) -> list[tuple[str, str]]:
    """(name, site) of every control plane: ``site-a-1``, ``site-a-2``, ``site-b-1``, …

    The site is in the name so that ``kubectl get rkcp -A`` and the TCP lists read at a glance;
    the same name serves the Cluster, the RKCP and the TCP at the site.
    """
    if per_site < 0:
        raise ValueError(f"control planes per site must be 0 or more, got {per_site}")
    return [(f"{site}-{i}", site) for site in sites for i in range(1, per_site + 1)]


def cluster(name: str, *, namespace: str) -> dict[str, Any]:
    """A CAPI Cluster whose control plane is the RKCP of the same name."""
    return {
        "apiVersion": CLUSTER.api_version,
        "kind": CLUSTER.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "clusterNetwork": {
                "apiServerPort": 6443,
                "services": {"cidrBlocks": ["10.96.0.0/16"]},
                "pods": {"cidrBlocks": ["10.244.0.0/16"]},
                "serviceDomain": "cluster.local",
            },
            "controlPlaneRef": {"apiVersion": RKCP.api_version, "kind": RKCP.kind, "name": name},
        },
    }


def remote_kamaji_control_plane(
    name: str,
    *,
    namespace: str,
    cluster_uid: str,
    site: str,
    target_namespace: str,
    version: str = DEFAULT_VERSION,
    replicas: int = 2,
    **spec: Any,
) -> dict[str, Any]:
    """The RKCP of Cluster ``name`` (owned by it, as CAPI's Cluster controller would set), placed
    at ``site`` in ``target_namespace``; extra ``spec`` fields pass through unchanged."""
    return {
        "apiVersion": RKCP.api_version,
        "kind": RKCP.kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {writing.CLUSTER_NAME_LABEL: name},
            "ownerReferences": [
                {"apiVersion": CLUSTER.api_version, "kind": CLUSTER.kind, "name": name, "uid": cluster_uid}
            ],
        },
        "spec": {
            "site": site,
            "targetNamespace": target_namespace,
            "version": version,
            "replicas": replicas,
            **spec,
        },
    }
