"""The fleet kept by watching: what ``kamaji-broker status --watch`` and the sandbox's live view
show, without reading everything again for every look.

A ``Watcher`` keeps the Sites and RemoteKamajiControlPlanes (and, asked, the kubeconfig Secrets
by their label and the Clusters) in step with the management cluster through
``common.kube.informer``: one list each, then watch events, into ``fleet.keeping.Kept``. The bus
(``fleet.reading.read_bus``: three requests per site, with the observer's read-only credential)
is read every ``Pace.bus`` seconds, not per look: a heartbeat is no news sooner. ``next`` hands
out a ``fleet.verdicts.Fleet`` when what it shows changed (a burst of changes is one look, at
most one every ``Pace.coalesce`` seconds), or every ``Pace.tick`` seconds while nothing does,
for the ages. At rest a look is a few milliseconds every few seconds; no request reaches the
management cluster but the watches.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from common import aiotasks, bus, objects
from common.kube import Kube, informer, resources
from fleet import keeping, reading, verdicts
from hub.controllers.rkcp import writing
from protocol import subjects

__all__ = ["Pace", "Scope", "Watcher"]

Key = objects.Key


@dataclass(frozen=True, kw_only=True)
class Pace:
    coalesce: float = 0.5
    """Seconds between two looks at least while changes arrive: a hundred control planes made
    at once are one look, not a hundred, and a view still feels live."""
    tick: float = 5.0
    """Seconds between two looks while nothing changes: the heartbeat ages a view shows move
    (by the second, but no reader acts on one second)."""
    bus: float = 10.0
    """Seconds between two reads of the bus: the agents' heartbeat interval (a new heartbeat
    arrives no more often)."""


@dataclass(frozen=True, kw_only=True)
class Scope:
    """What a look reads, as ``fleet.reading.read``'s arguments say."""

    prefix: str = subjects.DEFAULT_PREFIX
    stale_after: float = 30.0
    """Seconds after which a heartbeat means the agent is gone, for an agent that does not say
    its interval."""
    secrets: bool = False
    """A control plane is done once its kubeconfig Secret exists (the Secrets the hub labels are
    watched); else its ``SecretsSynced`` condition says."""
    clusters: bool = False
    """The Clusters of a ClusterClass without their control plane yet show too (the sandbox's)."""


@dataclass(frozen=True)
class _Sink:
    """An informer's ``Sink`` onto ``Kept``'s operations for one kind."""

    keys: Callable[[], Iterable[Key]]
    put: Callable[[Key, dict[str, Any]], None]
    drop: Callable[[Key], None]

    def known(self) -> Iterable[Key]:
        return list(self.keys())

    def upsert(self, key: Key, obj: dict[str, Any]) -> None:
        self.put(key, obj)

    def delete(self, key: Key) -> None:
        self.drop(key)


