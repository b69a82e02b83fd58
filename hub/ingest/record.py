"""Recording what a site sent about a control plane into ``hub.ingest.observations``: check, decode, record.

Shared by the two ways a message reaches the hub: its durable consumer (``consumer``, news) and
the streams' last message per subject (``load``: a restarted hub rebuilds its view;
``open_latest``: the box to be written, when it was not kept). Every message is checked against
its subject and decoded; what cannot be used, and every field replaced at decoding
(``protocol.text``), is counted in ``kb_hub_bus_rejected_total{stream, reason}`` and logged with
its subject, never with secret material. What a site's stream holds (``learn_holdings``,
``landed``, ``lose_track``) is read when the consumer binds and kept current by it, so ``load``
reads only subjects that hold a message.

Sealed secrets: the hub keeps of a box what is needed to decide (its sequence, checksum and
owner, and why it did not open) and, until it is written, the box itself, still sealed
(``sealed``, within a byte budget), so writing it needs no second read of the stream. The
consumer opens a new box on arrival, only to know whether it opens (``SecretsSynced`` says
``DecryptFailed`` at once; a box that does not open is not kept); ``load`` records and keeps
without opening; ``open_latest`` is the one way to the plaintext (the kept box, or the stream's
last one, for ``hub.controllers.rkcp.writing`` to write at once). A kept box is only a copy of
what the stream holds: a hub that dies before writing it reads it again from the stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging

from common import bus, logs
from common.bus import errors as bus_errors
from hub import metrics as hub_metrics
from hub.ingest import held as holdings
from hub.ingest import observations
from hub.ingest import sealed as boxes
from protocol import errors as protocol_errors
from protocol import messages, sealing, streams, subjects, text
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)

DECODE_ERROR = "DecodeError"
BAD_SUBJECT = "BadSubject"
UNMAPPED = "Unmapped"
"""A message for coordinates no RKCP maps to: counted, never opened or kept."""


class Verdict(enum.Enum):
    """What became of a message."""

    RECORDED = "recorded"
    """News: recorded and announced."""
    KEPT = "kept"
    """Nothing new (held already, superseded, or kept by the stream only)."""
    REFUSED = "refused"
    """Unusable, now and forever: counted and dropped."""


@dataclasses.dataclass(frozen=True)
class Deps:
    conn: bus.Connection
    observations: observations.Observations
    keyring: sealing.Keyring
    metrics: hub_metrics.Metrics


HOLDINGS_LIMIT = 4 * streams.SITE_MAX_MSGS  # subjects known per site stream (hub.ingest.held), at most


class Intake:
    def __init__(self, deps: Deps, *, prefix: str = subjects.DEFAULT_PREFIX) -> None:
        self.deps = deps
        self.observations = deps.observations
        self.prefix = prefix
        self._holdings: dict[str, holdings.Holdings] = {}
        """Per site stream, the subjects it holds messages on (``learn_holdings``, ``landed``)."""

    def stream(self, site: str) -> str:
        return streams.site_stream_name(site, prefix=self.prefix)

    # -- what a site's stream holds ------------------------------------------------------------

    async def learn_holdings(self, stream: str) -> None:
        """Read which subjects ``stream`` holds messages on (one request). Called by the stream's
        consumer when it binds, before its first fetch, and after a gap: from then on every
        message landing on the stream is delivered to it and passes ``landed``, so a subject
        not held is one with no message (``load`` skips its reads). Raises ``BusError``."""
        held = self._holdings.setdefault(stream, holdings.Holdings(limit=HOLDINGS_LIMIT))
        held.forget()  # until the list is in, whatever was known may be stale (a gap)
        held.learning()
        taken = asyncio.get_running_loop().time()
        found = await bus.subjects_of(self.deps.conn, stream, ">")
        held.seed(found, at=taken)

    def knows(self, stream: str) -> bool:
        """Whether what ``stream`` holds is known (its consumer follows it)."""
        held = self._holdings.get(stream)
        return held is not None and held.seeded

    def forget_holdings(self, stream: str) -> None:
        """Nobody follows ``stream`` any more (its consumer task ended): ``load`` reads it."""
        held = self._holdings.pop(stream, None)
        if held is not None:
            held.forget()

    def landed(self, stream: str, subject: str) -> None:
        """A message on ``subject`` was delivered from ``stream``."""
        held = self._holdings.get(stream)
        if held is not None:
            held.add(subject)

    def lose_track(self, stream: str) -> list[Coordinates]:
        """Messages of ``stream`` went by unseen: forget what it holds and what is held for its
        site's control planes (their next look reads the stream); the coordinates forgotten."""
        self.forget_holdings(stream)
        return self.observations.retain(lambda c: self.stream(c.site) != stream)

    # -- reading the streams' last messages ----------------------------------------------------

    async def load(self, coords: observations.Key) -> observations.ControlPlaneObservation | None:
        """What is held for ``coords``, reading the streams' last messages the first time.

        The durable consumers do not deliver again what an earlier hub process was sent, so the
        first look at a control plane after a start reads its latest status and sealed secrets
        straight from the streams (the box is not opened: only its checksum and owner are kept),
        unless the stream is known to hold neither subject (``learn_holdings``: a control plane
        no site has written about yet, the common case of a new RKCP, costs no read). Later
        looks use the cache: the consumers deliver anything newer. Raises
        ``common.bus.errors.BusError`` when the streams cannot be read (nothing is marked loaded
        then, so the next call tries again) and ``protocol.errors.SubjectError`` for coordinates
        that are not DNS labels. Announces nothing: the caller holds the answer.
        """
        coords = Coordinates(*coords)
        if self.observations.loaded(coords):
            return self.observations.get(coords)
        status_subject = subjects.status(*coords, prefix=self.prefix)
        secret_subject = subjects.secret(*coords, prefix=self.prefix)
        stream = self.stream(coords.site)
        held = self._holdings.get(stream)
        if held is not None and held.holds(status_subject) is False and held.holds(secret_subject) is False:
            self.observations.mark_loaded(coords)  # the stream holds neither: nothing to read
            return self.observations.get(coords)
        try:
            # Both asked at once: one write, the two answers awaited together.
            stored_status, stored_sealed = await asyncio.gather(
                bus.last_message(self.deps.conn, stream, status_subject),
                bus.last_message(self.deps.conn, stream, secret_subject),
            )
        except bus_errors.NotFound:
            # The site's stream does not exist yet (the reconcile plans EnsureTopology).
            stored_status = stored_sealed = None
        if stored_status is not None:
            status = self.decode(messages.decode_status, stream, status_subject, stored_status.data)
            if status is not None:
                seq = stored_status.seq
                self.record_status(coords, status, seq, stream=stream, subject=status_subject, last=True)
        if stored_sealed is not None:
            data = stored_sealed.data
            sealed = self.decode(messages.decode_sealed_secrets, stream, secret_subject, data)
            if sealed is not None:
                seq = stored_sealed.seq
                self.record_sealed(coords, sealed, seq, stream=stream, subject=secret_subject, last=True)
        self.observations.mark_loaded(coords)
        return self.observations.get(coords)

    async def open_latest(
        self, coords: observations.Key
    ) -> tuple[messages.SealedSecrets, messages.SecretsPayload] | None:
        """Open the latest sealed secrets of ``coords`` to write them: the box and its payload,
        or None when there is no usable box (what was found is recorded, so the next reconcile
        decides from it). The box kept since it was recorded (``observations.Observations.
        take_box``), if it is the latest held, without a read; otherwise the stream's last box,
        read and recorded. Raises ``common.bus.errors.BusError`` (only when reading).

        A kept box is written even if the stream was purged behind the hub's back since it
        arrived: the site sent it, on its own subject, for this owner, and it opens and matches
        its checksum, exactly as if the write had come before the purge. The hub's own purges
        (an RKCP's deletion, a released owner's messages) go through ``forget`` and ``unload``,
        which drop the kept box first, so what the hub purged is never written."""
        coords = Coordinates(*coords)
        subject = subjects.secret(*coords, prefix=self.prefix)
        stream = self.stream(coords.site)
        kept = self.observations.take_box(coords)
        found = (kept.sealed, kept.seq) if kept is not None else await self._read_sealed(coords)
        if found is None:
            return None
        sealed, seq = found
        opened = boxes.open_sealed(sealed, keyring=self.deps.keyring)
        # Recorded (a box read anew, or why a kept box does not open); never kept again: it is
        # written now, and if that fails the next attempt reads it from the stream.
        self.record_sealed(
            coords, sealed, seq, stream=stream, subject=subject, opened=opened, last=True, keep=False
        )
        return None if isinstance(opened, boxes.DecryptError) else (sealed, opened)

    async def _read_sealed(self, coords: Coordinates) -> tuple[messages.SealedSecrets, int] | None:
        """The stream's last box of ``coords`` and its sequence; None, and the box held dropped,
        when there is no usable one."""
        subject = subjects.secret(*coords, prefix=self.prefix)
        stream = self.stream(coords.site)
        stored = await bus.last_message(self.deps.conn, stream, subject)
        dec = messages.decode_sealed_secrets
        sealed = None if stored is None else self.decode(dec, stream, subject, stored.data)
        if stored is None or sealed is None or observations.disagreement(coords, sealed) is not None:
            # Purged or replaced by something unusable behind the hub's back: nothing to write
            # until the site sends a box again (it does when its Secrets change or it restarts).
            self.observations.drop_sealed(coords)
            return None
        return sealed, stored.seq

    # -- checking, decoding, recording -------------------------------------------------------

    def parse(self, stream: str, subject: str) -> subjects.Parsed | None:
        try:
            return subjects.parse(subject, prefix=self.prefix)
        except protocol_errors.SubjectError as exc:
            self.reject(stream, BAD_SUBJECT, subject, str(exc))
            return None

    def decode(
        self, decoder: messages.Decoder[messages.T], stream: str, subject: str, data: bytes
    ) -> messages.T | None:
        try:
            message, findings = decoder.checked(data)
        except protocol_errors.DecodeError as exc:
            # The decoder's message names the field that failed, never the value (secrets
            # travel only inside the ciphertext, which is decoded elsewhere).
            self.reject(stream, DECODE_ERROR, subject, str(exc))
            return None
        for found in findings:
            self.replaced(stream, subject, found)
        return message

    def record_status(
        self,
        coords: Coordinates,
        status: messages.Status,
        seq: int,
        *,
        stream: str,
        subject: str,
        last: bool = False,
    ) -> Verdict:
        """Record the status at ``seq``; ``last``: read as its stream's last message."""
        applied = self.observations.apply_status(coords, status, seq, last=last)
        return self._verdict(applied, stream=stream, subject=subject, seq=seq)

    def record_sealed(
        self,
        coords: Coordinates,
        sealed: messages.SealedSecrets,
        seq: int,
        *,
        stream: str,
        subject: str,
        opened: messages.SecretsPayload | boxes.DecryptError | None = None,
        open_new: bool = False,
        last: bool = False,
        keep: bool = True,
    ) -> Verdict:
        """Record the box at ``seq`` with what opening it gave: ``opened`` (None: not opened),
        or, with ``open_new``, open it here if it is newer than what is held (the consumer: only
        to know whether it opens; the payload is not kept). ``last``: read as its stream's last
        message (``observations.Observations.apply_sealed``). ``keep``: a box recorded, and not
        known not to open, is kept (sealed) until it is written (``open_latest``)."""
        why = observations.disagreement(coords, sealed)
        if why is not None:
            self.reject(stream, observations.Outcome.MISMATCH.value, subject, why, seq=seq)
            return Verdict.REFUSED
        if open_new:
            if seq <= self.observations.held_seq(coords)[1]:
                return Verdict.KEPT  # held already (the consumer and load both saw it) or superseded
            opened = boxes.open_sealed(sealed, keyring=self.deps.keyring)
        if isinstance(opened, boxes.DecryptError):
            self.reject(stream, opened.reason, subject, opened.message, seq=seq)
        applied = self.observations.apply_sealed(coords, sealed, opened, seq, last=last, keep=keep)
        return self._verdict(applied, stream=stream, subject=subject, seq=seq)

    def _verdict(self, applied: observations.Applied, *, stream: str, subject: str, seq: int) -> Verdict:
        if applied.outcome is observations.Outcome.MISMATCH:
            self.reject(stream, applied.outcome.value, subject, applied.message, seq=seq)
            return Verdict.REFUSED
        if not applied.recorded:
            if log.isEnabledFor(logging.DEBUG):  # a hot path: no fields built for nothing
                about = logs.about_subject(subject, prefix=self.prefix, seq=seq)
                log.debug("%s seq %d ignored: %s (%s)", subject, seq, applied.outcome.value, applied.message,
                          extra=about)  # fmt: skip
            return Verdict.KEPT
        return Verdict.RECORDED

    def replaced(self, stream: str, subject: str, found: text.Finding) -> None:
        """A field was replaced with a safe value; the rest is used (and moves the status)."""
        self.deps.metrics.bus_rejected.labels(stream=stream, reason=found.code).inc()
        about = logs.about_subject(subject, prefix=self.prefix)
        log.warning("message on %s (%s): %s; the rest of it is used", subject, found.code, found, extra=about)

    def reject(self, stream: str, reason: str, subject: str, detail: str, *, seq: int | None = None) -> None:
        self.deps.metrics.bus_rejected.labels(stream=stream, reason=reason).inc()
        about = logs.about_subject(subject, prefix=self.prefix, seq=seq)
        log.warning("rejected message on %s (%s): %s", subject, reason, detail, extra=about)
