"""``Topology``: the whole kamaji-broker system on this machine, as separate OS processes.

Owns the sandbox directory and the order of things. ``start()``:

1. credentials with the operator commands, run as ``kamaji-broker keys generate``,
   ``kamaji-broker nats-config --tls-generate`` and ``kamaji-broker site add <site>``
   subprocesses (DIR/keys/, DIR/nats/, the CA and server certificate in DIR/nats/tls/; ``site
   add`` also writes each site's ``Site`` manifest, granting ``rkcp_namespaces`` the target
   namespace), and the RKCP and Site CRDs rendered by ``hub.crdgen`` (DIR/crds/);
2. nats-server from the wheel with that configuration (TLS required of every client, as in
   production; hub and agents verify it with DIR/nats/tls/ca.crt), and one emulated API server
   per cluster (``mgmt`` with the RKCP, Site and CAPI Cluster CRDs, one per site with the compact
   TCP CRD; their kubeconfigs DIR/<cluster>.kubeconfig), all on 127.0.0.1 and free ports;
3. the ``Site`` objects in ``mgmt`` (from the manifests ``site add`` wrote), the target
   namespace at each site, a Kamaji simulator per site (its own address pool);
4. ``kamaji-broker hub`` and then one ``kamaji-broker agent`` per site, each waited for on ``/readyz``.

``stop()`` undoes it in reverse (agents and hub first, NATS last): SIGTERM, SIGKILL after a
timeout, by PID. Every process logs to DIR/logs/<name>.log. The helpers create, change and
delete Cluster + RKCP pairs through ``common.kube`` and read progress (``sandbox.progress``).
Used by ``kamaji-broker sandbox``, the end-to-end tests and the provisioning benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from common import kube, natsfiles
from common.kube import errors as kerrors
from common.kube import resources
from hub import crdgen
from sandbox import crds, natsd, progress
from sandbox.launcher import processes, workload

__all__ = ["MARKER", "Topology", "prepare_directory"]

MARKER = ".kamaji-broker-sandbox"
"""Written into every sandbox directory (with the launcher's PID): only such a directory is ever
wiped, so ``--dir ~`` by mistake fails instead of deleting a home directory."""

MGMT = "mgmt"
RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
TCP = resources.TENANT_CONTROL_PLANE
CLI = ("-m", "kamaji_broker.cli")
HUB_LEASE = "kamaji-broker-hub"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prepare_directory(directory: Path) -> None:
    """Make ``directory`` an empty sandbox directory: create it, or wipe an earlier sandbox's.

    Wiping matters: an earlier run's JetStream store would replay its intents into the fresh
    emulated clusters. Refuses a non-empty directory that is not a sandbox's, and one whose
    sandbox is still running.
    """
    marker = directory / MARKER
    if directory.exists():
        if not directory.is_dir():
            raise processes.LaunchError(f"{directory} exists and is not a directory")
        if any(directory.iterdir()):
            if not marker.is_file():
                raise processes.LaunchError(
                    f"{directory} is not empty and is not a sandbox directory (no {MARKER}); "
                    "choose another --dir"
                )
            owner = marker.read_text().strip()
            if owner.isdigit() and int(owner) != os.getpid() and _alive(int(owner)):
                raise processes.LaunchError(
                    f"a sandbox (pid {owner}) is running in {directory}; stop it first "
                    f"(or delete {marker} if that process is not a sandbox)"
                )
            shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{os.getpid()}\n")


def _address_pool(index: int) -> str:
    """Site ``index``'s endpoint network: the (index+1)-th /16 of 10.0.0.0/8, so the endpoints
    of different sites never collide and each site has room for 65,000 control planes."""
    if not 0 <= index < 255:
        raise ValueError(f"at most 255 sites, got index {index}")
    return str(ipaddress.ip_network(f"10.{index + 1}.0.0/16"))


class Topology:
    """Hub, agents, NATS, emulated clusters and Kamaji simulators under ``directory``.

    ``env`` is added to the hub's and the agents' environment (e.g. ``KB_LOG_LEVEL``); use it
    for settings the flags here do not cover. After ``start()``: ``nats_url``,
    ``hub_health_url``, ``agent_health_urls``, ``mgmt`` and ``site_kube(site)`` (clients of
    ``common.kube``), and every path as a property.
    """

    def __init__(
        self,
        directory: Path,
        *,
        sites: Sequence[str] = ("site-a", "site-b"),
        kamaji_delay: float = 3.0,
        namespace: str = "tenants",
        rkcp_namespaces: Sequence[str] = ("default",),
        heartbeat_interval: float = 10.0,
        env: Mapping[str, str] | None = None,
        start_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        hub_replicas: int = 1,
        lease_duration: float = 4.0,
    ) -> None:
        if not sites:
            raise ValueError("a topology needs at least one site")
        if hub_replicas < 1:
            raise ValueError(f"hub_replicas must be at least 1, got {hub_replicas}")
        if MGMT in sites:
            raise ValueError(f"{MGMT!r} names the management cluster; choose another site name")
        self.directory = directory
        self.sites = tuple(sites)
        self.kamaji_delay = kamaji_delay
        self.namespace = namespace
        self.rkcp_namespaces = tuple(rkcp_namespaces)
        """Management namespaces the sites' ``Site`` objects let place control planes in ``namespace``."""
        self.heartbeat_interval = heartbeat_interval
        self.env = dict(env or {})
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.hub_replicas = hub_replicas
        """More than one: the replicas elect a leader through a Lease in ``default`` of ``mgmt``
        (children ``hub``, ``hub-1``, ...)."""
        self.lease_duration = lease_duration
        self.nats_port = 0
        self.nats_monitor_port = 0
        self.hub_health_url = ""
        """The first hub replica's; ``hub_health_urls`` has every replica's by child name."""
        self.hub_health_urls: dict[str, str] = {}
        self.agent_health_urls: dict[str, str] = {}
        self.children: list[processes.Child] = []
        self._api_clients: dict[str, Any] = {}
        self._kubes: dict[str, kube.Kube] = {}

    # -- paths -------------------------------------------------------------------------------

    @property
    def keys_dir(self) -> Path:
        return self.directory / "keys"

    @property
    def nats_dir(self) -> Path:
        return self.directory / "nats"

    @property
    def logs_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def hub_seed(self) -> Path:
        return self.nats_dir / "hub.nk"

    @property
    def hub_public_keys(self) -> Path:
        return self.keys_dir / "hub-public-keys.json"

    def site_seed(self, site: str) -> Path:
        return self.nats_dir / "sites" / f"{site}.nk"

    @property
    def tls_dir(self) -> Path:
        """The CA (ca.crt, ca.key) and the server certificate `nats-config --tls-generate` made."""
        return self.nats_dir / "tls"

    @property
    def nats_ca_file(self) -> Path:
        """What hub and agents (and any client of this topology) verify the server with."""
        return self.tls_dir / "ca.crt"

    def kubeconfig(self, cluster: str) -> Path:
        """DIR/<cluster>.kubeconfig for ``mgmt`` or a site."""
        return self.directory / f"{cluster}.kubeconfig"

    @property
    def mgmt_kubeconfig(self) -> Path:
        return self.kubeconfig(MGMT)

    def log(self, name: str) -> Path:
        return self.logs_dir / f"{name}.log"

    @property
    def nats_monitor_url(self) -> str:
        """nats-server's HTTP monitoring (/varz: message and byte counters), on 127.0.0.1."""
        return f"http://127.0.0.1:{self.nats_monitor_port}" if self.nats_monitor_port else ""

    @property
    def nats_url(self) -> str:
        if not self.nats_port:
            raise RuntimeError("the topology is not started")
        return f"tls://127.0.0.1:{self.nats_port}"

    # -- clients -----------------------------------------------------------------------------

    @property
    def mgmt(self) -> kube.Kube:
        return self._kube(MGMT)

    def site_kube(self, site: str) -> kube.Kube:
        return self._kube(site)

    def _kube(self, cluster: str) -> kube.Kube:
        try:
            return self._kubes[cluster]
        except KeyError:
            raise RuntimeError(f"no client for cluster {cluster!r}: is the topology started?") from None

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Topology:
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
        nats = self._spawn(
            "nats-server",
            [natsd.find_binary(), "-a", "127.0.0.1", "-c", str(self.nats_dir / "nats-server.conf")],
            ready_text="Server is ready",
        )
        crd_files = [*self._render_crds(), crds.CLUSTER]
        emulators = [self._emulator(MGMT, crd_files)]
        emulators += [self._emulator(site, [crds.TENANT_CONTROL_PLANE]) for site in self.sites]
        await self._ready([nats, *emulators])
        for cluster in (MGMT, *self.sites):
            api_client = await kube.api_client_from_kubeconfig(self.kubeconfig(cluster))
            self._api_clients[cluster] = api_client
            self._kubes[cluster] = kube.Kube(api_client)
        for site in self.sites:
            # The placement authorization: what `site add` wrote, applied as an operator would.
            manifest = yaml.safe_load((self.nats_dir / natsfiles.SITES_DIR / f"{site}.site.yaml").read_text())
            with contextlib.suppress(kerrors.Conflict):
                await self.mgmt.create(resources.SITE, manifest)
            with contextlib.suppress(kerrors.Conflict):
                await self._kubes[site].create(resources.NAMESPACE, {"metadata": {"name": self.namespace}})
        simulators = [self._simulator(i, site) for i, site in enumerate(self.sites)]
        hubs = [self._hub(i) for i in range(self.hub_replicas)]
        await self._ready([*simulators, *hubs])
        # After the hub: it creates the streams and every agent's durable consumer.
        await self._ready([self._agent(site) for site in self.sites])

    async def stop(self) -> None:
        """Stop everything that was started, in reverse order; safe to call more than once."""
        for api_client in self._api_clients.values():
            with contextlib.suppress(Exception):
                await api_client.close()
        self._api_clients.clear()
        self._kubes.clear()
        tiers: list[list[processes.Child]] = []
        for child in reversed(self.children):
            tier = _TIERS.get(child.name.split("-", 1)[0], 9)
            while len(tiers) <= tier:
                tiers.append([])
            tiers[tier].append(child)
        for tier_children in tiers:
            for child in tier_children:
                child.terminate()
            await asyncio.gather(*(c.wait_stopped(timeout=self.stop_timeout) for c in tier_children))
        self.children.clear()

    def failures(self) -> list[str]:
        """Children that exited although the topology runs (not by an injected fault): a line
        each, with its log."""
        return [
            f"{c.name} (pid {c.pid}) exited with code {c.returncode}; see {c.log}"
            for c in self.children
            if c.returncode is not None and not c.injected
        ]

    # -- faults ------------------------------------------------------------------------------

    def child(self, name: str) -> processes.Child:
        """The child process called ``name``: ``nats-server``, ``hub`` (``hub-1``... for more
        replicas), ``agent-<site>``, ``kamaji-<site>``, ``kubeapi-<cluster>``."""
        for child in self.children:
            if child.name == name:
                return child
        raise KeyError(f"no child {name!r}; the topology has {', '.join(c.name for c in self.children)}")

    async def kill(self, name: str) -> None:
        """SIGKILL child ``name`` and reap it: a crash, no cleanup, its Lease and consumers left
        as they were."""
        await self.child(name).kill()

    def pause(self, name: str) -> None:
        """SIGSTOP child ``name``: connections stay open, nothing is answered."""
        self.child(name).pause()

    def resume(self, name: str) -> None:
        self.child(name).resume()

    async def start_again(self, name: str) -> None:
        """Start child ``name`` again after ``kill`` with the same flags, ports and store (a
        restarted pod), and wait until it is ready."""
        await self.child(name).start_again(timeout=self.start_timeout)

    async def leader(self) -> str:
        """The name of the hub replica that holds the Lease (with ``hub_replicas`` > 1)."""
        lease = await self.mgmt.get(resources.LEASE, HUB_LEASE, namespace="default")
        return str(lease["spec"]["holderIdentity"])

    def log_marks(self) -> dict[str, int]:
        """Where every child's log ends now; ``errors_since`` reads what came after."""
        return {c.name: c.log.stat().st_size if c.log.exists() else 0 for c in self.children}

    def errors_since(self, marks: Mapping[str, int]) -> list[str]:
        """Every line logged at error level after ``marks``, as ``<child>: <line>``."""
        found: list[str] = []
        for child in self.children:
            found += [
                f"{child.name}: {line}" for line in processes.errors(child.log, marks.get(child.name, 0))
            ]
        return found

    def recent_errors(self) -> list[str]:
        """The last error line of each child's log that has one, named by the child: the first
        place to look when something does not become Ready."""
        found = []
        for child in self.children:
            line = processes.last_error(child.log)
            if line:
                found.append(f"{child.name}: {line}")
        return found

    # -- the parts ---------------------------------------------------------------------------

    async def _cli(self, *args: str) -> None:
        """Run one ``kamaji-broker`` operator command as a subprocess, as an operator would."""
        await asyncio.to_thread(_run_cli, list(args), log=self.log("setup"))

    async def _credentials(self) -> None:
        await self._cli("keys", "generate", "--out", str(self.keys_dir))
        self.nats_port = natsd.free_port()
        self.nats_monitor_port = natsd.free_port()
        await self._cli(
            "nats-config", "--dir", str(self.nats_dir), "--host", "127.0.0.1", "--port", str(self.nats_port),
            "--store-dir", str(self.directory / "jetstream"), "--server-name", "kamaji-broker-sandbox",
            "--monitor", f"127.0.0.1:{self.nats_monitor_port}", "--tls-generate", str(self.tls_dir),
        )  # fmt: skip
        for site in self.sites:
            # One at a time: each run re-renders the shared auth.conf.
            await self._cli(
                "site", "add", site, "--nats-config-dir", str(self.nats_dir),
                "--namespaces", ",".join(self.rkcp_namespaces), "--target-namespaces", self.namespace,
            )  # fmt: skip

    def _render_crds(self) -> list[Path]:
        """The RKCP and Site CRDs, as ``python -m hub.crdgen`` renders them, in DIR/crds/."""
        rkcp = self.directory / "crds" / crdgen.FILENAME
        site = rkcp.parent / crdgen.SITE_FILENAME
        rkcp.parent.mkdir(parents=True, exist_ok=True)
        rkcp.write_text(crdgen.render())
        site.write_text(crdgen.render_site())
        return [rkcp, site]

    def _spawn(
        self, name: str, args: list[str], *, health_url: str | None = None, ready_text: str | None = None
    ) -> processes.Child:
        child = processes.Child(
            name=name,
            args=args,
            log=self.log(name),
            env=processes.child_env(self.env),
            health_url=health_url,
            ready_text=ready_text,
        )
        # Recorded before it starts: a failed start still gets stopped by stop().
        self.children.append(child)
        child.start()
        return child

    async def _ready(self, children: list[processes.Child]) -> None:
        await asyncio.gather(*(c.wait_ready(timeout=self.start_timeout) for c in children))

    def _emulator(self, cluster: str, crd_files: list[Path]) -> processes.Child:
        kubeconfig = self.kubeconfig(cluster)
        args = [sys.executable, "-m", "sandbox.kubeapi", "--port", "0", "--kubeconfig", str(kubeconfig)]
        args += ["--name", cluster]
        for path in crd_files:
            args += ["--crd", str(path)]
        # The emulator prints this line once it serves and its kubeconfig is written.
        return self._spawn(f"kubeapi-{cluster}", args, ready_text="(kubeconfig:")

    def _simulator(self, index: int, site: str) -> processes.Child:
        args = [sys.executable, "-m", "sandbox.kamaji", "--kubeconfig", str(self.kubeconfig(site))]
        args += ["--ready-delay", str(self.kamaji_delay), "--address-pool", _address_pool(index)]
        return self._spawn(f"kamaji-{site}", args, ready_text="kamaji simulator running")

    def _hub(self, index: int = 0) -> processes.Child:
        name = "hub" if index == 0 else f"hub-{index}"
        port = natsd.free_port()
        self.hub_health_urls[name] = f"http://127.0.0.1:{port}"
        self.hub_health_url = self.hub_health_urls["hub"]
        args = [
            sys.executable, *CLI, "hub",
            "--kubeconfig", str(self.mgmt_kubeconfig),
            "--nats-url", self.nats_url,
            "--nats-seed", str(self.hub_seed),
            "--nats-ca-file", str(self.nats_ca_file),
            "--signing-key", str(self.keys_dir / "signing.key"),
            "--sealing-keys", str(self.keys_dir / "sealing"),
            "--all-namespaces",
            "--sites", ",".join(self.sites),
            "--heartbeat-interval", str(self.heartbeat_interval),
            "--listen", f"127.0.0.1:{port}",
        ]  # fmt: skip
        if self.hub_replicas > 1:
            args += [
                "--leader-elect", "--lease-namespace", "default", "--lease-name", HUB_LEASE,
                "--lease-duration", str(self.lease_duration), "--identity", name,
            ]  # fmt: skip
        return self._spawn(name, args, health_url=self.hub_health_urls[name])

    def _agent(self, site: str) -> processes.Child:
        port = natsd.free_port()
        self.agent_health_urls[site] = f"http://127.0.0.1:{port}"
        args = [
            sys.executable, *CLI, "agent",
            "--site", site,
            "--nats-url", self.nats_url,
            "--nats-seed", str(self.site_seed(site)),
            "--nats-ca-file", str(self.nats_ca_file),
            "--hub-public-keys", str(self.hub_public_keys),
            "--kubeconfig", str(self.kubeconfig(site)),
            "--namespaces", self.namespace,
            "--heartbeat-interval", str(self.heartbeat_interval),
            "--listen", f"127.0.0.1:{port}",
        ]  # fmt: skip
        return self._spawn(f"agent-{site}", args, health_url=self.agent_health_urls[site])

    # -- workload ----------------------------------------------------------------------------

    async def create_control_plane(
        self,
        name: str,
        *,
        site: str,
        namespace: str = "default",
        version: str = workload.DEFAULT_VERSION,
        replicas: int = 2,
        **spec: Any,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Create Cluster ``name`` and its RKCP ``name`` (placed at ``site``); returns both as stored."""
        if site not in self.sites:
            raise ValueError(f"unknown site {site!r}; the topology has {', '.join(self.sites)}")
        cluster = await self.mgmt.create(
            resources.CLUSTER, workload.cluster(name, namespace=namespace), namespace=namespace
        )
        body = workload.remote_kamaji_control_plane(
            name,
            namespace=namespace,
            cluster_uid=str(cluster["metadata"]["uid"]),
            site=site,
            target_namespace=self.namespace,
            version=version,
            replicas=replicas,
            **spec,
        )
        rkcp = await self.mgmt.create(RKCP, body, namespace=namespace)
        return cluster, rkcp

    async def update_control_plane(
        self, name: str, *, namespace: str = "default", **spec: Any
    ) -> dict[str, Any]:
        """Merge ``spec`` into RKCP ``name``'s spec (e.g. ``version="v1.32.0"``, ``replicas=3``)."""
        return await self.mgmt.patch(RKCP, name, {"spec": spec}, namespace=namespace)

    async def delete_control_plane(self, name: str, *, namespace: str = "default") -> None:
        """Delete RKCP ``name`` and then its Cluster, as CAPI's Cluster controller does.

        Returns at once; the RKCP goes away when the hub has seen the TCP deleted at its site.
        """
        await self.mgmt.delete(RKCP, name, namespace=namespace)
        await self.mgmt.delete(resources.CLUSTER, name, namespace=namespace)

    async def progress(self) -> progress.Snapshot:
        """Every RKCP's phase and every site's counts, as the management cluster shows them now."""
        rkcps = await self.mgmt.list(RKCP)
        # The CAPI Secrets carry this label (the hub writes it); existence is enough here.
        secrets = await self.mgmt.list(resources.SECRET, label_selector="cluster.x-k8s.io/cluster-name")
        names = {(s["metadata"]["namespace"], s["metadata"]["name"]) for s in secrets.items}
        return progress.new_snapshot(rkcps.items, secrets=names)


def _run_cli(args: list[str], *, log: Path) -> None:
    with open(log, "ab") as out:
        done = subprocess.run(
            [sys.executable, *CLI, *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=processes.child_env(),
            check=False,
        )
    if done.returncode != 0:
        raise processes.LaunchError(
            f"`kamaji-broker {' '.join(args)}` failed with exit code {done.returncode}; "
            f"end of {log}:\n{processes.tail(log)}"
        )


# Stop order by name prefix: whoever talks to others goes first, what they talk to last.
_TIERS: dict[str, int] = {"agent": 0, "hub": 1, "kamaji": 2, "kubeapi": 3, "nats": 4}
