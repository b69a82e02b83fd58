"""The status loop's shell: watch managed TCPs and their Secrets, publish Status and SealedSecrets.

Owns an in-memory cache fed by ``common.kube.watching.stream`` (one TCP stream and one Secret
stream per target namespace, or one of each cluster-wide), a schedule of TCPs whose report may
have changed, and one publishing task that works through it. Decisions come from the pure
``agent.status.report``; messages leave through ``agent.publishing.Publisher``.

Why one publishing task: every publish for a TCP happens in order and reads the cache at the
moment it runs, so the last observed state always wins and a burst of events costs one publish
per ``min_interval`` (the trailing one after the window carries the final state). A publish
that fails stays scheduled and is retried with backoff; the loop never ends on an error.

Talks to: the Kubernetes API (list/watch TCPs and Secrets, nothing else), NATS through the
Publisher. Logs name coordinates and subjects only, never Secret content.

A managed TCP that vanishes without a delete intent (a site admin deleted it) is not reported
Deleted while the latest intent still says provision: ``restore`` (the cleanup loop's) creates
it again, right from the watch event. Likewise a TCP whose owned fields were edited at the site
(``tcps.drifted``) is reported NotReady/Drifted and ``revert`` (the cleanup loop's) applies the
latest intent again, right from the watch event.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from agent import metrics as agent_metrics
from agent import publishing, tcps
from agent.status import report
from common import aiotasks, backoff
from common.bus import errors
from common.kube import Kube, WatchEvent, resources, watching
from common.kube import errors as kerrors
from protocol import errors as protocol_errors
from protocol import keys, messages

log = logging.getLogger(__name__)

SECRET_SELECTOR: Final = "kamaji.clastix.io/project=kamaji"
"""Kamaji labels every Secret it generates so; watching only those keeps other Secrets out."""

_BACKOFF_BASE: Final = 0.5
_BACKOFF_CAP: Final = 30.0

Key = tuple[str, str]
"""(namespace, name) of a TCP, or of a Secret in the Secret cache."""


def _backoff(failures: int) -> float:
    # Jitter, so that many agents that lost NATS together do not come back in step.
    return backoff.delay(failures, base=_BACKOFF_BASE, cap=_BACKOFF_CAP)


def _key(obj: Mapping[str, Any]) -> Key:
    meta = tcps.meta(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _version(obj: Mapping[str, Any] | None) -> str:
    return str(tcps.meta(obj).get("resourceVersion") or "") if obj is not None else ""


def _in_scope(key: Key, namespace: str | None) -> bool:
    return namespace is None or key[0] == namespace


@dataclass
class _Entry:
    """What the loop knows about one managed TCP, and what it last told the hub about it."""

    tcp: dict[str, Any] | None = None
    """The latest object; None once it is gone (then ``gone`` says a Deleted is owed)."""
    gone: bool = False
    applied: tcps.Applied | None = None
    """The last annotations seen: a Deleted names the owner of the TCP that disappeared."""
    uid: str = ""
    sent: report.Significant | None = None
    sealed: tuple[str, str] | None = None
    """(plaintext checksum, recipient key id) of the last SealedSecrets the server acknowledged."""
    last_publish: float = -math.inf
    failures: int = 0
    force: bool = False
    """Publish the Status even when unchanged (anti-entropy asked for it and it is not yet done)."""


class StatusLoop:
    """Report every managed TCP of ``site`` to the hub (DESIGN §5 agent 2, issue 4 §4)."""

    def __init__(
        self,
        *,
        kube: Kube,
        publisher: publishing.Publisher,
        site: str,
        hub_keys: keys.HubPublicKeys,
        metrics: agent_metrics.Metrics,
        namespaces: tuple[str, ...] = (),
        min_interval: float = 0.5,
        secret_selector: str = SECRET_SELECTOR,
    ) -> None:
        self.kube = kube
        self.publisher = publisher
        self.site = site
        self.hub_keys = hub_keys
        self.metrics = metrics
        self.namespaces = namespaces
        """Target namespaces; empty means all (one cluster-wide watch per kind)."""
        self.min_interval = min_interval
        """Seconds: at most one publish per TCP per window; the last state goes out after it."""
        self.secret_selector = secret_selector
        self._entries: dict[Key, _Entry] = {}
        self._delete_seq: dict[Key, int] = {}
        """Delete intents the apply loop is carrying out, by TCP (see ``deleting``)."""
        self._secrets: dict[Key, dict[str, Any]] = {}
        self._due: dict[Key, float] = {}
        """TCPs to sync, with the loop time from which they may be synced."""
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        """Held for one TCP's sync, so the publishing task and republish_all never interleave."""
        self._failures = 0
        self._paused_until = 0.0
        self._published = 0
        """Statuses published since start (a sync counts its own from it, under the lock)."""
        self._unsynced = {(kind, ns) for kind in ("tcp", "secret") for ns in self._scopes()}
        self._synced = asyncio.Event()
        self.restore: Callable[[str, str, tcps.Applied | None], Awaitable[bool]] | None = None
        """Asked (namespace, name, its last annotations) when a managed TCP vanished that no
        delete intent removed: it recreates the TCP from the latest intent if that still says
        provision for its owner (the cleanup loop's ``restore``), and answers whether it did.
        None: every vanished TCP is reported Deleted."""
        self.revert: Callable[[str, str], Awaitable[bool]] | None = None
        """Asked (namespace, name) when a managed TCP's owned fields no longer hold what we
        applied (``tcps.drifted``, checked on every watch event): it reverts them to the latest
        intent (the cleanup loop's ``revert``), so an edit at the site is undone within a second,
        not at the next anti-entropy pass. None: drift waits for that pass."""
        # Counted when scraped, not on every watch event (that was O(TCPs) per event).
        metrics.managed_tcps.set_function(self._count_managed)

    # Public API

    async def run(self) -> None:
        """Watch and publish until cancelled."""
        async with asyncio.TaskGroup() as group:
            for namespace in self._scopes():
                group.create_task(self._forever(self._watch_tcps, namespace), name=f"status-tcps-{namespace}")
                group.create_task(
                    self._forever(self._watch_secrets, namespace), name=f"status-secrets-{namespace}"
                )
            group.create_task(self._forever(self._publishing), name="status-publishing")

    def deleting(self, namespace: str, name: str, intent_seq: int) -> None:
        """The apply loop deletes this TCP for the delete intent ``intent_seq``.

        The Deleted this loop publishes when the TCP vanishes then answers that intent. One
        Deleted per TCP, from one place: two publishers (this loop and the apply loop) could reach
        the hub in either order, and the hub purges the subjects at the first one it accepts.
        """
        self._delete_seq[(namespace, name)] = intent_seq

    def counts(self) -> tuple[int, int]:
        """(managed, ready): TCPs of this site the loop knows, and those Kamaji reports Ready."""
        present = [e.tcp for e in self._entries.values() if e.tcp is not None]
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
        for entry in self._entries.values():
            entry.force = True
        published = 0
        keys_now = list(self._entries)
        for i, key in enumerate(keys_now):
            done = await self._sync(key)
            if done is None:
                for rest in keys_now[i + 1 :]:
                    self._schedule(rest)
                break
            published += done
        return published

    # Watching

    def _scopes(self) -> tuple[str | None, ...]:
        return self.namespaces or (None,)

    async def _forever(self, work: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run ``work`` again whenever it ends: a bug in handling one object must not stop reporting."""
        failures = 0
        while True:
            try:
                await work(*args)
            except Exception:
                failures += 1
                log.exception("status loop: %s failed; restarting it", getattr(work, "__name__", work))
                await asyncio.sleep(_backoff(failures))

    async def _watch_tcps(self, namespace: str | None) -> None:
        events = watching.stream(
            self.kube, tcps.TCP, namespace=namespace, label_selector=tcps.selector(self.site)
        )
        async with contextlib.aclosing(events):
            async for item in events:
                if isinstance(item, watching.Synced):
                    self._tcps_listed(namespace, item.items)
                    self._mark_synced("tcp", namespace)
                else:
                    self._tcp_event(item)

    async def _watch_secrets(self, namespace: str | None) -> None:
        events = watching.stream(
            self.kube, resources.SECRET, namespace=namespace, label_selector=self.secret_selector or None
        )
        async with contextlib.aclosing(events):
            async for item in events:
                if isinstance(item, watching.Synced):
                    self._secrets_listed(namespace, item.items)
                    self._mark_synced("secret", namespace)
                else:
                    self._secret_event(item)

    def _mark_synced(self, kind: str, namespace: str | None) -> None:
        self._unsynced.discard((kind, namespace))
        if not self._unsynced:
            self._synced.set()

    def _tcps_listed(self, namespace: str | None, items: Iterable[dict[str, Any]]) -> None:
        present = {_key(obj): obj for obj in items}
        for key, entry in list(self._entries.items()):
            # Gone while we were not watching: the relist is the only news of it.
            if _in_scope(key, namespace) and entry.tcp is not None and key not in present:
                self._gone(key)
        for key, obj in present.items():
            self._seen(key, obj)

    def _tcp_event(self, event: WatchEvent) -> None:
        key = _key(event.object)
        if event.type == "DELETED":
            self._gone(key)
        elif event.type in ("ADDED", "MODIFIED"):
            self._seen(key, event.object)

    def _seen(self, key: Key, obj: dict[str, Any]) -> None:
        entry = self._entries.setdefault(key, _Entry())
        entry.tcp, entry.gone = obj, False
        entry.uid = str(tcps.meta(obj).get("uid") or "")
        entry.applied = tcps.applied(obj, site=self.site) or entry.applied
        self._schedule(key)

    def _gone(self, key: Key) -> None:
        entry = self._entries.get(key)
        if entry is None:
            return
        entry.tcp, entry.gone = None, True
        self._schedule(key)

    def _secrets_listed(self, namespace: str | None, items: Iterable[dict[str, Any]]) -> None:
        present = {_key(obj): obj for obj in items if report.tcp_names_of_secret(_key(obj)[1])}
        touched = {k for k in self._secrets if _in_scope(k, namespace) and k not in present}
        touched |= {k for k, obj in present.items() if _version(self._secrets.get(k)) != _version(obj)}
        for key in [k for k in self._secrets if _in_scope(k, namespace)]:
            del self._secrets[key]
        self._secrets.update(present)
        for key in touched:
            self._secret_touched(key)

    def _secret_event(self, event: WatchEvent) -> None:
        key = _key(event.object)
        if not report.tcp_names_of_secret(key[1]):
            return
        if event.type == "DELETED":
            self._secrets.pop(key, None)
        elif event.type in ("ADDED", "MODIFIED"):
            self._secrets[key] = event.object
        else:
            return
        self._secret_touched(key)

    def _secret_touched(self, secret_key: Key) -> None:
        namespace, name = secret_key
        for tcp_name in report.tcp_names_of_secret(name):
            if (namespace, tcp_name) in self._entries:
                self._schedule((namespace, tcp_name))

    def _count_managed(self) -> float:
        return float(sum(1 for e in self._entries.values() if e.tcp is not None))

    # Publishing

    def _schedule(self, key: Key) -> None:
        """Sync ``key`` as soon as its window allows; an already scheduled sync will see the news."""
        if key in self._due:
            return
        entry = self._entries.get(key)
        window = entry.last_publish + self.min_interval if entry is not None else 0.0
        self._due[key] = max(asyncio.get_running_loop().time(), window)
        self._wake.set()

    async def _publishing(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            # Cleared before the scan: anything scheduled meanwhile sets it and ends the wait.
            self._wake.clear()
            now = loop.time()
            if now >= self._paused_until:
                for key in [k for k, at in self._due.items() if at <= now]:
                    self._due.pop(key, None)
                    if await self._sync(key) is None:
                        break  # the bus is failing: pause everything, not only this TCP
            now = loop.time()
            wake_at = min(self._due.values(), default=math.inf)
            if self._paused_until > now:
                wake_at = max(wake_at, self._paused_until)
            timeout = None if wake_at == math.inf else max(0.0, wake_at - now)
            await aiotasks.wait_event(self._wake, timeout)

    async def _sync(self, key: Key) -> int | None:
        """Publish what changed for one TCP: the number of Statuses published, None when the bus
        failed (the TCP stays scheduled, with backoff)."""
        async with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return 0
            before = self._published
            try:
                await self._sync_entry(key, entry)
            except errors.QuotaExceeded as exc:
                # This TCP's message does not fit the site's quota (a new subject in a full
                # stream, a box over the size limit): retry it later, keep reporting the others,
                # whose updates replace messages already stored and still fit.
                entry.failures += 1
                delay = _backoff(entry.failures)
                self._due[key] = asyncio.get_running_loop().time() + delay
                log.error("status of tcp %s/%s not published: %s; retrying in %.1fs", *key, exc, delay)
                return 0
            except errors.BusError as exc:
                self._failures += 1
                entry.failures += 1
                delay = _backoff(max(self._failures, entry.failures))
                now = asyncio.get_running_loop().time()
                self._paused_until = now + delay
                self._due[key] = now + delay
                log.warning("status of tcp %s/%s not published (%s); retrying in %.1fs", *key, exc, delay)
                return None
            except Exception:
                # A bug or an object we cannot read: retry this TCP later, keep reporting the others.
                entry.failures += 1
                delay = _backoff(entry.failures)
                self._due[key] = asyncio.get_running_loop().time() + delay
                log.exception("status of tcp %s/%s failed; retrying in %.1fs", *key, delay)
                return 0
            self._failures = 0
            entry.failures = 0
            return self._published - before

    async def _sync_entry(self, key: Key, entry: _Entry) -> None:
        namespace, name = key
        now = messages.utcnow()
        if entry.tcp is None:
            if entry.gone and key not in self._delete_seq and await self._restored(key):
                # Recreated from the intent that still says provision (issue 11 §1): no Deleted
                # for the hub, the new TCP's own events report it from Pending on.
                if entry.tcp is None:
                    del self._entries[key]
                return
            if entry.gone:
                applied = entry.applied
                status = report.deleted_status(
                    site=self.site,
                    namespace=namespace,
                    name=name,
                    owner_uid=applied.owner_uid if applied else "",
                    intent_seq=max(applied.intent_seq if applied else 0, self._delete_seq.pop(key, 0)),
                    now=now,
                )
                await self._publish_status(key, entry, status, about=f"deleted-{entry.uid}")
            # A TCP of the same name may have come back while we published: it has its own sync.
            if entry.tcp is None:
                del self._entries[key]
            return
        tcp = entry.tcp
        checksum = await self._sync_secrets(key, entry, tcp, now=now)
        status = report.new_status(tcp, site=self.site, now=now, secrets_checksum=checksum)
        if entry.force or report.significant(status) != entry.sent:
            await self._publish_status(key, entry, status, about=_version(tcp))
        if status.reason == report.DRIFTED:
            # Reported first: the hub shows Drifted, not Ready, until the revert's own watch
            # event reports the TCP as it is again.
            await self._revert(key, entry)

    async def _revert(self, key: Key, entry: _Entry) -> None:
        if self.revert is None:
            return
        try:
            await self.revert(*key)
        except (errors.BusError, kerrors.KubeError) as exc:
            entry.failures += 1
            delay = _backoff(entry.failures)
            self._due[key] = asyncio.get_running_loop().time() + delay
            log.warning("drift of tcp %s/%s not reverted: %s; retrying in %.1fs", *key, exc, delay)

    async def _restored(self, key: Key) -> bool:
        """Whether ``restore`` brought the vanished TCP back (or it is back already)."""
        if self.restore is None:
            return False
        try:
            entry = self._entries.get(key)
            return await self.restore(*key, entry.applied if entry is not None else None)
        except (errors.BusError, kerrors.KubeError) as exc:
            # The Deleted goes out instead: the hub, still wanting the TCP, publishes its intent again.
            log.warning("tcp %s/%s vanished and could not be recreated: %s", *key, exc)
            return False

    async def _sync_secrets(self, key: Key, entry: _Entry, tcp: dict[str, Any], *, now: dt.datetime) -> str:
        """Publish the sealed Secrets if their plaintext changed; the plaintext's checksum ("" if none)."""
        namespace, name = key
        applied = tcps.applied(tcp, site=self.site)
        if applied is None:
            return ""
        kubeconfig = self._owned_secret(namespace, report.kubeconfig_secret_name(name), tcp)
        ca = self._owned_secret(namespace, report.ca_secret_name(name), tcp)
        plaintext = report.payload(kubeconfig, ca, key=applied.kubeconfig_key)
        if plaintext is None:
            return ""
        checksum = report.checksum(plaintext)
        try:
            recipient = self.hub_keys.newest_sealing()
        except protocol_errors.SealError as exc:
            # A configuration error (no sealing key): the Status still goes, without secrets.
            log.error("sealed secrets of tcp %s/%s not published: %s", namespace, name, exc)
            return checksum
        if entry.sealed == (checksum, recipient.key_id):
            return checksum
        sealed = report.new_sealed(tcp, plaintext, site=self.site, recipient=recipient, now=now)
        ack = await self.publisher.sealed(sealed, about=f"{_version(kubeconfig)}-{_version(ca)}")
        entry.sealed = (checksum, recipient.key_id)
        entry.last_publish = asyncio.get_running_loop().time()
        self.metrics.secrets_published.inc()
        log.info(
            "sealed secrets of tcp %s/%s published to key %s (stream seq %d%s)",
            namespace,
            name,
            recipient.key_id,
            ack.seq,
            ", duplicate" if ack.duplicate else "",
        )
        return checksum

    def _owned_secret(self, namespace: str, name: str, tcp: Mapping[str, Any]) -> dict[str, Any] | None:
        secret = self._secrets.get((namespace, name))
        return secret if secret is not None and report.belongs(secret, tcp) else None

    async def _publish_status(self, key: Key, entry: _Entry, status: messages.Status, *, about: str) -> None:
        ack = await self.publisher.status(status, about=about)
        changed_phase = entry.sent is None or entry.sent[0] != status.phase
        entry.sent = report.significant(status)
        entry.force = False
        entry.last_publish = asyncio.get_running_loop().time()
        self._published += 1
        self.metrics.status_published.inc()
        log.log(
            logging.INFO if changed_phase else logging.DEBUG,
            "status of tcp %s/%s published: %s (%s), stream seq %d",
            *key,
            status.phase,
            status.reason,
            ack.seq,
        )
