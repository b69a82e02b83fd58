"""Scale benchmark: S sites x M control planes on one hub (default 100 x 100 = 10,000).

Real, as processes: nats-server from the wheel (127.0.0.1, TLS, every site with its own NKey
identity and permissions as ``kamaji-broker site add`` writes them), the emulated management
cluster (``sandbox.kubeapi``) and ``kamaji-broker hub --sites site-000,...``, which makes the
NATS topology itself: the intents stream, one stream per site, the hub's consumer and the
``agent-<site>`` consumer of every site. Started by ``sandbox.launcher`` without what the sites
would run (``Sites`` below).

Simulated cheaply: the S site agents run as one process (``--simulators K`` for K), started from
this file with ``--simulate``. For every site it connects with that site's own credential, binds the
site's real ``agent-<site>`` consumer, verifies each intent's signature and, for a provision,
publishes what a real agent publishes through ``agent.publishing.Publisher``: the sealed box
(an admin kubeconfig pointing at the control plane's endpoint, its CA and key, sealed to the
hub's newest sealing key) and a Ready Status with that endpoint and the box's checksum, then
acks the intent; a heartbeat per site every interval. No Kubernetes and no Kamaji at the sites.

Drive: S x M CAPI Cluster + RemoteKamajiControlPlane pairs created in the management cluster
(64 at a time, sites interleaved); a control plane is done when its ``<cluster>-kubeconfig``
Secret exists. Prints ONE JSON object: throughput, create → kubeconfig latency percentiles,
the hub's CPU during the run (seconds, ms per control plane) and peak RSS, nats-server's CPU and
RSS, JetStream streams and consumers (monitor ``/jsz``), NATS messages and bytes per control
plane (``/varz`` deltas), the simulators' and the emulator's CPU apart. Exits non-zero naming
what was missing when not every control plane is done ``--timeout`` seconds after the last
create.

``--rest S`` then measures the system at rest for S seconds, every control plane Ready and
nothing changing: CPU (share of one core) and RSS per process kind, and the hub's
management-cluster requests and NATS messages per control plane per hour (the ``rest`` object).

``--replicas R`` runs R hub replicas sharing the sites (``--shard``): the ``hub_replicas`` object has
each one's CPU and RSS; ``--takeover`` then kills the replica leading the most sites and times
how long the survivors take to lead them all (``takeover``).

Run: ``.venv/bin/python bench/scale.py [--sites 100] [--per-site 100] [--timeout 1800] [--rest 120]
[--replicas 2 --takeover] [--simulators 2] [--site-max-mib 16]`` (1,000 sites at the default 64 MiB
each need 64 GB of ``max_file_store``, which nats-server reserves when it makes the streams).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime as dt
import json
import logging
import re
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
ROOT = SCRIPT.parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from agent import publishing  # noqa: E402
from bench.provision import (  # noqa: E402
    NAMESPACE,
    Tracker,
    drive,
    mgmt_calls,
    nats_totals,
    server_of,
    settled,
    usage,
)
from common import bus  # noqa: E402
from common.bus import errors as bus_errors  # noqa: E402
from common.files import keys as keyfiles  # noqa: E402
from common.files import natsserver  # noqa: E402
from kamaji_broker import sitefiles  # noqa: E402
from protocol import errors as protocol_errors  # noqa: E402
from protocol import keys, messages, sealing, signing, streams  # noqa: E402
from sandbox import (  # noqa: E402
    crds,
    launcher,
    processes,
)
from sandbox.kamaji import pki  # noqa: E402
from sandbox.launcher.options import MGMT  # noqa: E402

log = logging.getLogger("bench.scale")
SIMULATOR_READY = "simulated sites bound"
FETCH_BATCH = 64
CONCURRENCY = 64


def site_names(count: int) -> tuple[str, ...]:
    """``site-000``, ``site-001``, … (wider past 1,000)."""
    width = max(3, len(str(count - 1)))
    return tuple(f"site-{i:0{width}d}" for i in range(count))


def interleaved(sites: Sequence[str], per_site: int) -> list[tuple[str, str]]:
    """(cluster name, site): the first control plane of every site, then the second, …"""
    return [(f"{site}-{i}", site) for i in range(1, per_site + 1) for site in sites]


class Sites(launcher.System):
    """The sandbox topology without what runs at the sites (their API servers, Kamaji
    simulators and agents): NATS, the management cluster and the hub; the simulated agents are
    started afterwards with ``start_simulators``."""

    async def _credentials(self) -> None:
        # Operator mode: each simulated site connects with a credential the launcher mints and
        # records in its Site (``recorded_site_credential``, in ``start_simulators``), and its
        # Site manifest is written here (S CLI runs would take minutes).
        await self._cli("keys", "generate", "--out", str(self.keys_dir))
        await self._configure_nats()
        placements = sitefiles.placements(",".join(self.options.rkcp_namespaces), self.namespace)
        (self.nats_dir / natsserver.SITES_DIR).mkdir(parents=True, exist_ok=True)
        for site in self.sites:
            sitefiles.write(self.nats_dir / natsserver.SITES_DIR, site, placements=placements)

    def _start_emulators(self) -> list[processes.Child]:
        return [self._emulator(MGMT, [*self._render_crds(), crds.CLUSTER, *crds.TOPOLOGY])]

    async def _connect(self) -> None:
        await self._client(MGMT)
        await self._apply_sites(self.mgmt)

    def _start_simulators(self) -> list[processes.Child]:
        return []

    def _start_agents(self) -> list[processes.Child]:
        return []

    async def start_simulators(self, count: int, *, lifetime: dt.timedelta) -> list[processes.Child]:
        """``count`` simulator processes sharing the sites, each site's credential valid for
        ``lifetime`` (they do not renew); returned once each bound its consumers."""
        children = []
        creds = {site: await self.recorded_site_credential(site, lifetime=lifetime) for site in self.sites}
        for k in range(count):
            config = self.directory / f"simulator-{k}.json"
            mine = {site: i for i, site in enumerate(self.sites) if i % count == k}
            config.write_text(
                json.dumps(
                    {
                        "servers": list(self.nats_urls),
                        "ca_file": str(self.nats_ca_file),
                        "public_keys": str(self.hub_public_keys),
                        "heartbeat_interval": self.options.heartbeat_interval,
                        "sites": {site: [i, str(creds[site])] for site, i in mine.items()},
                    }
                )
            )
            args = [sys.executable, str(SCRIPT), "--simulate", str(config)]
            children.append(self._spawn(f"agent-simulator-{k}", args, ready_text=SIMULATOR_READY))
        await self._ready(children)
        return children


# -- the simulated sites (the child process) ---------------------------------------------------


class Secrets:
    """What every simulated control plane's Secrets hold: one CA and admin certificate per
    process (minting them per control plane would measure the simulator)."""

    def __init__(self) -> None:
        now = messages.utcnow()
        self.ca = pki.new_ca(now=now)
        self.cert, self.key = pki.new_client_certificate(self.ca, pki.ADMIN, now=now)

    def payload(self, name: str, server: str, kubeconfig_key: str) -> messages.SecretsPayload:
        kubeconfig = pki.new_kubeconfig(
            cluster=name,
            server=server,
            ca_pem=self.ca.cert_pem,
            user=pki.ADMIN.user,
            client_cert_pem=self.cert,
            client_key_pem=self.key,
        )
        return messages.SecretsPayload(
            kubeconfig_key=kubeconfig_key,
            kubeconfig=kubeconfig,
            ca_crt=self.ca.cert_pem.decode(),
            ca_key=self.ca.key_pem.decode(),
        )


class SimulatedSite:
    """One site's agent, reduced to its NATS traffic: bind ``agent-<site>``, answer every
    intent with what an agent reports once Kamaji made the control plane Ready, heartbeat."""

    def __init__(self, site: str, index: int, conn: bus.Connection, hub_keys: keys.HubPublicKeys) -> None:
        self.site = site
        self.index = index
        self.conn = conn
        self.publisher = publishing.Publisher(conn, site=site)
        self.hub_keys = hub_keys
        self.trusted = hub_keys.verify_keys()
        self.recipient = hub_keys.newest_sealing()
        self.endpoints: dict[str, messages.Endpoint] = {}
        self.started_at = messages.utcnow()
        self.last_seq = 0

    def endpoint(self, name: str) -> messages.Endpoint:
        """The control plane's address, stable across redeliveries (10.<site>.x.y:6443)."""
        if name not in self.endpoints:
            n = len(self.endpoints) + 1
            host = f"10.{1 + self.index % 250}.{n // 256 % 256}.{n % 256}"
            self.endpoints[name] = messages.Endpoint(host=host, port=6443)
        return self.endpoints[name]

    async def run(self, consumer: bus.Consumer, secrets: Secrets) -> None:
        while True:
            deliveries = await consumer.fetch(FETCH_BATCH, timeout=2.0)
            by_subject: dict[str, list[bus.Delivery]] = collections.defaultdict(list)
            for d in deliveries:
                by_subject[d.subject].append(d)
            # Control planes concurrently, the intents of one strictly in order (as the agent).
            await asyncio.gather(*(self._in_order(ds, secrets) for ds in by_subject.values()))

    async def _in_order(self, deliveries: list[bus.Delivery], secrets: Secrets) -> None:
        for d in deliveries:
            try:
                await self.handle(d, secrets)
            except bus_errors.BusError as exc:  # not acked: the server redelivers it
                log.warning("%s: %s", d.subject, exc)

    async def handle(self, d: bus.Delivery, secrets: Secrets) -> None:
        try:
            intent = signing.verify(d.data, self.trusted, retired=self.hub_keys.retired)
        except protocol_errors.ProtocolError as exc:
            log.error("%s refused: %s", d.subject, exc)
            await d.term()
            return
        self.last_seq = max(self.last_seq, d.stream_seq)
        now = messages.utcnow()
        about = f"intent-{d.stream_seq}"
        if intent.op == "delete":
            self.endpoints.pop(intent.name, None)
            await self.publisher.status(self._status(intent, d, "Deleted", now=now), about=about)
            await d.ack()
            return
        endpoint = self.endpoint(intent.name)
        plaintext = secrets.payload(
            intent.name, f"https://{endpoint.host}:{endpoint.port}", intent.kubeconfig_key
        )
        encoded = messages.encode(plaintext)
        checksum = sealing.checksum(encoded)
        sealed = messages.SealedSecrets(
            site=self.site,
            namespace=intent.namespace,
            name=intent.name,
            owner_uid=intent.owner.uid,
            recipient_key_id=self.recipient.key_id,
            ciphertext=sealing.seal(encoded, self.recipient),
            checksum=checksum,
            observed_at=now,
        )
        await self.publisher.sealed(sealed, about=about)
        status = self._status(intent, d, "Ready", now=now, endpoint=endpoint, checksum=checksum)
        await self.publisher.status(status, about=about)
        await d.ack()

    def _status(
        self,
        intent: messages.Intent,
        d: bus.Delivery,
        phase: messages.Phase,
        *,
        now: dt.datetime,
        endpoint: messages.Endpoint | None = None,
        checksum: str = "",
    ) -> messages.Status:
        replicas = int(((intent.spec.get("controlPlane") or {}).get("deployment") or {}).get("replicas") or 2)
        running = replicas if phase == "Ready" else 0
        return messages.Status(
            site=self.site,
            namespace=intent.namespace,
            name=intent.name,
            owner_uid=intent.owner.uid,
            observed_generation=intent.generation,
            intent_seq=d.stream_seq,
            phase=phase,
            reason=phase,
            version=str((intent.spec.get("kubernetes") or {}).get("version") or ""),
            endpoint=endpoint,
            replicas=running,
            ready_replicas=running,
            available_replicas=running,
            updated_replicas=running,
            secrets_checksum=checksum,
            observed_at=now,
        )

    async def heartbeats(self, interval: float) -> None:
        while True:
            ready = len(self.endpoints)
            beat = messages.Heartbeat(
                site=self.site,
                agent_version="bench-scale-simulator",
                started_at=self.started_at,
                sent_at=messages.utcnow(),
                managed=ready,
                ready=ready,
                last_intent_seq=self.last_seq,
                kamaji_detected=True,
                trusted_key_ids=self.hub_keys.trusted_key_ids(),
            )
            try:
                await self.publisher.heartbeat(beat)
            except bus_errors.BusError as exc:
                log.warning("heartbeat of %s: %s", self.site, exc)
            await asyncio.sleep(interval)


