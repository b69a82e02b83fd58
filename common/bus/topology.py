"""Create or update the four streams and the durable consumers, idempotently (the hub's job).

Definitions come from ``protocol.streams``; this module only maps them onto nats-py's config
types and reconciles the server towards them: create when absent, update when a field we own
differs, leave alone when equal. Agents never call it (they lack the permission).
"""

from __future__ import annotations

from collections.abc import Iterable

import nats.js.api as api

from common import errors
from common.bus.connection import Connection
from protocol import streams, subjects


def stream_config(d: streams.StreamDef) -> api.StreamConfig:
    return api.StreamConfig(
        name=d.name,
        subjects=list(d.subjects),
        retention=api.RetentionPolicy(d.retention),
        storage=api.StorageType(d.storage),
        max_msgs_per_subject=d.max_msgs_per_subject,
        duplicate_window=d.duplicate_window,
        num_replicas=d.replicas,
        max_consumers=d.max_consumers,
        allow_direct=d.allow_direct,
        discard=api.DiscardPolicy.OLD,
    )


def consumer_config(d: streams.ConsumerDef) -> api.ConsumerConfig:
    return api.ConsumerConfig(
        durable_name=d.durable_name,
        filter_subject=d.filter_subject,
        ack_policy=api.AckPolicy(d.ack_policy),
        deliver_policy=api.DeliverPolicy(d.deliver_policy),
        ack_wait=d.ack_wait,
        max_deliver=d.max_deliver,
        max_ack_pending=d.max_ack_pending,
    )


_STREAM_FIELDS = (
    "subjects",
    "retention",
    "storage",
    "max_msgs_per_subject",
    "duplicate_window",
    "num_replicas",
    "max_consumers",
    "allow_direct",
    "discard",
)


def _differs(want: api.StreamConfig, have: api.StreamConfig) -> list[str]:
    return [f for f in _STREAM_FIELDS if getattr(want, f) != getattr(have, f)]


async def ensure_stream(conn: Connection, d: streams.StreamDef) -> str:
    """Create or update one stream; returns "created", "updated" or "unchanged"."""
    want = stream_config(d)
    api_subject = f"$JS.API.STREAM.*.{d.name}"
    try:
        info = await conn.call(
            conn.js.stream_info(d.name), subjects=[api_subject], what=f"stream info {d.name}"
        )
    except errors.NotFound:
        await conn.call(conn.js.add_stream(want), subjects=[api_subject], what=f"create stream {d.name}")
        return "created"
    if not _differs(want, info.config):
        return "unchanged"
    await conn.call(conn.js.update_stream(want), subjects=[api_subject], what=f"update stream {d.name}")
    return "updated"


async def ensure_consumer(conn: Connection, d: streams.ConsumerDef) -> None:
    """Create or update a durable consumer (the server's create-or-update is idempotent)."""
    await conn.call(
        conn.js.add_consumer(d.stream, consumer_config(d)),
        subjects=["$JS.API.CONSUMER.>"],
        what=f"create consumer {d.durable_name} on {d.stream}",
    )


async def ensure_topology(
    conn: Connection,
    *,
    sites: Iterable[str],
    replicas: int = 1,
    prefix: str = subjects.DEFAULT_PREFIX,
) -> dict[str, str]:
    """The four streams, the hub's consumers and one ``agent-<site>`` consumer per site."""
    outcome = {}
    for d in streams.all_streams(replicas=replicas, prefix=prefix):
        outcome[d.name] = await ensure_stream(conn, d)
    for c in streams.hub_consumers(prefix=prefix):
        await ensure_consumer(conn, c)
    for site in sorted(set(sites)):
        await ensure_consumer(conn, streams.agent_consumer(site, prefix=prefix))
    return outcome
