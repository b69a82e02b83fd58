"""Which subjects a stream holds messages on, as far as the hub knows: so a control plane the hub
has never seen needs no stream read to learn that no message about it exists.

One ``Holdings`` per stream, filled by its owner: seeded from the stream's subject list (one
request for the whole stream, ``common.bus.subjects_of``) and kept current from what the owner
sees land afterwards (the hub's consumer of a site's stream adds every subject delivered to
it; the intents' owner adds what it publishes). ``holds`` answers True, False, or None when
nothing is known (not seeded, or forgotten after a gap): then the caller reads the stream as
before. False is only as current as the owner keeps it; every owner says in its docstring
why a False it acts on cannot hide a message. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


class Holdings:
    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        """Subjects at most: past it the record is dropped (the stream is read as before), so a
        site publishing to ever new subjects cannot grow the hub's memory through it."""
        self._subjects: set[str] | None = None
        self.taken_at = -math.inf
        """Loop time of the seed the record grew from; -inf when nothing is known."""

    def seed(self, subjects: Iterable[str], *, at: float) -> None:
        """What the stream held at loop time ``at`` (a subject list taken then)."""
        held = set(subjects)
        if len(held) > self.limit:
            self.forget()
            return
        self._subjects = held
        self.taken_at = at

    def forget(self) -> None:
        """Nothing is known any more (a message may have gone by unseen)."""
        self._subjects = None
        self.taken_at = -math.inf

    @property
    def seeded(self) -> bool:
        return self._subjects is not None

    def add(self, subject: str) -> None:
        """A message landed on ``subject`` (seen delivered, or published by the owner)."""
        if self._subjects is None:
            return
        self._subjects.add(subject)
        if len(self._subjects) > self.limit:
            self.forget()

    def discard(self, subject: str) -> None:
        """``subject`` was purged by the owner."""
        if self._subjects is not None:
            self._subjects.discard(subject)

    def holds(self, subject: str) -> bool | None:
        """Whether the stream holds a message on ``subject``; None when that is not known."""
        if self._subjects is None:
            return None
        return subject in self._subjects
