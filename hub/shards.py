"""Sharing the sites among hub replicas: a Lease per replica, the share decided by
``hub.reconcile.shares``.

Each replica keeps the Lease ``<group>-<hash of its identity>`` in ``namespace``, labelled with
the group, renewed every ``renew_interval`` with the members it acts under (its view) in an
annotation. Every round it lists the group's Leases. A peer is live while its Lease changed
(its resourceVersion) within the peer's lease duration *by this replica's clock*: no other
machine's clock is trusted. When the share changes, ``on_change`` gets the old one's end first
(``shares.NOTHING``: stop leading), the Lease is written with the new view, and only then does
``on_change`` get the new share: a site is let go of before the view that gives it away is
written, and taken up after the view that claims it is.

A replica that could not renew for ``renew_deadline`` (two thirds of the duration, counted from
the start of its last renewal that succeeded) leads nothing, since its peers may count it dead a
third later; and a replica leads nothing until it has renewed for a whole duration without
such a lapse (from its start, too): by then every peer that counted it dead has seen its Lease
move again. On a clean stop it deletes its Lease, so its peers take over at once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from common import logs
from common.kube import Kube, errors, resources
from hub.reconcile import shares

log = logging.getLogger(__name__)

GROUP_LABEL: Final = "kamaji-broker.io/hub-shards"
VIEW_ANNOTATION: Final = "kamaji-broker.io/view"


def lease_name(group: str, identity: str) -> str:
    """A DNS-safe Lease name for any identity (a pod name, a host name with its pid)."""
    return f"{group}-{hashlib.blake2b(identity.encode(), digest_size=5).hexdigest()}"


def read_view(lease: dict[str, Any]) -> tuple[str, ...]:
    """The members a peer's Lease says it acts under; none when unreadable (it claims nothing)."""
    text = ((lease.get("metadata") or {}).get("annotations") or {}).get(VIEW_ANNOTATION) or "[]"
    try:
        view = json.loads(text)
    except ValueError:
        return ()
    return tuple(m for m in view if isinstance(m, str)) if isinstance(view, list) else ()


@dataclass
class Membership:
    kube: Kube
    namespace: str
    group: str
    identity: str
    on_change: Callable[[shares.Share], Awaitable[None]]
    lease_duration: float = 15.0
    renew_interval: float = 5.0
    share: shares.Share = shares.NOTHING
    _seen: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Each peer Lease's resourceVersion and the loop time it was first seen with it."""
    _renewed: float | None = None
    """Loop time the last renewal that succeeded was started."""
    _since: float | None = None
    """Loop time of the first renewal after the last lapse (or the start)."""

    @property
    def name(self) -> str:
        return lease_name(self.group, self.identity)

    @property
    def renew_deadline(self) -> float:
        return self.lease_duration * 2 / 3

    async def run(self) -> None:
        """Forever: a round every ``renew_interval``; a lapse ends the share at once."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                await self.round()
            except errors.KubeError as exc:
                log.warning("hub shards: %s", exc, extra=logs.about(kind="Lease", namespace=self.namespace))
            if self._renewed is not None and loop.time() - self._renewed > self.renew_deadline:
                log.warning("hub shards: Lease %s not renewed in time: leading no site", self.name)
                self._renewed = self._since = None
                await self._adopt(shares.NOTHING)
            await asyncio.sleep(self.renew_interval)

    async def round(self) -> None:
        loop = asyncio.get_running_loop()
        listed = (
            await self.kube.list(resources.LEASE, namespace=self.namespace, label_selector=self._selector)
        ).items
        mine = next((item for item in listed if item["metadata"]["name"] == self.name), None)
        peers = self._live([item for item in listed if item is not mine], loop.time())
        view = shares.view(self.identity, (p.identity for p in peers))
        settled = self._since is not None and loop.time() - self._since >= self.lease_duration
        share = shares.Share(self.identity, view, tuple(peers)) if settled else shares.NOTHING
        if share != self.share:
            await self._adopt(shares.NOTHING)  # let go before the view that gives it away is written
        started = loop.time()
        await self._renew(mine, view)
        self._renewed = started
        if self._since is None:
            self._since = started
        if share != self.share:
            await self._adopt(share)

    def _live(self, leases: Iterable[dict[str, Any]], now: float) -> list[shares.Peer]:
        peers, seen = [], {}
        for lease in leases:
            name, spec = lease["metadata"]["name"], lease.get("spec") or {}
            version = str(lease["metadata"].get("resourceVersion") or "")
            before = self._seen.get(name)
            since = before[1] if before is not None and before[0] == version else now
            seen[name] = (version, since)
            holder = str(spec.get("holderIdentity") or "")
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if holder and holder != self.identity and now - since <= duration:
                peers.append(shares.Peer(holder, read_view(lease)))
        self._seen = seen
        return sorted(peers, key=lambda p: p.identity)

    async def _renew(self, mine: dict[str, Any] | None, view: tuple[str, ...]) -> None:
        body: dict[str, Any] = {
            "apiVersion": resources.LEASE.api_version,
            "kind": resources.LEASE.kind,
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {GROUP_LABEL: self.group},
                "annotations": {VIEW_ANNOTATION: json.dumps(list(view))},
            },
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "renewTime": renew_time(),
            },
        }
        if mine is None:
            await self.kube.create(resources.LEASE, body, namespace=self.namespace)
            return
        body["metadata"]["resourceVersion"] = mine["metadata"]["resourceVersion"]
        await self.kube.replace(resources.LEASE, self.name, body, namespace=self.namespace)

    async def _adopt(self, share: shares.Share) -> None:
        if share == self.share:
            return
        self.share = share
        if share.view:
            log.info("hub shards: %s leads its share among %s", self.identity, ", ".join(share.view))
        await self.on_change(share)

    async def release(self) -> None:
        """A clean stop: lead nothing, and delete the Lease so the peers take over at once."""
        await self._adopt(shares.NOTHING)
        try:
            await self.kube.delete(resources.LEASE, self.name, namespace=self.namespace)
        except errors.KubeError as exc:
            log.warning("hub shards: deleting Lease %s: %s", self.name, exc)

    @property
    def _selector(self) -> str:
        return f"{GROUP_LABEL}={self.group}"


def renew_time() -> str:
    """Now, as a Lease's ``renewTime`` (for people reading it: peers judge by their own clocks)."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
