"""What hub and agent processes share: run until a signal, and stop tasks and connections cleanly.

``Service`` owns the long-lived tasks, the NATS connection, the Kubernetes client and the
health server of one process; ``run_until_signalled`` starts it and stops it on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from common import aiotasks, bus, health, kube

log = logging.getLogger(__name__)


class Service:
    """Base of the hub and agent processes: the resources ``stop()`` releases, in order."""

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[None]] = []
        self.conn: bus.Connection | None = None
        self.kube: kube.Kube | None = None
        self.health_server: health.HealthServer | None = None

    def supervise(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        self.tasks.append(asyncio.create_task(aiotasks.supervise(name, run), name=name))

    def spawn(self, name: str, run: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """A task that handles its own errors (not restarted)."""
        self.tasks.append(asyncio.create_task(run(), name=name))

    async def watch_nats(
        self, readiness: health.Readiness, check: str, on: Callable[[bool], None] | None = None
    ) -> None:
        """Keep a readiness check (and an optional gauge) in step with the NATS connection."""
        assert self.conn is not None
        while True:
            connected = self.conn.connected
            # While reconnecting, say why the last attempt failed (a rotated CA, a refused TLS
            # handshake), not only that it did.
            why = self.conn.last_failure or "disconnected; reconnecting"
            readiness.set(check, connected, "connected" if connected else why)
            if on is not None:
                on(connected)
            await asyncio.sleep(1.0)

    async def before_close(self) -> None:
        """Hook: work to do after the tasks stopped and before the connections close."""

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()
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
    """Start ``service``, wait for SIGTERM or SIGINT, stop it (also when starting failed)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    # start() may wait a long time (NATS retried forever, say with a CA the server does not
    # match): a signal meanwhile cancels it, instead of going unheard until SIGKILL.
    starting = asyncio.ensure_future(service.start())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
            log.info("stopping while starting")
            return
        starting.result()  # a failed start raises here
        await stopping
        log.info("stopping")
    finally:
        for task in (starting, stopping):
            task.cancel()
        await service.stop()
