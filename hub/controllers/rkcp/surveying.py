"""The survey of KB_INTENTS: what was written there behind the hub's back, found without reading
every intent subject.

Every ``intent_check_interval`` one stream-info request; ``hub.reconcile.rkcp.survey.judge``
decides from it what else to read: the message at each sequence the hub did not publish (a
replayed or foreign intent), the subject list (a purged or deleted subject), or every record
again. A record found out of date is dropped from ``published.PublishedIntents`` (the next
reconcile reads the subject) and its coordinates are handed to ``on_moved`` (the controller
requeues the RKCPs there). Talks to NATS only (``common.bus``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence

from common import bus, logs
from common.bus import errors as bus_errors
from hub.controllers.deps import Settings
from hub.controllers.rkcp.published import PublishedIntents
from hub.reconcile.rkcp import survey
from protocol import errors as protocol_errors
from protocol import streams, subjects
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)

LIST_PAGE = 100_000
"""Subjects nats-server lists in one stream-info answer."""

SHARED_READ_LIMIT = 100_000
"""With the sites shared: sequences since the last survey read (as subjects, no payload) before
every record is read again instead. The other replicas' intents count, so far more than
``survey.FOREIGN_READ_LIMIT``."""


class IntentSurvey:
    def __init__(
        self,
        settings: Settings,
        conn: bus.Connection,
        published: PublishedIntents,
        *,
        on_moved: Callable[[Coordinates], None],
        shared: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self.settings = settings
        self.conn = conn
        self.published = published
        self.on_moved = on_moved
        self.shared = shared
        """With the sites shared among replicas (--shard): the sites this one leads. The other
        replicas' intents are not foreign, and they are many: only the subjects of these sites
        are read (``bus.subjects_since``, headers only), not each message."""
        self.stream = streams.stream_name(subjects.Kind.INTENT, prefix=settings.prefix)
        self._mark: survey.Mark | None = None
        """The stream's state at the last survey that was followed through (None: none yet)."""

    async def run(self) -> None:
        while True:
            try:
                await self.survey()
            except bus_errors.BusError as exc:
                log.warning(
                    "surveying %s: %s; trying again in %ss",
                    self.stream,
                    exc,
                    self.settings.intent_check_interval,
                )
            await asyncio.sleep(self.settings.intent_check_interval)

    async def survey(self) -> survey.Verdict:
        """One survey, followed through; what it found. A ``BusError`` leaves the last mark,
        so the next survey judges everything since then."""
        state = await bus.stream_info(self.conn, self.stream)
        mark = survey.Mark(messages=state.messages, first_seq=state.first_seq, last_seq=state.last_seq)
        own = self.published.own_seqs
        limit = SHARED_READ_LIMIT if self.shared is not None else survey.FOREIGN_READ_LIMIT
        verdict = survey.judge(self._mark, mark, own, limit=limit)
        written = None if verdict.everything else await self._written(verdict.foreign)
        if written is None:
            log.warning(
                "%s moved behind the hub's back (last sequence %s, was %s): reading every intent again",
                self.stream,
                mark.last_seq,
                self._mark.last_seq if self._mark else "none",
            )
            for coords, _, _ in self.published.recorded():
                self._moved(coords)
        for seq, subject in written or ():
            if seq not in own:  # own: acknowledged meanwhile
                self._foreign(subject, seq)
        if verdict.compare and written is not None:
            await self._compare()
        self._mark = mark
        own.difference_update([s for s in own if s <= mark.last_seq])
        return verdict

    async def _written(self, foreign: Sequence[int]) -> list[tuple[int, str]] | None:
        """The subject at each of the ``foreign`` sequences that is about a site this replica
        leads; None when too many to read."""
        if not foreign:
            return []
        if self.shared is None:
            stored = [await bus.message_at(self.conn, self.stream, seq) for seq in foreign]
            return [(m.seq, m.subject) for m in stored if m is not None]
        filters = [
            subjects.site_filter(subjects.Kind.INTENT, site, prefix=self.settings.prefix)
            for site in sorted(self.shared())
        ]
        found = await bus.subjects_since(self.conn, self.stream, foreign[0], filters, limit=SHARED_READ_LIMIT)
        wanted = set(foreign)
        return None if found is None else [(seq, subject) for seq, subject in found if seq in wanted]

    def _foreign(self, subject: str, seq: int) -> None:
        try:
            parsed = subjects.parse(subject, prefix=self.settings.prefix)
        except protocol_errors.SubjectError:
            return  # not an intent subject of ours: no record can be about it
        if parsed.kind is not subjects.Kind.INTENT:
            return
        coords = Coordinates(parsed.site, parsed.namespace, parsed.name)
        if coords in self.published.writing:
            return  # the hub's own publish there, not acknowledged yet when the survey began
        log.warning(
            "intent subject %s was written behind the hub's back (seq %d): reading it again",
            subject,
            seq,
            extra=logs.about_tcp(coords, seq=seq),
        )
        self._moved(coords)

    async def _compare(self) -> None:
        """The subject list against the record: a subject recorded as held that the list lacks
        was purged or deleted; one recorded as empty that the list has was published to. Only
        records older than the list: a write since is in the record and maybe not in the list."""
        listed, taken = await self.published.subject_list()
        if len(listed) >= LIST_PAGE:
            # The server answers at most this many subjects at once: what is missing from a
            # list that long may be on the next page, not purged.
            log.warning("%s lists %d subjects or more: not compared for purges", self.stream, LIST_PAGE)
            return
        for coords, held, checked in self.published.recorded():
            if checked >= taken or coords in self.published.writing:
                continue  # written since the list was taken, or being written now
            subject = subjects.intent(*coords, prefix=self.settings.prefix)
            if (held is not None) != (subject in listed):
                log.warning(
                    "intent subject %s was %s behind the hub's back: reading it again",
                    subject,
                    "purged" if held is not None else "published to",
                    extra=logs.about_tcp(coords),
                )
                self._moved(coords)

    def _moved(self, coords: Coordinates) -> None:
        self.published.drop(coords)
        self.on_moved(coords)
