"""``System``: the whole kamaji-broker system on this machine, as separate OS processes.

Owns the order of things. ``start()``:

1. credentials with the operator commands, run as ``kamaji-broker keys generate``,
   ``kamaji-broker nats-config --tls-generate`` and ``kamaji-broker site add <site>``
   subprocesses (DIR/keys/, DIR/nats/, the CA and server certificate in DIR/nats/tls/; ``site
   add`` also writes each site's ``Site`` manifest, granting ``rkcp_namespaces`` the target
   namespace), and the RKCP, RKCP template and Site CRDs rendered by ``hub.api.crds`` (DIR/crds/);
2. nats-server from the wheel with that configuration (TLS required of every client, as in
   production; hub and agents verify it with DIR/nats/tls/ca.crt) — or, with ``nats_nodes=3``,
   a JetStream cluster of three, waited for until a meta leader is elected (the hub then makes
   its streams R3 and every process gets every node's URL) — and one emulated API server per
   cluster, all on 127.0.0.1 and free ports (with ``site_links`` each site and nats-server at
   the address of a network namespace of its own);
3. the ``Site`` objects in ``mgmt`` (from the manifests ``site add`` wrote), the target
   namespace at each site, a Kamaji simulator per site (its own address pool);
4. ``kamaji-broker hub`` and then one ``kamaji-broker agent`` per site, each waited for on ``/readyz``.

``stop()`` undoes it in reverse (agents and hub first, NATS last): SIGTERM, SIGKILL after a
timeout, by PID. Every process logs to DIR/logs/<name>.log.

The class is built in layers, one module each, every layer on top of what it uses:
``layout`` (options and paths) → ``children`` (child processes, faults by name, logs) →
``netlinks`` (with ``site_links``: the network namespaces and the links a test shapes) →
``natsnodes`` (the nats-servers) and ``clusters`` (emulators, clients, simulators) → ``broker``
(hub replicas, agents), ``controlplanes`` (Cluster + RKCP pairs, progress) and ``identities``
(the launcher's own short-lived NATS users, signed when asked for) → ``System``.
Used by ``kamaji-broker sandbox``, the end-to-end and fault tests and the benchmarks.
"""

from __future__ import annotations

from types import TracebackType

from protocol import streams
from sandbox.launcher.broker import Broker
from sandbox.launcher.controlplanes import ControlPlanes
from sandbox.launcher.identities import Identities
from sandbox.launcher.layout import prepare_directory

__all__ = ["System"]


class System(Broker, ControlPlanes, Identities):
    """``System(directory, options)``: hub, agents, NATS, emulated clusters and Kamaji
    simulators under ``directory``, made as ``options`` (``sandbox.launcher.Options``) say.

    After ``start()``: ``nats_url``, ``nats_urls``, ``hub_health_url``, ``agent_health_urls``,
    ``mgmt`` and ``site_kube(site)`` (clients of ``common.kube``); every path is an attribute
    (``sandbox.launcher.layout``).
    """

    async def __aenter__(self) -> System:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Bring everything up and wait until the hub and every agent are ready.

        Raises ``processes.LaunchError`` naming the part that failed (and its log); whatever had
        started is stopped again first, also when the caller cancels the start.
        """
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        prepare_directory(self.directory)
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        await self._credentials()
        nats = self._start_nats()
        await self._ready([*nats, *await self._start_clusters()])
        await self._attach_links(self.nats_names)
        clustered = self.options.nats_nodes > 1
        if clustered:
            # "Server is ready" comes before the routes: the hub's first stream would be refused.
            await self.wait_jetstream()
        await self._connect()
        await self._install()
        await self._ready([*self._start_simulators(), *self._start_hubs()])
        if clustered:
            # Replicated streams elect their leaders after they are created: agents bind then.
            names = (streams.intents_stream_name(), *(streams.site_stream_name(s) for s in self.sites))
            await self.wait_jetstream(streams_=names)
        # After the hub: it creates the streams and every agent's durable consumer.
        await self._ready(self._start_agents())

    async def stop(self) -> None:
        """Stop everything that was started, in reverse order; safe to call more than once."""
        try:
            await self._disconnect()
            await self._stop_children()
            await self._release()
        finally:
            await self._release_links()

    async def _credentials(self) -> None:
        await self._cli("keys", "generate", "--out", str(self.keys_dir))
        await self._configure_nats()
        for site in self.sites:
            # `site add` writes each site's single-use bootstrap credential (operator mode).
            await self._cli(
                "site", "add", site, "--nats-config-dir", str(self.nats_dir),
                "--namespaces", ",".join(self.options.rkcp_namespaces),
                "--target-namespaces", self.namespace,
            )  # fmt: skip
