"""Benchmark of our Kubernetes client's own CPU per request (``common.kube``): what one
management-cluster write or watch event costs the hub's process, apart from the API server.

The emulator (``python -m sandbox.kubeapi``) runs as a child process; this process only makes
the requests, one at a time, and its CPU time (``time.process_time``) is divided by their
number. Prints ONE JSON line per measurement (``ms_cpu_per_request``, requests/s):

- ``create_secret``: a Secret like a CAPI kubeconfig Secret (about 6 KiB of data);
- ``create_event``: a core/v1 Event;
- ``merge_patch``: a merge patch of an object's annotations (what a status patch costs the client);
- ``watch_event``: an informer receiving a MODIFIED event (the CPU of ``merge_patch`` with an
  informer running, minus ``merge_patch`` alone).

Run: ``.venv/bin/python bench/kubeclient.py [--count 500]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.kubeapi import start_server
from common import kube as ckube
from common import objects
from common.kube import events, informer, resources

NS = "default"


def emit(measurement: str, count: int, cpu_s: float, wall_s: float) -> None:
    print(
        json.dumps(
            {
                "bench": "kubeclient",
                "measurement": measurement,
                "count": count,
                "ms_cpu_per_request": round(cpu_s * 1000 / count, 3),
                "per_s": round(count / wall_s, 1),
            }
        ),
        flush=True,
    )


async def measured(
    count: int, call: Callable[[int], Awaitable[Any]], *, then: Callable[[], Awaitable[Any]] | None = None
) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``count`` calls, one after the other, and of ``then``
    (waiting until every watch event they cause was handled)."""
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(count):
        await call(i)
    if then is not None:
        await then()
    return time.process_time() - cpu, time.perf_counter() - wall


class Counting:
    """An informer sink that only counts, and says when it has seen ``target`` events."""

    def __init__(self) -> None:
        self.events = 0
        self.target = 1
        self.reached = asyncio.Event()

    def expect(self, more: int) -> None:
        self.target = self.events + more
        self.reached.clear()

    def known(self) -> Iterable[objects.Key]:
        return []

    def upsert(self, key: objects.Key, obj: dict[str, Any]) -> None:
        self.events += 1
        if self.events >= self.target:
            self.reached.set()

    def delete(self, key: objects.Key) -> None:
        self.upsert(key, {})


async def run(count: int) -> None:
    with tempfile.TemporaryDirectory(prefix="kb-bench-kubeclient-") as tmp:
        proc, _ = await start_server(Path(tmp) / "kubeconfig")
        api = await ckube.api_client_from_kubeconfig(Path(tmp) / "kubeconfig")
        kube = ckube.Kube(api)
        try:
            await measure(kube, count)
        finally:
            await api.close()
            proc.terminate()
            await proc.wait()


async def measure(kube: ckube.Kube, count: int) -> None:
    value = "x" * 6000

    async def secret(i: int) -> None:
        body = {
            "metadata": {"name": f"s{i}"},
            "type": "cluster.x-k8s.io/secret",
            "stringData": {"value": value},
        }
        await kube.create(resources.SECRET, {**body, "stringData": {"value": value}}, namespace=NS)

    async def event(i: int) -> None:
        body = events.new_event(
            resources.SECRET, namespace=NS, name="target", uid="u", type="Normal", reason="Bench",
            message=f"event {i}", component="bench", now=dt.datetime.now(dt.UTC),
        )  # fmt: skip
        await kube.create(resources.EVENT, body, namespace=NS)

    await kube.create(resources.SECRET, {"metadata": {"name": "target"}}, namespace=NS)

    async def patch(i: int) -> None:
        notes = {"bench/n": str(i), "bench/reason": "x" * 400}
        await kube.patch(resources.SECRET, "target", {"metadata": {"annotations": notes}}, namespace=NS)

    for name, call in (("create_secret", secret), ("create_event", event), ("merge_patch", patch)):
        cpu, wall = await measured(count, call)
        emit(name, count, cpu, wall)
    alone, _ = await measured(count, patch)
    sink = Counting()
    watching = asyncio.create_task(informer.inform(kube, resources.SECRET, sink, namespace=NS))
    await sink.reached.wait()  # listed: the target Secret, and the ones created above
    sink.expect(count)
    cpu, wall = await measured(count, patch, then=sink.reached.wait)
    watching.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watching
    emit("watch_event", count, max(cpu - alone, 0.0), wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=500)
    args = parser.parse_args()
    asyncio.run(run(args.count))


if __name__ == "__main__":
    main()
