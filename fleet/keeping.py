"""What a watcher (``fleet.watching``) keeps of the fleet's objects between two looks, and
whether what changed shows. No I/O: the informers hand it objects through its sinks
(``common.kube.informer.Sink``), ``fleet`` makes the ``fleet.verdicts.Fleet`` of the moment.

At 10,000 RKCPs a look that validates every object again costs a tenth of a second, and the
objects themselves (as dicts) ten times their JSON in memory, all of it walked by the garbage
collector. So each object is read once, when it arrives: an RKCP as its
``controlplanes.Observed`` and the ``ControlPlane`` made of it (timestamps kept, aged at each
look), a Site as its validated model, a kubeconfig Secret as its key, a Cluster of a
ClusterClass still without its control plane as the stand-in ``controlplanes.waiting_cluster``
makes. ``changed`` is called only when what a look shows changed: the hub writes a Site's
heartbeat time every few minutes, and an RKCP's status has fields no look shows; both are kept
quietly (the next look shows the new ages).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from common import objects
from fleet import controlplanes, verdicts
from fleet.controlplanes import ControlPlane
from hub.api import site as site_api
from protocol import names

__all__ = ["Kept", "quiet", "shown"]

Key = objects.Key


def quiet(site: site_api.Site) -> site_api.Site:
    """``site`` without what moves while nothing happens: the hub's copy of its heartbeat time,
    and the resourceVersion each of its writes gives."""
    status = site.status.model_copy(update={"last_heartbeat_time": None})
    metadata = site.metadata.model_copy(update={"resource_version": ""})
    return site.model_copy(update={"status": status, "metadata": metadata})


def shown(bus: Mapping[str, verdicts.BusSite] | None) -> dict[str, verdicts.BusSite] | None:
    """What of a read of the bus is news: each site but when its heartbeat arrived (ages move)."""
    if bus is None:
        return None
    return {name: _without_time(b) for name, b in bus.items()}


def _without_time(b: verdicts.BusSite) -> verdicts.BusSite:
    return verdicts.BusSite(
        agent_started_at=b.agent_started_at, backlog=b.backlog, hub_pending=b.hub_pending,
        heartbeat_interval=b.heartbeat_interval, error=b.error, heartbeat_at=None,
    )  # fmt: skip


class Kept:
    """The Sites, RKCPs and (asked for) kubeconfig Secrets and Clusters, as a look needs them."""

    def __init__(self, *, changed: Callable[[], None], secrets: bool = False) -> None:
        self._changed = changed
        self.sites: dict[str, site_api.Site] = {}
        self.observed: dict[Key, controlplanes.Observed] = {}
        self.cps: dict[Key, ControlPlane] = {}
        """Each RKCP's control plane, its timestamps as written (``controlplanes.aged``)."""
        self.secrets: set[Key] | None = set() if secrets else None
        """The kubeconfig Secrets' keys (None: trust each RKCP's ``SecretsSynced`` condition)."""
        self._by_secret: dict[Key, set[Key]] = {}
        self.waiting: dict[Key, ControlPlane] = {}
        """Clusters of a ClusterClass that refer to no control plane yet."""

    def site_names(self) -> set[str]:
        """Every site with a Site object or a control plane placed at it."""
        return {*self.sites, *(cp.site for cp in self.cps.values() if cp.site)}

    # -- the sinks' operations, by kind

    def put_site(self, obj: Mapping[str, Any]) -> None:
        site = site_api.Site.model_validate(obj)
        old = self.sites.get(site.metadata.name)
        self.sites[site.metadata.name] = site
        if old is None or quiet(old) != quiet(site):
            self._changed()

    def drop_site(self, name: str) -> None:
        if self.sites.pop(name, None) is not None:
            self._changed()

    def put_rkcp(self, key: Key, obj: Mapping[str, Any]) -> None:
        o = controlplanes.observe(obj)
        old = self.observed.get(key)
        if o == old:
            return
        if old is not None:
            self._by_secret.get(_secret_of(old), set()).discard(key)
        self.observed[key] = o
        self._by_secret.setdefault(_secret_of(o), set()).add(key)
        self.cps[key] = controlplanes.from_observed(o, secrets=self.secrets)
        self._changed()

    def drop_rkcp(self, key: Key) -> None:
        o = self.observed.pop(key, None)
        if o is None:
            return
        self.cps.pop(key, None)
        mine = self._by_secret.get(_secret_of(o))
        if mine is not None:
            mine.discard(key)
            if not mine:
                del self._by_secret[_secret_of(o)]
        self._changed()

    def put_secret(self, key: Key) -> None:
        if self.secrets is not None and key not in self.secrets:
            self.secrets.add(key)
            self._secret_moved(key)

    def drop_secret(self, key: Key) -> None:
        if self.secrets is not None and key in self.secrets:
            self.secrets.discard(key)
            self._secret_moved(key)

    def _secret_moved(self, key: Key) -> None:
        """The control planes whose kubeconfig Secret ``key`` is, made again."""
        for k in self._by_secret.get(key, ()):
            self.cps[k] = controlplanes.from_observed(self.observed[k], secrets=self.secrets)
            self._changed()

    def put_cluster(self, key: Key, obj: Mapping[str, Any]) -> None:
        waiting = controlplanes.waiting_cluster(obj, now=None)
        old = self.waiting.pop(key, None) if waiting is None else self.waiting.get(key)
        if waiting is not None:
            self.waiting[key] = waiting
        if old != waiting:
            self._changed()

    def drop_cluster(self, key: Key) -> None:
        if self.waiting.pop(key, None) is not None:
            self._changed()

    # -- a look

    def fleet(
        self,
        *,
        now: dt.datetime,
        bus: Mapping[str, verdicts.BusSite] | None = None,
        stale_after: float = 30.0,
        notes: Iterable[str] = (),
    ) -> verdicts.Fleet:
        """The fleet as of ``now``: what ``fleet.reading.read`` would read, without a request."""
        cps = (controlplanes.aged(cp, now) for cp in self.cps.values())
        f = verdicts.assemble(self.sites, cps, now=now, bus=bus, stale_after=stale_after, notes=notes)
        if not self.waiting:
            return f
        made = {(cp.namespace, cp.cluster) for cp in f.control_planes}
        waiting = [
            controlplanes.aged(cp, now)
            for cp in self.waiting.values()
            if (cp.namespace, cp.cluster) not in made
        ]
        return verdicts.Fleet(
            sites=f.sites, control_planes=(*f.control_planes, *waiting), bus=f.bus, notes=f.notes
        )


def _secret_of(o: controlplanes.Observed) -> Key:
    return (o.namespace, names.capi_kubeconfig(o.cluster))
