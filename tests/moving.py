"""``clusterctl move`` of one Cluster between two (emulated) management clusters, step by step as
clusterctl's mover does it (cmd/clusterctl/client/cluster/mover.go), for the tests that prove a
control plane survives it (tests/hub/controllers/rkcp/test_move.py, tests/faults/test_move.py).

The steps: pause the Cluster in the source (``spec.paused``); read the Cluster, its RKCPs and the
Secrets labelled with its name, and create each in the target in owner order (Cluster, then
RKCPs, then Secrets), whole (annotations, finalizers, spec) without resourceVersion, the API
server giving each a new uid, every ownerReference rewritten to its owner's new uid; then in the
source, in reverse order, annotate each ``clusterctl.cluster.x-k8s.io/delete-for-move``, remove
its finalizers and delete it. ``resume`` is clusterctl's last step: unpause in the target.

``on_the_bus`` and ``conflicts`` are what a move must leave alone, for these tests and for
tests/e2e/test_clusterctl_move.py (clusterctl's own move).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from common import bus
from common import kube as ckube
from common.kube import resources
from protocol import messages, streams, subjects

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
DELETE_FOR_MOVE = "clusterctl.cluster.x-k8s.io/delete-for-move"
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
KINDS = (subjects.Kind.INTENT, subjects.Kind.STATUS, subjects.Kind.SECRET)


@dataclass
class Moved:
    """What moved: the uid each object had in the source → its uid in the target."""

    uids: dict[str, str] = field(default_factory=dict)
    objects: list[tuple[resources.Resource, dict[str, Any]]] = field(default_factory=list)
    """Each object as created in the target."""


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or ())


async def _groups(
    src: ckube.Kube, *, namespace: str, cluster: str
) -> list[list[tuple[resources.Resource, dict[str, Any]]]]:
    """The objects to move, by owner order (clusterctl's move sequence)."""
    cl = await src.get(resources.CLUSTER, cluster, namespace=namespace)
    rkcps = [
        o for o in (await src.list(RKCP, namespace=namespace)).items if _owned_by(o, cl["metadata"]["uid"])
    ]
    selector = f"{CLUSTER_NAME_LABEL}={cluster}"
    secrets = (await src.list(resources.SECRET, namespace=namespace, label_selector=selector)).items
    return [[(resources.CLUSTER, cl)], [(RKCP, o) for o in rkcps], [(resources.SECRET, s) for s in secrets]]


def _for_target(obj: dict[str, Any], uids: dict[str, str]) -> dict[str, Any]:
    body = copy.deepcopy(obj)
    meta = body["metadata"]
    meta.pop("resourceVersion", None)  # "New objects cannot have a specified resource version"
    refs = [
        {**ref, "uid": uids[ref["uid"]]} for ref in meta.get("ownerReferences") or () if ref["uid"] in uids
    ]
    meta["ownerReferences"] = refs  # rebuilt with the owners' new uids (buildOwnerChain)
    return body


async def move(src: ckube.Kube, dst: ckube.Kube, *, namespace: str, cluster: str) -> Moved:
    """Move Cluster ``cluster`` and what hangs off it; the target's Cluster stays paused."""
    await src.patch(resources.CLUSTER, cluster, {"spec": {"paused": True}}, namespace=namespace)
    groups = await _groups(src, namespace=namespace, cluster=cluster)
    moved = Moved()
    for group in groups:
        for rtype, obj in group:
            created = await dst.create(rtype, _for_target(obj, moved.uids), namespace=namespace)
            moved.uids[obj["metadata"]["uid"]] = created["metadata"]["uid"]
            moved.objects.append((rtype, created))
    for group in reversed(groups):
        for rtype, obj in group:
            name = obj["metadata"]["name"]
            await src.patch(
                rtype, name, {"metadata": {"annotations": {DELETE_FOR_MOVE: ""}}}, namespace=namespace
            )
            await src.patch(rtype, name, {"metadata": {"finalizers": None}}, namespace=namespace)
            await src.delete(rtype, name, namespace=namespace)
    return moved


async def resume(dst: ckube.Kube, *, namespace: str, cluster: str) -> None:
    """clusterctl's last step: drop ``spec.paused`` in the target."""
    await dst.patch(resources.CLUSTER, cluster, {"spec": {"paused": None}}, namespace=namespace)


async def on_the_bus(
    conn: bus.Connection, site: str, namespace: str, name: str
) -> dict[str, tuple[int, str]]:
    """(sequence, owner uid) of the last message on each subject of control plane ``name`` of
    ``site`` (``namespace`` its namespace there)."""
    out: dict[str, tuple[int, str]] = {}
    for kind in KINDS:
        subject = subjects.control_plane(kind, site, namespace, name)
        stored = await bus.last_message(conn, streams.stream_name(kind, site=site), subject)
        assert stored is not None, f"nothing on {subject}"
        if kind is subjects.Kind.INTENT:
            owner = messages.decode_intent(stored.data).owner.uid
        elif kind is subjects.Kind.STATUS:
            owner = messages.decode_status(stored.data).owner_uid
        else:
            owner = messages.decode_sealed_secrets(stored.data).owner_uid
        out[kind.value] = (stored.seq, owner)
    return out


def conflicts(obj: dict[str, Any] | None) -> list[str]:
    """The RKCP's conditions whose reason is a Conflict or an OwnerMismatch."""
    conds = ((obj or {}).get("status") or {}).get("conditions") or ()
    return [f"{c['type']}={c['reason']}" for c in conds if c["reason"] in ("Conflict", "OwnerMismatch")]
