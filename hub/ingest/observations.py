"""What the hub knows of each remote control plane from the bus: the pure, in-memory view.

Owns, per control plane coordinates ``(site, namespace, name)``, the latest ``Status`` and what
is needed to decide about the latest ``SealedSecrets`` (``SealedRef``: checksum and owner; and
why it did not open, if it is known not to), each with the stream sequence it came at, and a
``version`` that grows with every recorded change. Nothing secret is kept: the latest box is kept
only as it came, sealed, and only until it is written (``hub.ingest.sealed``, within a byte budget;
``take_box`` hands it to ``hub.ingest.record.Intake.open_latest``); a newer box, a failure to open, a
decision not to write it (``drop_box``), ``drop_sealed`` and ``forget`` drop it. The stream
keeps every box, and what is not kept is read from there when it is written
(``hub.controllers.rkcp.writing.write_latest``, whenever the CAPI Secrets do not carry its checksum).
The hub's RKCP controller reads it through ``hub.ingest.record.Intake.load``; ``hub.ingest.record`` writes it
from the hub's durable consumers and from the streams' last messages, only for coordinates an
RKCP maps to (``retain`` drops the rest), so its size follows the RKCPs, never what a site sends.

Pure: no I/O, no clock. Both writers may deliver the same message (the consumer and a
``load`` racing after a restart) or an older one (a redelivery): stream sequences decide,
so the result does not depend on which arrives first."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable

import msgspec

from hub.ingest import sealed as boxes
from protocol import messages
from protocol.coordinates import Coordinates

Key = tuple[str, str, str]
"""What the methods accept: a ``Coordinates`` or a plain ``(site, namespace, name)`` tuple."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class SealedRef:
    """What is kept of a ``SealedSecrets`` message: enough to decide, nothing secret."""

    checksum: str
    owner_uid: str

    @classmethod
    def of(cls, sealed: messages.SealedSecrets) -> SealedRef:
        return cls(checksum=sealed.checksum, owner_uid=sealed.owner_uid)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ControlPlaneObservation:
    """A snapshot of one control plane as seen on the bus; the controller's input."""

    coordinates: Coordinates
    version: int
    """Grows by one with every recorded change (status or secrets) of these coordinates."""
    status: messages.Status | None = None
    status_seq: int = 0
    """Sequence of ``status`` in its site's stream; 0 when there is none."""
    sealed: SealedRef | None = None
    sealed_seq: int = 0
    """Sequence of ``sealed`` in its site's stream; 0 when there is none."""
    secrets_error: boxes.DecryptError | None = None
    """Why ``sealed`` could not be opened; None when it opened or there is nothing sealed."""


class Outcome(enum.StrEnum):
    RECORDED = "Recorded"
    STALE = "Stale"
    """Older than what is held (a redelivery after a newer message): ignored."""
    DUPLICATE = "Duplicate"
    """The sequence already held (consumer and load both saw it): ignored."""
    MISMATCH = "CoordinatesMismatch"
    """The message names other coordinates than its subject: refused."""


@dataclasses.dataclass(frozen=True)
class Applied:
    outcome: Outcome
    message: str = ""

    @property
    def recorded(self) -> bool:
        return self.outcome is Outcome.RECORDED


def disagreement(subject_coords: Key, message: messages.Status | messages.SealedSecrets) -> str | None:
    """Why a message does not belong on its subject, or None when it does.

    The server lets a site publish only under its own subjects, so the subject is the trusted
    part; a body naming other coordinates is a bug or an attempt to report for someone else.
    """
    claimed = Coordinates.of(message)
    if tuple(claimed) == tuple(subject_coords):
        return None
    return (
        f"{type(message).__name__} names {'/'.join(claimed)} "
        f"but came on the subject of {'/'.join(subject_coords)}"
    )


_encode_status = msgspec.msgpack.Encoder().encode
_decode_status = msgspec.msgpack.Decoder(messages.Status).decode


