"""What Cluster API's Cluster controller writes on the objects a Cluster points at: pure, tested
by tables.

CAPI's Cluster controller makes the Cluster an owner of its control plane and of its
InfraCluster and labels each with ``cluster.x-k8s.io/cluster-name``; a control-plane provider
waits for that owner before it does anything (the hub says "waiting for an ownerReference to a
Cluster"). A Cluster of a ClusterClass (``spec.topology``) becomes their controller
(``controller`` and ``blockOwnerDeletion``, as ``controllerutil.SetControllerReference`` writes
it, refusing an object another controller owns); any other Cluster a plain owner (as
``SetOwnerReference`` writes it), which leaves the controller to whoever else manages the object.
Cluster API's own controllers, run against a real API server, showed the difference.
``adoption`` is the merge patch that does the same to one referenced object, or None when it is
already so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["CLUSTER_NAME_LABEL", "AlreadyOwned", "adoption", "owner_reference"]

CLUSTER_NAME_LABEL: Final = "cluster.x-k8s.io/cluster-name"


class AlreadyOwned(ValueError):
    """The object has another controller owner; the message names it."""


def _topology(cluster: Mapping[str, Any]) -> bool:
    return bool((cluster.get("spec") or {}).get("topology"))


def owner_reference(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The Cluster as an owner of what it points at: the controller for a ClusterClass's."""
    meta = cluster["metadata"]
    ref = {"apiVersion": cluster["apiVersion"], "kind": "Cluster", "name": meta["name"], "uid": meta["uid"]}
    if _topology(cluster):
        ref.update(controller=True, blockOwnerDeletion=True)
    return ref


def _same(ref: Mapping[str, Any], mine: Mapping[str, Any]) -> bool:
    """The same owner as controller-runtime matches it: group, kind and name (not the version)."""
    group = str(ref.get("apiVersion", "")).rpartition("/")[0]
    return (group, ref.get("kind"), ref.get("name")) == (
        str(mine["apiVersion"]).rpartition("/")[0], mine["kind"], mine["name"],
    )  # fmt: skip


def adoption(cluster: Mapping[str, Any], obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch making ``cluster`` an owner of ``obj`` (the controller, for a ClusterClass's
    Cluster) and labelling it with the Cluster's name; None when both are there. Raises
    ``AlreadyOwned`` when ``cluster`` would be the controller and another object is."""
    meta = obj.get("metadata") or {}
    mine = owner_reference(cluster)
    refs = list(meta.get("ownerReferences") or [])
    if mine.get("controller"):
        for ref in refs:
            if ref.get("controller") and not _same(ref, mine):
                raise AlreadyOwned(
                    f"{obj.get('kind')} {meta.get('namespace')}/{meta.get('name')} is already controlled "
                    f"by {ref.get('kind')} {ref.get('name')}"
                )
    patch: dict[str, Any] = {}
    if [r for r in refs if _same(r, mine)] != [mine]:
        # A merge patch replaces the whole list: every other owner is kept as it was.
        patch["ownerReferences"] = [r for r in refs if not _same(r, mine)] + [mine]
    if (meta.get("labels") or {}).get(CLUSTER_NAME_LABEL) != cluster["metadata"]["name"]:
        patch["labels"] = {CLUSTER_NAME_LABEL: cluster["metadata"]["name"]}
    return {"metadata": patch} if patch else None
