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