@dataclasses.dataclass(slots=True)
class _Entry:
    version: int = 0
    status: bytes | None = None
    """The latest ``Status``, encoded: a third of its size as objects (its strings apart), for
    every control plane held."""
    status_seq: int = 0
    sealed: SealedRef | None = None
    sealed_seq: int = 0
    secrets_error: boxes.DecryptError | None = None
    present: bool = False
    """False after ``forget``: the entry then only keeps its sequences and version, so a late
    redelivery of a purged message stays ignored and versions never go back."""
    loaded: bool = False
    """The streams' last messages were read for these coordinates (``hub.ingest.record.Intake.load``)."""


def _order(held: int, seq: int, *, again: bool = False) -> Outcome:
    """``again``: the message is the stream's last one, read for a slot that holds nothing
    (forgotten, or never kept): the stream has it now, so it is held again at its sequence."""
    if seq < held:
        return Outcome.STALE
    if seq == held and not again:
        return Outcome.DUPLICATE
    return Outcome.RECORDED


class Observations:
    """The latest status and secrets per control plane, restart-safe by stream sequence."""

    def __init__(self, *, box_budget: int = boxes.DEFAULT_BUDGET) -> None:
        self._entries: dict[Coordinates, _Entry] = {}
        self.boxes = boxes.Boxes(box_budget)
        """The latest box of a control plane until it is written (``hub.ingest.sealed``)."""

    def apply_status(
        self, subject_coords: Key, status: messages.Status, seq: int, *, last: bool = False
    ) -> Applied:
        """Record ``status`` (stream sequence ``seq``) unless it is older than what is held.

        ``last``: read as the stream's last message (``hub.ingest.record.Intake.load``), which is held
        again after ``unload`` (a redelivery of the same sequence is not)."""
        why = disagreement(subject_coords, status)
        if why is not None:
            return Applied(Outcome.MISMATCH, why)
        coords = Coordinates(*subject_coords)
        entry = self._slot(coords)
        outcome = _order(entry.status_seq, seq, again=last and entry.status is None)
        if outcome is not Outcome.RECORDED:
            return Applied(outcome, f"status at sequence {seq}, holding {entry.status_seq}")
        entry.status, entry.status_seq = _encode_status(status), seq
        self._touch(entry)
        return Applied(Outcome.RECORDED)

    def apply_sealed(
        self,
        coords: Key,
        sealed: messages.SealedSecrets,
        payload_or_error: messages.SecretsPayload | boxes.DecryptError | None,
        seq: int,
        *,
        last: bool = False,
        keep: bool = False,
    ) -> Applied:
        """Record ``sealed`` with what opening it gave (None: not opened), unless it is older
        than what is held (``last`` as for ``apply_status``); a box held unopened that turns out
        not to open records why.

        Its ``SealedRef`` and the error, if any, are held; with ``keep``, the box itself too
        until it is written (``take_box``) unless it does not open. An opened payload never is.
        """
        why = disagreement(coords, sealed)
        if why is not None:
            return Applied(Outcome.MISMATCH, why)
        coords = Coordinates(*coords)
        entry = self._slot(coords)
        error = payload_or_error if isinstance(payload_or_error, boxes.DecryptError) else None
        outcome = _order(entry.sealed_seq, seq, again=last and entry.sealed is None)
        learned = outcome is Outcome.DUPLICATE and entry.sealed is not None and entry.secrets_error is None
        if outcome is not Outcome.RECORDED and not (learned and error is not None):
            return Applied(outcome, f"sealed secrets at sequence {seq}, holding {entry.sealed_seq}")
        entry.sealed, entry.sealed_seq, entry.secrets_error = SealedRef.of(sealed), seq, error
        if keep and error is None:
            self.boxes.keep(coords, sealed, seq)  # in place of an older one: the newer box wins
        else:
            self.boxes.drop(coords)
        self._touch(entry)
        return Applied(Outcome.RECORDED)

    def take_box(self, coords: Key) -> boxes.Kept | None:
        """The kept box of ``coords`` if it is the latest held (its sequence), no longer kept:
        it is opened to be written. None when there is none: it is read from the stream."""
        coords = Coordinates(*coords)
        kept, entry = self.boxes.take(coords), self._entries.get(coords)
        if kept is None or entry is None or entry.sealed is None or kept.seq != entry.sealed_seq:
            return None
        return kept

    def drop_box(self, coords: Key, *, seq: int) -> None:
        """A decision not to write the box at ``seq`` (the Secrets carry it, or it is withheld):
        it is not kept for later (a later write reads it from the stream)."""
        self.boxes.drop(Coordinates(*coords), seq=seq)

    def get(self, coords: Key) -> ControlPlaneObservation | None:
        """A snapshot of what is held for ``coords``; None when nothing is (or it was forgotten)."""
        entry = self._entries.get(Coordinates(*coords))
        if entry is None or not entry.present:
            return None
        return ControlPlaneObservation(
            coordinates=Coordinates(*coords),
            version=entry.version,
            status=None if entry.status is None else _decode_status(entry.status),
            status_seq=entry.status_seq,
            sealed=entry.sealed,
            sealed_seq=entry.sealed_seq,
            secrets_error=entry.secrets_error,
        )

    def drop_sealed(self, coords: Key) -> None:
        """The subject holds no usable box any more (purged behind the hub's back): stop asking
        for a write until the site sends one. The sequence stays (sequences only grow)."""
        self.boxes.drop(Coordinates(*coords))
        entry = self._entries.get(Coordinates(*coords))
        if entry is None or entry.sealed is None:
            return
        entry.sealed, entry.secrets_error = None, None
        self._touch(entry)

    def held_seq(self, coords: Key) -> tuple[int, int]:
        """(status sequence, sealed sequence) held, forgotten entries included; (0, 0) if never seen."""
        entry = self._entries.get(Coordinates(*coords))
        return (entry.status_seq, entry.sealed_seq) if entry else (0, 0)

    def forget(self, coords: Key) -> None:
        """Drop what is held (the hub purged the control plane's subjects after its deletion).

        The sequences and the version stay: stream sequences only grow, so a new control plane
        of the same coordinates is recorded while a late redelivery of a purged one is not.
        """
        self.boxes.drop(Coordinates(*coords))
        entry = self._entries.get(Coordinates(*coords))
        if entry is None or not entry.present:
            return
        self._entries[Coordinates(*coords)] = _Entry(
            version=entry.version + 1, status_seq=entry.status_seq, sealed_seq=entry.sealed_seq
        )

    def retain(self, keep: Callable[[Coordinates], bool]) -> list[Coordinates]:
        """``forget`` every control plane ``keep`` refuses (no RKCP maps to it any more); the
        coordinates forgotten. What is held stays bounded by the RKCPs, whatever sites send."""
        gone = [c for c, e in self._entries.items() if (e.present or e.loaded) and not keep(c)]
        for coords in gone:
            self.unload(coords)
        return gone

    def unload(self, coords: Key) -> None:
        """``forget`` and mark not loaded: a message for these coordinates was passed over (no
        RKCP maps to them), so an RKCP that maps to them later must read the streams again."""
        self.forget(coords)
        entry = self._entries.get(Coordinates(*coords))
        if entry is not None:
            entry.loaded = False

    def coordinates(self) -> frozenset[Coordinates]:
        """Every control plane something is held for (the controller spots unknown ones here)."""
        return frozenset(c for c, e in self._entries.items() if e.present)

    def loaded(self, coords: Key) -> bool:
        entry = self._entries.get(Coordinates(*coords))
        return entry is not None and entry.loaded

    def mark_loaded(self, coords: Key) -> None:
        """The streams' last messages of ``coords`` were read: the consumer delivers anything newer."""
        self._slot(Coordinates(*coords)).loaded = True

    def _slot(self, coords: Coordinates) -> _Entry:
        """The entry of ``coords``, made if there is none (its site and namespace strings shared
        with every other control plane's: each message's subject decodes them anew)."""
        entry = self._entries.get(coords)
        if entry is None:
            entry = self._entries[coords.shared()] = _Entry()
        return entry

    @staticmethod
    def _touch(entry: _Entry) -> None:
        entry.version += 1
        entry.present = True
