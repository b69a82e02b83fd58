"""Benchmark of the Kubernetes API emulator (sandbox.kubeapi): requests/s and watch fan-out.

Starts the emulator as a child process (``python -m sandbox.kubeapi``, so that it has a core to
itself and the load generator does not distort it), drives it with aiohttp clients from this
process, and prints ONE JSON line per measurement:

- ``get``, ``list`` (a namespace of ``--objects`` ConfigMaps, one page), ``patch`` (merge patch,
  each one a new resourceVersion and a watch event), ``create``: requests/s with
  ``--concurrency`` clients for ``--duration`` seconds;
- ``watch_fanout``: events/s delivered to ``--watchers`` concurrent watches while one client
  patches ``--events`` times;
- ``memory``: the emulator's resident set size after all of the above.

Run: ``.venv/bin/python bench/kubeapi.py [--duration 3] [--concurrency 16]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
NS = "/api/v1/namespaces/default/configmaps"


def emit(measurement: str, **fields: Any) -> None:
    print(json.dumps({"bench": "kubeapi", "measurement": measurement, **fields}), flush=True)


async def start_server(kubeconfig: Path) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sandbox.kubeapi",
        "--port",
        "0",
        "--kubeconfig",
        str(kubeconfig),
        "--name",
        "bench",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), timeout=30)
    return proc, line.decode().split()[0]


async def closed_loop(
    name: str,
    call: Callable[[aiohttp.ClientSession, int], Awaitable[None]],
    *,
    http: aiohttp.ClientSession,
    concurrency: int,
    duration: float,
    **extra: Any,
) -> None:
    """``concurrency`` clients each issuing ``call`` back to back for ``duration`` seconds."""
    done = 0
    deadline = time.perf_counter() + duration

    async def worker(wid: int) -> None:
        nonlocal done
        i = 0
        while time.perf_counter() < deadline:
            await call(http, wid * 1_000_000 + i)
            i += 1
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    elapsed = time.perf_counter() - start
    emit(
        name,
        requests_per_s=round(done / elapsed, 1),
        requests=done,
        concurrency=concurrency,
        seconds=round(elapsed, 2),
        **extra,
    )


async def expect(resp: aiohttp.ClientResponse, status: int) -> None:
    await resp.read()
    if resp.status != status:
        raise RuntimeError(f"{resp.method} {resp.url}: {resp.status}, expected {status}")


async def watch_fanout(base: str, *, watchers: int, events: int) -> None:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(base, connector=connector) as http:
        async with http.post(NS, json={"metadata": {"name": "fan"}, "data": {"n": "0"}}) as resp:
            rv = (await resp.json())["metadata"]["resourceVersion"]
        ready = 0
        all_ready = asyncio.Event()

        async def watcher() -> int:
            nonlocal ready
            got = 0
            url = f"{NS}?watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Dfan&timeoutSeconds=120"
            async with http.get(url) as resp:
                ready += 1
                if ready == watchers:
                    all_ready.set()
                while got < events:
                    line = await resp.content.readline()
                    if not line:
                        break
                    got += 1
            return got

        tasks = [asyncio.create_task(watcher()) for _ in range(watchers)]
        await asyncio.wait_for(all_ready.wait(), timeout=60)
        await asyncio.sleep(0.2)  # let the server subscribe every stream
        start = time.perf_counter()
        for i in range(events):
            async with http.patch(
                f"{NS}/fan",
                data=json.dumps({"data": {"n": str(i + 1)}}),
                headers={"Content-Type": "application/merge-patch+json"},
            ) as resp:
                await expect(resp, 200)
        received = await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
        total = sum(received)
        emit(
            "watch_fanout",
            events_per_s=round(total / elapsed, 1),
            watchers=watchers,
            events_per_watcher=events,
            delivered=total,
            expected=watchers * events,
            seconds=round(elapsed, 2),
        )


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = await start_server(Path(tmp) / "kubeconfig")
        try:
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(base, connector=connector) as http:
                for i in range(args.objects):
                    async with http.post(
                        NS,
                        json={
                            "metadata": {"name": f"cm-{i:04d}", "labels": {"i": str(i % 10)}},
                            "data": {"k": "v" * 64},
                        },
                    ) as resp:
                        await expect(resp, 201)

                async def get(h: aiohttp.ClientSession, n: int) -> None:
                    async with h.get(f"{NS}/cm-{n % args.objects:04d}") as resp:
                        await expect(resp, 200)

                async def list_(h: aiohttp.ClientSession, n: int) -> None:
                    async with h.get(NS) as resp:
                        await expect(resp, 200)

                async def patch(h: aiohttp.ClientSession, n: int) -> None:
                    body = json.dumps({"data": {"n": str(n)}})
                    async with h.patch(
                        f"{NS}/cm-{n % args.objects:04d}",
                        data=body,
                        headers={"Content-Type": "application/merge-patch+json"},
                    ) as resp:
                        await expect(resp, 200)

                async def create(h: aiohttp.ClientSession, n: int) -> None:
                    async with h.post(
                        NS, json={"metadata": {"name": f"new-{n}"}, "data": {"k": "v"}}
                    ) as resp:
                        await expect(resp, 201)

                common = {"http": http, "concurrency": args.concurrency, "duration": args.duration}
                await closed_loop("get", get, **common)
                await closed_loop("list", list_, objects_per_list=args.objects, **common)
                await closed_loop("patch", patch, **common)
                await closed_loop("create", create, **common)
            await watch_fanout(base, watchers=args.watchers, events=args.events)
            emit("memory", rss_mb=rss_mb(proc.pid), history_window=10_000)
        finally:
            proc.terminate()
            await proc.wait()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per request-rate measurement")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent clients")
    parser.add_argument("--objects", type=int, default=100, help="ConfigMaps to create first (the list size)")
    parser.add_argument("--watchers", type=int, default=100, help="concurrent watches for the fan-out")
    parser.add_argument("--events", type=int, default=200, help="events each watcher must receive")
    return parser


if __name__ == "__main__":
    asyncio.run(main(_parser().parse_args()))
