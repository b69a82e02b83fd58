"""Create or update the streams and the durable consumers, idempotently (the hub's job).

Definitions come from ``protocol.streams``; this module only maps them onto nats-py's config
types and reconciles the server towards them: create when absent, update when a field we own
differs, leave alone when equal. Agents never call it (they lack the permission).

Streams of releases before per-site streams (KB_STATUS, KB_SECRETS, KB_SITES, shared by every
site) claim the subjects the per-site streams need; they are deleted before a site's stream is
created. They held only what agents publish again (statuses, heartbeats; sealed secrets when they
change, and the hub's CAPI Secrets hold the current ones already).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import nats.js.api as api

from common.bus import errors
from common.bus.connection import Connection
from protocol import streams, subjects

log = logging.getLogger(__name__)

LEGACY_SHARED_STREAMS = ("STATUS", "SECRETS", "SITES")
"""Suffixes of the shared inbound streams that per-site streams replace."""


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
        max_msg_size=d.max_msg_size,
        max_msgs=d.max_msgs,
        max_bytes=d.max_bytes,
        discard=api.DiscardPolicy(d.discard),
    )


def consumer_config(d: streams.ConsumerDef) -> api.ConsumerConfig:
    single = len(d.filter_subjects) == 1
    return api.ConsumerConfig(
        durable_name=d.durable_name,
        filter_subject=d.filter_subjects[0] if single else None,
        filter_subjects=None if single else list(d.filter_subjects),
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
    "max_msg_size",
    "max_msgs",
    "max_bytes",
    "discard",
)


def _differs(want: api.StreamConfig, have: api.StreamConfig) -> list[str]:
    return [f for f in _STREAM_FIELDS if getattr(want, f) != getattr(have, f)]


async def ensure_stream(conn: Connection, d: streams.StreamDef) -> str:
    """Create or update one stream; returns "created", "updated" or "unchanged"."""
    want = stream_config(d)
    api_subject = f"$JS.API.STREAM.*.{d.name}"
    try:
        info = await conn.jetstream(
            lambda js: js.stream_info(d.name), subjects=[api_subject], what=f"stream info {d.name}"
        )
    except errors.NotFound:
        await conn.jetstream(
            lambda js: js.add_stream(want), subjects=[api_subject], what=f"create stream {d.name}"
        )
        return "created"
    if not _differs(want, info.config):
        return "unchanged"
    await conn.jetstream(
        lambda js: js.update_stream(want), subjects=[api_subject], what=f"update stream {d.name}"
    )
    return "updated"


_ACK_POLICY_FIXED = "ack policy can not be updated"
"""The server's refusal (err_code 10012, which it gives to every refused consumer update) when
only the ack policy differs: the one difference ``ensure_consumer`` creates a consumer again for."""


async def ensure_consumer(conn: Connection, d: streams.ConsumerDef) -> None:
    """Create or update a durable consumer (the server's create-or-update is idempotent).

    The hub's own consumer of an earlier release, which acknowledged, is deleted and created
    again without acks: what it had delivered is lost to it, which the hub's first reads after
    a start cover anyway (``hub.ingest.record.Intake.load``). No other consumer is ever deleted here
    (an agent's holds its site's place in the intents). Going back to a release whose hub
    consumer acknowledges needs ``nats consumer rm <stream> hub`` first (docs/operations.md, Troubleshooting).
    """
    config = consumer_config(d)

    async def create() -> None:
        await conn.jetstream(
            lambda js: js.add_consumer(d.stream, config),
            subjects=["$JS.API.CONSUMER.>"],
            what=f"create consumer {d.durable_name} on {d.stream}",
        )

    try:
        await create()
        return
    except errors.BusError as exc:
        if d.durable_name != streams.HUB_CONSUMER or _ACK_POLICY_FIXED not in str(exc):
            raise
        log.warning(
            "consumer %s on %s acknowledges (an earlier release): created again", d.durable_name, d.stream
        )
    await conn.jetstream(
        lambda js: js.delete_consumer(d.stream, d.durable_name),
        subjects=[f"$JS.API.CONSUMER.DELETE.{d.stream}.{d.durable_name}"],
        what=f"delete consumer {d.durable_name} on {d.stream}",
    )
    await create()


async def delete_stream(conn: Connection, name: str) -> bool:
    """Delete stream ``name`` with every message it holds; False when there was none."""
    try:
        await conn.jetstream(
            lambda js: js.delete_stream(name),
            subjects=[f"$JS.API.STREAM.*.{name}"],
            what=f"delete stream {name}",
        )
    except errors.NotFound:
        return False
    return True


async def remove_legacy_streams(conn: Connection, *, prefix: str = subjects.DEFAULT_PREFIX) -> list[str]:
    """Delete the shared inbound streams of earlier releases; the names deleted."""
    base = streams.intents_stream_name(prefix=prefix).removesuffix("_INTENTS")
    removed = []
    for suffix in LEGACY_SHARED_STREAMS:
        name = f"{base}_{suffix}"
        if not await delete_stream(conn, name):
            continue
        log.warning(
            "deleted the shared stream %s of an earlier release (replaced by one stream per site)", name
        )
        removed.append(name)
    return removed


async def ensure_topology(
    conn: Connection,
    *,
    sites: Iterable[str],
    replicas: int = 1,
    prefix: str = subjects.DEFAULT_PREFIX,
    limits: streams.SiteLimits = streams.SiteLimits(),  # noqa: B008 - frozen, so one shared default is safe
) -> dict[str, str]:
    """KB_INTENTS, and per site its own stream with ``limits``, the hub's consumer on it and
    the ``agent-<site>`` consumer on KB_INTENTS. Returns what happened to each stream."""
    outcome = {}
    d = streams.intents_stream(replicas=replicas, prefix=prefix)
    outcome[d.name] = await ensure_stream(conn, d)
    wanted = sorted(set(sites))
    if wanted:
        for name in await remove_legacy_streams(conn, prefix=prefix):
            outcome[name] = "deleted"
    for site in wanted:
        site_def = streams.site_stream(site, replicas=replicas, prefix=prefix, limits=limits)
        outcome[site_def.name] = await ensure_stream(conn, site_def)
        await ensure_consumer(conn, streams.hub_consumer(site, prefix=prefix))
        await ensure_consumer(conn, streams.agent_consumer(site, prefix=prefix))
    return outcome
