"""The Cluster API stand-in's shell: every Cluster owns what it points at, as CAPI's Cluster
controller makes it (``sandbox.capi.ownership``), and ClusterClass-based Clusters in the
management cluster get their control plane and InfraCluster, as Cluster API's topology
controller would make them.

Each pass lists the Clusters and adopts the control plane and InfraCluster each names; for one
with ``spec.topology`` it reads its ClusterClass and the two templates the class names, creates
the InfraCluster and the control plane ``sandbox.capi.topology`` makes of them, then points the
Cluster at both (``controlPlaneRef``, ``infrastructureRef``); once made, it only brings the
control plane to the topology's version and replicas. A failure (no class, a patch that cannot
apply, a refused object, an object another controller owns) is reported once per Cluster and
message, written in a topology Cluster's ``TopologyReconciled`` condition (as CAPI does), and
tried again next pass. Talks to the management cluster through ``common.kube``; the sandbox
command runs it beside its progress loop (``sandbox.run``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any, Final

from common import aiotasks, kube
from common.kube import errors as kerrors
from common.kube import resources
from sandbox.capi import ownership, topology

__all__ = ["CLUSTER_CLASS", "reconcile", "resource_of", "run"]

CLUSTER_CLASS: Final = resources.Resource("cluster.x-k8s.io", "v1beta1", "clusterclasses", "ClusterClass")
INTERVAL: Final = 1.0
"""Seconds between two passes: a Cluster applied with kubectl gets its control plane within one."""


def resource_of(obj: Mapping[str, Any]) -> resources.Resource:
    """The resource of an object or reference: its kind in lower case, pluralized as kubebuilder
    does for the kinds here (``clusterclasses``, ``dockerclusters``); CAPI asks discovery instead."""
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    kind = str(obj["kind"])
    singular = kind.lower()
    plural = f"{singular}es" if singular.endswith(("s", "x", "ch", "sh")) else f"{singular}s"
    return resources.Resource(group, version, plural, kind)


async def _template(k: kube.Kube, cluster_class: Mapping[str, Any], part: str) -> dict[str, Any]:
    ref = ((cluster_class.get("spec") or {}).get(part) or {}).get("ref")
    if not ref:
        raise topology.TopologyError(f"ClusterClass {cluster_class['metadata']['name']} has no {part}.ref")
    namespace = ref.get("namespace") or cluster_class["metadata"]["namespace"]
    try:
        return await k.get(resource_of(ref), ref["name"], namespace=namespace)
    except kerrors.NotFound:
        raise topology.TopologyError(f"{ref.get('kind')} {namespace}/{ref['name']} not found") from None


async def _create(k: kube.Kube, obj: Mapping[str, Any]) -> None:
    # Conflict: made by an earlier pass that stopped before pointing the Cluster at it.
    with contextlib.suppress(kerrors.Conflict):
        await k.create(resource_of(obj), obj, namespace=obj["metadata"]["namespace"])


async def _adopt(k: kube.Kube, cluster: Mapping[str, Any]) -> None:
    """The Cluster's control plane and InfraCluster owned by it and labelled, as CAPI's Cluster
    controller makes them (what is not there yet is left for a later pass)."""
    spec = cluster.get("spec") or {}
    namespace = cluster["metadata"]["namespace"]
    for part in ("controlPlaneRef", "infrastructureRef"):
        ref = spec.get(part)
        if not ref:
            continue
        try:
            obj = await k.get(resource_of(ref), ref["name"], namespace=namespace)
        except kerrors.NotFound:
            continue
        try:
            patch = ownership.adoption(cluster, obj)
        except ownership.AlreadyOwned as exc:
            raise topology.TopologyError(str(exc)) from None
        if patch is not None:
            await k.patch(resource_of(ref), ref["name"], patch, namespace=namespace)


async def reconcile(k: kube.Kube, cluster: Mapping[str, Any]) -> None:
    """One Cluster: what it points at owned by it; with ``spec.topology``, made or followed."""
    spec = cluster.get("spec") or {}
    await _adopt(k, cluster)
    wanted = spec.get("topology")
    if not wanted:
        return
    namespace = cluster["metadata"]["namespace"]
    ref = spec.get("controlPlaneRef")
    if ref:
        control = await k.get(resource_of(ref), ref["name"], namespace=namespace)
        change = topology.drift(cluster, control)
        if change:
            await k.patch(resource_of(ref), ref["name"], change, namespace=namespace)
        return
    class_namespace = wanted.get("classNamespace") or namespace
    try:
        cluster_class = await k.get(CLUSTER_CLASS, wanted["class"], namespace=class_namespace)
    except kerrors.NotFound:
        raise topology.TopologyError(f"ClusterClass {class_namespace}/{wanted['class']} not found") from None
    infrastructure = topology.infrastructure_cluster(
        cluster, cluster_class, await _template(k, cluster_class, "infrastructure")
    )
    control = topology.control_plane(
        cluster, cluster_class, await _template(k, cluster_class, "controlPlane")
    )
    await _create(k, infrastructure)
    await _create(k, control)
    patch = topology.references(control, infrastructure)
    await k.patch(resources.CLUSTER, cluster["metadata"]["name"], patch, namespace=namespace)


async def run(
    k: kube.Kube, *, stop: asyncio.Event, report: Callable[[str], None], interval: float = INTERVAL
) -> None:
    """Pass over every Cluster until ``stop``; ``report`` hears each new failure once."""
    reported: dict[str, str] = {}
    while not stop.is_set():
        try:
            clusters = (await k.list(resources.CLUSTER)).items
        except kerrors.KubeError as exc:
            clusters = []
            if reported.get("") != str(exc):
                report(f"cannot list Clusters: {exc}")
                reported[""] = str(exc)
        for cluster in clusters:
            key = f"{cluster['metadata']['namespace']}/{cluster['metadata']['name']}"
            error = ""
            try:
                await reconcile(k, cluster)
                reported.pop(key, None)
            except (topology.TopologyError, kerrors.KubeError) as exc:
                error = str(exc)
                if reported.get(key) != error:
                    report(f"Cluster {key}: {exc}")
                    reported[key] = error
            await _mark(k, cluster, error)
        await aiotasks.wait_event(stop, interval)


async def _mark(k: kube.Kube, cluster: Mapping[str, Any], error: str) -> None:
    """The Cluster says whether its topology was made, as CAPI's does: what a reader of the
    management cluster (the sandbox's view) shows for a Cluster that has no control plane."""
    if not (cluster.get("spec") or {}).get("topology"):
        return
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = topology.reconciled(cluster, error, now=now)
    if conditions is None:
        return
    meta = cluster["metadata"]
    # Gone meanwhile, or refused: the next pass tries again.
    with contextlib.suppress(kerrors.KubeError):
        await k.patch(
            resources.CLUSTER, meta["name"], {"status": {"conditions": conditions}},
            namespace=meta["namespace"], subresource="status",
        )  # fmt: skip
