"""The RKCP status writer: one patch of ``status`` per RKCP per interval, none when nothing changed;
a new RKCP's first one interval after it was first seen, unless it is Ready.

Owns the loop time of each RKCP's last status write, so a burst of site reports coalesces into
one write, and a digest of what it wrote (the cached object may lag behind it); ``forget`` drops
an RKCP's. Talks to the management cluster (``common.kube``: patch
``remotekamajicontrolplanes/status``).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import msgspec

from common import kube as ckube
from common import objects
from common.kube import errors as kerrors
from common.kube import resources
from hub.api import rkcp
from hub.controllers.rkcp.own_writes import OwnWrites

Key = objects.Key

INTERVAL = 1.0
"""Seconds: at most one status write per RKCP per interval (bursts of site reports coalesce)."""


class StatusWrites:
    def __init__(self, kube: ckube.Kube, *, interval: float = INTERVAL, own: OwnWrites | None = None) -> None:
        self.kube = kube
        self.own = own if own is not None else OwnWrites()
        self.interval = interval
        self._last: dict[Key, float] = {}
        """Loop time of each RKCP's last status write."""
        self._seen: dict[Key, float] = {}
        """Loop time a new RKCP (no status yet) was first seen, until its first status write."""
        self._written: dict[Key, bytes] = {}
        """A digest of each RKCP's last status written: the cached object may not show it yet."""

    async def write(
        self, key: Key, r: rkcp.RemoteKamajiControlPlane, status: rkcp.Status, requeue: float | None
    ) -> float | None:
        """Patch ``status`` unless it is ``r``'s already; when to look again (sooner if too early)."""
        written = self._written.get(key)
        if status == r.status and (written is None or written == _digest(status.to_dict())):
            # What the object shows, and nothing else written since that the cache may not show
            # yet (our own status writes enqueue nothing: a write the cache lags behind would
            # otherwise hide that a later decision went back to what the cache still shows).
            return requeue
        now = asyncio.get_running_loop().time()
        if key in self._last:
            wait = self._last[key] + self.interval - now
        elif _fresh(r) and not status.ready:
            # A new control plane's first status waits one interval for the site's answer: one
            # that is Ready by then is written once, not once asked and once again Ready.
            wait = self._seen.setdefault(key, now) + self.interval - now
        else:
            wait = 0.0
        if wait > 0:
            return wait if requeue is None else min(wait, requeue)
        body = status.to_dict()
        try:
            patched = await self.kube.patch(
                resources.REMOTE_KAMAJI_CONTROL_PLANE,
                key[1],
                {"status": body},
                namespace=key[0],
                subresource="status",
            )
        except kerrors.NotFound:
            return None
        after = str((patched.get("metadata") or {}).get("resourceVersion") or "")
        self.own.wrote(key, before=r.metadata.resource_version, after=after, now=now)
        self._last[key] = now
        self._seen.pop(key, None)
        self._written[key] = _digest(body)
        return requeue

    def forget(self, key: Key) -> None:
        self._last.pop(key, None)
        self._seen.pop(key, None)
        self._written.pop(key, None)


def _fresh(r: rkcp.RemoteKamajiControlPlane) -> bool:
    """Whether ``r`` has no status written yet (by this hub or any before it)."""
    return r.status.observed_generation is None and not r.status.conditions


def _digest(body: dict[str, Any]) -> bytes:
    return hashlib.blake2b(msgspec.json.encode(body, order="sorted"), digest_size=16).digest()
