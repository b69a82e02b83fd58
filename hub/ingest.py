"""The hub's reading of statuses and sealed secrets from the bus into ``hub.observations``.

Talks to NATS through ``common.bus`` only: the durable consumers ``hub-status`` (KB_STATUS) and
``hub-secrets`` (KB_SECRETS), which the hub creates with ``ensure_topology`` before this runs,
and the streams' last message per subject (``load``) so a restarted hub, whose consumers do
not redeliver what was acknowledged before, rebuilds its view without waiting for news.

Every message is decoded, checked against its subject, opened (secrets), recorded, announced
through ``on_change`` and only then acknowledged. What cannot be used is terminated (never
redelivered), counted in ``kb_hub_bus_rejected_total{stream,reason}`` and logged with its
subject; nothing here ever logs or counts secret material.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable

from common import bus
from common import errors as bus_errors
from hub import metrics as hub_metrics
from hub import observations
from protocol import errors as protocol_errors
from protocol import messages, sealing, streams, subjects

log = logging.getLogger(__name__)

DECODE_ERROR = "DecodeError"
BAD_SUBJECT = "BadSubject"


class Ingest:
    def __init__(
        self,
        *,
        conn: bus.Connection,
        observations: observations.Observations,
        keyring: sealing.Keyring,
        prefix: str = subjects.DEFAULT_PREFIX,
        metrics: hub_metrics.Metrics,
        on_change: Callable[[observations.Coordinates], None],
        batch: int = 64,
        fetch_timeout: float = 2.0,
        max_backoff: float = 10.0,
    ) -> None:
        self.conn = conn
        self.observations = observations
        self.keyring = keyring
        self.prefix = prefix
        self.metrics = metrics
        self.on_change = on_change
        self.batch = batch
        self.fetch_timeout = fetch_timeout
        self.max_backoff = max_backoff
        self.status_stream = streams.stream_name(subjects.Kind.STATUS, prefix=prefix)
        self.secrets_stream = streams.stream_name(subjects.Kind.SECRET, prefix=prefix)

    # -- consuming -------------------------------------------------------------------------

    async def run(self) -> None:
        """Forever: consume both hub consumers concurrently; each rebinds on its own after errors."""
        async with asyncio.TaskGroup() as group:
            for definition in streams.hub_consumers(prefix=self.prefix):
                group.create_task(self._consume_forever(definition))

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
        """Record one delivery of either hub consumer, then settle it: ack what was recorded or
        superseded, terminate what can never be used."""
        if delivery.stream == self.status_stream:
            usable = self._handle_status(delivery)
        else:
            usable = self._handle_sealed(delivery)
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
        return min(self.max_backoff, 0.25 * 2.0 ** min(failures, 10)) * random.uniform(0.5, 1.0)

    def _handle_status(self, delivery: bus.Delivery) -> bool:
        """True to ack (recorded or superseded), False to terminate (unusable)."""
        coords = self._coordinates(delivery.stream, delivery.subject)
        if coords is None:
            return False
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

    def _handle_sealed(self, delivery: bus.Delivery) -> bool:
        coords = self._coordinates(delivery.stream, delivery.subject)
        if coords is None:
            return False
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

    async def reopen(self, coords: observations.Key) -> None:
        """Open the latest sealed secrets of ``coords`` again (they were released once written)."""
        coords = observations.Coordinates(*coords)
        subject = subjects.secret(*coords, prefix=self.prefix)
        stored = await bus.last_message(self.conn, self.secrets_stream, subject)
        if stored is None:
            return
        sealed = self._decode(messages.decode_sealed_secrets, self.secrets_stream, subject, stored.data)
        if sealed is None:
            return
        opened = observations.open_sealed(sealed, keyring=self.keyring)
        if isinstance(opened, messages.SecretsPayload):
            self.observations.restore_secrets(coords, sealed, opened)

    # -- loading after a restart -------------------------------------------------------------

    async def load(self, coords: observations.Key) -> observations.ControlPlaneObservation | None:
        """What is held for ``coords``, reading the streams' last messages the first time.

        The durable consumers do not redeliver what an earlier hub process acknowledged, so the
        first look at a control plane after a start reads its latest status and sealed secrets
        straight from the streams. Later looks use the cache: the consumers deliver anything
        newer. Raises ``common.errors.BusError`` when the streams cannot be read (nothing is
        marked loaded then, so the next call tries again) and ``protocol.errors.SubjectError``
        for coordinates that are not DNS labels. Does not call ``on_change``: the caller holds
        the answer. Read through this rather than ``Observations.get`` so a restart is seen.
        """
        coords = observations.Coordinates(*coords)
        if self.observations.loaded(coords):
            return self.observations.get(coords)
        site, namespace, name = coords
        status_subject = subjects.status(site, namespace, name, prefix=self.prefix)
        secret_subject = subjects.secret(site, namespace, name, prefix=self.prefix)
        stored_status = await bus.last_message(self.conn, self.status_stream, status_subject)
        stored_sealed = await bus.last_message(self.conn, self.secrets_stream, secret_subject)
        if stored_status is not None:
            status = self._decode(
                messages.decode_status, self.status_stream, status_subject, stored_status.data
            )
            if status is not None:
                self._record_status(
                    coords,
                    status,
                    stored_status.seq,
                    stream=self.status_stream,
                    subject=status_subject,
                    announce=False,
                )
        if stored_sealed is not None:
            sealed = self._decode(
                messages.decode_sealed_secrets, self.secrets_stream, secret_subject, stored_sealed.data
            )
            if sealed is not None:
                self._record_sealed(
                    coords,
                    sealed,
                    stored_sealed.seq,
                    stream=self.secrets_stream,
                    subject=secret_subject,
                    announce=False,
                )
        self.observations.mark_loaded(coords)
        return self.observations.get(coords)

    # -- shared by both paths ----------------------------------------------------------------

    def _coordinates(self, stream: str, subject: str) -> observations.Coordinates | None:
        try:
            parsed = subjects.parse(subject, prefix=self.prefix)
        except protocol_errors.SubjectError as exc:
            self._reject(stream, BAD_SUBJECT, subject, str(exc))
            return None
        return observations.Coordinates(parsed.site, parsed.namespace, parsed.name)

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
        coords: observations.Coordinates,
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
        coords: observations.Coordinates,
        sealed: messages.SealedSecrets,
        seq: int,
        *,
        stream: str,
        subject: str,
        announce: bool,
    ) -> bool:
        why = observations.disagreement(coords, sealed)
        if why is not None:
            self._reject(stream, observations.Outcome.MISMATCH.value, subject, why)
            return False
        if seq <= self.observations.held_seq(coords)[1]:
            # Already held (the consumer and load both saw it) or superseded: no need to open it.
            return True
        opened = observations.open_sealed(sealed, keyring=self.keyring)
        if isinstance(opened, observations.DecryptError):
            self._reject(stream, opened.reason, subject, opened.message)
        applied = self.observations.apply_sealed(coords, sealed, opened, seq)
        return self._recorded(applied, coords, stream=stream, subject=subject, seq=seq, announce=announce)

    def _recorded(
        self,
        applied: observations.Applied,
        coords: observations.Coordinates,
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