async def bound_when_made(conn: bus.Connection, site: str, *, deadline: float = 300.0) -> bus.Consumer:
    """The site's ``agent-<site>`` consumer, once the hub has made it (a hub slowed by a profiler
    or a loaded machine may still be making the sites' topology when the simulators start)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while True:
        try:
            return await bus.bind(conn, streams.agent_consumer(site))
        except bus_errors.ConsumerNotFound:
            if loop.time() > end:
                raise
            await asyncio.sleep(0.5)


async def simulate(config: dict[str, Any]) -> None:
    hub_keys = keyfiles.load_public_keys(Path(config["public_keys"]))
    secrets = Secrets()

    async def bound(site: str, index: int, creds: str) -> tuple[SimulatedSite, bus.Consumer]:
        options = bus.Options(
            servers=tuple(config["servers"]),
            creds_file=Path(creds),
            ca_file=Path(config["ca_file"]),
            inbox_prefix=bus.site_inbox_prefix(site),
            name=f"bench-scale-{site}",
        )
        conn = await bus.connect(options, deadline=30)
        return SimulatedSite(site, index, conn, hub_keys), await bound_when_made(conn, site)

    pairs = await asyncio.gather(*(bound(site, i, seed) for site, (i, seed) in config["sites"].items()))
    print(f"{SIMULATOR_READY}: {len(pairs)}", flush=True)
    interval = float(config["heartbeat_interval"])
    await asyncio.gather(*(s.run(c, secrets) for s, c in pairs), *(s.heartbeats(interval) for s, _ in pairs))


# -- the benchmark (this process) --------------------------------------------------------------


async def jetstream_counts(url: str) -> dict[str, int]:
    async with aiohttp.ClientSession() as s, s.get(f"{url}/jsz") as r:
        jsz = await r.json()
    return {"streams": int(jsz.get("streams", 0)), "consumers": int(jsz.get("consumers", 0))}


def spent(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]], prefix: str, total: int
) -> dict[str, float]:
    """CPU seconds between the snapshots, ms per control plane and peak RSS of the children
    whose name starts with ``prefix``."""
    names = [n for n in after if n.startswith(prefix)]
    cpu = sum(after[n][0] - before.get(n, (0.0, 0.0))[0] for n in names)
    return {
        "cpu_s": round(cpu, 2),
        "ms_per_cp": round(cpu * 1000 / total, 3),
        "peak_rss_mb": round(max((after[n][1] for n in names), default=0.0), 1),
        "processes": len(names),
    }


def snapshot(children: Sequence[processes.Child]) -> dict[str, tuple[float, float]]:
    return {c.name: usage(c.pid) for c in children}


def resident_mb(pid: int | None) -> float:
    """The RSS of a live process now (not its peak), in MB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))
    except (FileNotFoundError, ProcessLookupError, StopIteration, TypeError):
        return 0.0


