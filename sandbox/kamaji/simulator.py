"""The Kamaji simulator's I/O shell: inform on TenantControlPlanes, run one worker per TCP.

Owns the simulator's lifetime, its workers and its address pool. The TCP stream is
:func:`common.kube.watching.stream`'s (list, watch, resume from the last seen version, relist on
410 Gone), applied by :mod:`common.kube.informer` to the workers, its ``Sink``: a full list
drops the workers of TCPs that are gone, every object gets (or wakes) its worker, a DELETED
event ends it. The stream runs under :func:`common.aiotasks.supervise`. What a worker does when
it wakes is :mod:`sandbox.kamaji.visiting`'s; every decision is the pure
:func:`sandbox.kamaji.reconcile.reconcile`'s. Talks to one cluster through :mod:`common.kube`
only, so it runs unchanged against the emulator or a real API server.

A worker never blocks the watch: the watch stores the newest object in the worker and wakes it;
delays are the worker's ``requeue_after`` timers. Nothing but ``stop()`` ends the simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterable, Mapping
from typing import Any

from common import aiotasks, kube, objects
from common.kube import informer, resources, watching
from sandbox.kamaji import addresses, reconcile, visiting

__all__ = ["Simulator"]

TCP = resources.TENANT_CONTROL_PLANE


def _newer(candidate: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether ``candidate`` may replace ``current`` in a worker's cache.

    The worker caches the objects its own writes return, which are often newer than watch
    events still in flight; replaying those older events would only cause redundant writes.
    resourceVersions are opaque by contract, so this compares them only when both are integers
    (etcd's revisions and the emulator's counter are) and otherwise trusts the event.
    """
    if visiting.uid(candidate) != visiting.uid(current):
        return True
    new = objects.dig(candidate, "metadata", "resourceVersion")
    old = objects.dig(current, "metadata", "resourceVersion")
    try:
        return int(str(new)) >= int(str(old))
    except ValueError:
        return True


class _Workers:
    """The simulator's ``informer.Sink``: one worker (an asyncio task) per TCP key, woken by
    every newer object; a gone key's worker is cancelled and its address released."""

    def __init__(self, context: visiting.Context) -> None:
        self.context = context
        self.by_key: dict[objects.Key, visiting.Worker] = {}

    def known(self) -> Iterable[objects.Key]:
        return list(self.by_key)

    def upsert(self, key: objects.Key, obj: dict[str, Any]) -> None:
        worker = self.by_key.get(key)
        if worker is None:
            self._claim_address(obj)
            worker = visiting.Worker(key=key, obj=obj)
            worker.task = asyncio.create_task(self._work(worker), name=f"kamaji-simulator {key[0]}/{key[1]}")
            self.by_key[key] = worker
        elif _newer(obj, worker.obj):
            if visiting.uid(obj) != visiting.uid(worker.obj):
                self.context.pool.release(visiting.uid(worker.obj))
            worker.obj = obj
            worker.stale = False
        worker.wake.set()

    def delete(self, key: objects.Key) -> None:
        worker = self.by_key.pop(key, None)
        if worker is None:
            return
        if worker.task is not None:
            worker.task.cancel()
        self.context.pool.release(visiting.uid(worker.obj))

    def holds(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` is the object its key's worker works on: a DELETED event of an earlier
        object under the same name must not end the worker of its successor."""
        worker = self.by_key.get(objects.key(obj))
        return worker is not None and visiting.uid(worker.obj) == visiting.uid(obj)

    def tasks(self) -> list[asyncio.Task[None]]:
        return [w.task for w in self.by_key.values() if w.task is not None]

    def _claim_address(self, obj: Mapping[str, Any]) -> None:
        if objects.dig(obj, "spec", "networkProfile", "address"):
            return
        host = visiting.endpoint_host(obj.get("status") or {})
        if host is not None:
            self.context.pool.address_for(visiting.uid(obj), hint=host)

    async def _work(self, worker: visiting.Worker) -> None:
        delay: float | None = 0.0
        while True:
            if delay is None:
                await worker.wake.wait()
            elif delay > 0:
                await aiotasks.wait_event(worker.wake, delay)
            worker.wake.clear()
            delay = await visiting.visit_guarded(worker, self.context)


class Simulator:
    """A Kamaji stand-in for one cluster.

    ``api`` is a kubernetes_asyncio ``ApiClient`` (the caller keeps owning it) or a kubeconfig
    path (the simulator creates the client at ``start()`` and closes it at ``stop()``).
    """

    def __init__(
        self,
        api: Any,
        *,
        ready_delay: float = 3.0,
        delete_delay: float = 0.0,
        address_pool: str = "10.240.0.0/16",
        watch_timeout: int = 300,
    ) -> None:
        self._api = api
        self._timings = reconcile.Timings(ready_delay=ready_delay, delete_delay=delete_delay)
        self._pool = addresses.AddressPool(address_pool)
        self._watch_timeout = watch_timeout
        self._api_client: Any = None
        self._owns_client = False
        self._workers: _Workers | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._synced = asyncio.Event()

    async def __aenter__(self) -> Simulator:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        if self._watch_task is not None:
            raise RuntimeError("the simulator is already running")
        if isinstance(self._api, str | os.PathLike):
            self._api_client = await kube.api_client_from_kubeconfig(os.fspath(self._api))
            self._owns_client = True
        else:
            self._api_client = self._api
        self._workers = _Workers(visiting.Context(kube.Kube(self._api_client), self._pool, self._timings))
        # The stream retries API failures itself, forever; what ends it is an error of ours (a
        # bug, a malformed object). That must not silently end the only watch: supervise logs it
        # and starts a new stream, which relists.
        watch = aiotasks.supervise("watching tenantcontrolplanes", self._inform)
        self._watch_task = asyncio.create_task(watch, name="kamaji-simulator-watch")

    async def stop(self) -> None:
        """Cancel the watch and every worker, wait for them, close the client if ours."""
        workers = self._workers.tasks() if self._workers is not None else []
        tasks = [t for t in (self._watch_task, *workers) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._watch_task, self._workers = None, None
        if self._owns_client and self._api_client is not None:
            await self._api_client.close()
        self._api_client, self._owns_client = None, False

    async def wait_synced(self) -> None:
        """Wait until the first list has been dispatched (every existing TCP has a worker)."""
        await self._synced.wait()

    async def _inform(self) -> None:
        workers = self._workers
        assert workers is not None
        items = watching.stream(workers.context.kube, TCP, watch_timeout=self._watch_timeout)
        async with contextlib.aclosing(items):
            async for item in items:
                if isinstance(item, watching.Synced):
                    # Every worker is created and woken here, but none runs before the whole list
                    # is applied: each new one re-adopts the endpoint its status shows before any
                    # worker allocates a new one (so a restarted simulator hands out no taken one).
                    informer.relisted(workers, item.items, None)
                    self._synced.set()
                elif item.type != "DELETED" or workers.holds(item.object):
                    informer.event(workers, item)
