"""What hub and agent processes share: start, run until a signal, stop tasks and connections cleanly.

``Service`` owns the long-lived tasks, the readiness checks, the health server, the NATS
connection (watched for readiness) and the Kubernetes client of one process;
``run_until_signalled`` starts it and stops it on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

import prometheus_client

from common import aiotasks, bus, health, kube
from common.bus import connection
from common.settings import ProcessSettings

log = logging.getLogger(__name__)

NATS_CHECK = "nats"
"""The readiness check that follows the NATS connection."""


class Service:
    """Base of the hub and agent processes: the resources ``stop()`` releases, in order."""

    exit_when_bus_lost = False
    """Whether the process ends (and says why) once its NATS connection ended for good: nothing
    reconnects a client nats-py closed, so only a new process talks to NATS again."""

    def __init__(self) -> None:
        self.ended: list[str] = []
        """Why the process must end by itself (``run_until_signalled`` then stops it, failing)."""
        self.ending = asyncio.Event()
        self.tasks = aiotasks.Group()
        self.conn: bus.Connection | None = None
        self.also_watched: list[bus.Connection] = []
        """Other connections of the process whose loss for good ``watch_nats`` says too."""
        self.kube: kube.Kube | None = None
        self.health_server: health.HealthServer | None = None
        self.readiness = health.Readiness()

    async def serve_health(
        self, listen: str, registry: prometheus_client.CollectorRegistry, *checks: str
    ) -> None:
        """Declare the NATS check and ``checks`` (not ready until set), serve /healthz, /readyz, /metrics."""
        self.readiness.declare(NATS_CHECK, *checks)
        self.health_server = health.HealthServer(self.readiness, registry)
        await self.health_server.start(listen)

    async def connect_bus(
        self,
        s: ProcessSettings,
        *,
        name: str,
        inbox_prefix: str = connection.DEFAULT_INBOX_PREFIX,
        on: Callable[[bool], None] | None = None,
        identity: bus.Identity | None = None,
    ) -> bus.Connection:
        """Connect to NATS as ``s`` says (retrying forever) and keep the NATS check in step;
        with ``identity`` (operator mode: a JWT held in memory) instead of a seed or .creds file."""
        self.conn = conn = await bus.connect(
            bus.Options(
                servers=s.servers,
                seed_file=s.nats_seed,
                creds_file=s.nats_creds,
                identity=identity,
                ca_file=s.nats_ca_file,
                inbox_prefix=inbox_prefix,
                name=name,
                ping_interval=s.nats_ping_interval,
            ),
            report=lambda why: self.readiness.set(NATS_CHECK, False, why),
        )
        self.spawn("nats-monitor", lambda: self.watch_nats(on))
        return conn

    def supervise(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        self.tasks.supervise(name, run)

    def spawn(self, name: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """A task that handles its own errors (not restarted)."""
        self.tasks.spawn(name, run)

    async def watch_nats(self, on: Callable[[bool], None] | None = None) -> None:
        """Keep a readiness check (and an optional gauge) in step with the NATS connection (and
        ``also_watched``: a connection lost for good is said, and ends a process that says so)."""
        assert self.conn is not None
        while True:
            lost = [c.lost[0] for c in (self.conn, *self.also_watched) if c.lost]
            if lost:
                why = f"NATS connection closed for good: {lost[0]}"
                self.readiness.set(NATS_CHECK, False, why)
                if on is not None:
                    on(False)
                if self.exit_when_bus_lost:
                    self.end(f"{why}; exiting, to connect again in a new process")
                    return
                await asyncio.sleep(1.0)
                continue
            connected = self.conn.connected
            # While reconnecting, say why the last attempt failed (a rotated CA, a refused TLS
            # handshake), not only that it did.
            why = self.conn.last_failure or "disconnected; reconnecting"
            self.readiness.set(NATS_CHECK, connected, "connected" if connected else why)
            if on is not None:
                on(connected)
            await asyncio.sleep(1.0)

    def end(self, why: str) -> None:
        """End the process, failing, for ``why`` (``run_until_signalled`` stops it)."""
        log.error("%s", why)
        self.ended.append(why)
        self.ending.set()

    async def before_close(self) -> None:
        """Hook: work to do after the tasks stopped and before the connections close."""

    async def stop(self) -> None:
        await self.tasks.stop()
        await self.before_close()
        if self.conn is not None:
            await self.conn.close()
        if self.kube is not None:
            await self.kube.close()
        if self.health_server is not None:
            await self.health_server.stop()


class Startable(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


async def run_until_signalled(service: Startable) -> None:
    """Start ``service``, wait for SIGTERM or SIGINT, stop it (also when starting failed). A
    ``Service`` that ends by itself (``Service.end``) is stopped too, and ``Ended`` says why."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    ending = service.ending if isinstance(service, Service) else asyncio.Event()
    # start() may wait a long time (NATS retried forever, say with a CA the server does not
    # match): a signal meanwhile cancels it, instead of going unheard until SIGKILL.
    starting = asyncio.ensure_future(service.start())
    stopping = asyncio.ensure_future(_either(stop, ending))
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            log.info("stopping while starting")
        else:
            starting.result()  # a failed start raises here
            await stopping
            log.info("stopping")
    finally:
        for task in (starting, stopping):
            task.cancel()
        await service.stop()
    if isinstance(service, Service) and service.ended:
        raise Ended(service.ended[0])


class Ended(Exception):
    """The process ended by itself, failing (``Service.end``): why."""


async def _either(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
