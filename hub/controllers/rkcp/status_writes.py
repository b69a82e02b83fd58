"""The RKCP status writer: one patch of ``status`` per RKCP per interval, none when nothing changed.

Owns the loop time of each RKCP's last status write, so a burst of site reports coalesces into
one write; ``forget`` drops an RKCP's. Talks to the management cluster (``common.kube``: patch
``remotekamajicontrolplanes/status``).
"""

from __future__ import annotations

import asyncio

from common import kube as ckube
from common import objects
from common.kube import errors as kerrors
from common.kube import resources
from hub.api import rkcp

Key = objects.Key

INTERVAL = 1.0
"""Seconds: at most one status write per RKCP per interval (bursts of site reports coalesce)."""


class StatusWrites:
    def __init__(self, kube: ckube.Kube, *, interval: float = INTERVAL) -> None:
        self.kube = kube
        self.interval = interval
        self._last: dict[Key, float] = {}
        """Loop time of each RKCP's last status write."""

    async def write(
        self, key: Key, r: rkcp.RemoteKamajiControlPlane, status: rkcp.Status, requeue: float | None
    ) -> float | None:
        """Patch ``status`` unless it is ``r``'s already; when to look again (sooner if too early)."""
        if status == r.status:
            return requeue
        loop = asyncio.get_running_loop()
        wait = self._last.get(key, 0.0) + self.interval - loop.time()
        if wait > 0:
            return wait if requeue is None else min(wait, requeue)
        body = status.to_dict()
        try:
            await self.kube.patch(
                resources.REMOTE_KAMAJI_CONTROL_PLANE,
                key[1],
                {"status": body},
                namespace=key[0],
                subresource="status",
            )
        except kerrors.NotFound:
            return None
        self._last[key] = loop.time()
        return requeue

    def forget(self, key: Key) -> None:
        self._last.pop(key, None)
