"""The status loop's shell: watch managed TCPs and their Secrets, publish Status and SealedSecrets.

Owns the tasks: one ``common.kube.informer`` per kind and target namespace (or one of each
cluster-wide) feeding the cache (``agent.status.cache``), and one publishing task that works
through the ``agent.status.schedule`` and syncs each due TCP (``agent.status.syncing``), every
task restarted by ``common.aiotasks.supervise`` if it fails. Decisions come from the pure
``agent.status.report``; messages leave through ``agent.publishing.Publisher``.

Why one publishing task: every publish for a TCP happens in order and reads the cache at the
moment it runs, so the last observed state always wins and a burst of events costs one publish
per ``status_min_interval`` (the trailing one after the window carries the final state). It
syncs the due TCPs ``SYNC_CONCURRENCY`` at a time (a lock per TCP keeps two syncs of one TCP
apart), so their publishes share writes and round trips. A
publish that fails stays scheduled and is retried with backoff; the loop never ends on an error.

Talks to: the Kubernetes API (list/watch TCPs and Secrets, nothing else), NATS through the
Publisher. Logs name coordinates and subjects only, never Secret content.

A managed TCP that vanishes without a delete intent (a site admin deleted it) is not reported
Deleted while the latest intent still says provision: ``restore`` (the cleanup loop's) creates
it again, right from the watch event. Likewise a TCP whose owned fields were edited at the site
(``managed.drifted``) is reported NotReady/Drifted and ``revert`` (the cleanup loop's) applies the
latest intent again, right from the watch event.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import math
from collections.abc import Awaitable, Callable, Iterator
from typing import Final

from agent.deps import Deps
from agent.settings import AgentSettings
from agent.status import cache, report, syncing
from agent.status.schedule import Schedule
from agent.tcp import managed
from common import aiotasks
from common.kube import informer, resources

SECRET_SELECTOR: Final = "kamaji.clastix.io/project=kamaji"
"""Kamaji labels every Secret it generates so; watching only those keeps other Secrets out."""
SYNC_CONCURRENCY: Final = 64
"""TCPs synced at once: their publishes go out in one write and their answers are awaited
together, instead of one round trip each."""
WATCHED: Final = ("tcp", "secret")
"""The kinds the loop watches in each target namespace: managed TCPs and Kamaji's Secrets."""

Restore = Callable[[str, str, managed.Applied | None], Awaitable[bool]]
Revert = Callable[[str, str], Awaitable[bool]]


