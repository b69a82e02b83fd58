"""Small shared facts about stored objects: well-known keys, timestamps, private copies.

Imported by ``store`` and ``collecting`` alike (which is why it is not in either). Pure.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from sandbox.kubeapi.state import watching

NAMESPACES: watching.ResourceKey = ("", "namespaces")
CRDS: watching.ResourceKey = ("apiextensions.k8s.io", "customresourcedefinitions")
#: The finalizer the apiextensions-apiserver puts on every CRD to delete its objects first.
CRD_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
#: The finalizer of foreground cascading deletion.
FOREGROUND = "foregroundDeletion"


def now() -> str:
    """An RFC 3339 timestamp with second precision, as metav1.Time serialises."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def copy_obj(entry: watching.Entry) -> dict[str, Any]:
    """A private deep copy of a stored object (decoding its cached JSON is the fastest copy)."""
    result: dict[str, Any] = msgspec.json.decode(entry.raw)
    return result


def terminating(entry: watching.Entry) -> bool:
    return bool(entry.obj["metadata"].get("deletionTimestamp"))
