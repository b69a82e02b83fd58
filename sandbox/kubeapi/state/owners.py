"""Who owns whom: the store's index of uids and ownerReferences.

Owns two maps the garbage collector needs on every delete and that a scan of all objects would
make quadratic: uid → where the object lives, and owner uid → where its dependents live. The
``store`` updates them on each write and removal; ``collecting`` reads them through the store.
Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from sandbox.kubeapi.state import watching

ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects
Location = tuple[watching.ResourceKey, ObjectKey]


class Owners:
    """uid → location, and owner uid → the locations of its dependents."""

    def __init__(self) -> None:
        self._uids: dict[str, Location] = {}
        self._dependents: dict[str, set[Location]] = {}

    def where(self, uid: str) -> Location | None:
        return self._uids.get(uid)

    def dependents(self, uid: str) -> list[Location]:
        """Where the dependents of ``uid`` live, in a stable order."""
        return sorted(self._dependents.get(uid, ()))

    def index(self, where: Location, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        """Record that the object at ``where`` changed from ``old`` to ``new`` (None: absent)."""
        old_owners = _owner_uids(old)
        new_owners = _owner_uids(new)
        for uid in old_owners - new_owners:
            deps = self._dependents.get(uid)
            if deps is not None:
                deps.discard(where)
                if not deps:
                    del self._dependents[uid]
        for uid in new_owners - old_owners:
            self._dependents.setdefault(uid, set()).add(where)
        if new is None and old is not None:
            self._uids.pop(old["metadata"]["uid"], None)
        elif new is not None:
            self._uids[new["metadata"]["uid"]] = where


def _owner_uids(obj: dict[str, Any] | None) -> set[str]:
    if obj is None:
        return set()
    return {
        ref["uid"]
        for ref in obj["metadata"].get("ownerReferences") or []
        if isinstance(ref, dict) and "uid" in ref
    }
