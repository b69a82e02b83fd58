"""Wiring of the site agent: settings → NATS, Kubernetes, health server → the agent's loops.

Owns the process lifetime: connect (retrying forever), start every loop under supervision,
keep readiness and the connection metric current, stop cleanly on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent import __version__, heartbeat, publishing
from agent import metrics as agent_metrics
from agent.apply import intents
from agent.apply import loop as apply_loop
from agent.cleanup import loop as cleanup_loop
from agent.settings import AgentSettings
from agent.status import loop as status_loop
from common import aiotasks, bus, health
from common import kube as ckube
from common.kube import errors as kerrors
from common.kube import resources
from protocol import keys

log = logging.getLogger(__name__)

NATS_CHECK = "nats"
KUBE_CHECK = "kubernetes"


@dataclass
class Agent:
    """A running agent; ``stop()`` ends every loop and closes every connection."""

    settings: AgentSettings
    metrics: agent_metrics.Metrics = field(default_factory=agent_metrics.Metrics)
    readiness: health.Readiness = field(default_factory=health.Readiness)
    conn: bus.Connection | None = None
    api_client: Any = None
    apply: apply_loop.ApplyLoop | None = None
    status: status_loop.StatusLoop | None = None
    cleanup: cleanup_loop.CleanupLoop | None = None
    heartbeat: heartbeat.Heartbeat | None = None
    health_server: health.HealthServer | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        s = self.settings
        self.readiness.declare(NATS_CHECK, KUBE_CHECK)
        self.health_server = health.HealthServer(self.readiness, self.metrics.registry)
        await self.health_server.start(s.listen)
        hub_keys = keys.decode_public_keys(s.hub_public_keys.read_bytes())
        self.api_client = (
            ckube.api_client_in_cluster()
            if s.in_cluster
            else await ckube.api_client_from_kubeconfig(s.kubeconfig or "")
        )
        kube = ckube.Kube(self.api_client)
        self.tasks.append(asyncio.create_task(self._probe_kube(kube), name="kube-probe"))
        self.conn = await bus.connect(
            bus.Options(
                servers=s.servers,
                seed_file=s.nats_seed,
                creds_file=s.nats_creds,
                inbox_prefix=bus.site_inbox_prefix(s.site),
                name=f"kamaji-broker-agent-{s.site}",
            )
        )
        self.tasks.append(asyncio.create_task(self._watch_nats(self.conn), name="nats-monitor"))
        publisher = publishing.Publisher(self.conn, site=s.site, prefix=s.prefix)
        self.apply = apply_loop.ApplyLoop(
            conn=self.conn,
            kube=kube,
            publisher=publisher,
            ctx=intents.Context(
                site=s.site, namespaces=s.target_namespaces, namespace_retry=s.namespace_retry
            ),
            trusted=hub_keys.verify_keys(),
            metrics=self.metrics,
            readiness=self.readiness,
            prefix=s.prefix,
            batch=s.fetch_batch,
        )
        self._supervise("apply loop", self.apply.run)
        self.status = status_loop.StatusLoop(
            kube=kube,
            publisher=publisher,
            site=s.site,
            hub_keys=hub_keys,
            metrics=self.metrics,
            namespaces=s.target_namespaces,
            min_interval=s.status_min_interval,
        )
        self._supervise("status loop", self.status.run)
        apply, status, conn = self.apply, self.status, self.conn

        async def caught_up() -> bool:
            return await cleanup_loop.consumer_caught_up(conn, apply.definition, lambda: apply.idle)

        self.cleanup = cleanup_loop.CleanupLoop(
            conn=conn,
            kube=kube,
            site=s.site,
            trusted=hub_keys.verify_keys(),
            metrics=self.metrics,
            caught_up=caught_up,
            policy=s.orphan_policy,
            grace=s.orphan_grace,
            interval=s.resync_interval,
            namespaces=s.target_namespaces,
            prefix=s.prefix,
            republish=status.republish_all,
        )
        # Anti-entropy on every reconnect: whatever changed while we were away is reconciled.
        conn.on_reconnect.append(self.cleanup.on_reconnect)
        self._supervise("cleanup loop", self.cleanup.run)
        self.heartbeat = heartbeat.Heartbeat(
            publisher=publisher,
            kube=kube,
            site=s.site,
            managed=lambda: status.counts()[0],
            ready=lambda: status.counts()[1],
            last_intent_seq=lambda: apply.last_seq,
            agent_version=__version__,
            interval=s.heartbeat_interval,
            namespaces=s.target_namespaces,
        )
        self._supervise("heartbeat", self.heartbeat.run)
        log.info("agent for site %s started; health on %s", s.site, s.listen)

    def _supervise(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        self.tasks.append(asyncio.create_task(aiotasks.supervise(name, run), name=name))

    async def _watch_nats(self, conn: bus.Connection) -> None:
        while True:
            connected = conn.connected
            self.metrics.nats_connected.set(1 if connected else 0)
            self.readiness.set(
                NATS_CHECK, connected, "connected" if connected else "disconnected; reconnecting"
            )
            await asyncio.sleep(1.0)

    async def _probe_kube(self, kube: ckube.Kube) -> None:
        while True:
            try:
                await kube.list(
                    resources.TENANT_CONTROL_PLANE,
                    namespace=self.settings.target_namespaces[0] if self.settings.target_namespaces else None,
                    label_selector="kamaji-broker.io/probe=none",
                )
            except kerrors.NotFound:
                self.readiness.set(
                    KUBE_CHECK, False, "TenantControlPlane API not served here (is Kamaji installed?)"
                )
            except kerrors.KubeError as exc:
                self.readiness.set(KUBE_CHECK, False, f"API server: {exc}")
            else:
                self.readiness.set(KUBE_CHECK, True, "reachable")
            await asyncio.sleep(10.0)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()
        if self.conn is not None:
            await self.conn.close()
        if self.api_client is not None:
            await self.api_client.close()
        if self.health_server is not None:
            await self.health_server.stop()


async def run(settings: AgentSettings) -> None:
    """Run until SIGTERM or SIGINT."""
    agent = Agent(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await agent.start()
        await stop.wait()
        log.info("stopping")
    finally:
        await agent.stop()
