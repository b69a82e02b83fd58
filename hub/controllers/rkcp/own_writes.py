"""The hub's own writes to RKCPs that the watch has not brought back yet.

Owns, per RKCP, the resourceVersion its cached object had when the hub last changed it (the
finalizer, the endpoint, the status). While the cache still shows that version, a reconcile would
decide from an object older than the hub's own write: it would plan the write again, and a
write guarded by that stale version fails with a Conflict. So the reconcile waits for the watch
(``behind``). Only versions are compared for equality: their order means nothing.
"""

from __future__ import annotations

from common import objects

Key = objects.Key


class OwnWrites:
    def __init__(self) -> None:
        self._before: dict[Key, str] = {}

    def wrote(self, key: Key, *, before: str, after: str) -> None:
        """The hub changed ``key`` from version ``before`` to ``after`` (a write that changed
        nothing keeps its version, and leaves nothing to wait for)."""
        if before and after and before != after:
            self._before[key] = before

    def behind(self, key: Key, cached: str) -> bool:
        """Whether the cached object (at version ``cached``) predates the hub's last write."""
        before = self._before.get(key)
        if before is None:
            return False
        if before == cached:
            return True
        del self._before[key]  # caught up (or moved on by another writer since)
        return False

    def forget(self, key: Key) -> None:
        self._before.pop(key, None)
