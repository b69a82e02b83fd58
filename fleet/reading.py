"""Reading the fleet (``fleet.verdicts``): the Sites and RemoteKamajiControlPlanes from the management
cluster through ``common.kube``, and per site from the bus through ``common.bus``, with the
observer's read-only credential (``protocol.permissions.for_observer``):

- its agent's backlog: the ``agent-<site>`` consumer's pending plus unacknowledged intents;
- the hub's lag: the ``hub`` consumer's pending messages on the site's stream;
- its latest heartbeat: when it reached the bus (the server's timestamp), by Direct Get, and
  the interval its agent beats at, as the heartbeat says.

A site the bus cannot be read for gets a ``BusSite`` saying why; the rest is still read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from common import bus
from common.bus import errors as bus_errors
from common.kube import Kube, resources
from fleet import controlplanes, verdicts
from protocol import errors as protocol_errors
from protocol import messages, streams, subjects

__all__ = ["read", "read_bus", "read_management"]


async def _heartbeat(
    conn: bus.Connection, site: str, *, prefix: str
) -> tuple[dt.datetime | None, messages.Heartbeat | None]:
    """When the latest heartbeat reached the bus, and the heartbeat (None when undecodable)."""
    stream = streams.site_stream_name(site, prefix=prefix)
    try:
        stored = await bus.last_message(conn, stream, subjects.heartbeat(site, prefix=prefix), direct=True)
    except bus_errors.Unavailable:  # no responders: the stream is not there (yet) or has no leader
        return None, None
    if stored is None:
        return None, None
    try:
        beat: messages.Heartbeat | None = messages.decode_heartbeat(stored.data)
    except protocol_errors.DecodeError:
        beat = None
    # The server's timestamp; without it, the agent's own clock is the only hint.
    arrived = stored.time or (beat.sent_at if beat is not None else None)
    return arrived, beat


async def _pending(conn: bus.Connection, consumer: streams.ConsumerDef, *, unacked: bool) -> int | None:
    try:
        state = await bus.consumer_info(conn, consumer.stream, consumer.durable_name)
    except bus_errors.NotFound:
        return None
    return state.num_pending + (state.num_ack_pending if unacked else 0)


async def read_site(conn: bus.Connection, site: str, *, prefix: str) -> verdicts.BusSite:
    try:
        heartbeat_at, beat = await _heartbeat(conn, site, prefix=prefix)
        return verdicts.BusSite(
            heartbeat_at=heartbeat_at,
            agent_started_at=beat.started_at if beat is not None else None,
            heartbeat_interval=(beat.interval or None) if beat is not None else None,
            backlog=await _pending(conn, streams.agent_consumer(site, prefix=prefix), unacked=True),
            hub_pending=await _pending(conn, streams.hub_consumer(site, prefix=prefix), unacked=False),
        )
    except (bus_errors.BusError, protocol_errors.SubjectError) as exc:
        return verdicts.BusSite(error=str(exc))


async def read_bus(conn: bus.Connection, sites: Iterable[str], *, prefix: str) -> dict[str, verdicts.BusSite]:
    return {site: await read_site(conn, site, prefix=prefix) for site in sorted(set(sites))}


async def read_management(kube: Kube) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every Site and every RKCP (all namespaces)."""
    sites = await kube.list(resources.SITE)
    rkcps = await kube.list(resources.REMOTE_KAMAJI_CONTROL_PLANE)
    return list(sites.items), list(rkcps.items)


def _site_names(sites: Iterable[Mapping[str, Any]], rkcps: Iterable[Mapping[str, Any]]) -> set[str]:
    named = {str((s.get("metadata") or {}).get("name") or "") for s in sites}
    placed = {str((r.get("spec") or {}).get("site") or "") for r in rkcps}
    return {n for n in named | placed if n}


async def read(
    kube: Kube,
    conn: bus.Connection | None,
    *,
    prefix: str = subjects.DEFAULT_PREFIX,
    stale_after: float = 30.0,
    secrets: Collection[tuple[str, str]] | None = None,
    notes: Iterable[str] = (),
    clusters: bool = False,
) -> verdicts.Fleet:
    """The whole fleet now; without ``conn``, as the hub last wrote it. With ``clusters``, the
    ClusterClass-based Clusters that have no control plane yet too (``controlplanes.waiting_clusters``):
    the sandbox, which made every Cluster there, asks; a management cluster's other Clusters
    may belong to other providers."""
    sites, rkcps = await read_management(kube)
    on_bus = None if conn is None else await read_bus(conn, _site_names(sites, rkcps), prefix=prefix)
    now = dt.datetime.now(dt.UTC)
    f = verdicts.new_fleet(
        sites, rkcps, now=now, bus=on_bus, secrets=secrets, stale_after=stale_after, notes=notes
    )
    if not clusters:
        return f
    listed = (await kube.list(resources.CLUSTER)).items
    waiting = controlplanes.waiting_clusters(listed, f.control_planes, now=now)
    return dataclasses.replace(f, control_planes=(*f.control_planes, *waiting)) if waiting else f
