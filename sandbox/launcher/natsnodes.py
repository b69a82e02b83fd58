"""The system's nats-servers: one, or a JetStream cluster, and what the monitoring says of it.

Owns the node names (``nats-server``, or ``nats-0``.. with ``nats_nodes`` > 1), their client,
monitoring and route ports (free ports on 127.0.0.1, or each at its namespace's address with
``site_links``: ``sandbox.launcher.netlinks``), their configuration (``kamaji-broker
nats-config``, one file per node in the shared DIR/nats/, TLS required of every client and, in a
cluster, mutual TLS on the routes) and their start. Reads leaders and catch-up from each node's
HTTP monitoring through ``sandbox.natsmonitor``. A layer of ``sandbox.launcher.system.System``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path

from common.files import natsserver
from sandbox import natsd, natsmonitor, ports, processes
from sandbox.launcher.netlinks import LOCAL, NetLinks
from sandbox.launcher.options import Options

__all__ = ["NATS_CLUSTER", "NATS_SINGLE", "NatsNodes"]

NATS_SINGLE = "nats-server"
"""The child name of the one nats-server (``nats_nodes=1``); a cluster's are ``nats-<i>``."""
NATS_CLUSTER = "kamaji-broker-sandbox"
"""The server name of the single node, and the cluster's name with ``nats_nodes`` > 1."""


