"""Provisioning benchmark: K control planes across N sites, end to end, broker vs direct.

``--mode broker`` (default) runs the sandbox topology as processes (``sandbox.launcher``: NATS,
an emulated management cluster, N emulated sites with Kamaji simulators at delay 0, the hub, one
agent per site) and creates K CAPI Cluster + RemoteKamajiControlPlane pairs; a control plane is
done when its ``<cluster>-kubeconfig`` Secret exists in the management cluster.

``--mode direct`` is the baseline the broker replaces: a controller in this process that holds a
kubeconfig for every site (Kamaji's ExternalClusterReference approach, ``bench/baselines/direct.py``). By
default it has the shape of a Cluster API control-plane provider (``--baseline provider``: the same
Cluster and control-plane object per control plane in the management cluster, its finalizer,
endpoint and status written, the TenantControlPlane created in the site and the two Secrets
copied back); ``--baseline bare`` writes TenantControlPlanes alone and copies the Secrets back;
``--baseline both`` runs each.

``--compare`` runs both in one invocation and adds broker/direct ratios. ``--rate R`` paces the
creations at R per second (latency at a steady load) instead of all at once. Prints ONE JSON
object: throughput, latency percentiles, CPU seconds spent during the run (not start-up) and
milliseconds per control plane per role, ours apart from the emulators' and simulators', peak
RSS, NATS messages and bytes per control plane (broker), the messages also by sender (hub, agents).

Run: ``.venv/bin/python bench/provision.py [--k 1000] [--n 10] [--compare] [--rate 50]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import yaml  # noqa: E402

from bench.baselines import direct as direct_baseline  # noqa: E402
from common import kube as ckube  # noqa: E402
from common.kube import resources, watching  # noqa: E402
from hub.api import crds as crdgen  # noqa: E402
from sandbox import (  # noqa: E402
    crds,
    launcher,
    processes,
)
from sandbox.launcher import workload  # noqa: E402
from sandbox.launcher.options import MGMT  # noqa: E402

NAMESPACE = "default"
SITE_NAMESPACE = "tenants"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))], 3)


def usage(pid: int | None) -> tuple[float, float]:
    """(CPU seconds, peak RSS MB) of a live process, from /proc."""
    if pid is None:
        return 0.0, 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        hwm = next(
            int(line.split()[1]) / 1024
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("VmHWM:")
        )
    except (FileNotFoundError, ProcessLookupError, StopIteration, IndexError):
        return 0.0, 0.0
    return cpu, hwm


OURS = ("hub", "agent", "direct")  # the rest (kubeapi, kamaji, nats) is test infrastructure


def snapshot(children: Iterable[processes.Child]) -> dict[str, tuple[str, float, float]]:
    """Per child: (role, CPU seconds so far, peak RSS MB)."""
    return {c.name: (c.name.split("-", 1)[0], *usage(c.pid)) for c in children}


def role_usage(
    before: dict[str, tuple[str, float, float]], after: dict[str, tuple[str, float, float]], k: int
) -> dict[str, dict[str, float]]:
    """CPU spent between the two snapshots (the run, not start-up) per role, in seconds and in
    milliseconds per control plane, and peak RSS."""
    roles: dict[str, dict[str, float]] = {}
    for name, (role, cpu, rss) in after.items():
        spent = cpu - before.get(name, (role, 0.0, 0.0))[1]
        entry = roles.setdefault(role, {"cpu_s": 0.0, "ms_per_cp": 0.0, "peak_rss_mb": 0.0, "processes": 0})
        entry["cpu_s"] = round(entry["cpu_s"] + spent, 2)
        entry["ms_per_cp"] = round(entry["cpu_s"] * 1000 / k, 2)
        entry["peak_rss_mb"] = round(max(entry["peak_rss_mb"], rss), 1)
        entry["processes"] += 1
    return roles


def cpu_split(roles: dict[str, dict[str, float]], k: int) -> dict[str, float]:
    """Our processes' CPU per control plane apart from the emulators' and simulators'."""
    ours = sum(v["cpu_s"] for r, v in roles.items() if r.startswith(OURS))
    infra = sum(v["cpu_s"] for r, v in roles.items() if not r.startswith(OURS))
    return {
        "ours_ms_per_cp": round(ours * 1000 / k, 2),
        "infrastructure_ms_per_cp": round(infra * 1000 / k, 2),
    }


