"""Reading Kubernetes objects as plain dicts (the wire's camelCase JSON). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def dig(obj: Mapping[str, Any], *path: str) -> Any:
    """``obj[path[0]][path[1]]...``, or None as soon as a step is missing or not a mapping."""
    node: Any = obj
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


Key = tuple[str, str]
"""(namespace, name) of a Kubernetes object; the namespace is empty for a cluster-scoped one."""


def key(obj: Mapping[str, Any]) -> Key:
    """The (namespace, name) of ``obj`` from its metadata (missing fields read as empty)."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "", ""
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""kubectl's copy of what it last applied: an annotation as large as the object's spec."""


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without what the API server and kubectl keep for their writers and no reader of
    ours needs: ``metadata.managedFields`` (server-side apply's record) and kubectl's
    last-applied copy. A new dict when there was something to drop, ``obj`` itself otherwise."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return obj
    notes = meta.get("annotations")
    applied = isinstance(notes, Mapping) and LAST_APPLIED in notes
    if "managedFields" not in meta and not applied:
        return obj
    kept = {k: v for k, v in meta.items() if k != "managedFields"}
    if isinstance(notes, Mapping) and applied:
        kept["annotations"] = {k: v for k, v in notes.items() if k != LAST_APPLIED}
    return {**obj, "metadata": kept}