async def mgmt_requests(server: str) -> int:
    """Resource requests the management cluster's emulator has received (its ``/metrics``)."""
    return sum((await mgmt_calls(server)).values())


async def hub_nats_msgs(url: str) -> int:
    """Messages the hub's connections have sent the server (requests and publishes), from /connz."""
    async with aiohttp.ClientSession() as s, s.get(f"{url}/connz?limit=4096") as r:
        connz = await r.json()
    return sum(
        int(c.get("in_msgs") or 0)
        for c in connz.get("connections") or []
        if str(c.get("name") or "").startswith("kamaji-broker-hub")
    )


async def at_rest(topo: Sites, seconds: float, total: int, *, settle: float) -> dict[str, Any]:
    """What each process kind costs over ``seconds`` with every control plane Ready and nothing
    changing (``settled``: no write in the management cluster for ``settle`` seconds): CPU as a
    share of one core, RSS now, and the hub's management-cluster requests and NATS messages per
    control plane per hour (the emulator's and the server's counters: the bench's own watch is
    one request)."""
    settle_s, quiet = await settled(topo.mgmt, quiet=settle)
    server = server_of(topo.kubeconfig(MGMT))
    cpu0, req0, msg0 = (
        snapshot(topo.children),
        await mgmt_requests(server),
        await hub_nats_msgs(topo.nats_monitor_url),
    )
    await asyncio.sleep(seconds)
    cpu1, req1, msg1 = (
        snapshot(topo.children),
        await mgmt_requests(server),
        await hub_nats_msgs(topo.nats_monitor_url),
    )
    pids = {c.name: c.pid for c in topo.children}

    def kind(prefix: str) -> dict[str, float]:
        names = [n for n in cpu1 if n.startswith(prefix)]
        cpu = sum(cpu1[n][0] - cpu0.get(n, (0.0, 0.0))[0] for n in names)
        return {
            "cpu_pct": round(100 * cpu / seconds, 2),
            "rss_mb": round(sum(resident_mb(pids[n]) for n in names), 1),
        }

    hours = seconds / 3600
    return {
        "seconds": seconds,
        "settled_after_s": settle_s,
        "settled": quiet,
        "control_planes": total,
        "hub": kind("hub"),
        "nats_server": kind("nats"),
        "kubeapi_mgmt": kind("kubeapi"),
        "simulator": kind("agent-simulator"),
        "per_cp_hour": {
            "mgmt_requests": round((req1 - req0) / total / hours, 3),
            "hub_nats_msgs": round((msg1 - msg0) / total / hours, 3),
        },
    }


