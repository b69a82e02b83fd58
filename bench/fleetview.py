"""Fleet view benchmark: what keeping the fleet on screen costs at rest, watching against polling.

Starts the emulated management cluster (``python -m sandbox.kubeapi`` with the RKCP, Site and
Cluster CRDs, as ``sandbox.launcher`` starts it) and a nats-server with the topology of every
site (its stream and the ``hub`` and ``agent-<site>`` consumers), creates ``--sites`` Sites and
``--rkcps`` Cluster + RemoteKamajiControlPlane pairs spread over them, each RKCP with a Ready
status as the hub writes it, then measures one view at rest for ``--seconds`` seconds, each in a
child process of its own (its CPU and RSS are its alone):

- ``watch``: ``fleet.watching.Watcher`` (list + watch, the bus every 10 s), a look whenever it
  hands one out, each drawn as ``fleet.view.table``;
- ``poll``: what the live view did before: ``fleet.reading.read`` (list everything, read the
  bus) and a drawing every 0.5 s.

Prints ONE JSON object: per mode the view's ``cpu_pct`` (share of one core), ``rss_mb``,
``peak_rss_mb`` (the first list included), ``recomputes`` (fleets made during the window) and the
emulator's ``kubeapi_cpu_pct`` meanwhile.

Run: ``.venv/bin/python bench/fleetview.py [--rkcps 10000] [--sites 100] [--seconds 60]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
ROOT = SCRIPT.parents[1]
sys.path.insert(0, str(ROOT))

from bench.provision import usage  # noqa: E402
from common import bus  # noqa: E402
from common import kube as ckube  # noqa: E402
from common.kube import resources  # noqa: E402
from fleet import reading, view, watching  # noqa: E402
from hub.api import crds as crdgen  # noqa: E402
from hub.api import site as site_api  # noqa: E402
from sandbox import crds, natsd  # noqa: E402
from sandbox.launcher import workload  # noqa: E402

CONCURRENCY = 32
POLL = 0.5


def _conditions(kinds: dict[str, str], now: str) -> list[dict[str, Any]]:
    return [
        {"type": t, "status": "True", "reason": r, "message": "", "lastTransitionTime": now}
        for t, r in kinds.items()
    ]


def rkcp_status(now: str) -> dict[str, Any]:
    """A Ready RKCP's status, as the hub writes it once its site reported the control plane Ready."""
    kinds = {
        "Ready": "Ready", "Available": "Available", "IntentDelivered": "Delivered",
        "SiteConnected": "Connected", "StatusFresh": "Fresh", "TenantControlPlaneReady": "Ready",
        "SecretsSynced": "Synced",
    }  # fmt: skip
    return {
        "ready": True, "initialized": True, "initialization": {"controlPlaneInitialized": True},
        "version": workload.DEFAULT_VERSION, "replicas": 2, "readyReplicas": 2, "availableReplicas": 2,
        "upToDateReplicas": 2, "updatedReplicas": 2, "observedGeneration": 1,
        "conditions": _conditions(kinds, now),
    }  # fmt: skip


def site_status(now: str) -> dict[str, Any]:
    kinds = {site_api.CONNECTED: "HeartbeatReceived", site_api.SIGNING_KEY_TRUSTED: "Trusted"}
    return {
        "connected": True, "lastHeartbeatTime": now, "backlog": 0, "agentVersion": "0.9.0",
        "trustedKeyIds": ["k1"], "conditions": _conditions(kinds, now),
    }  # fmt: skip


async def _bounded(calls: list[Any]) -> None:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(call: Any) -> None:
        async with gate:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


async def populate(kube: ckube.Kube, sites: list[str], rkcps: int) -> None:
    """The Sites, and the Clusters with their RKCPs, created and given their status (a
    subresource: a second request)."""
    now = dt.datetime.now(dt.UTC).isoformat()

    async def site(name: str) -> None:
        await kube.create(resources.SITE, site_api.manifest(name))
        await kube.patch(resources.SITE, name, {"status": site_status(now)}, subresource="status")

    async def rkcp(i: int) -> None:
        at = sites[i % len(sites)]
        name = f"{at}-{i // len(sites)}"
        # Its Cluster first: the emulator collects an RKCP whose owner does not exist.
        cluster = await kube.create(
            resources.CLUSTER, workload.cluster(name, namespace="default"), namespace="default"
        )
        body = workload.remote_kamaji_control_plane(
            name,
            namespace="default",
            cluster_uid=cluster["metadata"]["uid"],
            site=at,
            target_namespace="tenants",
        )
        body["spec"]["controlPlaneEndpoint"] = {"host": f"10.0.{i // 256 % 256}.{i % 256}", "port": 6443}
        made = await kube.create(resources.REMOTE_KAMAJI_CONTROL_PLANE, body, namespace="default")
        patch = {"status": rkcp_status(now)}
        await kube.patch(
            resources.REMOTE_KAMAJI_CONTROL_PLANE, made["metadata"]["name"], patch, namespace="default",
            subresource="status",
        )  # fmt: skip

    await _bounded([lambda s=s: site(s) for s in sites])
    await _bounded([lambda i=i: rkcp(i) for i in range(rkcps)])


