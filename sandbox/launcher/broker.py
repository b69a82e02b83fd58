"""kamaji-broker's own processes in the system: the hub (one or more replicas) and an agent per site.

Owns their command lines (``kamaji-broker hub`` / ``agent`` with every path, URL and interval as
a flag, as a deployment would pass them), their health ports and, with ``hub_replicas`` > 1,
leader election through the Lease ``kamaji-broker-hub`` in ``default`` of ``mgmt`` (``leader()``
reads its holder), or with ``shard`` the sites shared through a Lease per replica. A layer of
``sandbox.launcher.system.System``, on top of the NATS nodes (their URLs) and the clusters (their
kubeconfigs, ``mgmt``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from common.kube import resources
from sandbox import ports, processes
from sandbox.launcher.children import CLI
from sandbox.launcher.installs import Installs
from sandbox.launcher.options import MGMT, Options

__all__ = ["HUB_LEASE", "Broker"]

HUB_LEASE = "kamaji-broker-hub"


class Broker(Installs):
    """After ``start()``: ``hub_health_url``, ``hub_health_urls``, ``agent_health_urls``."""

    def __init__(self, directory: Path, options: Options) -> None:
        super().__init__(directory, options)
        self.hub_health_url = ""
        """The first hub replica's; ``hub_health_urls`` has every replica's by child name."""
        self.hub_health_urls: dict[str, str] = {}
        self.agent_health_urls: dict[str, str] = {}

    async def leader(self) -> str:
        """The name of the hub replica that holds the Lease (with ``hub_replicas`` > 1)."""
        lease = await self.mgmt.get(resources.LEASE, HUB_LEASE, namespace=self.lease_namespace)
        return str(lease["spec"]["holderIdentity"])

    async def start_hub(self, name: str, *, cluster: str) -> None:
        """Start one more hub, ``name`` (``hub-<something>``), on management cluster ``cluster``
        (``Clusters.start_management``) with the same NATS identity and keys, and wait until it
        is ready: the hub of the target management cluster after ``clusterctl move``."""
        if self.real:
            await self.install_hub(cluster)
        await self._ready([self._hub(name, cluster=cluster)])

    def _start_hubs(self) -> list[processes.Child]:
        return [self._hub("hub" if i == 0 else f"hub-{i}") for i in range(self.options.hub_replicas)]

    def _hub(self, name: str, *, cluster: str = MGMT) -> processes.Child:
        port = ports.free_port()
        self.hub_health_urls[name] = f"http://127.0.0.1:{port}"
        self.hub_health_url = self.hub_health_urls.get("hub", self.hub_health_url)
        args = [
            sys.executable, *CLI, "hub",
            "--kubeconfig", str(self.hub_kubeconfig(cluster)),
            "--nats-url", ",".join(self.nats_urls),
            "--nats-operator-dir", str(self.hub_operator_dir),
            "--nats-ca-file", str(self.nats_ca_file),
            "--signing-key", str(self.keys_dir / "signing.key"),
            "--sealing-keys", str(self.keys_dir / "sealing"),
            *self._hub_scope(),
            "--sites", ",".join(self.sites),
            "--heartbeat-interval", str(self.options.heartbeat_interval),
            "--stream-replicas", str(self.stream_replicas),
            "--listen", f"127.0.0.1:{port}",
            *self.options.args,
        ]  # fmt: skip
        if self.options.hub_replicas > 1:
            args += [
                "--shard" if self.options.shard else "--leader-elect",
                "--lease-namespace", self.lease_namespace, "--lease-name", HUB_LEASE,
                "--lease-duration", str(self.options.lease_duration), "--identity", name,
            ]  # fmt: skip
        return self._spawn(name, args, health_url=self.hub_health_urls[name])

    def _hub_scope(self) -> list[str]:
        watched = self.options.hub_namespaces
        return ["--namespaces", ",".join(watched)] if watched else ["--all-namespaces"]

    def _start_agents(self) -> list[processes.Child]:
        return [self._agent(site) for site in self.sites]

    def _agent(self, site: str) -> processes.Child:
        port, host = ports.free_port(), self.host(site)
        self.agent_health_urls[site] = f"http://{host}:{port}"
        args = [
            sys.executable, *CLI, "agent",
            "--site", site,
            "--nats-url", ",".join(self.nats_urls),
            "--nats-identity-secret", self.agent_identity_secret(site),
            "--nats-bootstrap-creds", str(self.bootstrap_creds(site)),
            "--nats-ca-file", str(self.nats_ca_file),
            "--hub-public-keys", str(self.hub_public_keys),
            "--kubeconfig", str(self.agent_kubeconfig(site)),
            "--namespaces", self.namespace,
            "--heartbeat-interval", str(self.options.heartbeat_interval),
            "--listen", f"{host}:{port}",
            *self.options.args,
        ]  # fmt: skip
        return self._spawn_at(site, f"agent-{site}", args, health_url=self.agent_health_urls[site])
