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
