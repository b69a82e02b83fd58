"""Wiring of the site agent: settings → NATS, Kubernetes, health server → the agent's loops.

Owns the process lifetime: connect (retrying forever), start every loop under supervision,
keep readiness and the connection metric current, stop cleanly on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import logging

from agent import __version__, heartbeat, publishing
from agent import metrics as agent_metrics
from agent.apply import loop as apply_loop
from agent.cleanup import loop as cleanup_loop
from agent.cleanup import reading
from agent.credential import keeper
from agent.deps import Deps
from agent.settings import AgentSettings
from agent.status import loop as status_loop
from common import bus, logs, service
from common import kube as ckube
from common.files import keys as keyfiles
from common.kube import errors as kerrors
from common.kube import resources
from protocol import keys

log = logging.getLogger(__name__)

KUBE_CHECK = "kubernetes"
KUBE_PROBE_INTERVAL = 10.0
"""Seconds between two looks at the site's API server for the ``kubernetes`` readiness check."""
KUBE_PROBE_TIMEOUT = 10.0
"""Seconds one look may take. The client itself never gives up on a server that accepted the
connection and does not answer (one stopped, or behind a dead proxy): unbounded, the check
would keep saying "reachable" from before, for as long as the server hangs."""


class Agent(service.Service):
    """A running agent; ``stop()`` ends every loop and closes every connection."""

    def __init__(self, settings: AgentSettings) -> None:
        super().__init__()
        self.settings = settings
        self.metrics = agent_metrics.Metrics()
        self.metrics.info.labels(site=settings.site, version=__version__).set(1)
        self.apply: apply_loop.ApplyLoop | None = None
        self.status: status_loop.StatusLoop | None = None
        self.cleanup: cleanup_loop.CleanupLoop | None = None
        self.heartbeat: heartbeat.Heartbeat | None = None
        self.credential: keeper.Credential | None = None

    async def start(self) -> None:
        s = self.settings
        checks = (KUBE_CHECK, keeper.CHECK) if s.operator_mode else (KUBE_CHECK,)
        await self.serve_health(s.listen, self.metrics.registry, *checks)
        hub_keys = self._hub_keys()
        kube = self.kube = await ckube.connect(in_cluster=s.in_cluster, kubeconfig=s.kubeconfig)
        self.spawn("kube-probe", lambda: self._probe_kube(kube))
        identity = None
        if s.operator_mode:  # our own key, a JWT from the Secret or bootstrapped
            self.credential = keeper.Credential(s, kube=kube, readiness=self.readiness, metrics=self.metrics)
            identity = await self.credential.obtain()
        conn = await self.connect_bus(
            s,
            name=f"kamaji-broker-agent-{s.site}",
            inbox_prefix=bus.site_inbox_prefix(s.site),
            on=self._connected,
            identity=identity,
        )
        if self.credential is not None:
            renewing = self.credential
            self.supervise("nats-credential renewal", lambda: renewing.renew_forever(conn))
        publisher = publishing.Publisher(conn, site=s.site, prefix=s.prefix)
        self._start_loops(
            Deps(
                conn=conn,
                kube=kube,
                publisher=publisher,
                hub_keys=hub_keys,
                metrics=self.metrics,
                readiness=self.readiness,
            )
        )
        assert self.health_server is not None
        log.info(
            "agent for site %s started; health on port %d",
            s.site,
            self.health_server.port,
            extra=logs.about(site=s.site),
        )

    def _hub_keys(self) -> keys.HubPublicKeys:
        hub_keys = keyfiles.load_public_keys(self.settings.hub_public_keys)
        self.metrics.trust(hub_keys)
        log.info(
            "trusting hub signing key ids %s; retired: %s",
            ", ".join(hub_keys.trusted_key_ids()) or "none",
            ", ".join(hub_keys.retired) or "none",
        )
        return hub_keys

    def _start_loops(self, deps: Deps) -> None:
        """Build the four loops, wire them to each other, start each under supervision."""
        s = self.settings
        self.status = status = status_loop.StatusLoop(s, deps)
        self.supervise("status loop", status.run)

        # A provision the status loop's cache has no TCP for is created without a GET first.
        self.apply = apply = apply_loop.ApplyLoop(s, deps, on_delete=status.deleting, known=status.known)
        self.supervise("apply loop", apply.run)

        async def caught_up() -> bool:
            return await reading.consumer_caught_up(deps.conn, apply.definition, lambda: apply.idle)

        self.cleanup = cleanup = cleanup_loop.CleanupLoop(
            s, deps, caught_up=caught_up, republish=status.republish_all
        )
        # A TCP deleted by hand while its intent still says provision is created again at once.
        status.restore = cleanup.restore
        # Likewise a TCP edited by hand is reverted from the watch event, not at the next pass.
        status.revert = cleanup.revert
        # Anti-entropy on every reconnect: whatever changed while we were away is reconciled.
        deps.conn.on_reconnect.append(cleanup.on_reconnect)
        self.supervise("cleanup loop", cleanup.run)
        self.heartbeat = heartbeat.Heartbeat(
            s, deps, counts=status.counts, last_intent_seq=lambda: apply.last_seq
        )
        self.supervise("heartbeat", self.heartbeat.run)

    def _connected(self, connected: bool) -> None:
        self.metrics.nats_connected.set(1 if connected else 0)

    async def _probe_kube(self, kube: ckube.Kube) -> None:
        namespaces = self.settings.target_namespaces
        while True:
            try:
                async with asyncio.timeout(KUBE_PROBE_TIMEOUT):
                    await kube.list(
                        resources.TENANT_CONTROL_PLANE,
                        namespace=namespaces[0] if namespaces else None,
                        label_selector=heartbeat.PROBE_SELECTOR,
                    )
            except TimeoutError:
                self.readiness.set(KUBE_CHECK, False, f"API server: no answer within {KUBE_PROBE_TIMEOUT:g}s")
            except kerrors.NotFound:
                self.readiness.set(
                    KUBE_CHECK, False, "TenantControlPlane API not served here (is Kamaji installed?)"
                )
            except kerrors.KubeError as exc:
                self.readiness.set(KUBE_CHECK, False, f"API server: {exc}")
            else:
                self.readiness.set(KUBE_CHECK, True, "reachable")
            await asyncio.sleep(KUBE_PROBE_INTERVAL)


async def run(settings: AgentSettings) -> None:
    """Run until SIGTERM or SIGINT."""
    await service.run_until_signalled(Agent(settings))
