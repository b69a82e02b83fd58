"""The fleet at a glance: every site and every control plane, from what the hub writes in the
management cluster and, when it can be read, what the bus itself shows. Pure.

``new_fleet`` takes the listed ``Site`` objects and RemoteKamajiControlPlanes (as dicts) and, per
site, a ``BusSite`` (read with the observer's read-only NATS credential by ``fleet.reading``)
and judges each: a site is unhealthy when its agent is not connected, when it refuses the hub's
signing key, or when the hub stopped updating its status although the bus shows the site alive
(then it is the hub, not the site); a control plane when it is not Ready. ``kamaji-broker
status`` and the sandbox's live view (``sandbox.progress``) render the same ``Fleet``
(``fleet.view``).
Control planes are ``fleet.controlplanes.ControlPlane``.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from fleet import wording
from fleet.controlplanes import ControlPlane, new_control_plane
from hub.api import site as site_api
from hub.reconcile import site as site_status
from protocol import streams

STALE_STATUS: Final = 2 * site_status.HEARTBEAT_WRITE_INTERVAL + 15.0
"""Seconds: a Site status whose heartbeat is this much older than the bus's is not being kept up
by the hub (it writes the heartbeat time at least every ``HEARTBEAT_WRITE_INTERVAL``)."""


@dataclass(frozen=True)
class BusSite:
    """One site as the bus shows it."""

    heartbeat_at: dt.datetime | None = None
    """When its latest heartbeat reached the bus; None when it never beat (or cannot be read)."""
    agent_started_at: dt.datetime | None = None
    """When the agent that sent it started (from the heartbeat)."""
    backlog: int | None = None
    """Intents its agent has not acknowledged; None when its consumer does not exist."""
    hub_pending: int | None = None
    """Messages of the site's stream the hub has not read yet; None when unknown."""
    heartbeat_interval: float | None = None
    """Seconds between its agent's heartbeats, as its latest heartbeat says; None when it does
    not say (an agent too old to)."""
    error: str = ""
    """Why the bus could not be read for this site (then the rest is unknown)."""


@dataclass(frozen=True)
class Problem:
    reason: str
    """One CamelCase word (a condition reason where there is one): what changed, for the live view."""
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class SiteRow:
    name: str
    connected: bool | None
    """Whether its agent is connected: by the bus's own heartbeat when it was read, else as the hub
    last wrote it (None: no heartbeat seen yet)."""
    heartbeat_age: float | None
    """Seconds since the latest heartbeat: the bus's when read, else the hub's (coarser)."""
    backlog: int | None
    phases: Mapping[str, int]
    agent_version: str
    trusted_key_ids: tuple[str, ...]
    problems: tuple[Problem, ...]
    """Why it is unhealthy; empty when healthy."""
    hub_pending: int | None = None
    heartbeat_interval: float | None = None
    """Seconds between its agent's heartbeats, as they say: what its liveness was judged by
    (None: the reader's ``stale_after``)."""

    @property
    def requested(self) -> int:
        return sum(self.phases.values())


@dataclass(frozen=True)
class Fleet:
    sites: tuple[SiteRow, ...]
    control_planes: tuple[ControlPlane, ...]
    bus: bool = False
    """Whether the bus was read (else ages and backlogs are the hub's)."""
    notes: tuple[str, ...] = field(default=())
    """What could not be read at all (the bus unreachable...): a problem too."""

    @property
    def ready(self) -> int:
        """Control planes healthy: done, and Ready by their condition."""
        return sum(1 for cp in self.control_planes if cp.healthy)

    @property
    def done(self) -> bool:
        return all(cp.done for cp in self.control_planes)

    def missing(self) -> list[str]:
        return [cp.missing() for cp in self.control_planes if not cp.done]

    def problems(self) -> list[str]:
        """Everything unhealthy: each site's problems, then each control plane not healthy."""
        sites = [f"site {s.name}: {p}" for s in self.sites for p in s.problems]
        control_planes = [cp.problem() for cp in self.control_planes if not cp.healthy]
        return [*sites, *self.notes, *control_planes]

    @property
    def healthy(self) -> bool:
        return not self.problems()


