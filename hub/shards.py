"""Sharing the sites among hub replicas: a Lease per replica, the share decided by
``hub.reconcile.shares``.

Each replica keeps the Lease ``<group>-<hash of its identity>`` in ``namespace``, labelled with
the group, renewed every ``renew_interval`` with the members it acts under (its view) in an
annotation. Every round it lists the group's Leases. A peer is live while its Lease changed
(its resourceVersion) within the peer's lease duration *by this replica's clock*: no other
machine's clock is trusted; a Lease deleted by someone counts as live until that duration has
run out, and one whose view is empty (a replica that stopped cleanly says so before deleting
its Lease) claims nothing and is no member. When the share changes, ``on_change`` gets the old
one's end first (``shares.NOTHING``: stop leading), the Lease is written with the new view, and
only then does ``on_change`` get the new share, unless the round took so long that what it
listed is stale: a site is let go of before the view that gives it away is written, and taken
up after the view that claims it is.

A replica that could not renew for ``renew_deadline`` (two thirds of the duration, counted from
the start of its last renewal that succeeded; a call may take what is left of it, no more) leads
nothing, since its peers may count it dead a third later; so does one whose Lease was deleted,
or written by another process (the same ``--identity`` twice: neither leads, and says why). A
replica leads nothing until it has renewed for a whole duration without such a lapse (from its
start too): by then every peer that counted it dead has seen its Lease move again. On a clean
stop it writes an empty view and deletes its Lease, so its peers take over at once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import inspect
import json
import logging
import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from common import logs
from common.kube import Kube, errors, resources
from hub.reconcile import shares

log = logging.getLogger(__name__)

T = TypeVar("T")

GROUP_LABEL: Final = "kamaji-broker.io/hub-shards"
VIEW_ANNOTATION: Final = "kamaji-broker.io/view"


def lease_name(group: str, identity: str) -> str:
    """A DNS-safe Lease name for any identity (a pod name, a host name with its pid)."""
    return f"{group}-{hashlib.blake2b(identity.encode(), digest_size=5).hexdigest()}"


def call_budget(renewed: float | None, now: float, renew_deadline: float) -> float:
    """Seconds a call to the API server may take at ``now``: until ``renew_deadline`` after the
    start of the last renewal that succeeded (``renewed``; a whole one before the first, or
    after a lapse); 0 once that has passed (no call then: the lapse follows)."""
    return renew_deadline if renewed is None else max(0.0, renewed + renew_deadline - now)


def read_view(lease: dict[str, Any], holder: str) -> tuple[str, ...]:
    """The members a peer's Lease says it acts under; one that cannot be read claims every site
    (``(holder,)``), so a peer of another version never loses its sites to a misreading."""
    text = ((lease.get("metadata") or {}).get("annotations") or {}).get(VIEW_ANNOTATION)
    try:
        view = json.loads(text) if text is not None else None
    except ValueError:
        view = None
    if not isinstance(view, list) or not all(isinstance(m, str) for m in view):
        return (holder,)
    return tuple(view)


@dataclass(frozen=True)
class _Seen:
    version: str
    since: float
    """Loop time this replica first saw the Lease at ``version``."""
    holder: str
    view: tuple[str, ...]
    duration: float


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
    _seen: dict[str, _Seen] = field(default_factory=dict)
    _renewed: float | None = None
    """Loop time the last renewal that succeeded was started."""
    _since: float | None = None
    """Loop time of the first renewal after the last lapse (or the start)."""
    _written: str = ""
    """The resourceVersion of this replica's last write of its Lease."""

    @property
    def name(self) -> str:
        return lease_name(self.group, self.identity)

    @property
    def renew_deadline(self) -> float:
        return self.lease_duration * 2 / 3

    async def run(self) -> None:
        """Forever: a round every ``renew_interval``; a lapse ends the share at once."""
        while True:
            try:
                await self.round()
            except (errors.KubeError, TimeoutError) as exc:
                log.warning("hub shards: %s", str(exc) or "a call took too long", extra=self._about)
            except Exception:
                log.exception("hub shards: a round failed", extra=self._about)
            if self._lapsed():
                await self._lapse(f"Lease {self.name} not renewed within {self.renew_deadline:g}s")
            await asyncio.sleep(self._pause())

    def _pause(self) -> float:
        """Until the next round: ``renew_interval``, or less, so that a round that failed is tried
        again (or the lapse said) by the renew deadline rather than after it."""
        if self._renewed is None:
            return self.renew_interval
        left = self._renewed + self.renew_deadline - asyncio.get_running_loop().time()
        return max(0.0, min(self.renew_interval, left + 0.01))

    async def round(self) -> None:
        loop = asyncio.get_running_loop()
        if self._lapsed():
            await self._lapse(f"Lease {self.name} not renewed within {self.renew_deadline:g}s")
        listed_at = loop.time()
        listing = await self._call(
            self.kube.list(resources.LEASE, namespace=self.namespace, label_selector=self._selector)
        )
        # A peer's Lease seen changed is dated when the list came back, not when it was asked for:
        # its renewal may have landed while the list was on its way.
        seen_at = loop.time()
        mine = await self._mine(listing.items)
        others = [i for i in listing.items if i["metadata"]["name"] != self.name]
        peers = self._live(others, listed_at, seen_at=seen_at)
        view = shares.view(self.identity, (p.identity for p in peers))
        settled = self._since is not None and listed_at - self._since >= self.lease_duration
        share = shares.Share(self.identity, view, tuple(peers)) if settled else shares.NOTHING
        if share != self.share:
            await self._adopt(shares.NOTHING)  # let go before the view that gives it away is written
        started = loop.time()
        try:
            self._written = await self._renew(mine, view)
        except errors.Conflict:
            # Written (or made) by someone between this round's read and its write: another
            # process with this identity, most likely; a lapse either way.
            await self._lapse(self._twin(), always=True)
            return
        except BaseException:
            # A write that timed out may still have landed: the next round must not take its
            # own Lease, changed, for another process's writing.
            self._written = ""
            raise
        self._renewed = started
        if self._since is None:
            self._since = started
        fresh = loop.time() - listed_at <= self.renew_interval and not self._lapsed()
        if share != self.share and fresh:
            await self._adopt(share)

    async def _mine(self, listed: list[dict[str, Any]]) -> dict[str, Any] | None:
        """This replica's Lease as stored; a lapse when someone deleted it or wrote it."""
        mine = next((i for i in listed if i["metadata"]["name"] == self.name), None)
        if mine is None:  # by name too: a Lease that lost its label is still this one
            mine = await self._call(
                self.kube.get_or_none(resources.LEASE, self.name, namespace=self.namespace)
            )
        if mine is None and self._written:
            self._written = ""
            await self._lapse(f"Lease {self.name} was deleted: its peers may count this replica gone")
        elif mine is not None and self._written and mine["metadata"].get("resourceVersion") != self._written:
            await self._lapse(self._twin(), always=True)
        return mine

    def _twin(self) -> str:
        return (
            f"Lease {self.name} was written by another process: is --identity {self.identity} given to "
            "two replicas? At most one of them leads, and neither for long"
        )

    def _live(self, leases: Iterable[dict[str, Any]], now: float, *, seen_at: float) -> list[shares.Peer]:
        """The live peers among ``leases`` as of ``now`` (when they were asked for), a Lease
        first seen at a version counted from ``seen_at`` (when they came back)."""
        seen: dict[str, _Seen] = {}
        for lease in leases:
            name, spec = lease["metadata"]["name"], lease.get("spec") or {}
            version = str(lease["metadata"].get("resourceVersion") or "")
            before = self._seen.get(name)
            since = before.since if before is not None and before.version == version else seen_at
            holder = str(spec.get("holderIdentity") or "")
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            seen[name] = _Seen(version, since, holder, read_view(lease, holder), duration)
        for name, gone in self._seen.items():
            if name not in seen and gone.view and now - gone.since <= gone.duration:
                seen[name] = gone  # deleted, not released: its holder may lead until it lapses
        self._seen = seen
        peers = {
            s.holder: shares.Peer(s.holder, s.view)
            for s in seen.values()
            if s.holder and s.holder != self.identity and s.view and now - s.since <= s.duration
        }
        return [peers[holder] for holder in sorted(peers)]

    async def _renew(self, mine: dict[str, Any] | None, view: tuple[str, ...]) -> str:
        """Write this replica's Lease with ``view``; the resourceVersion written."""
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
                "leaseDurationSeconds": math.ceil(self.lease_duration),
                "renewTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            },
        }
        if mine is None:
            written = await self._call(self.kube.create(resources.LEASE, body, namespace=self.namespace))
        else:
            body["metadata"]["resourceVersion"] = mine["metadata"]["resourceVersion"]
            written = await self._call(
                self.kube.replace(resources.LEASE, self.name, body, namespace=self.namespace)
            )
        return str(written["metadata"].get("resourceVersion") or "")

    def _lapsed(self) -> bool:
        loop = asyncio.get_running_loop()
        return self._renewed is not None and loop.time() - self._renewed > self.renew_deadline

    async def _lapse(self, why: str, *, always: bool = False) -> None:
        """Lead nothing, and wait a whole duration after the next renewal before leading again;
        said when it ends a share (``always``: every time, a misconfiguration to be seen)."""
        if always or self._since is not None or self.share != shares.NOTHING:
            log.warning("hub shards: %s: leading no site", why, extra=self._about)
        self._renewed = self._since = None
        await self._adopt(shares.NOTHING)

    async def _adopt(self, share: shares.Share) -> None:
        """Hand ``share`` to ``on_change``; held once it took it. One that failed (the old share
        was let go of first) leaves nothing held, and the next round tries again."""
        if share == self.share:
            return
        try:
            await self.on_change(share)
        except BaseException:
            self.share = shares.NOTHING
            raise
        self.share = share
        if share.view:
            log.info("hub shards: %s leads its share among %s", self.identity, ", ".join(share.view))

    async def _call(self, call: Awaitable[T]) -> T:
        """A call to the API server, bounded by what is left until the renew deadline: a busy API
        server (a list of 100,000 objects in its queue) may take seconds, and only a renewal
        that comes too late for the peers is a lapse."""
        now = asyncio.get_running_loop().time()
        budget = call_budget(self._renewed, now, self.renew_deadline)
        if budget <= 0:
            if inspect.iscoroutine(call):
                call.close()  # never started
            raise TimeoutError(f"the renew deadline of Lease {self.name} has passed")
        return await asyncio.wait_for(call, timeout=budget)

    async def release(self) -> None:
        """A clean stop: lead nothing, say so (an empty view), and delete the Lease so the peers
        take over at once."""
        await self._adopt(shares.NOTHING)
        try:
            mine = await self._call(
                self.kube.get_or_none(resources.LEASE, self.name, namespace=self.namespace)
            )
            if mine is not None:
                await self._renew(mine, ())
                await self._call(self.kube.delete(resources.LEASE, self.name, namespace=self.namespace))
        except (errors.KubeError, TimeoutError) as exc:
            log.warning("hub shards: releasing Lease %s: %s", self.name, exc, extra=self._about)

    @property
    def _selector(self) -> str:
        return f"{GROUP_LABEL}={self.group}"

    @property
    def _about(self) -> dict[str, Any]:
        return logs.about(kind=resources.LEASE.kind, namespace=self.namespace, name=self.name)