class NatsNodes(NetLinks):
    """After ``start()``: ``nats_url`` (the first node), ``nats_urls`` (every node),
    ``nats_monitor_urls``, the leaders of the meta group and of each stream."""

    def __init__(self, directory: Path, options: Options) -> None:
        super().__init__(directory, options)
        nodes = options.nats_nodes
        self.nats_names: tuple[str, ...] = (
            (NATS_SINGLE,) if nodes == 1 else tuple(f"nats-{i}" for i in range(nodes))
        )
        """Child names of the nats-servers (``nats-server``, or ``nats-0``.. in a cluster)."""
        self.nats_ports: dict[str, int] = {}
        self.nats_monitor_ports: dict[str, int] = {}
        self.nats_port = 0
        self.nats_monitor_port = 0

    @property
    def nats_monitor_url(self) -> str:
        """The first nats-server's HTTP monitoring (/varz: message and byte counters)."""
        first = self.nats_names[0]
        return f"http://{self.host(first)}:{self.nats_monitor_port}" if self.nats_monitor_port else ""

    @property
    def nats_url(self) -> str:
        """The first node's URL (nats-py learns the others from it; see ``nats_urls``)."""
        if not self.nats_port:
            raise RuntimeError("the system is not started")
        return f"tls://{self.host(self.nats_names[0])}:{self.nats_port}"

    @property
    def nats_urls(self) -> tuple[str, ...]:
        """Every node's URL: what hub and agents are given, so any one of them is enough."""
        if not self.nats_ports:
            raise RuntimeError("the system is not started")
        return tuple(f"tls://{self.host(name)}:{port}" for name, port in self.nats_ports.items())

    @property
    def nats_monitor_urls(self) -> dict[str, str]:
        """Each nats-server's HTTP monitoring by child name."""
        return {name: f"http://{self.host(name)}:{port}" for name, port in self.nats_monitor_ports.items()}

    @property
    def stream_replicas(self) -> int:
        return min(3, self.options.nats_nodes)

    def _server_name(self, child: str) -> str:
        return NATS_CLUSTER if self.options.nats_nodes == 1 else child

    def _child_of(self, server_name: str) -> str:
        names = {self._server_name(child): child for child in self.nats_names}
        return names.get(server_name, "")

    async def meta_leader(self) -> str:
        """The child that leads the JetStream meta group, as every running node agrees; empty
        during an election (or without quorum)."""
        nodes = self.options.nats_nodes
        leader = await natsmonitor.meta_leader_of(list(self.nats_monitor_urls.values()), nodes=nodes)
        if nodes == 1:  # a single server leads itself (under its id: see natsmonitor.meta)
            return NATS_SINGLE if leader else ""
        return self._child_of(leader)

    async def stream_leader(self, stream: str) -> str:
        """The child whose nats-server leads ``stream`` (e.g. ``KB_INTENTS``), as every running
        node with a replica agrees; empty while it is being elected."""
        return self._child_of(
            await natsmonitor.stream_leader_of(list(self.nats_monitor_urls.values()), stream)
        )

    async def jetstream_settled(self, streams_: Sequence[str] = ()) -> bool:
        """Whether every nats-server answers, all agree on the meta leader and on the leader of
        each of ``streams_``, and every peer is current (``natsmonitor.settled``): a node started
        again has caught up."""
        urls = list(self.nats_monitor_urls.values())
        return await natsmonitor.settled_of(urls, nodes=self.options.nats_nodes, streams=streams_)

    async def wait_jetstream(self, *, streams_: Sequence[str] = (), timeout: float | None = None) -> None:
        """Wait until ``jetstream_settled(streams_)``; ``LaunchError`` after ``timeout`` seconds
        (default ``start_timeout``)."""
        loop = asyncio.get_running_loop()
        limit = self.options.start_timeout if timeout is None else timeout
        deadline = loop.time() + limit
        while not await self.jetstream_settled(streams_):
            if loop.time() > deadline:
                waiting = f"a meta leader{' and leaders of ' + ', '.join(streams_) if streams_ else ''}"
                raise processes.LaunchError(
                    f"JetStream of {', '.join(self.nats_names)} has no {waiting} known to every node "
                    f"after {limit:g}s; see {self.log(self.nats_names[0])}"
                )
            await asyncio.sleep(0.2)

    # -- configuring and starting ------------------------------------------------------------

    def _nats_config(self, name: str) -> Path:
        return self.nats_dir / (natsserver.MAIN_FILE if self.options.nats_nodes == 1 else f"{name}.conf")

    def _cluster_flags(self, name: str, route_ports: Mapping[str, int]) -> list[str]:
        """``nats-config``'s flags that make node ``name`` one of the cluster: its own file in
        the shared directory, its route port, every node's route."""
        routes = ",".join(f"nats://{self.host(node)}:{port}" for node, port in route_ports.items())
        return [
            "--config-file", self._nats_config(name).name, "--cluster-name", NATS_CLUSTER,
            "--cluster-listen", f"{self.host(name)}:{route_ports[name]}", "--routes", routes,
        ]  # fmt: skip

    async def _configure_nats(self) -> None:
        """Pick every node's ports and write its configuration with ``nats-config``."""
        await self._make_namespaces(self.nats_names)
        # Every node's address in the one server certificate they share.
        tls_hosts = [
            a for n in self.nats_names for a in ("--tls-host", self.host(n)) if self.host(n) != LOCAL
        ]
        for name in self.nats_names:
            self.nats_ports[name] = ports.free_port()
            self.nats_monitor_ports[name] = ports.free_port()
        self.nats_port = self.nats_ports[self.nats_names[0]]
        self.nats_monitor_port = self.nats_monitor_ports[self.nats_names[0]]
        route_ports = {name: ports.free_port() for name in self.nats_names}
        single = self.options.nats_nodes == 1
        for name in self.nats_names:
            # One node at a time, all in one directory: they share auth.conf and the TLS files
            # (the certificate names 127.0.0.1 and every node's address: it serves the routes too).
            store = self.directory / ("jetstream" if single else f"jetstream-{name}")
            cluster = [] if single else self._cluster_flags(name, route_ports)
            await self._cli(
                "nats-config", "--dir", str(self.nats_dir),
                "--host", self.host(name), "--port", str(self.nats_ports[name]),
                "--store-dir", str(store), "--server-name", self._server_name(name),
                "--monitor", f"{self.host(name)}:{self.nats_monitor_ports[name]}",
                "--tls-generate", str(self.tls_dir), *tls_hosts, "--auth", "operator", *cluster,
            )  # fmt: skip

    def _start_nats(self) -> list[processes.Child]:
        """Start every node (not waited for: see ``_ready``)."""
        return [
            self._spawn_at(
                name,
                name,
                [natsd.find_binary(), "-a", self.host(name), "-c", str(self._nats_config(name))],
                ready_text="Server is ready",
            )
            for name in self.nats_names
        ]