def _age(when: dt.datetime | None, now: dt.datetime) -> float | None:
    return None if when is None else max(0.0, (now - when).total_seconds())


def _condition(site: site_api.Site, kind: str) -> tuple[str, str]:
    for cond in site.status.conditions:
        if cond.type == kind:
            return cond.reason, cond.message
    return "", ""


def _connection(
    site: site_api.Site, bus: BusSite | None, now: dt.datetime, stale_after: float
) -> tuple[bool | None, list[Problem]]:
    """Whether the agent is connected, and whether the hub keeps the Site's status up: the bus's
    own heartbeat decides when it was read, the hub's status otherwise."""
    status = site.status
    read = bus if bus is not None and not bus.error else None
    bus_age = _age(read.heartbeat_at, now) if read is not None else None
    agent_age = _age(read.agent_started_at, now) if read is not None else None
    hub_age = _age(status.last_heartbeat_time, now)
    if bus_age is not None and bus_age > stale_after:
        beats = f" (it beats every {read.heartbeat_interval:g}s)" if read and read.heartbeat_interval else ""
        message = f"agent not connected: its last heartbeat is {bus_age:.0f}s old{beats}"
        return False, [Problem("HeartbeatMissing", message)]
    if bus_age is not None:
        if _hub_behind(hub_age, bus_age, agent_age):
            was = f"{hub_age:.0f}s old" if hub_age is not None else "missing"
            message = (
                f"the hub is not updating its status: the bus has a heartbeat {bus_age:.0f}s old, "
                f"the hub's copy is {was} (is the hub running?)"
            )
            return True, [Problem("HubNotUpdating", message)]
        return True, []
    if status.connected is None:
        return None, [
            Problem("NoHeartbeat", "no heartbeat from its agent yet: is it running, for this site?")
        ]
    if status.connected is False:
        reason, message = _condition(site, site_api.CONNECTED)
        text = "agent not connected" + (f" ({wording.ages(message, now)})" if message else "")
        return False, [Problem(reason or "HeartbeatMissing", text)]
    if hub_age is not None and hub_age > stale_after + STALE_STATUS:
        message = (
            f"the hub's copy of its heartbeat is {hub_age:.0f}s old: the hub is not updating it, or "
            "the agent stopped (give --nats-url to tell which)"
        )
        return None, [Problem("StatusStale", message)]
    return True, []


def _hub_behind(hub_age: float | None, bus_age: float, agent_age: float | None) -> bool:
    """Whether the hub's copy of a live heartbeat lags more than it would if the hub were up. A
    copy it never wrote counts only once the agent has been beating longer than that: a site
    that just came up is not news yet."""
    if hub_age is None:
        return agent_age is None or agent_age > STALE_STATUS
    return hub_age - bus_age > STALE_STATUS


def _other_problems(
    site: site_api.Site, bus: BusSite | None, now: dt.datetime, *, placed: bool
) -> list[Problem]:
    problems = []
    reason, message = _condition(site, site_api.SIGNING_KEY_TRUSTED)
    if reason == "NotTrusted":
        problems.append(Problem(reason, message))
    credential = site.status.credential
    if credential is not None and credential.expires_at is not None and credential.expires_at <= now:
        message = (
            f"its NATS credential expired at {credential.expires_at.isoformat()}: "
            "the agent needs a new bootstrap credential"
        )
        problems.append(Problem("CredentialExpired", message))
    if bus is not None and bus.error:
        problems.append(Problem("BusUnreadable", f"the bus could not be read for it: {bus.error}"))
    elif bus is not None and bus.backlog is None and placed:
        # The hub makes a site's stream and consumer once a control plane is placed there.
        message = "its agent's consumer does not exist on the bus: is the hub running?"
        problems.append(Problem("NoConsumer", message))
    return problems


