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


PATIENCE = 5.0
"""Seconds a reconcile waits for the watch at most: a watch that stalls longer is the informer's
to mend, and meanwhile a decision from the cache (whose guarded writes fail and are retried)
beats none."""


class OwnWrites:
    def __init__(self, *, patience: float = PATIENCE) -> None:
        self.patience = patience
        self._before: dict[Key, tuple[str, float]] = {}

    def wrote(self, key: Key, *, before: str, after: str, now: float) -> None:
        """The hub changed ``key`` from version ``before`` to ``after`` at loop time ``now`` (a
        write that changed nothing keeps its version, and leaves nothing to wait for)."""
        if before and after and before != after:
            self._before[key] = (before, now)

    def behind(self, key: Key, cached: str, *, now: float) -> bool:
        """Whether the cached object (at version ``cached``) predates the hub's last write, and
        the write is recent enough to wait for."""
        entry = self._before.get(key)
        if entry is None:
            return False
        if entry[0] == cached and now - entry[1] <= self.patience:
            return True
        del self._before[key]  # caught up, moved on by another writer since, or waited long enough
        return False

    def forget(self, key: Key) -> None:
        self._before.pop(key, None)