LEASE_SECONDS = 15.0
"""The hub replicas' Lease duration with --replicas (the hub's default)."""

_LED = re.compile(r'^kb_hub_site_connected\{site="([^"]+)"\}', re.MULTILINE)


async def led(topo: Sites) -> dict[str, set[str]]:
    """The sites each hub replica leads now, from its own metrics (a site's gauges exist only in
    the term that leads it); a replica that does not answer leads none."""
    found: dict[str, set[str]] = {}
    async with aiohttp.ClientSession() as http:
        for name, url in topo.hub_health_urls.items():
            try:
                async with http.get(f"{url}/metrics") as answer:
                    found[name] = set(_LED.findall(await answer.text()))
            except aiohttp.ClientError:
                found[name] = set()
    return found


async def until_led(topo: Sites, sites: set[str], *, without: str = "") -> None:
    """Until the replicas (but ``without``) lead every one of ``sites`` between them."""
    while True:
        now = await led(topo)
        if set().union(*(v for name, v in now.items() if name != without)) >= sites:
            return
        await asyncio.sleep(0.2)


async def take_over(topo: Sites, sites: set[str]) -> dict[str, Any]:
    """SIGKILL the replica that leads the most sites; seconds until the survivors lead every
    site (the fault suite asserts that it happens; this measures how long)."""
    loop = asyncio.get_running_loop()
    before = await led(topo)
    victim = max(before, key=lambda name: len(before[name]))
    killed = loop.time()
    await topo.kill(victim)
    await until_led(topo, sites, without=victim)
    return {
        "killed": victim,
        "sites_it_led": len(before[victim]),
        "lease_s": LEASE_SECONDS,
        "seconds": round(loop.time() - killed, 1),
    }


