"""Heartbeats and backlogs into ``hub.ingest.liveness.Sites``: the shell of liveness.

Each heartbeat the hub's consumer delivers is handed here (``heartbeats``, for
``hub.ingest.consumer``); ``run`` every interval judges each known site from what it holds,
reads a site's latest heartbeat (the last message on ``kb.site.<site>`` in the site's own
stream ``KB_SITE_<site>``) only until it has one, and the backlog of its ``agent-<site>``
consumer only when ``Sites.backlog_due``, through ``common.bus``; it updates
``kb_hub_sites_connected`` and, per site, ``kb_hub_site_backlog``, ``kb_hub_site_connected`` and
``kb_hub_site_heartbeat_age_seconds``, and calls ``on_change(site, change)`` when its view
changes (``liveness.Sites.changed``). Fields a heartbeat had replaced at decoding are counted as rejected.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Iterable

from common import bus, logs
from common.bus import errors as bus_errors
from hub import metrics as hub_metrics
from hub.ingest import liveness
from hub.ingest.liveness import HEARTBEAT_INTERVAL, Sites, arrival
from protocol import errors as protocol_errors
from protocol import messages, streams, subjects

log = logging.getLogger(__name__)


async def run(
    sites: Sites,
    conn: bus.Connection,
    *,
    sites_provider: Callable[[], Iterable[str]],
    prefix: str = subjects.DEFAULT_PREFIX,
    metrics: hub_metrics.Metrics,
    interval: float = 5.0,
    heartbeat_interval: float = HEARTBEAT_INTERVAL,
    on_change: Callable[[str, liveness.Change], None] | None = None,
    first: Callable[[], Awaitable[None]] | None = None,
    polled: Callable[[], None] | None = None,
) -> None:
    """Forever: every ``interval`` seconds, ``poll`` the sites ``sites_provider`` names; the
    first poll once ``first`` returns (the sites are known), ``polled`` after each."""
    if first is not None:
        await first()
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
        for site, change in changed.items():
            if on_change is None:
                continue
            try:
                on_change(site, change)
            except Exception:
                log.exception("on_change for site %s failed", site, extra=logs.about(site=site))
        if polled is not None:
            polled()
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
) -> dict[str, liveness.Change]:
    """Read every named site's heartbeat, and its backlog when due (``Sites.backlog_due``),
    once; the sites whose view changed, with what changed.

    Bus errors are logged per site and leave what was known; sites no longer named are
    forgotten with their gauge.
    """
    wanted = sorted(set(names))
    for gone in sites.sites() - set(wanted):
        sites.forget(gone)
        metrics.forget_site(gone)
    changed: dict[str, liveness.Change] = {}
    for site in wanted:
        try:
            if sites.seen_seq(site) == 0:
                # Nothing heard yet (a start, a new site): read the latest. After that the hub's
                # consumer delivers every heartbeat (``hub.ingest.consumer``): no request per poll.
                await _read_heartbeat(sites, conn, site, prefix=prefix, metrics=metrics, now=now)
            if sites.backlog_due(site):
                await _read_backlog(sites, conn, site, prefix=prefix, metrics=metrics)
        except protocol_errors.SubjectError as exc:
            log.warning("site %r cannot be polled: %s", site, exc, extra=logs.about(site=site))
            continue
        heard = sites.snapshot(site, now, interval=heartbeat_interval)
        age = (now - heard.last_heartbeat_time).total_seconds() if heard.last_heartbeat_time else None
        metrics.site_seen(site, connected=heard.connected, heartbeat_age=age)
        change = sites.changed(site, now, interval=heartbeat_interval)
        if change:
            changed[site] = change
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
    if stored is not None:
        delivered(
            sites, site, stored.data, seq=stored.seq, stored_at=stored.time, stream=stream, subject=subject,
            metrics=metrics, now=now,
        )  # fmt: skip


def heartbeats(sites: Sites, metrics: hub_metrics.Metrics) -> Callable[[str, bus.Delivery], None]:
    """What the hub's consumer calls with each heartbeat it delivers (``ingest.Deps.heartbeat``)."""

    def heard(site: str, d: bus.Delivery) -> None:
        now = dt.datetime.now(dt.UTC)
        delivered(
            sites, site, d.data, seq=d.stream_seq, stored_at=d.timestamp, stream=d.stream, subject=d.subject,
            metrics=metrics, now=now,
        )  # fmt: skip

    return heard


def delivered(
    sites: Sites,
    site: str,
    data: bytes,
    *,
    seq: int,
    stored_at: dt.datetime | None,
    stream: str,
    subject: str,
    metrics: hub_metrics.Metrics,
    now: dt.datetime,
) -> None:
    """A heartbeat of ``site`` stored at ``seq`` on ``subject`` of ``stream`` (read, or
    delivered by the hub's consumer): checked and recorded unless one as new is held; a bad one
    is counted once."""
    if seq <= sites.seen_seq(site):
        return
    try:
        beat, findings = messages.decode_heartbeat.checked(data)
    except protocol_errors.DecodeError as exc:
        detail = f"{subject}: {exc}"
        return _reject(sites, metrics, site, seq, stream=stream, reason="DecodeError", detail=detail)
    for found in findings:  # replaced by a safe value; the rest of the heartbeat is used
        metrics.bus_rejected.labels(stream=stream, reason=found.code).inc()
        log.warning("heartbeat on %s (%s): %s", subject, found.code, found, extra=logs.about(site=site))
    if beat.site != site:
        detail = f"{subject}: heartbeat names site {beat.site!r}"
        _reject(sites, metrics, site, seq, stream=stream, reason="CoordinatesMismatch", detail=detail)
        return
    received_at = arrival(
        stored_at=stored_at, sent_at=beat.sent_at, first_sight=sites.seen_seq(site) == 0, now=now
    )
    sites.record_heartbeat(site, beat, seq=seq, received_at=received_at)


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