# -- one view at rest (the child process) -------------------------------------------------------


async def _watch(kube: ckube.Kube, conn: bus.Connection, seconds: float) -> tuple[int, float]:
    watcher = watching.Watcher(kube, conn)
    running = asyncio.create_task(watcher.run())
    try:
        f = await watcher.next()
        assert f is not None  # no timeout
        view.table(f)  # the first look: listed, before the window
        before, began = watcher.recomputes, time.process_time()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            # As the sandbox's live view waits: up to half a second, then its own checks; a look
            # is drawn when the watcher hands one out.
            look = await watcher.next(timeout=POLL)
            if look is not None:
                view.table(look)
        return watcher.recomputes - before, time.process_time() - began
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def _poll(kube: ckube.Kube, conn: bus.Connection, seconds: float) -> tuple[int, float]:
    view.table(await reading.read(kube, conn))
    looks, began = 0, time.process_time()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        view.table(await reading.read(kube, conn))
        looks += 1
        await asyncio.sleep(POLL)
    return looks, time.process_time() - began


def _rss() -> float:
    """This process's resident set now, MB."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


async def child(args: argparse.Namespace) -> None:
    kube = await ckube.connect(in_cluster=False, kubeconfig=Path(args.kubeconfig))
    conn = await bus.connect(bus.Options(servers=(args.nats_url,), name="fleetview"), deadline=10)
    try:
        measure = _watch if args.child == "watch" else _poll
        looks, cpu = await measure(kube, conn, args.seconds)
    finally:
        await conn.close()
        await kube.close()
    _, peak = usage(os.getpid())
    out = {
        "cpu_pct": round(100 * cpu / args.seconds, 2), "rss_mb": round(_rss(), 1),
        "peak_rss_mb": round(peak, 1), "recomputes": looks,
    }  # fmt: skip
    print(json.dumps(out), flush=True)


# -- the parent ----------------------------------------------------------------------------------


async def _start_kubeapi(directory: Path) -> tuple[asyncio.subprocess.Process, Path]:
    (directory / "crds").mkdir()
    files = []
    for name, render in ((crdgen.FILENAME, crdgen.render), (crdgen.SITE_FILENAME, crdgen.render_site)):
        (directory / "crds" / name).write_text(render())
        files += ["--crd", str(directory / "crds" / name)]
    kubeconfig = directory / "mgmt.kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sandbox.kubeapi", "--port", "0", "--kubeconfig", str(kubeconfig),
        "--name", "mgmt", *files, "--crd", str(crds.CLUSTER), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    await asyncio.wait_for(proc.stdout.readline(), timeout=60)
    return proc, kubeconfig


async def _measure(mode: str, args: argparse.Namespace, kubeconfig: Path, nats_url: str, api: int) -> Any:
    cpu_before, _ = usage(api)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), "--child", mode, "--kubeconfig", str(kubeconfig),
        "--nats-url", nats_url, "--seconds", str(args.seconds), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await proc.communicate()
    cpu_after, _ = usage(api)
    result = json.loads(out.decode().strip().splitlines()[-1])
    # The emulator's CPU over the child's whole life (its lists included), per second of the window.
    result["kubeapi_cpu_pct"] = round(100 * (cpu_after - cpu_before) / args.seconds, 2)
    return result


async def parent(args: argparse.Namespace) -> None:
    sites = [f"site-{i:03d}" for i in range(args.sites)]
    with tempfile.TemporaryDirectory(prefix="fleetview-") as tmp:
        directory = Path(tmp)
        server = natsd.NatsServer(store_dir=directory / "nats")
        server.start()
        api, kubeconfig = await _start_kubeapi(directory)
        try:
            conn = await bus.connect(bus.Options(servers=(server.url,), name="fleetview-setup"), deadline=10)
            await bus.ensure_topology(conn, sites=sites, prefix="kb")
            await conn.close()
            kube = await ckube.connect(in_cluster=False, kubeconfig=kubeconfig)
            began = time.monotonic()
            await populate(kube, sites, args.rkcps)
            await kube.close()
            made = time.monotonic() - began
            results = {m: await _measure(m, args, kubeconfig, server.url, api.pid) for m in args.modes}
        finally:
            api.terminate()
            await api.wait()
            server.stop()
    print(json.dumps({
        "bench": "fleetview", "rkcps": args.rkcps, "sites": args.sites, "seconds": args.seconds,
        "populate_seconds": round(made, 1), **results, "date": dt.date.today().isoformat(),
    }))  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rkcps", type=int, default=10_000)
    p.add_argument("--sites", type=int, default=100)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--modes", nargs="+", choices=("watch", "poll"), default=["watch", "poll"])
    p.add_argument("--child", choices=("watch", "poll"), help=argparse.SUPPRESS)
    p.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    p.add_argument("--nats-url", help=argparse.SUPPRESS)
    args = p.parse_args()
    asyncio.run(child(args) if args.child else parent(args))


if __name__ == "__main__":
    main()