class Tracker:
    """Watches the management cluster's CAPI Secrets: a control plane is done when its
    ``<cluster>-kubeconfig`` appears."""

    def __init__(self, names: set[str]) -> None:
        self.wanted = {f"{n}-kubeconfig": n for n in names}
        self.done: dict[str, float] = {}
        self.all_done = asyncio.Event()

    async def watch(self, mgmt: ckube.Kube) -> None:
        async for item in watching.stream(mgmt, resources.SECRET, namespace=NAMESPACE):
            objs = item.items if isinstance(item, watching.Synced) else [item.object]
            for obj in objs:
                name = self.wanted.get(obj["metadata"]["name"])
                if name is not None and name not in self.done:
                    self.done[name] = time.perf_counter()
            if len(self.done) == len(self.wanted):
                self.all_done.set()


async def drive(
    names: list[tuple[str, str]],
    create: Callable[[str, str], Awaitable[None]],
    tracker: Tracker,
    *,
    rate: float | None,
    concurrency: int,
    timeout: float,
) -> dict[str, Any]:
    started: dict[str, float] = {}
    gate = asyncio.Semaphore(concurrency)

    async def one(name: str, site: str) -> None:
        async with gate:
            started[name] = time.perf_counter()
            await create(name, site)

    t0 = time.perf_counter()
    tasks = []
    for i, (name, site) in enumerate(names):
        if rate:
            delay = t0 + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(name, site)))
    await asyncio.gather(*tasks)
    try:
        await asyncio.wait_for(tracker.all_done.wait(), timeout)
    except TimeoutError:
        missing = sorted(set(started) - set(tracker.done))
        raise SystemExit(
            f"only {len(tracker.done)}/{len(names)} done within {timeout:g}s; e.g. {missing[:5]}"
        ) from None
    end = max(tracker.done.values())
    latencies = [tracker.done[n] - started[n] for n in started]
    return {
        "control_planes": len(names),
        "seconds": round(end - t0, 2),
        "per_s": round(len(names) / (end - t0), 1),
        "p50_s": percentile(latencies, 0.50),
        "p95_s": percentile(latencies, 0.95),
        "p99_s": percentile(latencies, 0.99),
    }


def server_of(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])


async def mgmt_calls(server: str) -> collections.Counter[tuple[str, str]]:
    """Requests the management cluster's emulator has received, by (HTTP method, resource), from
    its ``/metrics`` (a subresource as ``plural/status``)."""
    async with aiohttp.ClientSession() as s, s.get(f"{server}/metrics", ssl=False) as r:
        text = await r.text()
    calls: collections.Counter[tuple[str, str]] = collections.Counter()
    for line in text.splitlines():
        if line.startswith("kubeapi_requests_total{"):
            labels, n = line.rsplit(" ", 1)
            method = labels.split('method="', 1)[1].split('"', 1)[0]
            resource = labels.split('resource="', 1)[1].split('"', 1)[0]
            calls[(method, resource)] += int(n)
    return calls


def writes_per_cp(
    before: collections.Counter[tuple[str, str]], after: collections.Counter[tuple[str, str]], k: int
) -> dict[str, float]:
    """The management-cluster writes (every method but GET) per control plane between the two
    counts, by ``METHOD resource`` and in all, less the bench's own creates (a Cluster and an
    RKCP per control plane)."""
    spent = after - before
    spent[("POST", "clusters")] -= k
    spent[("POST", "remotekamajicontrolplanes")] -= k
    writes = {f"{m} {r}": round(n / k, 2) for (m, r), n in sorted(spent.items()) if m != "GET" and n > 0}
    return {"total": round(sum(n for (m, _), n in spent.items() if m != "GET" and n > 0) / k, 2), **writes}