def site_row(
    name: str,
    site: site_api.Site | None,
    cps: Iterable[ControlPlane],
    *,
    bus: BusSite | None,
    now: dt.datetime,
    stale_after: float,
) -> SiteRow:
    cps = tuple(cps)
    if site is None:
        connected: bool | None = None
        missing = "no Site object: the hub refuses control planes placed here (kubectl apply the Site)"
        problems = [Problem("NoSite", missing)]
    else:
        connected, problems = _connection(site, bus, now, stale_after)
        problems += _other_problems(site, bus, now, placed=bool(cps))
    status = site.status if site is not None else site_api.SiteStatus()
    heartbeat = (
        bus.heartbeat_at if bus is not None and bus.heartbeat_at is not None else status.last_heartbeat_time
    )
    return SiteRow(
        name=name,
        connected=connected,
        heartbeat_age=_age(heartbeat, now),
        backlog=bus.backlog if bus is not None and not bus.error else status.backlog,
        phases=dict(sorted(Counter(cp.phase for cp in cps).items())),
        agent_version=status.agent_version or "",
        trusted_key_ids=tuple(status.trusted_key_ids),
        problems=tuple(problems),
        hub_pending=bus.hub_pending if bus is not None else None,
        heartbeat_interval=bus.heartbeat_interval if bus is not None and not bus.error else None,
    )


def _stale_after(bus: BusSite | None, otherwise: float) -> float:
    # The agent knows when its next heartbeat is due; the reader's setting is only a guess.
    if bus is not None and not bus.error and bus.heartbeat_interval:
        return streams.MISSED_HEARTBEATS * bus.heartbeat_interval
    return otherwise


def new_fleet(
    sites: Iterable[Mapping[str, Any]],
    rkcps: Iterable[Mapping[str, Any]],
    *,
    now: dt.datetime,
    bus: Mapping[str, BusSite] | None = None,
    secrets: Collection[tuple[str, str]] | None = None,
    stale_after: float = 30.0,
    notes: Iterable[str] = (),
) -> Fleet:
    """The fleet from listed Sites and RKCPs; ``bus`` per site when the bus was read.
    ``stale_after``: seconds after which a heartbeat means the agent is gone (three of the
    agents' heartbeat intervals, as the hub counts), for a site whose heartbeat does not say its
    interval; one that says it is judged by it."""
    objects = {s.metadata.name: s for s in (site_api.Site.model_validate(o) for o in sites)}
    cps = (new_control_plane(o, secrets=secrets, now=now) for o in rkcps)
    return assemble(objects, cps, now=now, bus=bus, stale_after=stale_after, notes=notes)


def assemble(
    sites: Mapping[str, site_api.Site],
    cps: Iterable[ControlPlane],
    *,
    now: dt.datetime,
    bus: Mapping[str, BusSite] | None = None,
    stale_after: float = 30.0,
    notes: Iterable[str] = (),
) -> Fleet:
    """``new_fleet`` from the Sites (by name) and the control planes already made: what a
    watcher (``fleet.watching``) keeps between two looks."""
    ordered = sorted(cps, key=lambda c: (c.site, c.namespace, c.name))
    by_site: dict[str, list[ControlPlane]] = {name: [] for name in sites}
    for cp in ordered:
        by_site.setdefault(cp.site, []).append(cp)
    read = {name: None if bus is None else bus.get(name, BusSite(error="not read")) for name in by_site}
    rows = tuple(
        site_row(
            name,
            sites.get(name),
            members,
            bus=read[name],
            now=now,
            stale_after=_stale_after(read[name], stale_after),
        )
        for name, members in sorted(by_site.items())
    )
    return Fleet(sites=rows, control_planes=tuple(ordered), bus=bus is not None, notes=tuple(notes))
