"""The sandbox's example objects, made from ``deploy/templates/`` as ``clusterctl generate`` makes them.

A CAPI ``Cluster`` + ``RemoteKamajiControlPlane`` pair per control plane from
``cluster-template.yaml`` (the RKCP then owned by its Cluster, as CAPI's Cluster controller sets
it); with ``--topology``, a Cluster of ``cluster-template-topology.yaml`` and the ClusterClass
``clusterclass-kamaji-broker.yaml`` it names. Variables are substituted by ``sandbox.templating``
(clusterctl's rules) from the sandbox's values. Also the sandbox's naming scheme. Reads the
template files, talks to nothing; ``sandbox.launcher.controlplanes`` creates the objects through
``common.kube``.
"""

from __future__ import annotations

import functools
import string
from pathlib import Path
from typing import Any, Final

import yaml

from common.kube import resources
from sandbox import templating
from sandbox.capi import infra, ownership

__all__ = [
    "DEFAULT_VERSION",
    "cluster",
    "cluster_class",
    "control_plane_names",
    "generated",
    "remote_kamaji_control_plane",
    "site_names",
    "template_values",
    "topology_cluster",
]

DEFAULT_VERSION = "v1.31.0"
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
CLUSTER = resources.CLUSTER
TEMPLATES: Final = Path(__file__).resolve().parents[2] / "deploy" / "templates"
"""The repository's templates: the sandbox runs from a checkout (``make sandbox``)."""
CLUSTER_TEMPLATE: Final = TEMPLATES / "cluster-template.yaml"
TOPOLOGY_TEMPLATE: Final = TEMPLATES / "cluster-template-topology.yaml"
CLUSTER_CLASS: Final = TEMPLATES / "clusterclass-kamaji-broker.yaml"


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


def template_values(
    name: str,
    *,
    namespace: str,
    site: str = "",
    target_namespace: str = "",
    version: str = DEFAULT_VERSION,
    replicas: int = 2,
) -> dict[str, str]:
    """The variables ``clusterctl generate cluster NAME`` would be given for this control plane."""
    return {
        "CLUSTER_NAME": name,
        "NAMESPACE": namespace,
        "KAMAJI_BROKER_SITE": site,
        "KAMAJI_BROKER_TARGET_NAMESPACE": target_namespace,
        "KUBERNETES_VERSION": version,
        "CONTROL_PLANE_MACHINE_COUNT": str(replicas),
    }


@functools.cache
def _text(path: Path) -> str:
    return path.read_text()


def rendered(path: Path, values: dict[str, str]) -> list[dict[str, Any]]:
    """The objects of template ``path`` with ``values`` substituted (clusterctl's rules)."""
    text = templating.substitute(_text(path), values)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def _one(documents: list[dict[str, Any]], kind: str, path: Path) -> dict[str, Any]:
    found = [d for d in documents if d.get("kind") == kind]
    if len(found) != 1:
        raise ValueError(f"{path} holds {len(found)} {kind} objects, the sandbox wants one")
    return found[0]


def cluster(name: str, *, namespace: str) -> dict[str, Any]:
    """The CAPI Cluster of ``cluster-template.yaml``, whose control plane is the RKCP of the same name."""
    return _one(
        rendered(CLUSTER_TEMPLATE, template_values(name, namespace=namespace)), CLUSTER.kind, CLUSTER_TEMPLATE
    )


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
    """The RKCP of ``cluster-template.yaml`` for Cluster ``name``, owned by it (as CAPI's Cluster
    controller sets it), placed at ``site`` in ``target_namespace``; extra ``spec`` fields are
    added unchanged."""
    values = template_values(
        name,
        namespace=namespace,
        site=site,
        target_namespace=target_namespace,
        version=version,
        replicas=replicas,
    )
    obj = _one(rendered(CLUSTER_TEMPLATE, values), RKCP.kind, CLUSTER_TEMPLATE)
    cluster = {"apiVersion": CLUSTER.api_version, "metadata": {"name": name, "uid": cluster_uid}}
    obj["metadata"]["ownerReferences"] = [ownership.owner_reference(cluster)]
    obj["spec"].update(spec)
    return obj


def topology_cluster(
    name: str,
    *,
    namespace: str,
    site: str,
    target_namespace: str,
    version: str = DEFAULT_VERSION,
    replicas: int = 2,
) -> dict[str, Any]:
    """The Cluster of ``cluster-template-topology.yaml``: class ``kamaji-broker``, placed by variables."""
    values = template_values(
        name,
        namespace=namespace,
        site=site,
        target_namespace=target_namespace,
        version=version,
        replicas=replicas,
    )
    return _one(rendered(TOPOLOGY_TEMPLATE, values), CLUSTER.kind, TOPOLOGY_TEMPLATE)


def cluster_class(*, namespace: str, target_namespace: str) -> list[dict[str, Any]]:
    """``clusterclass-kamaji-broker.yaml``: the ClusterClass and the templates it names."""
    values = {"NAMESPACE": namespace, "KAMAJI_BROKER_TARGET_NAMESPACE": target_namespace}
    return rendered(CLUSTER_CLASS, values)


def generated(
    name: str,
    *,
    namespace: str,
    site: str,
    target_namespace: str,
    topology: bool = False,
    capi: str = "stand-in",
    version: str = DEFAULT_VERSION,
    replicas: int = 2,
) -> list[dict[str, Any]]:
    """What a user applies for control plane ``name`` at ``site``: what ``clusterctl generate
    cluster`` prints from ``cluster-template.yaml`` (with ``topology``: the ClusterClass file,
    then ``cluster-template-topology.yaml``'s Cluster); with real Cluster API (``capi``
    ``"real"``) the stand-in infrastructure where the templates ask for the workers' own."""
    values = template_values(
        name,
        namespace=namespace,
        site=site,
        target_namespace=target_namespace,
        version=version,
        replicas=replicas,
    )
    if topology:
        made = cluster_class(namespace=namespace, target_namespace=target_namespace)
        made = infra.in_class(made) if capi == "real" else made
        return [*made, *rendered(TOPOLOGY_TEMPLATE, values)]
    made = rendered(CLUSTER_TEMPLATE, values)
    return infra.with_infrastructure(made, name=name, namespace=namespace) if capi == "real" else made
