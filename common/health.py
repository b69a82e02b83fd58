"""The health and metrics endpoint of hub and agent: ``/healthz``, ``/readyz``, ``/metrics``.

``/healthz`` answers 200 while the event loop runs. ``/readyz`` answers 200 only when every
registered check passes, and lists each check with its reason either way, so an operator sees
*why* a pod is not ready (for example "consumer agent-site-a does not exist"). ``/metrics``
serves the process's Prometheus registry. Reasons must never contain secret material.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)


@dataclass
class Readiness:
    """Named readiness checks, each set true or false with a reason by the loop that owns it."""

    checks: dict[str, tuple[bool, str]] = field(default_factory=dict)

    def declare(self, *names: str) -> None:
        for name in names:
            self.checks.setdefault(name, (False, "not checked yet"))

    def set(self, name: str, ok: bool, reason: str = "") -> None:
        previous = self.checks.get(name)
        self.checks[name] = (ok, reason)
        if previous is not None and previous[0] != ok:
            log.info(
                "readiness %s: %s%s", name, "ok" if ok else "not ready", f" ({reason})" if reason else ""
            )

    @property
    def ready(self) -> bool:
        return bool(self.checks) and all(ok for ok, _ in self.checks.values())

    def report(self) -> str:
        lines = [
            f"[{'+' if ok else '-'}] {name}{': ' + reason if reason else ''}"
            for name, (ok, reason) in sorted(self.checks.items())
        ]
        lines.append("ready" if self.ready else "not ready")
        return "\n".join(lines) + "\n"


def parse_listen(listen: str) -> tuple[str, int]:
    """``:8080``, ``0.0.0.0:8080`` or ``127.0.0.1:0`` → (host, port)."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"invalid listen address {listen!r}: use HOST:PORT or :PORT")
    return host or "0.0.0.0", int(port)


class HealthServer:
    def __init__(self, readiness: Readiness, registry: CollectorRegistry) -> None:
        self.readiness = readiness
        self.registry = registry
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, listen: str) -> None:
        host, port = parse_listen(listen)
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        # Logged as soon as it serves: /readyz says why while start-up still waits (for NATS,
        # say), and an operator (or a test) finds the port of ``--listen :0`` here.
        log.info("serving /healthz, /readyz and /metrics; health on port %d", self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        return web.Response(text=self.readiness.report(), status=200 if self.readiness.ready else 503)

    async def _metrics(self, _: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