async def settled(mgmt: ckube.Kube, *, quiet: float, timeout: float = 900.0) -> tuple[float, bool]:
    """Seconds until every RKCP says Ready and none was written for ``quiet`` seconds (the
    hub's status writes trail the kubeconfig Secrets; its Lease renewals do not count), and
    whether that happened within ``timeout``."""
    loop = asyncio.get_running_loop()
    start = since = loop.time()
    version = 0
    while loop.time() - start < timeout:
        listing = await mgmt.list(resources.REMOTE_KAMAJI_CONTROL_PLANE, namespace=NAMESPACE)
        now = loop.time()
        current = hash(frozenset(o["metadata"]["resourceVersion"] for o in listing.items))
        if current != version:
            version, since = current, now
        ready = all((o.get("status") or {}).get("ready") is True for o in listing.items)
        if ready and now - since >= quiet:
            return round(now - start, 1), True
        await asyncio.sleep(5.0)
    return round(loop.time() - start, 1), False


async def sites_calls(kubeconfigs: Iterable[Path]) -> collections.Counter[tuple[str, str]]:
    """Requests the sites' emulated API servers have received, summed, by (method, resource)."""
    total: collections.Counter[tuple[str, str]] = collections.Counter()
    for kubeconfig in kubeconfigs:
        total += await mgmt_calls(server_of(kubeconfig))
    return total


def calls_per_cp(
    before: collections.Counter[tuple[str, str]], after: collections.Counter[tuple[str, str]], k: int
) -> dict[str, float]:
    """Every request (a list or a watch is a GET with no name) per control plane, by ``METHOD resource``."""
    spent = after - before
    return {"total": round(sum(spent.values()) / k, 2)} | {
        f"{m} {r}": round(n / k, 2) for (m, r), n in sorted(spent.items())
    }


async def nats_by_role(url: str) -> dict[str, int]:
    """Messages received by the server per client role (the connection name's last word before
    the site: ``kamaji-broker-hub``, ``kamaji-broker-agent-<site>``), from /connz."""
    async with aiohttp.ClientSession() as s, s.get(f"{url}/connz?limit=1024") as r:
        connz = await r.json()
    roles: dict[str, int] = {}
    for c in connz.get("connections") or []:
        name = str(c.get("name") or "other").removeprefix("kamaji-broker-").split("-", 1)[0]
        roles[name] = roles.get(name, 0) + int(c.get("in_msgs") or 0)
    return roles


async def nats_totals(url: str) -> tuple[int, int]:
    async with aiohttp.ClientSession() as s, s.get(f"{url}/varz") as r:
        varz = await r.json()
    return int(varz["in_msgs"]), int(varz["in_bytes"])


async def broker(k: int, n: int, *, rate: float | None, work: Path, timeout: float) -> dict[str, Any]:
    sites = workload.site_names(n)
    names = spread(k, sites)
    topo = launcher.System(
        work / "broker", launcher.Options(sites=sites, kamaji_delay=0.0, env={"KB_LOG_LEVEL": "warning"})
    )
    await topo.start()
    try:
        tracker = Tracker({name for name, _ in names})
        watch = asyncio.create_task(tracker.watch(topo.mgmt))
        monitor = topo.nats_monitor_url
        before = await nats_totals(monitor) if monitor else (0, 0)
        roles_before = await nats_by_role(monitor) if monitor else {}

        async def create(name: str, site: str) -> None:
            await topo.create_control_plane(name, site=site)

        server = server_of(topo.kubeconfig(MGMT))
        site_configs = [topo.kubeconfig(site) for site in sites]
        site0 = await sites_calls(site_configs)
        calls0, cpu0 = await mgmt_calls(server), snapshot(topo.children)
        result = await drive(names, create, tracker, rate=rate, concurrency=64, timeout=timeout)
        watch.cancel()
        # The hub's status writes trail the kubeconfig Secrets the tracker waits for: its work
        # too, as the direct controller's endpoint and status writes are (CPU counted after them;
        # the quiet wait itself costs the processes nothing).
        await settled(topo.mgmt, quiet=5.0)
        cpu1 = snapshot(topo.children)
        result["mgmt_writes_per_cp"] = writes_per_cp(calls0, await mgmt_calls(server), k)
        result["site_requests_per_cp"] = calls_per_cp(site0, await sites_calls(site_configs), k)
        if monitor:
            after = await nats_totals(monitor)
            result["nats_msgs_per_cp"] = round((after[0] - before[0]) / k, 1)
            result["nats_msgs_per_cp_by_sender"] = {
                role: round((n - roles_before.get(role, 0)) / k, 2)
                for role, n in sorted((await nats_by_role(monitor)).items())
            }
            result["nats_bytes_per_cp"] = round((after[1] - before[1]) / k)
        result["processes"] = role_usage(cpu0, cpu1, k)
        result["cpu"] = cpu_split(result["processes"], k)
        return result
    finally:
        await topo.stop()


