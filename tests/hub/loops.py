"""The hub's loops of one term in a test: the controller, the ingest and the site poller, as
``hub.main`` wires them, with the short intervals tests want. The one place tests build a hub."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from common import bus
from common import kube as ckube
from hub import metrics as hub_metrics
from hub.controllers import deps as config
from hub.controllers.rkcp import controller as rkcp_controller
from hub.ingest import consumer, heartbeats, liveness, observations, record
from protocol import sealing


def start(
    settings: config.Settings,
    *,
    kube: ckube.Kube,
    conn: bus.Connection,
    signer: Any,
    keyring: sealing.Keyring,
    metrics: hub_metrics.Metrics,
    earlier_keys: Mapping[str, Any] | None = None,
) -> tuple[rkcp_controller.Controller, list[asyncio.Task[None]]]:
    """Start the three loops; the controller and their tasks (the caller cancels them).
    ``earlier_keys``: the signing keys of ``--hub-public-keys``."""
    seen = observations.Observations()
    state = liveness.Sites()
    reader = record.Intake(
        record.Deps(conn=conn, observations=seen, keyring=keyring, metrics=metrics), prefix=settings.prefix
    )
    deps = config.Deps(
        kube=kube, conn=conn, signer=signer, observations=seen, intake=reader, sites=state, metrics=metrics,
        earlier_keys=earlier_keys or {},
    )  # fmt: skip
    c = rkcp_controller.Controller(settings, deps)
    ing = consumer.Ingest(
        consumer.Deps(
            intake=reader,
            sites=c.known_sites,
            maps=c.maps,
            on_change=c.on_observation,
            ensured=c.ensured,
            heartbeat=heartbeats.heartbeats(state, metrics),
        ),
        consumer.Settings(rescan_interval=0.2, retain_interval=0.2),
    )

    async def poll() -> None:
        await heartbeats.run(
            state, conn, sites_provider=c.known_sites, prefix=settings.prefix, metrics=metrics,
            interval=0.3, heartbeat_interval=settings.heartbeat_interval, on_change=c.on_site_change,
            first=c.listed, polled=c.polled,
        )  # fmt: skip

    tasks = [
        asyncio.create_task(c.run(), name="hub-controller"),
        asyncio.create_task(ing.run(), name="hub-ingest"),
        asyncio.create_task(poll(), name="hub-sites"),
    ]
    return c, tasks
