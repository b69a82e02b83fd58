"""What Cluster API's Cluster controller writes on the objects a Cluster points at: pure, tested
by tables.

CAPI's Cluster controller makes the Cluster the controller owner of its control plane and of its
InfraCluster (``ownerReferences`` with ``controller`` and ``blockOwnerDeletion``) and labels each
with ``cluster.x-k8s.io/cluster-name``; a control-plane provider waits for that owner before it
does anything (the hub says "waiting for an ownerReference to a Cluster"). ``adoption`` is the
merge patch that does the same to one referenced object, or None when it is already so; an object
another controller owns is refused, as ``controllerutil.SetControllerReference`` refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["CLUSTER_NAME_LABEL", "AlreadyOwned", "adoption", "owner_reference"]

CLUSTER_NAME_LABEL: Final = "cluster.x-k8s.io/cluster-name"


class AlreadyOwned(ValueError):
    """The object has another controller owner; the message names it."""


def owner_reference(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The Cluster as the controller owner of what it points at."""
    meta = cluster["metadata"]
    return {
        "apiVersion": cluster["apiVersion"],
        "kind": "Cluster",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def adoption(cluster: Mapping[str, Any], obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch making ``cluster`` the controller owner of ``obj`` and labelling it with the
    Cluster's name; None when both are there. Raises ``AlreadyOwned`` when another object is
    ``obj``'s controller."""
    meta = obj.get("metadata") or {}
    mine = owner_reference(cluster)
    refs = list(meta.get("ownerReferences") or [])
    patch: dict[str, Any] = {}
    for ref in refs:
        if ref.get("controller") and ref.get("uid") != mine["uid"]:
            raise AlreadyOwned(
                f"{obj.get('kind')} {meta.get('namespace')}/{meta.get('name')} is already controlled "
                f"by {ref.get('kind')} {ref.get('name')}"
            )
    ours = [r for r in refs if r.get("uid") == mine["uid"]]
    if ours != [mine]:
        # A merge patch replaces the whole list: every other owner is kept as it was.
        patch["ownerReferences"] = [r for r in refs if r.get("uid") != mine["uid"]] + [mine]
    if (meta.get("labels") or {}).get(CLUSTER_NAME_LABEL) != cluster["metadata"]["name"]:
        patch["labels"] = {CLUSTER_NAME_LABEL: cluster["metadata"]["name"]}
    return {"metadata": patch} if patch else None