def spread(k: int, sites: tuple[str, ...]) -> list[tuple[str, str]]:
    """``cp-00001``… assigned round-robin to the sites."""
    return [(f"cp-{i:05d}", sites[i % len(sites)]) for i in range(k)]


async def direct(
    k: int, n: int, *, rate: float | None, work: Path, timeout: float, baseline: str = "provider"
) -> dict[str, Any]:
    """The baseline (``bench/baselines/direct.py``) on emulated clusters: a management cluster (with the RKCP
    CRD for the provider shape) and N sites with Kamaji simulators at delay 0."""
    sites = workload.site_names(n)
    names = spread(k, sites)
    base = work / f"direct-{baseline}"
    children: list[processes.Child] = []

    def spawn(name: str, args: list[str], ready: str) -> processes.Child:
        log = base / "logs" / f"{name}.log"
        env = processes.child_env({"KB_LOG_LEVEL": "warning"})
        child = processes.Child(name=name, args=[sys.executable, *args], log=log, env=env, ready_text=ready)
        children.append(child)
        child.start()
        return child

    (base / "crds").mkdir(parents=True, exist_ok=True)
    rkcp_crd = base / "crds" / crdgen.FILENAME
    rkcp_crd.write_text(crdgen.render())
    clients: list[Any] = []
    try:
        for cluster in ("mgmt", *sites):
            kinds = [crds.CLUSTER, rkcp_crd] if cluster == "mgmt" else [crds.TENANT_CONTROL_PLANE]
            kubeconfig = str(base / f"{cluster}.kubeconfig")
            args = ["-m", "sandbox.kubeapi", "--port", "0", "--kubeconfig", kubeconfig, "--name", cluster]
            for crd in kinds:
                args += ["--crd", str(crd)]
            spawn(f"kubeapi-{cluster}", [*args, "--history", "200000"], "(kubeconfig:")
        await asyncio.gather(*(c.wait_ready(timeout=60) for c in children))
        kubes: dict[str, ckube.Kube] = {}
        for cluster in ("mgmt", *sites):
            client = await ckube.api_client_from_kubeconfig(base / f"{cluster}.kubeconfig")
            clients.append(client)
            kubes[cluster] = ckube.Kube(client)
        for i, site in enumerate(sites):
            await kubes[site].create(resources.NAMESPACE, {"metadata": {"name": SITE_NAMESPACE}})
            spawn(f"kamaji-{site}", ["-m", "sandbox.kamaji", "--kubeconfig", str(base / f"{site}.kubeconfig"),
                                     "--ready-delay", "0", "--address-pool", f"10.{100 + i}.0.0/16"],
                  "kamaji simulator running")  # fmt: skip
        await asyncio.gather(*(c.wait_ready(timeout=60) for c in children))
        shape = direct_baseline.Provider if baseline == "provider" else direct_baseline.Bare
        controller = shape(kubes["mgmt"], {s: kubes[s] for s in sites})
        tracker = Tracker({name for name, _ in names})
        site_configs = [base / f"{site}.kubeconfig" for site in sites]
        site0 = await sites_calls(site_configs)
        server = server_of(base / "mgmt.kubeconfig")
        calls0 = await mgmt_calls(server)
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        infra0 = snapshot(children)
        tasks = [asyncio.create_task(tracker.watch(kubes["mgmt"]))]
        tasks += [asyncio.create_task(loop) for loop in controller.loops()]
        result = await drive(names, controller.create, tracker, rate=rate, concurrency=64, timeout=timeout)
        # What the controller writes after the Secrets (the endpoint, the status) is part of its work.
        await controller.finished()
        for t in tasks:
            t.cancel()
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        result["processes"] = role_usage(infra0, snapshot(children), k)
        result["mgmt_writes_per_cp"] = writes_per_cp(calls0, await mgmt_calls(server), k)
        result["site_requests_per_cp"] = calls_per_cp(site0, await sites_calls(site_configs), k)
        # The direct controller runs in this process, with the load generator and the tracker:
        # its CPU includes the creation of every Cluster and control-plane object (provider), which
        # the broker's figures leave to the bench's own process.
        spent = cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime
        result["processes"]["direct-controller"] = {
            "cpu_s": round(spent, 2),
            "ms_per_cp": round(spent * 1000 / k, 2),
            "peak_rss_mb": round(cpu1.ru_maxrss / 1024, 1),
            "processes": 1,
        }
        result["cpu"] = cpu_split(result["processes"], k)
        return result
    finally:
        for client in clients:
            await client.close()
        for child in children:
            child.terminate()
        await asyncio.gather(*(c.wait_stopped(timeout=10) for c in children))