class Watcher:
    """The fleet of the management cluster ``kube`` (and the bus through ``conn``, the observer's
    connection), kept while ``run`` runs; ``next`` for each look."""

    def __init__(
        self, kube: Kube, conn: bus.Connection | None = None, *, scope: Scope = Scope(), pace: Pace = Pace()
    ) -> None:
        self.kube, self.conn, self.scope, self.pace = kube, conn, scope, pace
        self.notes: tuple[str, ...] = ()
        """What could not be read at all, shown as problems (the caller's to say)."""
        self.kept = keeping.Kept(changed=self._changed, secrets=scope.secrets)
        self.recomputes = 0
        """Fleets made so far: what a bench counts."""
        self._dirty = asyncio.Event()
        self._listed: set[str] = set()
        self._all_listed = asyncio.Event()
        self._ready = asyncio.Event()
        """Everything listed, and the bus read once (when there is one)."""
        self._bus: dict[str, verdicts.BusSite] | None = None
        self._read_again = asyncio.Event()
        self._last_look: float | None = None
        self._watches = self._informers()

    def _changed(self) -> None:
        self._dirty.set()

    def _informers(self) -> dict[str, Callable[[], Awaitable[None]]]:
        """The watches, by kind: each an informer into ``kept``."""
        k = self.kept
        sites = _Sink(
            lambda: [("", n) for n in k.sites], lambda _, o: k.put_site(o), lambda key: k.drop_site(key[1])
        )
        watches = {
            "sites": self._inform("sites", resources.SITE, sites),
            "rkcps": self._inform(
                "rkcps",
                resources.REMOTE_KAMAJI_CONTROL_PLANE,
                _Sink(k.observed.keys, k.put_rkcp, k.drop_rkcp),
            ),
        }
        if k.secrets is not None:
            # Only the kubeconfig Secrets CAPI's users read: the hub writes them with this label.
            held = k.secrets
            secrets = _Sink(lambda: held, lambda key, _: k.put_secret(key), k.drop_secret)
            watches["secrets"] = self._inform(
                "secrets", resources.SECRET, secrets, writing.CLUSTER_NAME_LABEL
            )
        if self.scope.clusters:
            clusters = _Sink(k.waiting.keys, k.put_cluster, k.drop_cluster)
            watches["clusters"] = self._inform("clusters", resources.CLUSTER, clusters)
        return watches

    def _inform(
        self, name: str, r: resources.Resource, sink: _Sink, selector: str | None = None
    ) -> Callable[[], Awaitable[None]]:
        def listed() -> None:
            self._listed.add(name)
            if len(self._listed) == len(self._watches):
                self._all_listed.set()
                self._check_ready()

        return lambda: informer.inform(self.kube, r, sink, label_selector=selector, synced=listed)

    def _check_ready(self) -> None:
        if self._all_listed.is_set() and (self.conn is None or self._bus is not None):
            self._ready.set()

    async def run(self) -> None:
        """Keep the fleet until cancelled: the watches, and the bus read every ``Pace.bus``."""
        group = aiotasks.Group()
        for name, inform in self._watches.items():
            group.supervise(f"fleet {name} watch", inform)
        if self.conn is not None:
            group.supervise("fleet bus reads", self._read_bus)
        await group.run()

    async def _read_bus(self) -> None:
        assert self.conn is not None
        await self._all_listed.wait()  # the sites to read are known once listed
        while True:
            self._read_again.clear()
            read = await reading.read_bus(self.conn, self.kept.site_names(), prefix=self.scope.prefix)
            if keeping.shown(read) != keeping.shown(self._bus):
                self._changed()
            self._bus = read
            self._check_ready()
            await aiotasks.wait_event(self._read_again, self.pace.bus)

    async def next(self, timeout: float | None = None) -> verdicts.Fleet | None:
        """The fleet, once it changed since the last look or ``Pace.tick`` passed; the first once
        everything was listed (and the bus read). None when ``timeout`` seconds pass first (a
        burst's ``Pace.coalesce`` may add to it)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        if not await aiotasks.wait_event(self._ready, timeout):
            return None
        if self._last_look is not None:
            due = self._last_look + self.pace.tick
            if deadline is not None and deadline < due:
                if not await aiotasks.wait_event(self._dirty, max(0.0, deadline - loop.time())):
                    return None
            else:
                await aiotasks.wait_event(self._dirty, max(0.0, due - loop.time()))
            # A burst is one look: what else arrives meanwhile is in it.
            await asyncio.sleep(max(0.0, self._last_look + self.pace.coalesce - loop.time()))
        self._dirty.clear()
        return self._look()

    def _look(self) -> verdicts.Fleet:
        f = self.kept.fleet(
            now=dt.datetime.now(dt.UTC), bus=self._bus, stale_after=self.scope.stale_after, notes=self.notes
        )
        self.recomputes += 1
        self._last_look = asyncio.get_running_loop().time()
        if self._bus is not None and any(s.name not in self._bus for s in f.sites):
            self._read_again.set()  # a new site: its bus is read now, not at the next read
        return f
