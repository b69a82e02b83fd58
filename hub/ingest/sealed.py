"""Sealed boxes in the hub: opening one, and keeping those recorded and not written yet.

``open_sealed`` is the one place a ``SealedSecrets`` box is opened (with the hub's keyring), and
``DecryptError`` why one cannot be used. ``Boxes`` keeps boxes, still sealed, within a byte
budget: ``hub.ingest.observations`` keeps, takes and drops them as it records, forgets and supersedes,
so that writing a box the hub's consumer just delivered, or ``hub.ingest.record.Intake.load`` just read,
needs no second read of the site's stream. Only the ``SealedSecrets`` message is
kept, never what it opens to: its ciphertext is sealed to the hub's keys, as it is in the
stream. A kept box is a copy, never the only one: the stream keeps every box until it is
superseded or purged, so whatever is not kept (over the budget, dropped, or lost with the
process) is read again from there, exactly as if nothing had been kept.

Pure: no I/O, no clock. Talks to nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Final

from protocol import errors, messages, sealing
from protocol.coordinates import Coordinates

DEFAULT_BUDGET: Final = 8 * 1024 * 1024
"""Bytes of boxes kept at most, all control planes together: about 800 boxes of an admin
kubeconfig and a CA with RSA-2048 keys (about 10 KiB each), what a burst keeps waiting for its
writes when the hub is behind by some 30 s at 25/s; beyond it a new box is not kept (it is read
from the stream when written). Measured: 32 MiB raised the hub's peak RSS by 20 MB at 10,000
control planes (``bench/scale.py``) for reads that cost less."""

DECRYPT_FAILED: Final = "DecryptFailed"
"""The reason of every secrets failure; the RKCP's ``SecretsSynced`` condition shows it."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DecryptError:
    """Why sealed secrets could not be used. The message names the key id, never the content."""

    reason: str = DECRYPT_FAILED
    message: str


def open_sealed(
    sealed: messages.SealedSecrets, *, keyring: sealing.Keyring
) -> messages.SecretsPayload | DecryptError:
    """Open, verify against the checksum and decode; every failure is a DecryptError.

    Messages name the key id and what failed, never any part of the plaintext.
    """
    key_id = sealed.recipient_key_id
    try:
        plaintext = keyring.open(sealed.ciphertext, key_id=key_id)
    except errors.SealError as exc:
        return DecryptError(message=str(exc))
    if sealing.checksum(plaintext) != sealed.checksum:
        return DecryptError(
            message=f"sealed box for key id {key_id!r} opened but its checksum does not match the message's"
        )
    try:
        return messages.decode_secrets_payload(plaintext)
    except errors.DecodeError:
        # The decoder's message is safe today, but the plaintext is secret: say only what failed.
        return DecryptError(
            message=f"sealed box for key id {key_id!r} opened but holds no valid SecretsPayload"
        )


OVERHEAD: Final = 512
"""Bytes counted per box beyond its ciphertext and strings: the message object, its datetime
and the bookkeeping here."""


def size(sealed: messages.SealedSecrets) -> int:
    """The bytes a kept box is counted for (its ciphertext dominates: a few to some 60 KiB)."""
    strings = (sealed.site, sealed.namespace, sealed.name, sealed.owner_uid, sealed.recipient_key_id)
    return OVERHEAD + len(sealed.ciphertext) + len(sealed.checksum) + sum(len(s) for s in strings)


@dataclasses.dataclass(frozen=True)
class Kept:
    """A box as kept: the stream sequence it came at, the message, and what it is counted for."""

    seq: int
    sealed: messages.SealedSecrets
    size: int


class Boxes:
    """At most one box per control plane (the latest recorded), ``budget`` bytes in all."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        if budget < 0:
            raise ValueError(f"box budget must be at least 0 bytes, got {budget}")
        self.budget = budget
        self._kept: dict[Coordinates, Kept] = {}
        """In the order kept (a box kept again moves to the end): the oldest go first."""
        self._bytes = 0

    def keep(self, coords: Coordinates, sealed: messages.SealedSecrets, seq: int) -> bool:
        """Keep ``sealed`` (at ``seq``) for ``coords`` in place of any box kept for them. False,
        and nothing kept for ``coords``, when it does not fit in what the budget has left: the
        boxes kept are those that came first, which the reconciles reach first."""
        self.drop(coords)
        kept = Kept(seq=seq, sealed=sealed, size=size(sealed))
        if self._bytes + kept.size > self.budget:
            return False
        self._kept[coords] = kept
        self._bytes += kept.size
        return True

    def take(self, coords: Coordinates) -> Kept | None:
        """The box kept for ``coords``, which is no longer kept (it is opened to be written)."""
        kept = self._kept.pop(coords, None)
        if kept is not None:
            self._bytes -= kept.size
        return kept

    def drop(self, coords: Coordinates, *, seq: int | None = None) -> None:
        """Drop the box kept for ``coords``; with ``seq``, only if it is the one at ``seq``."""
        kept = self._kept.get(coords)
        if kept is not None and (seq is None or kept.seq == seq):
            self.take(coords)

    def peek(self, coords: Coordinates) -> Kept | None:
        """The box kept for ``coords``, left kept (what tests and metrics look at)."""
        return self._kept.get(coords)

    @property
    def bytes(self) -> int:
        """Bytes counted for every box kept."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._kept)
