"""The decisions of the topology simulator: a ClusterClass-based Cluster → its control plane and
InfraCluster, as Cluster API's topology controller makes them.

For a Cluster with ``spec.topology`` and its ClusterClass: the topology's variables (the Cluster's
values, the class's schema defaults for required ones, and ``builtin.cluster`` /
``builtin.controlPlane``); the class's inline JSON patches applied to a copy of each template
(selector by apiVersion/kind and ``matchResources``; ``value`` or ``valueFrom.variable``); an
object made from each patched template (kind without ``Template``, named ``<cluster>-<suffix>``,
labelled and annotated as CAPI does, owned by the Cluster); the control plane's ``version`` and
``replicas`` from the topology; the Cluster's ``controlPlaneRef`` and ``infrastructureRef``; and,
once made, what to change when the topology's version or replicas change.

What CAPI does that this does not (a sandbox stand-in, refused with ``TopologyError`` where a
class asks for it): ``valueFrom.template`` and ``enabledIf`` (Go templates), external patches,
worker classes, variable schema validation. Pure: talks to nothing.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Final

from sandbox.capi.ownership import CLUSTER_NAME_LABEL
from sandbox.kubeapi.apply import patching

__all__ = [
    "TopologyError", "control_plane", "drift", "infrastructure_cluster", "reconciled", "references",
    "variables",
]  # fmt: skip

OWNED_LABEL: Final = "topology.cluster.x-k8s.io/owned"
CLONED_NAME: Final = "cluster.x-k8s.io/cloned-from-name"
CLONED_GROUP_KIND: Final = "cluster.x-k8s.io/cloned-from-groupkind"
TOPOLOGY_RECONCILED: Final = "TopologyReconciled"
RECONCILE_FAILED: Final = "TopologyReconcileFailed"
"""CAPI's v1beta1 reason (severity Error) when the topology cannot be made into objects."""


class TopologyError(ValueError):
    """The Cluster or its class cannot be made into objects; the message names what and where."""


def _topology(cluster: Mapping[str, Any]) -> Mapping[str, Any]:
    return (cluster.get("spec") or {}).get("topology") or {}


def variables(cluster: Mapping[str, Any], cluster_class: Mapping[str, Any]) -> dict[str, Any]:
    """Every variable a patch may read: the Cluster's, the class's defaults, and ``builtin``."""
    topology = _topology(cluster)
    values = {v["name"]: v.get("value") for v in topology.get("variables") or ()}
    for definition in (cluster_class.get("spec") or {}).get("variables") or ():
        name = definition["name"]
        schema = (definition.get("schema") or {}).get("openAPIV3Schema") or {}
        if name not in values and definition.get("required"):
            if "default" not in schema:
                raise TopologyError(f"variable {name!r} is required by ClusterClass {_name(cluster_class)}")
            values[name] = copy.deepcopy(schema["default"])
    metadata = cluster.get("metadata") or {}
    control_plane = topology.get("controlPlane") or {}
    builtin = {
        "cluster": {"name": metadata.get("name"), "namespace": metadata.get("namespace")},
        "controlPlane": {"version": topology.get("version"), "replicas": control_plane.get("replicas")},
    }
    return {**values, "builtin": builtin}