async def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    sites = site_names(args.sites)
    names = interleaved(sites, args.per_site)
    total = len(names)
    # The site streams' quota scaled to the run (a status and a box per control plane, heartbeats).
    # nats-server reserves each stream's max_bytes when it makes the stream, against its
    # max_file_store (by default 75% of the free disk): --site-max-mib sizes it for many sites.
    site_bytes = max(streams.SITE_MAX_BYTES, args.per_site * 32 * 1024)
    if args.site_max_mib is not None:
        site_bytes = args.site_max_mib * 1024 * 1024
    limits = {
        "KB_HUB_SITE_MAX_MSGS": str(max(streams.SITE_MAX_MSGS, 4 * args.per_site + 1024)),
        "KB_HUB_SITE_MAX_BYTES": str(site_bytes),
    }
    options = launcher.Options(
        sites=sites,
        env={"KB_LOG_LEVEL": "warning", **limits},
        start_timeout=max(60.0, args.sites * 1.0),
        hub_replicas=args.replicas,
        shard=args.replicas > 1,
        lease_duration=LEASE_SECONDS,
    )
    topo = Sites(work / "scale", options)
    watch: asyncio.Task[None] | None = None
    try:
        await topo.start()
        if args.replicas > 1:
            # Each replica makes the streams and consumers of the sites it leads, once it leads.
            await until_led(topo, set(sites))
        # The simulated sites hold their credential for the whole run: creating (well under an
        # hour at the default scale), then up to --timeout.
        await topo.start_simulators(args.simulators, lifetime=dt.timedelta(seconds=args.timeout + 3600))
        tracker = Tracker({name for name, _ in names})
        watch = asyncio.create_task(tracker.watch(topo.mgmt))
        monitor = topo.nats_monitor_url
        before_nats = await nats_totals(monitor)

        async def create(name: str, site: str) -> None:
            await topo.create_control_plane(name, site=site, namespace=NAMESPACE)

        cpu0 = snapshot(topo.children)
        try:
            result = await drive(
                names, create, tracker, rate=None, concurrency=CONCURRENCY, timeout=args.timeout
            )
        except SystemExit as exc:  # not every control plane done in time: say where to look
            errors = "".join(f"\n  {line}" for line in topo.recent_errors())
            raise SystemExit(f"bench/scale.py: {exc}{'; last errors:' + errors if errors else ''}") from None
        cpu1 = snapshot(topo.children)
        after_nats = await nats_totals(monitor)
        rest = await at_rest(topo, args.rest, total, settle=args.settle) if args.rest > 0 else None
        takeover = await take_over(topo, set(sites)) if args.replicas > 1 and args.takeover else None
        return {
            "bench": "scale",
            "sites": args.sites,
            "per_site": args.per_site,
            "total": total,
            "seconds": result["seconds"],
            "per_s": result["per_s"],
            "latency_s": {q: result[f"{q}_s"] for q in ("p50", "p95", "p99")},
            "hub": spent(cpu0, cpu1, "hub", total),
            "hub_replicas": {
                name: spent({name: cpu0.get(name, (0.0, 0.0))}, {name: cpu1[name]}, name, total)
                for name in sorted(cpu1)
                if name.split("-")[0] == "hub"
            },
            "nats_server": spent(cpu0, cpu1, "nats", total),
            "nats": {
                **await jetstream_counts(monitor),
                "msgs_per_cp": round((after_nats[0] - before_nats[0]) / total, 1),
                "bytes_per_cp": round((after_nats[1] - before_nats[1]) / total),
            },
            "simulator": spent(cpu0, cpu1, "agent-simulator", total),
            "kubeapi_mgmt": spent(cpu0, cpu1, "kubeapi", total),
            **({"rest": rest} if rest is not None else {}),
            **({"takeover": takeover} if takeover is not None else {}),
        }
    finally:
        if watch is not None:
            watch.cancel()
        await topo.stop()


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    # SIGTERM (make, CI) ends the run like Ctrl-C: every child stopped, the directory removed.
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        try:
            return await run(args, Path(tmp))
        except processes.LaunchError as exc:
            raise SystemExit(f"bench/scale.py: could not start the topology: {exc}") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sites", type=int, default=100, help="sites (default 100)")
    parser.add_argument("--per-site", type=int, default=100, help="control planes per site (default 100)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=1800.0,
        help="seconds, after the last create, for every control plane to be done (default 1800)",
    )
    parser.add_argument(
        "--simulators", type=int, default=1, help="processes simulating the sites (default 1)"
    )
    parser.add_argument(
        "--rest",
        type=float,
        default=0.0,
        help="then measure every process at rest for this many seconds (the 'rest' object)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=15.0,
        help="seconds after the last control plane is done before --rest",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="hub replicas sharing the sites (--shard) when more than 1 (default 1)",
    )
    parser.add_argument(
        "--takeover",
        action="store_true",
        help="with --replicas: at the end, kill the replica leading the most sites and time the takeover",
    )
    parser.add_argument(
        "--site-max-mib",
        type=int,
        default=None,
        help="each site stream's max_bytes in MiB (default: 64, or 32 KiB per control plane if more)",
    )
    parser.add_argument("--simulate", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.simulate is not None:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
        asyncio.run(simulate(json.loads(args.simulate.read_text())))
        return
    if args.sites < 1 or args.per_site < 1 or not 1 <= args.simulators <= args.sites:
        parser.error("--sites and --per-site must be at least 1, --simulators between 1 and --sites")
    if args.replicas < 1:
        parser.error(f"--replicas must be at least 1, got {args.replicas}")
    try:
        print(json.dumps(asyncio.run(main_async(args))), flush=True)
    except asyncio.CancelledError:
        raise SystemExit("bench/scale.py: terminated; every process it started is stopped") from None


if __name__ == "__main__":
    main()
