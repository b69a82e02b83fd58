"""The sandbox's own metrics, plotted: what the Grafana dashboard of deploy/monitoring shows.

Runs the sandbox topology as processes (``sandbox.launcher``: nats-server, emulated clusters,
Kamaji simulators, the hub, an agent per site) and scrapes the hub's and every agent's /metrics
once a second while a scripted day happens:

1. ``--per-site`` control planes created at every site, until all are Ready;
2. half of them upgraded (``spec.version``), until each is Ready at its new generation;
3. one site's agent killed; control planes created and upgraded there meanwhile (its backlog
   grows, the hub sees it disconnected), held for ``--down`` seconds, then started again, until
   everything is Ready;
4. some control planes deleted at every site, until they are gone;

holding ``--settle`` seconds between the steps. Then plots a 2x2 PNG (matplotlib, Agg): control
planes Ready per site, intents published per second by operation, the intent backlog per site
with the agent-down window shaded, and the first-ready and update-to-ready distributions (the
hub's histograms). Prints one JSON line.

Run: ``.venv/bin/pip install -e '.[plot]' && .venv/bin/python bench/metrics_plot.py``
(``--out docs/sandbox-metrics.png`` by default).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import math
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from common.kube import resources  # noqa: E402
from sandbox.launcher import Options, System  # noqa: E402

RKCP = resources.REMOTE_KAMAJI_CONTROL_PLANE
CLUSTER = resources.CLUSTER
SITES = ("site-a", "site-b", "site-c")
DOWN_SITE = "site-b"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class Recording:
    """Every scrape, by process: (seconds since the start, samples); and the agent-down window."""

    start: float = field(default_factory=time.monotonic)
    hub: list[tuple[float, Samples]] = field(default_factory=list)
    agents: dict[str, list[tuple[float, Samples]]] = field(default_factory=dict)
    down: tuple[float, float] | None = None

    def now(self) -> float:
        return time.monotonic() - self.start

    def last(self, name: str, **labels: str) -> float:
        return self.hub[-1][1].get((name, frozenset(labels.items())), 0.0) if self.hub else 0.0


async def _scrape(http: aiohttp.ClientSession, url: str) -> Samples | None:
    try:
        async with http.get(f"{url}/metrics", timeout=aiohttp.ClientTimeout(total=2)) as r:
            text = await r.text()
    except (aiohttp.ClientError, TimeoutError):
        return None  # a stopped agent: a gap in its series, as Prometheus would have
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def _scrape_forever(world: System, rec: Recording) -> None:
    async with aiohttp.ClientSession() as http:
        while True:
            t = rec.now()
            if (hub := await _scrape(http, world.hub_health_url)) is not None:
                rec.hub.append((t, hub))
            for site, url in world.agent_health_urls.items():
                if (agent := await _scrape(http, url)) is not None:
                    rec.agents.setdefault(site, []).append((t, agent))
            await asyncio.sleep(max(0.0, 1.0 - (rec.now() - t)))


async def _until(probe: Callable[[], Awaitable[bool]], *, within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not await probe():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {within:.0f}s")
        await asyncio.sleep(0.5)


async def _all_ready(world: System, names: set[str]) -> bool:
    snapshot = await world.progress()
    done = {cp.name for cp in snapshot.control_planes if cp.done}
    return names <= done


async def _scenario(
    world: System, rec: Recording, per_site: int, down: float, settle: float
) -> dict[str, Any]:
    async def steady() -> None:
        """Hold ``settle`` seconds: each step shows as a plateau on the plot."""
        until = rec.now() + settle
        await _until(lambda: _after(rec, until), within=settle + 30, what="a steady state")

    await steady()
    names = {site: [f"cp-{site[-1]}{i}" for i in range(per_site)] for site in SITES}
    for site, cps in names.items():
        for name in cps:
            await world.create_control_plane(name, site=site)
    every = {n for cps in names.values() for n in cps}
    await _until(lambda: _all_ready(world, every), within=300, what="every control plane Ready")
    await steady()

    upgraded = [n for cps in names.values() for n in cps[: per_site // 2]]
    for name in upgraded:
        await world.mgmt.patch(RKCP, name, {"spec": {"version": "v1.32.0"}}, namespace="default")

    async def timed(count: int) -> bool:
        return sum(rec.last("kb_hub_update_ready_seconds_count", site=s) for s in SITES) >= count

    await _until(lambda: timed(len(upgraded)), within=300, what="every upgrade Ready")
    await steady()

    # One site's agent goes away; work for it piles up in its stream meanwhile.
    await world.kill(f"agent-{DOWN_SITE}")
    went = rec.now()
    late = [f"cp-{DOWN_SITE[-1]}{i}" for i in range(per_site, per_site + 3)]
    for name in late:
        await world.create_control_plane(name, site=DOWN_SITE)
    held = names[DOWN_SITE][per_site // 2]
    await world.mgmt.patch(RKCP, held, {"spec": {"version": "v1.32.0"}}, namespace="default")

    async def disconnected() -> bool:
        return rec.last("kb_hub_site_connected", site=DOWN_SITE) == 0.0 and rec.now() - went >= down

    await _until(disconnected, within=down + 120, what=f"{DOWN_SITE} seen disconnected")
    await world.start_again(f"agent-{DOWN_SITE}")
    rec.down = (went, rec.now())
    every |= set(late)
    await _until(lambda: _all_ready(world, every), within=300, what="every control plane Ready again")
    await _until(lambda: timed(len(upgraded) + 1), within=300, what="the held upgrade Ready")
    await steady()

    deleted = [cps[-1] for cps in names.values()] + late[:1]
    for name in deleted:
        await world.mgmt.delete(RKCP, name, namespace="default")
        await world.mgmt.delete(CLUSTER, name, namespace="default")

    async def gone() -> bool:
        left = {cp.name for cp in (await world.progress()).control_planes}
        return not left & set(deleted)

    await _until(gone, within=300, what="deleted control planes gone")
    await steady()
    return {"created": len(every), "upgraded": len(upgraded) + 1, "deleted": len(deleted)}


async def _after(rec: Recording, t: float) -> bool:
    return rec.now() >= t


async def record(
    directory: Path, *, per_site: int, down: float, settle: float
) -> tuple[Recording, dict[str, Any]]:
    options = Options(sites=SITES, kamaji_delay=3.0, heartbeat_interval=2.0)
    world = System(directory, options)
    await world.start()
    rec = Recording()
    scraper = asyncio.create_task(_scrape_forever(world, rec))
    try:
        summary = await _scenario(world, rec, per_site, down, settle)
    finally:
        scraper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await scraper
        await world.stop()
    return rec, summary


# -- plotting ----------------------------------------------------------------------------------


def _series(rec: Recording, name: str, missing: float = math.nan, **labels: str) -> list[float]:
    key = (name, frozenset(labels.items()))
    return [samples.get(key, missing) for _, samples in rec.hub]


def _summed(rec: Recording, name: str, **labels: str) -> list[float]:
    """``name`` summed over every label set that has ``labels``, per scrape."""
    wanted = set(labels.items())
    return [sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls) for _, samples in rec.hub]


def _rate(t: list[float], counts: list[float], *, window: float = 5.0) -> list[float]:
    """Per second over the last ``window`` seconds (Prometheus' rate, without extrapolation)."""
    out, j = [], 0
    for i in range(len(t)):
        while t[i] - t[j] > window:
            j += 1
        out.append((counts[i] - counts[j]) / (t[i] - t[j]) if t[i] > t[j] else 0.0)
    return out


def _buckets(samples: Samples, name: str) -> list[tuple[float, float]]:
    """(le, cumulative count) of histogram ``name``, summed over its sites, by ``le``."""
    out: dict[float, float] = {}
    for (n, labels), v in samples.items():
        if n == f"{name}_bucket":
            le = float(dict(labels)["le"])
            out[le] = out.get(le, 0.0) + v
    return sorted(out.items())


def _quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile: linear within the bucket the rank falls in."""
    total = buckets[-1][1] if buckets else 0.0
    if total == 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return lower
            return lower + (le - lower) * (rank - below) / (count - below) if count > below else le
        lower, below = le, count
    return lower


def plot(rec: Recording, sites: tuple[str, ...], out: Path) -> dict[str, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    t = [x for x, _ in rec.hub]
    fig, ((ready_ax, intents_ax), (backlog_ax, latency_ax)) = plt.subplots(2, 2, figsize=(12, 7.2), dpi=90)
    ready_ax.stackplot(
        t,
        *[_series(rec, "kb_hub_control_planes", 0.0, site=s, phase="Ready") for s in sites],
        labels=sites,
        alpha=0.8,
    )
    total = _summed(rec, "kb_hub_control_planes")
    ready_ax.plot(t, total, color="black", linewidth=1, linestyle="--", label="all RKCPs")
    ready_ax.set(title="Control planes Ready, by site (kb_hub_control_planes)", ylabel="control planes")
    for op in ("provision", "delete"):
        intents_ax.plot(t, _rate(t, _summed(rec, "kb_hub_intents_published_total", op=op)), label=op)
    intents_ax.set(title="Intents published / s, by operation (5 s rate)", ylabel="intents / s")
    for s in sites:
        backlog_ax.plot(t, _series(rec, "kb_hub_site_backlog", site=s), label=s)
    backlog_ax.set(title="Intent backlog per site (kb_hub_site_backlog)", ylabel="unacknowledged intents")
    for ax in (ready_ax, intents_ax, backlog_ax):
        if rec.down is not None:
            ax.axvspan(*rec.down, color="grey", alpha=0.2, label=f"agent of {DOWN_SITE} down")
        ax.set_xlabel("seconds")
        ax.legend(loc="upper left", fontsize=8)
    figures: dict[str, Any] = {}
    for name, label in (
        ("kb_hub_first_ready_seconds", "first ready"),
        ("kb_hub_update_ready_seconds", "update to ready"),
    ):
        buckets = _buckets(rec.hub[-1][1], name) if rec.hub else []
        finite = [(le, c) for le, c in buckets if not math.isinf(le)]
        count = buckets[-1][1] if buckets else 0.0
        p50, p90 = _quantile(0.5, buckets), _quantile(0.9, buckets)
        key = name.removeprefix("kb_hub_").removesuffix("_seconds")
        figures.update({f"{key}_count": int(count), f"{key}_p50_s": p50, f"{key}_p90_s": p90})
        if count:
            legend = f"{label}: n={int(count)}, p50 ~ {p50:.1f} s, p90 ~ {p90:.1f} s"
            shares = [c / count for _, c in finite]
            latency_ax.step([le for le, _ in finite], shares, where="post", marker="o", label=legend)
    latency_ax.set_xscale("log")
    latency_ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    latency_ax.set(
        title="Time to Ready, hub histograms (share within each bound)",
        xlabel="seconds (bucket upper bound)",
        ylabel="share of control planes",
        ylim=(0, 1.05),
    )
    latency_ax.legend(loc="lower right", fontsize=8)
    fig.suptitle("kamaji-broker sandbox: the hub's /metrics, scraped every second (bench/metrics_plot.py)")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    backlog = [v for v in _series(rec, "kb_hub_site_backlog", site=DOWN_SITE) if not math.isnan(v)]
    agents = {s: rec.agents[s][-1][1].get(("kb_agent_managed_tcps", frozenset()), 0.0) for s in rec.agents}
    figures.update(
        {
            "scrapes": len(rec.hub),
            "max_backlog_" + DOWN_SITE: max(backlog, default=0.0),
            "down_s": round(rec.down[1] - rec.down[0], 1) if rec.down else None,
            "agent_managed_tcps": agents,
        }
    )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-site", type=int, default=4, help="control planes created per site first")
    parser.add_argument("--down", type=float, default=30.0, help="seconds the agent of site-b stays down")
    parser.add_argument("--settle", type=float, default=8.0, help="seconds held between the steps")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "sandbox-metrics.png")
    parser.add_argument("--samples", type=Path, help="also write every hub scrape here (JSON lines)")
    args = parser.parse_args()
    if importlib.util.find_spec("matplotlib") is None:
        print("bench/metrics_plot.py needs matplotlib: pip install -e '.[plot]'", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kb-metrics-plot-") as work:
        rec, summary = asyncio.run(
            record(Path(work) / "sandbox", per_site=args.per_site, down=args.down, settle=args.settle)
        )
    if args.samples is not None:
        with args.samples.open("w") as out:
            for t, samples in rec.hub:
                rows = [
                    [name, dict(labels), v] for (name, labels), v in samples.items() if name.startswith("kb_")
                ]
                out.write(json.dumps({"t": round(t, 3), "samples": rows}) + "\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figures = plot(rec, SITES, args.out)
    print(json.dumps({"bench": "metrics_plot", **summary, **figures, "png": str(args.out),
                      "png_bytes": args.out.stat().st_size}))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