def ratios(b: dict[str, Any], d: dict[str, Any]) -> dict[str, float]:
    return {
        "throughput_broker_over_direct": round(b["per_s"] / d["per_s"], 2),
        "p50_broker_over_direct": round(b["p50_s"] / d["p50_s"], 2) if d["p50_s"] else 0.0,
        "p99_broker_over_direct": round(b["p99_s"] / d["p99_s"], 2) if d["p99_s"] else 0.0,
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bench": "provision",
        "k": args.k,
        "n": args.n,
        "rate": args.rate,
        "kamaji_delay_s": 0,
    }
    baselines = ["provider", "bare"] if args.baseline == "both" else [args.baseline]
    with tempfile.TemporaryDirectory(prefix="bench-provision-") as tmp:
        work = Path(tmp)
        if args.compare or args.mode == "broker":
            out["broker"] = await broker(args.k, args.n, rate=args.rate, work=work, timeout=args.timeout)
        if args.compare or args.mode == "direct":
            for baseline in baselines:
                key = "direct" if baseline == baselines[0] else f"direct_{baseline}"
                out[key] = await direct(
                    args.k, args.n, rate=args.rate, work=work, timeout=args.timeout, baseline=baseline
                )
                out[key]["baseline"] = baseline
    if args.compare:
        out["ratios"] = ratios(out["broker"], out["direct"])
        for baseline in baselines[1:]:
            out[f"ratios_{baseline}"] = ratios(out["broker"], out[f"direct_{baseline}"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--k", type=int, default=1000, help="control planes (default 1000)")
    parser.add_argument("--n", type=int, default=10, help="sites (default 10)")
    parser.add_argument("--mode", choices=("broker", "direct"), default="broker")
    parser.add_argument("--compare", action="store_true", help="run broker and direct, print ratios")
    parser.add_argument(
        "--baseline", choices=("provider", "bare", "both"), default="provider",
        help="the direct controller's shape (bench/baselines/direct.py; default provider: a CAPI "
        "control-plane provider with its objects in the management cluster; bare: TCPs alone; both: each)",
    )  # fmt: skip
    parser.add_argument(
        "--rate", type=float, default=None, help="create at this many per second (default: all at once)"
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(args))), flush=True)


if __name__ == "__main__":
    main()