def _name(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


def _lookup(values: Mapping[str, Any], path: str, patch: str) -> Any:
    value: Any = values
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise TopologyError(f"patch {patch!r}: variable {path!r} is not set")
        value = value[part]
    return value


def _selected(selector: Mapping[str, Any], template: Mapping[str, Any], target: str) -> bool:
    if (selector.get("apiVersion"), selector.get("kind")) != (
        template.get("apiVersion"),
        template.get("kind"),
    ):
        return False
    return bool((selector.get("matchResources") or {}).get(target))


def _operations(
    patch: Mapping[str, Any], values: Mapping[str, Any]
) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
    """(selector, JSON patch operation with its value resolved) of each of ``patch``'s definitions."""
    name = str(patch.get("name"))
    if "enabledIf" in patch or "external" in patch:
        raise TopologyError(f"patch {name!r}: enabledIf and external patches are not simulated")
    found = []
    for definition in patch.get("definitions") or ():
        for op in definition.get("jsonPatches") or ():
            made = {"op": op["op"], "path": op["path"]}
            source = op.get("valueFrom") or {}
            if "template" in source:
                raise TopologyError(f"patch {name!r}: valueFrom.template is not simulated")
            if "variable" in source:
                made["value"] = copy.deepcopy(_lookup(values, source["variable"], name))
            elif "value" in op:
                made["value"] = copy.deepcopy(op["value"])
            found.append((definition.get("selector") or {}, made))
    return found


def patched(
    template: Mapping[str, Any], cluster_class: Mapping[str, Any], values: Mapping[str, Any], *, target: str
) -> dict[str, Any]:
    """``template`` with the class's patches for ``target`` (``controlPlane``, ``infrastructureCluster``)."""
    result = copy.deepcopy(dict(template))
    for patch in (cluster_class.get("spec") or {}).get("patches") or ():
        for selector, op in _operations(patch, values):
            if not _selected(selector, template, target):
                continue
            try:
                result = patching.json_patch(result, [op])
            except patching.PatchError as exc:
                raise TopologyError(f"patch {patch.get('name')!r} on {_name(template)}: {exc}") from None
    return result


def suffix(cluster: Mapping[str, Any]) -> str:
    """Five characters from the Cluster's uid: CAPI's names are random, the simulator's stable."""
    uid = re.sub(r"[^a-z0-9]", "", str((cluster.get("metadata") or {}).get("uid") or "").lower())
    if len(uid) < 5:
        raise TopologyError(f"Cluster {_name(cluster)} has no uid yet")
    return uid[:5]


def _made_from(template: Mapping[str, Any], cluster: Mapping[str, Any]) -> dict[str, Any]:
    """An object from a (patched) template, as CAPI clones it: owned by the Cluster, labelled."""
    meta = cluster.get("metadata") or {}
    name = f"{meta['name']}-{suffix(cluster)}"
    kind = str(template["kind"])
    if not kind.endswith("Template"):
        raise TopologyError(f"{kind} {_name(template)} is not a template (its kind must end in Template)")
    group = str(template["apiVersion"]).split("/")[0]
    resource = (template.get("spec") or {}).get("template") or {}
    template_meta = resource.get("metadata") or {}
    labels = {**(template_meta.get("labels") or {}), CLUSTER_NAME_LABEL: meta["name"], OWNED_LABEL: ""}
    annotations = {
        **(template_meta.get("annotations") or {}),
        CLONED_NAME: (template.get("metadata") or {}).get("name"),
        CLONED_GROUP_KIND: f"{kind}.{group}",
    }
    # A plain owner, as CAPI's topology controller clones it; the Cluster controller then makes it
    # the controller (``sandbox.capi.ownership``).
    owner = {"apiVersion": cluster["apiVersion"], "kind": "Cluster", "name": meta["name"], "uid": meta["uid"]}
    return {
        "apiVersion": template["apiVersion"],
        "kind": kind.removesuffix("Template"),
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner],
        },
        "spec": copy.deepcopy(resource.get("spec") or {}),
    }


def control_plane(
    cluster: Mapping[str, Any], cluster_class: Mapping[str, Any], template: Mapping[str, Any]
) -> dict[str, Any]:
    """The control plane of a ClusterClass-based Cluster: the class's template, patched, with the
    topology's version and replicas."""
    topology = _topology(cluster)
    if not topology.get("version"):
        raise TopologyError(f"Cluster {_name(cluster)} has no spec.topology.version")
    values = variables(cluster, cluster_class)
    made = _made_from(patched(template, cluster_class, values, target="controlPlane"), cluster)
    made["spec"]["version"] = topology["version"]
    replicas = (topology.get("controlPlane") or {}).get("replicas")
    if replicas is not None:
        made["spec"]["replicas"] = replicas
    return made


def infrastructure_cluster(
    cluster: Mapping[str, Any], cluster_class: Mapping[str, Any], template: Mapping[str, Any]
) -> dict[str, Any]:
    """The InfraCluster of a ClusterClass-based Cluster: the class's template, patched."""
    values = variables(cluster, cluster_class)
    return _made_from(patched(template, cluster_class, values, target="infrastructureCluster"), cluster)


def _ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "namespace": meta["namespace"],
    }


def references(control: Mapping[str, Any], infrastructure: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch of the Cluster that points it at what was made for it."""
    return {"spec": {"controlPlaneRef": _ref(control), "infrastructureRef": _ref(infrastructure)}}


def drift(cluster: Mapping[str, Any], control: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that brings an existing control plane to the topology's version and
    replicas (an upgrade is a change of ``spec.topology.version``), or None when it is there."""
    topology = _topology(cluster)
    spec = control.get("spec") or {}
    wanted = {"version": topology.get("version")}
    replicas = (topology.get("controlPlane") or {}).get("replicas")
    if replicas is not None:
        wanted["replicas"] = replicas
    changed = {k: v for k, v in wanted.items() if v is not None and spec.get(k) != v}
    return {"spec": changed} if changed else None


def reconciled(cluster: Mapping[str, Any], error: str, *, now: str) -> list[dict[str, Any]] | None:
    """The Cluster's ``status.conditions`` with ``TopologyReconciled`` as CAPI's topology
    controller sets it (v1beta1: with a severity when False): False with ``error``, True without;
    None when it already says so (nothing to write)."""
    conditions = [dict(c) for c in (cluster.get("status") or {}).get("conditions") or ()]
    found = next((c for c in conditions if c.get("type") == TOPOLOGY_RECONCILED), None)
    wanted: dict[str, Any] = {"type": TOPOLOGY_RECONCILED, "status": "False" if error else "True"}
    if error:
        wanted |= {"severity": "Error", "reason": RECONCILE_FAILED, "message": error}
    if found is not None and {k: v for k, v in found.items() if k != "lastTransitionTime"} == wanted:
        return None
    same = found is not None and found.get("status") == wanted["status"]
    wanted["lastTransitionTime"] = found.get("lastTransitionTime", now) if same and found else now
    others = [c for c in conditions if c.get("type") != TOPOLOGY_RECONCILED]
    return sorted([*others, wanted], key=lambda c: str(c.get("type")))