class StatusLoop:
    """Report every managed TCP of the site to the hub.

    Reads ``site``, ``target_namespaces`` (empty: one cluster-wide watch per kind) and
    ``status_min_interval`` from the settings.
    """

    def __init__(self, settings: AgentSettings, deps: Deps) -> None:
        self.site = settings.site
        self.namespaces = settings.target_namespaces
        self.kube = deps.kube
        self.desires = deps.desires
        """What drift is measured from (``agent.tcp.desires``): the apply and cleanup loops fill it."""
        self._tcps = cache.Tcps(site=settings.site, changed=self._schedule)
        self._secrets = cache.Secrets(self._tcps)
        self._due = Schedule(settings.status_min_interval)
        self._syncer = syncing.Syncer(
            deps, tcp_cache=self._tcps, secret_cache=self._secrets, schedule=self._due
        )
        self._unsynced = {(kind, ns) for kind in WATCHED for ns in self._scopes()}
        self._synced = asyncio.Event()
        # Counted when scraped, not on every watch event (that was O(TCPs) per event).
        deps.metrics.managed_tcps.set_function(self._tcps.count)

    @property
    def restore(self) -> Restore | None:
        """Asked (namespace, name, its last annotations) when a managed TCP vanished that no
        delete intent removed: it recreates the TCP from the latest intent if that still says
        provision for its owner (the cleanup loop's ``restore``), and answers whether it did.
        None: every vanished TCP is reported Deleted."""
        return self._syncer.restore

    @restore.setter
    def restore(self, restore: Restore | None) -> None:
        self._syncer.restore = restore

    @property
    def revert(self) -> Revert | None:
        """Asked (namespace, name) when a managed TCP's owned fields no longer hold what we
        applied (``managed.drifted``, checked on every watch event): it reverts them to the latest
        intent (the cleanup loop's ``revert``), so an edit at the site is undone within a second,
        not at the next anti-entropy pass. None: drift waits for that pass."""
        return self._syncer.revert

    @revert.setter
    def revert(self, revert: Revert | None) -> None:
        self._syncer.revert = revert

    # Public API

    async def run(self) -> None:
        """Watch and publish until cancelled."""
        work: dict[str, Callable[[], Awaitable[None]]] = {"status-publishing": self._publishing}
        for ns in self._scopes():
            for kind in WATCHED:
                work[f"status-{kind}s-{ns}"] = functools.partial(self._inform, kind, ns)
        group = aiotasks.Group()
        for name, task in work.items():
            # A bug in handling one object must not stop reporting: the task starts again.
            group.supervise(name, task)
        await group.run()

    def deleting(self, namespace: str, name: str, intent_seq: int) -> None:
        """The apply loop deletes this TCP for the delete intent ``intent_seq``.

        The Deleted this loop publishes when the TCP vanishes then answers that intent. One
        Deleted per TCP, from one place: two publishers (this loop and the apply loop) could reach
        the hub in either order, and the hub purges the subjects at the first one it accepts.
        """
        self._syncer.delete_seq[(namespace, name)] = intent_seq

    def known(self, namespace: str, name: str) -> bool | None:
        """Whether the cache holds a managed TCP ``namespace``/``name`` that is not gone; None
        while it cannot say: before every watch delivered its first list, or for a namespace
        no watch covers. The apply loop creates without reading first on a False."""
        if not self._synced.is_set() or (self.namespaces and namespace not in self.namespaces):
            return None
        entry = self._tcps.entries.get((namespace, name))
        return entry is not None and entry.tcp is not None

    def counts(self) -> tuple[int, int]:
        """(managed, ready): TCPs of this site the loop knows, and those Kamaji reports Ready."""
        present = self._tcps.present()
        ready = sum(1 for t in present if report.phase_of(t)[0] == "Ready")
        return len(present), ready

    async def wait_synced(self) -> None:
        """Return once every watch has delivered its first full list (the cache is complete)."""
        await self._synced.wait()

    async def republish_all(self) -> int:
        """Anti-entropy: publish the Status of every managed TCP now, changed or not.

        SealedSecrets go out only where the plaintext (or the hub's sealing key) changed since
        the last acknowledged publish. Returns the number of Statuses published by this call.
        On a bus error it returns early: the rest stays scheduled with ``force`` and the
        publishing task delivers it with backoff (this call never blocks on a broken bus).
        Before the first list completes there is nothing to republish: that list publishes all.
        """
        for entry in self._tcps.entries.values():
            entry.force = True
        keys = iter(list(self._tcps.entries))
        published, failed = await self._sync_many(keys)
        if failed:
            for rest in keys:
                self._schedule(rest)
        return published

    async def _sync_many(self, keys: Iterator[cache.Key]) -> tuple[int, bool]:
        """Sync ``keys``, up to ``SYNC_CONCURRENCY`` at a time (their publishes share the
        connection's writes and wait for their answers together): the Statuses published, and
        whether the bus failed, which stops it, leaving the keys not reached in ``keys``."""
        published = 0
        while chunk := list(itertools.islice(keys, SYNC_CONCURRENCY)):
            done = await asyncio.gather(*(self._syncer.sync(key) for key in chunk))
            published += sum(n for n in done if n is not None)
            if None in done:
                # The bus is failing: pause everything, not only these; one failure for the round.
                self._due.failures += 1
                return published, True
            self._due.failures = 0
        return published, False

    # Watching

    def _scopes(self) -> tuple[str | None, ...]:
        return self.namespaces or (None,)

    async def _inform(self, kind: str, ns: str | None) -> None:
        """Feed the cache of ``kind`` (``WATCHED``) from its resource in ``ns``."""
        watched: dict[str, tuple[resources.Resource, informer.Sink, str]] = {
            "tcp": (managed.TCP, self._tcps, managed.selector(self.site)),
            "secret": (resources.SECRET, self._secrets, SECRET_SELECTOR),
        }
        r, sink, selector = watched[kind]
        await informer.inform(
            self.kube,
            r,
            sink,
            namespace=ns,
            label_selector=selector,
            synced=lambda: self._mark_synced(kind, ns),
        )

    def _mark_synced(self, kind: str, namespace: str | None) -> None:
        self._unsynced.discard((kind, namespace))
        if not self._unsynced:
            self._synced.set()

    # Publishing

    def _schedule(self, key: cache.Key) -> None:
        entry = self._tcps.entries.get(key)
        self._due.add(key, last_publish=entry.last_publish if entry is not None else -math.inf)

    async def _publishing(self) -> None:
        while True:
            await self._sync_many(self._due.take())  # what it does not reach stays scheduled
            await self._due.wait()
