"""The status loop's sync of one TCP: publish its Status and SealedSecrets if they changed.

Owns how one sync goes: the TCP's report is decided by the pure ``agent.status.report`` from
the cache (``agent.status.cache``) at the moment the sync runs, published through
``agent.publishing.Publisher``, and a failure is rescheduled on the ``Schedule`` with backoff
(the bus failing pauses every sync; anything else retries only this TCP). A managed TCP that
vanished without a delete intent is handed to ``restore``, one whose owned fields drifted to
``revert`` (both the cleanup loop's). Logs name coordinates and subjects, never Secret content.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agent.deps import Deps
from agent.status import cache, report
from agent.status.schedule import Schedule, retry_delay
from agent.tcp import managed
from common import aiotasks, logs
from common.bus import errors
from common.kube import errors as kerrors
from protocol import errors as protocol_errors
from protocol import messages, names
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)

Key = cache.Key


class Syncer:
    """Syncs one TCP at a time (``sync``), for the publishing task and for ``republish_all``."""

    def __init__(
        self,
        deps: Deps,
        *,
        tcp_cache: cache.Tcps,
        secret_cache: cache.Secrets,
        schedule: Schedule,
    ) -> None:
        self.deps = deps
        self.tcp_cache = tcp_cache
        self.secret_cache = secret_cache
        self.schedule = schedule
        self.site = tcp_cache.site
        self.delete_seq: dict[Key, int] = {}
        """Delete intents the apply loop is carrying out, by TCP (``StatusLoop.deleting``)."""
        self.locks = aiotasks.KeyedLocks()
        """One per TCP, held for its sync: syncs of different TCPs run concurrently (their
        publishes share the connection's writes), two of one TCP never interleave."""
        self.restore: Callable[[str, str, managed.Applied | None], Awaitable[bool]] | None = None
        """See ``StatusLoop.restore``."""
        self.revert: Callable[[str, str], Awaitable[bool]] | None = None
        """See ``StatusLoop.revert``."""

    async def sync(self, key: Key) -> int | None:
        """Publish what changed for one TCP: the number of Statuses published, None when the bus
        failed (the TCP stays scheduled, with backoff)."""
        async with self.locks.hold(key):
            entry = self.tcp_cache.entries.get(key)
            if entry is None:
                return 0
            try:
                published = await self._sync_entry(key, entry)
            except errors.QuotaExceeded as exc:
                # This TCP's message does not fit the site's quota (a new subject in a full
                # stream, a box over the size limit): retry it later, keep reporting the others,
                # whose updates replace messages already stored and still fit.
                delay = self._retry(key, entry)
                log.error(
                    "status of tcp %s/%s not published: %s; retrying in %.1fs",
                    *key,
                    exc,
                    delay,
                    extra=self._about(key),
                )
                return 0
            except errors.BusError as exc:
                # The round's syncs fail together: the caller counts the round once
                # (``Schedule.failures``), so sixty-four failures at once are one failure.
                entry.failures += 1
                delay = retry_delay(max(self.schedule.failures + 1, entry.failures))
                self.schedule.pause(delay)
                self.schedule.retry(key, delay)
                log.warning(
                    "status of tcp %s/%s not published (%s); retrying in %.1fs",
                    *key,
                    exc,
                    delay,
                    extra=self._about(key),
                )
                return None
            except Exception:
                # A bug or an object we cannot read: retry this TCP later, keep reporting the others.
                delay = self._retry(key, entry)
                log.exception(
                    "status of tcp %s/%s failed; retrying in %.1fs", *key, delay, extra=self._about(key)
                )
                return 0
            entry.failures = 0
            return published

    def _about(self, key: Key, *, seq: int | None = None) -> dict[str, Any]:
        return logs.about_tcp(Coordinates(self.site, *key), seq=seq)

    def _retry(self, key: Key, entry: cache.Entry) -> float:
        entry.failures += 1
        delay = retry_delay(entry.failures)
        self.schedule.retry(key, delay)
        return delay

    async def _sync_entry(self, key: Key, entry: cache.Entry) -> int:
        """The number of Statuses published (0 or 1)."""
        if entry.tcp is None:
            published = await self._sync_gone(key, entry)
            # A TCP of the same name may have come back meanwhile: it has its own sync.
            if entry.tcp is None and self.tcp_cache.entries.get(key) is entry:
                del self.tcp_cache.entries[key]
            return published
        tcp = entry.tcp
        now = messages.utcnow()
        checksum = await self._sync_secrets(key, entry, tcp, now=now)
        applied = managed.applied(tcp, site=self.site)
        desires, ours = self.deps.desires, applied or managed.Applied("", 0, 0, "")
        desired = desires.spec(*key, seq=ours.intent_seq, owner_uid=ours.owner_uid) if applied else None
        status = report.new_status(tcp, site=self.site, now=now, secrets_checksum=checksum, desired=desired)
        published = 0
        if entry.force or report.significant(status) != entry.sent:
            await self._publish_status(key, entry, status, about=cache.version(tcp))
            published = 1
        if status.reason == report.DRIFTED:
            # Reported first: the hub shows Drifted, not Ready, until the revert's own watch
            # event reports the TCP as it is again.
            await self._revert(key, entry)
        return published

    async def _sync_gone(self, key: Key, entry: cache.Entry) -> int:
        """Report a vanished TCP Deleted, unless ``restore`` brings it back: 1 if reported."""
        if not entry.gone:
            return 0
        if key not in self.delete_seq and await self._restored(key):
            # Recreated from the intent that still says provision: no Deleted
            # for the hub, the new TCP's own events report it from Pending on.
            return 0
        namespace, name = key
        applied = entry.applied
        status = report.deleted_status(
            site=self.site,
            namespace=namespace,
            name=name,
            owner_uid=applied.owner_uid if applied else "",
            intent_seq=max(applied.intent_seq if applied else 0, self.delete_seq.pop(key, 0)),
            now=messages.utcnow(),
        )
        await self._publish_status(key, entry, status, about=f"deleted-{entry.uid}")
        self.deps.desires.forget(namespace, name, up_to=status.intent_seq)
        return 1

    async def _revert(self, key: Key, entry: cache.Entry) -> None:
        if self.revert is None:
            return
        try:
            await self.revert(*key)
        except (errors.BusError, kerrors.KubeError) as exc:
            delay = self._retry(key, entry)
            log.warning(
                "drift of tcp %s/%s not reverted: %s; retrying in %.1fs",
                *key,
                exc,
                delay,
                extra=self._about(key),
            )

    async def _restored(self, key: Key) -> bool:
        """Whether ``restore`` brought the vanished TCP back (or it is back already)."""
        if self.restore is None:
            return False
        try:
            entry = self.tcp_cache.entries.get(key)
            return await self.restore(*key, entry.applied if entry is not None else None)
        except (errors.BusError, kerrors.KubeError) as exc:
            # The Deleted goes out instead: the hub, still wanting the TCP, publishes its intent again.
            log.warning(
                "tcp %s/%s vanished and could not be recreated: %s", *key, exc, extra=self._about(key)
            )
            return False

    async def _sync_secrets(
        self, key: Key, entry: cache.Entry, tcp: dict[str, Any], *, now: dt.datetime
    ) -> str:
        """Publish the sealed Secrets if their plaintext changed; the plaintext's checksum ("" if none)."""
        namespace, name = key
        applied = managed.applied(tcp, site=self.site)
        if applied is None:
            return ""
        kubeconfig = self.secret_cache.owned(namespace, names.kamaji_kubeconfig(name), tcp)
        ca = self.secret_cache.owned(namespace, names.kamaji_ca(name), tcp)
        plaintext = report.payload(kubeconfig, ca, key=applied.kubeconfig_key)
        if plaintext is None:
            return ""
        checksum = report.checksum(plaintext)
        try:
            recipient = self.deps.hub_keys.newest_sealing()
        except protocol_errors.SealError as exc:
            # A configuration error (no sealing key): the Status still goes, without secrets.
            log.error(
                "sealed secrets of tcp %s/%s not published: %s", namespace, name, exc, extra=self._about(key)
            )
            return checksum
        if entry.sealed == (checksum, recipient.key_id):
            return checksum
        sealed = report.new_sealed(tcp, plaintext, site=self.site, recipient=recipient, now=now)
        about = f"{cache.version(kubeconfig)}-{cache.version(ca)}"
        ack = await self.deps.publisher.sealed(sealed, about=about)
        entry.sealed = (checksum, recipient.key_id)
        entry.last_publish = asyncio.get_running_loop().time()
        self.deps.metrics.secrets_published.inc()
        duplicate = ", duplicate" if ack.duplicate else ""
        log.info(
            "sealed secrets of tcp %s/%s published to key %s (stream seq %d%s)",
            *key,
            recipient.key_id,
            ack.seq,
            duplicate,
            extra=self._about(key, seq=ack.seq),
        )
        return checksum

    async def _publish_status(
        self, key: Key, entry: cache.Entry, status: messages.Status, *, about: str
    ) -> None:
        ack = await self.deps.publisher.status(status, about=about)
        changed_phase = entry.sent is None or entry.sent[0] != status.phase
        entry.sent = report.significant(status)
        entry.force = False
        entry.last_publish = asyncio.get_running_loop().time()
        self.deps.metrics.status_published.inc()
        log.log(
            logging.INFO if changed_phase else logging.DEBUG,
            "status of tcp %s/%s published: %s (%s), stream seq %d",
            *key,
            status.phase,
            status.reason,
            ack.seq,
            extra=self._about(key, seq=ack.seq),
        )
