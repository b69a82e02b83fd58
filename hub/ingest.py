"""The hub's reading of statuses and sealed secrets from the bus into ``hub.observations``.

Talks to NATS through ``common.bus`` only: the durable consumer ``hub`` on every known site's
own stream (``KB_SITE_<site>``), which the hub creates with ``ensure_topology`` before this runs,
and the streams' last message per subject (``load``) so a restarted hub, whose consumers do
not redeliver what was acknowledged before, rebuilds its view without waiting for news.

Every message is checked against its subject; one for coordinates no RKCP maps to (``maps``) is
acknowledged and counted, never decoded, opened or kept: the stream is the compacted log and
keeps it, and ``load`` reads it back when an RKCP appears. The hub's memory is only a cache of
what RKCPs need, so a site cannot grow it by publishing (issue 10). The rest is decoded, opened
(secrets), recorded, announced through ``on_change`` and only then acknowledged. What cannot be
used is terminated (never redelivered), counted in ``kb_hub_bus_rejected_total{stream,reason}``
(the stream names the site) and logged with its subject; nothing here ever logs or counts secret
material.

Sealed secrets are opened on arrival only to know whether they open (``SecretsSynced`` says
``DecryptFailed`` at once); the payload is not kept. ``open_latest`` is the one way to the
plaintext: it fetches the box from the stream (the last message on its subject), records it
and opens it, for the controller to write at once. So acknowledging a box never risks it: a hub
that dies before writing it reads it again from the stream (issue 11 §2).

Memory: a site's messages are at most ``protocol.streams.MAX_MSG_SIZE`` (the server refuses
larger ones), and each site's consumer fetches at most ``batch`` at a time, so messages in
flight are bounded by sites * batch * message size; what is kept is bounded by the RKCPs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from common import backoff, bus
from common.bus import errors as bus_errors
from hub import metrics as hub_metrics
from hub import observations
from protocol import errors as protocol_errors
from protocol import messages, sealing, streams, subjects
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)

DECODE_ERROR = "DecodeError"
BAD_SUBJECT = "BadSubject"
UNMAPPED = "Unmapped"
"""A message for coordinates no RKCP maps to: acknowledged, counted, never opened or kept."""


class Ingest:
    def __init__(
        self,
        *,
        conn: bus.Connection,
        observations: observations.Observations,
        keyring: sealing.Keyring,
        prefix: str = subjects.DEFAULT_PREFIX,
        metrics: hub_metrics.Metrics,
        on_change: Callable[[Coordinates], None],
        sites: Callable[[], Iterable[str]],
        maps: Callable[[Coordinates], bool],
        batch: int = 16,
        fetch_timeout: float = 2.0,
        max_backoff: float = 10.0,
        rescan_interval: float = 2.0,
    ) -> None:
        self.conn = conn
        self.observations = observations
        self.keyring = keyring
        self.prefix = prefix
        self.metrics = metrics
        self.on_change = on_change
        self.sites = sites
        """The sites whose streams are consumed (the controller's ``known_sites``)."""
        self.maps = maps
        """Whether an RKCP maps to these coordinates: only then is a message decoded and kept."""
        self.batch = batch
        """Messages per fetch and site: with 64 KiB messages, 16 keep 1 MiB in flight per site."""
        self.fetch_timeout = fetch_timeout
        self.max_backoff = max_backoff
        self.rescan_interval = rescan_interval
        """Seconds between looks at ``sites`` (a new site's consumer is bound within this)."""

    def _stream(self, site: str) -> str:
        return streams.site_stream_name(site, prefix=self.prefix)

    # -- consuming -------------------------------------------------------------------------

    async def run(self) -> None:
        """Forever: consume every known site's stream, each site in a task of its own that
        rebinds after errors; sites that appear get a task, sites that go lose theirs. Also drops
        what is held for coordinates no RKCP maps to any more."""
        tasks: dict[str, asyncio.Task[None]] = {}
        try:
            while True:
                self._rescan(tasks)
                self.observations.retain(self.maps)
                await asyncio.sleep(self.rescan_interval)
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)

    def _rescan(self, tasks: dict[str, asyncio.Task[None]]) -> None:
        try:
            names = set(self.sites())
        except Exception:
            log.exception("listing the known sites failed; consuming the previous ones")
            names = set(tasks)
        for site in sorted(set(tasks) - names):
            tasks.pop(site).cancel()
        for site in sorted(names):
            task = tasks.get(site)
            if task is not None and not task.done():
                continue
            if task is not None and not task.cancelled() and task.exception() is not None:
                log.error("consuming site %s stopped: %r; restarting", site, task.exception())
            try:
                definition = streams.hub_consumer(site, prefix=self.prefix)
            except protocol_errors.SubjectError as exc:
                log.warning("site %r cannot be consumed: %s", site, exc)
                continue
            tasks[site] = asyncio.create_task(self._consume_forever(definition), name=f"ingest {site}")

    async def _consume_forever(self, definition: streams.ConsumerDef) -> None:
        failures = 0
        while True:
            consumer = await self._bind(definition)
            try:
                while True:
                    deliveries = await consumer.fetch(self.batch, timeout=self.fetch_timeout)
                    failures = 0
                    for delivery in deliveries:
                        await self.handle(delivery)
            except bus_errors.BusError as exc:
                failures += 1
                log.warning("consuming %s/%s: %s; rebinding", definition.stream, definition.durable_name, exc)
                await asyncio.sleep(self._backoff(failures))
            finally:
                await consumer.unsubscribe()

    async def handle(self, delivery: bus.Delivery) -> None:
        """Record one delivery of a site's ``hub`` consumer, then settle it: ack what was recorded,
        superseded or is for coordinates no RKCP maps to, terminate what can never be used."""
        parsed = self._parse(delivery.stream, delivery.subject)
        if parsed is None or parsed.kind not in (subjects.Kind.STATUS, subjects.Kind.SECRET):
            # Only statuses and sealed secrets are delivered (the consumer's filter).
            usable = False
        else:
            coords = Coordinates(parsed.site, parsed.namespace, parsed.name)
            if not self.maps(coords):
                # Kept by the stream, not by us: ``load`` reads it when an RKCP maps to it.
                self.observations.unload(coords)
                self._count(delivery.stream, UNMAPPED, delivery.subject, "no RKCP maps to these coordinates")
                usable = True
            elif parsed.kind is subjects.Kind.STATUS:
                usable = self._handle_status(coords, delivery)
            else:
                usable = self._handle_sealed(coords, delivery)
        try:
            if usable:
                await delivery.ack()
            else:
                await delivery.term()
        except bus_errors.BusError as exc:
            # Recording is idempotent by sequence: a redelivery of this message is a Duplicate.
            log.warning(
                "settling %s (seq %d): %s; it may be redelivered", delivery.subject, delivery.stream_seq, exc
            )

    async def _bind(self, definition: streams.ConsumerDef) -> bus.Consumer:
        failures = 0
        while True:
            try:
                return await bus.bind(self.conn, definition)
            except bus_errors.ConsumerNotFound as exc:
                # The hub creates its consumers at start-up; until then (or after someone
                # deleted one) we wait rather than create it: ensuring topology is main's job.
                failures += 1
                log.warning("%s; retrying", exc)
            except bus_errors.BusError as exc:
                failures += 1
                log.warning(
                    "cannot bind %s/%s: %s; retrying", definition.stream, definition.durable_name, exc
                )
            await asyncio.sleep(self._backoff(failures))

    def _backoff(self, failures: int) -> float:
        return backoff.delay(failures + 1, base=0.25, cap=self.max_backoff)

    def _handle_status(self, coords: Coordinates, delivery: bus.Delivery) -> bool:
        """True to ack (recorded or superseded), False to terminate (unusable)."""
        status = self._decode(messages.decode_status, delivery.stream, delivery.subject, delivery.data)
        if status is None:
            return False
        self.metrics.status_received.inc()
        return self._record_status(
            coords,
            status,
            delivery.stream_seq,
            stream=delivery.stream,
            subject=delivery.subject,
            announce=True,
        )

    def _handle_sealed(self, coords: Coordinates, delivery: bus.Delivery) -> bool:
        sealed = self._decode(
            messages.decode_sealed_secrets, delivery.stream, delivery.subject, delivery.data
        )
        if sealed is None:
            return False
        return self._record_sealed(
            coords,
            sealed,
            delivery.stream_seq,
            stream=delivery.stream,
            subject=delivery.subject,
            announce=True,
        )

    async def open_latest(
        self, coords: observations.Key
    ) -> tuple[messages.SealedSecrets, messages.SecretsPayload] | None:
        """Fetch the latest sealed secrets of ``coords`` from the stream, record them and open
        them: the box and its payload, or None when there is no usable box (what was found is
        recorded, so the next reconcile decides from it). Raises ``common.bus.errors.BusError``."""
        coords = Coordinates(*coords)
        subject = subjects.secret(*coords, prefix=self.prefix)
        stream = self._stream(coords.site)
        stored = await bus.last_message(self.conn, stream, subject)
        sealed = None
        if stored is not None:
            sealed = self._decode(messages.decode_sealed_secrets, stream, subject, stored.data)
        if stored is None or sealed is None or observations.disagreement(coords, sealed) is not None:
            # Purged or replaced by something unusable behind the hub's back: nothing to write
            # until the site sends a box again (it does when its Secrets change or it restarts).
            self.observations.drop_sealed(coords)
            return None
        opened = observations.open_sealed(sealed, keyring=self.keyring)
        self._record_sealed(
            coords, sealed, stored.seq, stream=stream, subject=subject, announce=False, opened=opened
        )
        if isinstance(opened, observations.DecryptError):
            return None
        return sealed, opened

    # -- loading after a restart -------------------------------------------------------------

    async def load(self, coords: observations.Key) -> observations.ControlPlaneObservation | None:
        """What is held for ``coords``, reading the streams' last messages the first time.

        The durable consumers do not redeliver what an earlier hub process acknowledged, so the
        first look at a control plane after a start reads its latest status and sealed secrets
        straight from the streams. Later looks use the cache: the consumers deliver anything
        newer. Raises ``common.bus.errors.BusError`` when the streams cannot be read (nothing is
        marked loaded then, so the next call tries again) and ``protocol.errors.SubjectError``
        for coordinates that are not DNS labels. Does not call ``on_change``: the caller holds
        the answer. Read through this rather than ``Observations.get`` so a restart is seen.
        """
        coords = Coordinates(*coords)
        if self.observations.loaded(coords):
            return self.observations.get(coords)
        site, namespace, name = coords
        status_subject = subjects.status(site, namespace, name, prefix=self.prefix)
        secret_subject = subjects.secret(site, namespace, name, prefix=self.prefix)
        stream = self._stream(site)
        try:
            stored_status = await bus.last_message(self.conn, stream, status_subject)
            stored_sealed = await bus.last_message(self.conn, stream, secret_subject)
        except bus_errors.NotFound:
            # The site's stream does not exist yet (ensure_topology runs when a site appears).
            stored_status = stored_sealed = None
        if stored_status is not None:
            status = self._decode(messages.decode_status, stream, status_subject, stored_status.data)
            if status is not None:
                self._record_status(
                    coords,
                    status,
                    stored_status.seq,
                    stream=stream,
                    subject=status_subject,
                    announce=False,
                )
        if stored_sealed is not None:
            sealed = self._decode(messages.decode_sealed_secrets, stream, secret_subject, stored_sealed.data)
            if sealed is not None:
                self._record_sealed(
                    coords,
                    sealed,
                    stored_sealed.seq,
                    stream=stream,
                    subject=secret_subject,
                    announce=False,
                )
        self.observations.mark_loaded(coords)
        return self.observations.get(coords)

    # -- shared by both paths ----------------------------------------------------------------

    def _parse(self, stream: str, subject: str) -> subjects.Parsed | None:
        try:
            return subjects.parse(subject, prefix=self.prefix)
        except protocol_errors.SubjectError as exc:
            self._reject(stream, BAD_SUBJECT, subject, str(exc))
            return None

    def _decode(
        self, decoder: messages.Decoder[messages.T], stream: str, subject: str, data: bytes
    ) -> messages.T | None:
        try:
            return decoder(data)
        except protocol_errors.DecodeError as exc:
            # The decoder's message names the field that failed, never the value (secrets
            # travel only inside the ciphertext, which is decoded elsewhere).
            self._reject(stream, DECODE_ERROR, subject, str(exc))
            return None

    def _record_status(
        self,
        coords: Coordinates,
        status: messages.Status,
        seq: int,
        *,
        stream: str,
        subject: str,
        announce: bool,
    ) -> bool:
        applied = self.observations.apply_status(coords, status, seq)
        return self._recorded(applied, coords, stream=stream, subject=subject, seq=seq, announce=announce)

    def _record_sealed(
        self,
        coords: Coordinates,
        sealed: messages.SealedSecrets,
        seq: int,
        *,
        stream: str,
        subject: str,
        announce: bool,
        opened: messages.SecretsPayload | observations.DecryptError | None = None,
    ) -> bool:
        why = observations.disagreement(coords, sealed)
        if why is not None:
            self._reject(stream, observations.Outcome.MISMATCH.value, subject, why)
            return False
        if seq <= self.observations.held_seq(coords)[1]:
            # Already held (the consumer and load both saw it) or superseded: no need to open it.
            return True
        # Opened only to know whether it opens; the payload is not kept (see ``open_latest``).
        if opened is None:
            opened = observations.open_sealed(sealed, keyring=self.keyring)
        if isinstance(opened, observations.DecryptError):
            self._reject(stream, opened.reason, subject, opened.message)
        applied = self.observations.apply_sealed(coords, sealed, opened, seq)
        return self._recorded(applied, coords, stream=stream, subject=subject, seq=seq, announce=announce)

    def _recorded(
        self,
        applied: observations.Applied,
        coords: Coordinates,
        *,
        stream: str,
        subject: str,
        seq: int,
        announce: bool,
    ) -> bool:
        if applied.outcome is observations.Outcome.MISMATCH:
            self._reject(stream, applied.outcome.value, subject, applied.message)
            return False
        if not applied.recorded:
            log.debug("%s seq %d ignored: %s (%s)", subject, seq, applied.outcome.value, applied.message)
            return True
        if not announce:
            return True  # load(): its caller holds the answer, a requeue would only repeat it
        try:
            self.on_change(coords)
        except Exception:
            # A broken callback must not stop the bus being read; the observation is recorded
            # and the controller's resync will find it.
            log.exception("on_change for %s failed", "/".join(coords))
        return True

    def _reject(self, stream: str, reason: str, subject: str, detail: str) -> None:
        self.metrics.bus_rejected.labels(stream=stream, reason=reason).inc()
        log.warning("rejected message on %s (%s): %s", subject, reason, detail)

    def _count(self, stream: str, reason: str, subject: str, detail: str) -> None:
        # Counted like a rejection, logged at debug: a site's messages for control planes the
        # hub does not manage (yet) are normal after an RKCP's deletion and must not flood logs.
        self.metrics.bus_rejected.labels(stream=stream, reason=reason).inc()
        log.debug("ignored message on %s (%s): %s", subject, reason, detail)
