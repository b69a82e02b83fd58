"""Sites as the hub sees them: last heartbeat, whether it is fresh, and the intent backlog.

``Sites`` is the pure part (no I/O, ``now`` passed in): each site's latest heartbeat with the
time it reached the bus, and the backlog of its ``agent-<site>`` consumer (``num_pending +
num_ack_pending``). The RKCP controller reads ``snapshot`` for ``SiteConnected`` and backlog.

``run`` is the shell: every interval it reads each known site's heartbeat (the last message
on ``kb.site.<site>`` in the site's own stream ``KB_SITE_<site>``, which keeps one per subject
and bounds its size) and its consumer info, through ``common.bus``; it updates
``kb_hub_sites_connected`` and, per site, ``kb_hub_site_backlog``, ``kb_hub_site_connected`` and
``kb_hub_site_heartbeat_age_seconds``, and calls ``on_change(site)`` when its connected flag
or backlog changes. Fields a heartbeat had replaced at decoding are counted as rejected.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Iterable
from typing import Final

from common import bus, logs
from common.bus import errors as bus_errors
from hub import metrics as hub_metrics
from protocol import errors as protocol_errors
from protocol import messages, streams, subjects

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL: Final = 10.0
"""Seconds between an agent's heartbeats (the agent's default ``heartbeat_interval``)."""


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
    reported: tuple[bool, bool | None] | None = None
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
        self._sites.setdefault(site, _Site()).backlog = backlog

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

    def changed(self, site: str, now: dt.datetime, *, interval: float = HEARTBEAT_INTERVAL) -> bool:
        """Whether the site's view changed since the previous call; records the new one.

        The view is connectedness and whether a backlog exists (unknown / none / some), not its
        size: every RKCP of a site is reconciled on a change, and a backlog that moves at each
        poll during a burst would rewrite all their statuses every few seconds. The size reaches
        the statuses at their next reconcile (a resync at the latest). Connectedness changes with
        time alone (a heartbeat ages out), so this is asked on every poll.

        A heartbeat that arrived more than the limit after the previous one is a change too, even
        when both polls saw the site connected: in between, the site was disconnected for anyone
        who asked ``snapshot`` (an RKCP reconciled then shows ``SiteConnected=False``), and
        nothing else would reconcile it again before the resync. A NATS restart does that: the
        agent's heartbeats pause while it reconnects, between two polls.
        """
        entry = self._sites.setdefault(site, _Site())
        backlog = None if entry.backlog is None else entry.backlog > 0
        current = (self.connected(site, now, interval), backlog)
        previous, entry.reported_heartbeat = entry.reported_heartbeat, entry.received_at
        bridged = (
            previous is not None
            and entry.received_at is not None
            and (entry.received_at - previous).total_seconds() > streams.MISSED_HEARTBEATS * interval
        )
        if current == entry.reported and not bridged:
            return False
        entry.reported = current
        return True

    def forget(self, site: str) -> None:
        self._sites.pop(site, None)

    def sites(self) -> frozenset[str]:
        return frozenset(self._sites)


# -- the shell -------------------------------------------------------------------------------


async def run(
    sites: Sites,
    conn: bus.Connection,
    *,
    sites_provider: Callable[[], Iterable[str]],
    prefix: str = subjects.DEFAULT_PREFIX,
    metrics: hub_metrics.Metrics,
    interval: float = 5.0,
    heartbeat_interval: float = HEARTBEAT_INTERVAL,
    on_change: Callable[[str], None] | None = None,
) -> None:
    """Forever: every ``interval`` seconds, ``poll`` the sites ``sites_provider`` names."""
    while True:
        try:
            names = set(sites_provider())
        except Exception:
            log.exception("listing the known sites failed; polling the previous ones")
            names = set(sites.sites())
        changed = await poll(
            sites,
            conn,
            names=names,
            prefix=prefix,
            metrics=metrics,
            now=dt.datetime.now(dt.UTC),
            heartbeat_interval=heartbeat_interval,
        )
        for site in changed:
            if on_change is None:
                continue
            try:
                on_change(site)
            except Exception:
                log.exception("on_change for site %s failed", site, extra=logs.about(site=site))
        await asyncio.sleep(interval)


async def poll(
    sites: Sites,
    conn: bus.Connection,
    *,
    names: Iterable[str],
    prefix: str = subjects.DEFAULT_PREFIX,
    metrics: hub_metrics.Metrics,
    now: dt.datetime,
    heartbeat_interval: float = HEARTBEAT_INTERVAL,
) -> list[str]:
    """Read every named site's heartbeat and backlog once; the sites whose view changed.

    Bus errors are logged per site and leave what was known; sites no longer named are
    forgotten with their gauge.
    """
    wanted = sorted(set(names))
    for gone in sites.sites() - set(wanted):
        sites.forget(gone)
        metrics.forget_site(gone)
    changed = []
    for site in wanted:
        try:
            await _read_heartbeat(sites, conn, site, prefix=prefix, metrics=metrics, now=now)
            await _read_backlog(sites, conn, site, prefix=prefix, metrics=metrics)
        except protocol_errors.SubjectError as exc:
            log.warning("site %r cannot be polled: %s", site, exc, extra=logs.about(site=site))
            continue
        heard = sites.snapshot(site, now, interval=heartbeat_interval)
        age = (now - heard.last_heartbeat_time).total_seconds() if heard.last_heartbeat_time else None
        metrics.site_seen(site, connected=heard.connected, heartbeat_age=age)
        if sites.changed(site, now, interval=heartbeat_interval):
            changed.append(site)
    metrics.sites_connected.set(sum(sites.connected(s, now, heartbeat_interval) for s in wanted))
    return changed


async def _read_heartbeat(
    sites: Sites,
    conn: bus.Connection,
    site: str,
    *,
    prefix: str,
    metrics: hub_metrics.Metrics,
    now: dt.datetime,
) -> None:
    stream = streams.site_stream_name(site, prefix=prefix)
    subject = subjects.heartbeat(site, prefix=prefix)
    try:
        stored = await bus.last_message(conn, stream, subject)
    except bus_errors.NotFound:
        return  # the site's stream is created when the site appears; no heartbeat until then
    except bus_errors.BusError as exc:
        log.warning("reading the heartbeat of site %s: %s", site, exc, extra=logs.about(site=site))
        return
    if stored is None or stored.seq <= sites.seen_seq(site):
        return
    try:
        beat, findings = messages.decode_heartbeat.checked(stored.data)
    except protocol_errors.DecodeError as exc:
        detail = f"{subject}: {exc}"
        return _reject(sites, metrics, site, stored.seq, stream=stream, reason="DecodeError", detail=detail)
    for found in findings:  # replaced by a safe value; the rest of the heartbeat is used
        metrics.bus_rejected.labels(stream=stream, reason=found.code).inc()
        log.warning("heartbeat on %s (%s): %s", subject, found.code, found, extra=logs.about(site=site))
    if beat.site != site:
        detail = f"{subject}: heartbeat names site {beat.site!r}"
        _reject(sites, metrics, site, stored.seq, stream=stream, reason="CoordinatesMismatch", detail=detail)
        return
    received_at = arrival(
        stored_at=stored.time, sent_at=beat.sent_at, first_sight=sites.seen_seq(site) == 0, now=now
    )
    sites.record_heartbeat(site, beat, seq=stored.seq, received_at=received_at)


def _reject(
    sites: Sites, metrics: hub_metrics.Metrics, site: str, seq: int, *, stream: str, reason: str, detail: str
) -> None:
    sites.record_rejected(site, seq)
    metrics.bus_rejected.labels(stream=stream, reason=reason).inc()
    log.warning("rejected heartbeat on %s", detail, extra=logs.about(site=site, seq=seq))


async def _read_backlog(
    sites: Sites, conn: bus.Connection, site: str, *, prefix: str, metrics: hub_metrics.Metrics
) -> None:
    consumer = streams.agent_consumer(site, prefix=prefix)
    try:
        state = await bus.consumer_info(conn, consumer.stream, consumer.durable_name)
    except bus_errors.ConsumerNotFound:
        backlog: int | None = None
    except bus_errors.BusError as exc:
        log.warning("reading the backlog of site %s: %s", site, exc, extra=logs.about(site=site))
        return
    else:
        backlog = state.num_pending + state.num_ack_pending
    sites.record_backlog(site, backlog)
    if backlog is None:
        with contextlib.suppress(KeyError):
            metrics.site_backlog.remove(site)
    else:
        metrics.site_backlog.labels(site=site).set(backlog)
