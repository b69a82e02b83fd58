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
        """Subjects at most: past it nothing is known until the next list (the stream is read
        as before), so a site publishing to ever new subjects cannot grow the hub's memory."""
        self._subjects: set[str] | None = None
        self._added: set[str] | None = None
        """Subjects added while a list is being taken (``learning``): the list may predate them."""
        self.taken_at = -math.inf
        """Loop time of the last list (taken, too long, or failed); -inf when none was taken."""

    def learning(self) -> None:
        """A list is being taken: what is added until ``seed`` is kept on top of it."""
        self._added = set()

    def seed(self, subjects: Iterable[str], *, at: float) -> None:
        """What the stream held at loop time ``at`` (a list taken then, after ``learning``),
        plus what was added meanwhile. A list over the limit leaves nothing known until the
        next one (``taken_at`` still moves, so the owner does not list again at once)."""
        held = set(subjects) | (self._added or set())
        self._added = None
        self._subjects = held if len(held) <= self.limit else None
        self.taken_at = at

    def failed(self, *, at: float) -> None:
        """Taking the list at ``at`` failed: nothing is known until the next one."""
        self._subjects = self._added = None
        self.taken_at = at

    def forget(self) -> None:
        """Nothing is known any more (a message may have gone by unseen)."""
        self._subjects = self._added = None
        self.taken_at = -math.inf

    @property
    def seeded(self) -> bool:
        return self._subjects is not None

    def add(self, subject: str) -> None:
        """A message landed on ``subject`` (seen delivered, or published by the owner)."""
        if self._added is not None:
            self._added.add(subject)
        if self._subjects is None:
            return
        self._subjects.add(subject)
        if len(self._subjects) > self.limit:
            self._subjects = None

    def discard(self, subject: str) -> None:
        """``subject`` was purged by the owner."""
        if self._subjects is not None:
            self._subjects.discard(subject)

    def holds(self, subject: str) -> bool | None:
        """Whether the stream holds a message on ``subject``; None when that is not known."""
        if self._subjects is None:
            return None
        return subject in self._subjects
