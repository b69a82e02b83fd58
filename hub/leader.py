"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does.

One Lease names the holder and when it last renewed. A candidate takes the Lease when it is
free or its holder has not renewed for ``lease_duration``; the holder renews every
``renew_interval``. Every write carries the resourceVersion it read, so two candidates can never
both win the same round (the loser gets 409 and re-reads). A holder that cannot renew within
``lease_duration`` stops leading *before* anyone else can take over.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common import logs
from common.kube import Kube, errors, resources

log = logging.getLogger(__name__)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _format(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def expired(lease: dict[str, Any], *, now: dt.datetime) -> bool:
    """Whether the Lease's holder has let it lapse (pure)."""
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity"):
        return True
    renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
    duration = float(spec.get("leaseDurationSeconds") or 0)
    return renewed is None or (now - renewed).total_seconds() > duration


@dataclass
class Elector:
    kube: Kube
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_interval: float = 5.0
    clock: Callable[[], dt.datetime] = _now
    leading: asyncio.Event = field(default_factory=asyncio.Event)
    standby: asyncio.Event = field(default_factory=asyncio.Event)
    """Set exactly while ``leading`` is not: lets a follower await the loss of the Lease."""
    _last_renew: float = 0.0

    @property
    def _about(self) -> dict[str, Any]:
        return logs.about(kind=resources.LEASE.kind, namespace=self.namespace, name=self.name)

    def _spec(self, *, acquire: dt.datetime | None, transitions: int) -> dict[str, Any]:
        now = self.clock()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": _format(acquire or now),
            "renewTime": _format(now),
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One round: True when this candidate holds the Lease afterwards."""
        lease = await self.kube.get_or_none(resources.LEASE, self.name, namespace=self.namespace)
        if lease is None:
            body = {
                "apiVersion": resources.LEASE.api_version,
                "kind": resources.LEASE.kind,
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(acquire=None, transitions=0),
            }
            try:
                await self.kube.create(resources.LEASE, body, namespace=self.namespace)
            except errors.Conflict:
                return False
            return True
        spec = lease.get("spec") or {}
        ours = spec.get("holderIdentity") == self.identity
        if not ours and not expired(lease, now=self.clock()):
            return False
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        acquire = _parse(spec.get("acquireTime")) if ours else None
        lease["spec"] = self._spec(acquire=acquire, transitions=transitions)
        try:
            await self.kube.replace(resources.LEASE, self.name, lease, namespace=self.namespace)
        except errors.Conflict:
            return False  # someone else wrote it first; read again next round
        return True

    async def run(self) -> None:
        """Forever: campaign, then renew; ``leading`` is set exactly while we hold the Lease."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                held = await self.try_acquire_or_renew()
            except errors.KubeError as exc:
                log.warning(
                    "leader election on lease %s/%s: %s", self.namespace, self.name, exc, extra=self._about
                )
                held = False
                if self.leading.is_set() and loop.time() - self._last_renew < self.lease_duration:
                    held = True  # still within our lease: keep leading through a blip
            if held:
                self._last_renew = loop.time()
                if not self.leading.is_set():
                    log.info(
                        "became leader (lease %s/%s, identity %s)",
                        self.namespace,
                        self.name,
                        self.identity,
                        extra=self._about,
                    )
                    self.standby.clear()
                    self.leading.set()
            else:
                if self.leading.is_set():
                    log.warning("lost leadership (lease %s/%s)", self.namespace, self.name, extra=self._about)
                    self.leading.clear()
                self.standby.set()  # also after a first round lost: a candidate that never led
            await asyncio.sleep(self.renew_interval if held else self.renew_interval / 2)

    async def release(self) -> None:
        """Give the Lease up on a clean shutdown so a standby takes over at once."""
        if not self.leading.is_set():
            return
        self.leading.clear()
        self.standby.set()
        lease = await self.kube.get_or_none(resources.LEASE, self.name, namespace=self.namespace)
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        lease["spec"]["holderIdentity"] = None
        try:
            await self.kube.replace(resources.LEASE, self.name, lease, namespace=self.namespace)
        except errors.KubeError as exc:
            log.warning("releasing lease %s/%s: %s", self.namespace, self.name, exc, extra=self._about)
