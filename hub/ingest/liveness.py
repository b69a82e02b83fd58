"""Sites as the hub sees them: last heartbeat, whether it is fresh, and the intent backlog. Pure.

``Sites`` holds, per site, the latest heartbeat with the time it reached the bus, and the
backlog of its ``agent-<site>`` consumer (``num_pending + num_ack_pending``), and says whether
the backlog must be read again (``backlog_due``), and what changed in a site's view since it was
last asked (``changed``). The RKCP controller reads ``snapshot`` for ``SiteConnected``, the Site
controller for the Site's status. ``hub.ingest.heartbeats`` feeds it (no I/O here, ``now``
passed in).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from typing import Final

from protocol import messages, streams

HEARTBEAT_INTERVAL: Final = 10.0
"""Seconds between an agent's heartbeats (the agent's default ``heartbeat_interval``)."""


class Change(enum.IntEnum):
    """What changed in a site's view since it was last asked (``Sites.changed``); falsy: nothing."""

    NONE = 0
    SITE = 1
    """Only whether a backlog exists: the Site's status shows it, no control plane's does."""
    CONTROL_PLANES = 2
    """Its connectedness or what its agent says of itself: every control plane of the site
    decides on it (and the Site shows it too)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class SiteSnapshot:
    site: str
    connected: bool
    last_heartbeat_time: dt.datetime | None
    """When the latest heartbeat reached the bus (see ``arrival``); None before the first."""
    backlog: int | None
    """Intents the site's agent has not acknowledged; None when its consumer is unknown."""
    heartbeat: messages.Heartbeat | None = None


@dataclasses.dataclass
class _Site:
    heartbeat: messages.Heartbeat | None = None
    received_at: dt.datetime | None = None
    seq: int = 0
    """The sequence (in the site's stream) last looked at, usable or not (a bad one is counted once)."""
    backlog: int | None = None
    backlog_stale: bool = True
    """Intents were published to the site since its backlog was last read (or it never was)."""
    reported: tuple[bool, tuple[object, ...]] | None = None
    reported_backlog: bool | None = None
    reported_heartbeat: dt.datetime | None = None
    """``received_at`` when ``changed`` last looked: a later one past the limit bridged a gap."""


def arrival(
    *, stored_at: dt.datetime | None, sent_at: dt.datetime, first_sight: bool, now: dt.datetime
) -> dt.datetime:
    """When a heartbeat reached the bus, as well as the hub can tell; never in the future.

    A heartbeat that appeared since the previous poll arrived at most one poll ago, so ``now``:
    the hub's own clock, which no other clock's skew can move. The first one after a hub start
    may be days old, and ``now`` would show a dead site as connected: the server's timestamp
    tells then (or, without it, the agent's ``sent_at``, off by the site's clock skew, which the
    next heartbeat corrects).
    """
    if not first_sight:
        return now
    return min(stored_at if stored_at is not None else sent_at, now)


def says(heartbeat: messages.Heartbeat | None) -> tuple[object, ...]:
    """What a heartbeat says of its agent that the Site's status and the RKCPs' decisions show:
    its version, the hub keys it trusts, whether it found Kamaji. Its counts and times move at
    every beat and are not news."""
    if heartbeat is None:
        return ()
    return (heartbeat.agent_version, heartbeat.trusted_key_ids, heartbeat.kamaji_detected)


class Sites:
    """Heartbeats and backlogs per site; pure."""

    def __init__(self) -> None:
        self._sites: dict[str, _Site] = {}

    def seen_seq(self, site: str) -> int:
        entry = self._sites.get(site)
        return entry.seq if entry else 0

    def record_heartbeat(
        self, site: str, heartbeat: messages.Heartbeat, *, seq: int, received_at: dt.datetime
    ) -> bool:
        """Keep ``heartbeat`` unless an equal or newer sequence is held; True when kept."""
        entry = self._sites.setdefault(site, _Site())
        if seq <= entry.seq:
            return False
        entry.heartbeat, entry.received_at, entry.seq = heartbeat, received_at, seq
        return True

    def record_rejected(self, site: str, seq: int) -> None:
        """A heartbeat that could not be used: remember its sequence so it is judged only once."""
        entry = self._sites.setdefault(site, _Site())
        entry.seq = max(entry.seq, seq)

    def record_backlog(self, site: str, backlog: int | None) -> None:
        entry = self._sites.setdefault(site, _Site())
        entry.backlog, entry.backlog_stale = backlog, False

    def published_to(self, site: str) -> None:
        """The hub published an intent for ``site``: its backlog is read at the next poll."""
        entry = self._sites.get(site)
        if entry is not None:
            entry.backlog_stale = True

    def backlog_due(self, site: str) -> bool:
        """Whether the backlog must be read: unknown, not empty, or published to since. A site
        with nothing pending and nothing published to costs no request (at rest, every site)."""
        entry = self._sites.get(site)
        return entry is None or entry.backlog_stale or entry.backlog is None or entry.backlog > 0

    def connected(self, site: str, now: dt.datetime, interval: float = HEARTBEAT_INTERVAL) -> bool:
        entry = self._sites.get(site)
        if entry is None or entry.received_at is None:
            return False
        return (now - entry.received_at).total_seconds() <= streams.MISSED_HEARTBEATS * interval

    def snapshot(self, site: str, now: dt.datetime, *, interval: float = HEARTBEAT_INTERVAL) -> SiteSnapshot:
        entry = self._sites.get(site) or _Site()
        return SiteSnapshot(
            site=site,
            connected=self.connected(site, now, interval),
            last_heartbeat_time=entry.received_at,
            backlog=entry.backlog,
            heartbeat=entry.heartbeat,
        )

    def changed(self, site: str, now: dt.datetime, *, interval: float = HEARTBEAT_INTERVAL) -> Change:
        """What changed in the site's view since the previous call; records the new one.

        The view is connectedness and what the agent says of itself (``says``), on which every
        RKCP of the site decides, and whether a backlog exists (unknown / none / some), which
        only the Site's status shows: not its size, which moves at each poll during a burst and
        reaches the Site's status at its next look. Connectedness changes with time alone (a
        heartbeat ages out), so this is asked on every poll.

        A heartbeat that arrived more than the limit after the previous one is a change too, even
        when both polls saw the site connected: in between, the site was disconnected for anyone
        who asked ``snapshot`` (an RKCP reconciled then shows ``SiteConnected=False``), and
        nothing else would reconcile it again before the resync. A NATS restart does that: the
        agent's heartbeats pause while it reconnects, between two polls.
        """
        entry = self._sites.setdefault(site, _Site())
        backlog = None if entry.backlog is None else entry.backlog > 0
        current = (self.connected(site, now, interval), says(entry.heartbeat))
        previous, entry.reported_heartbeat = entry.reported_heartbeat, entry.received_at
        bridged = (
            previous is not None
            and entry.received_at is not None
            and (entry.received_at - previous).total_seconds() > streams.MISSED_HEARTBEATS * interval
        )
        if current != entry.reported or bridged:
            entry.reported, entry.reported_backlog = current, backlog
            return Change.CONTROL_PLANES
        if backlog != entry.reported_backlog:
            entry.reported_backlog = backlog
            return Change.SITE
        return Change.NONE

    def forget(self, site: str) -> None:
        self._sites.pop(site, None)

    def sites(self) -> frozenset[str]:
        return frozenset(self._sites)
