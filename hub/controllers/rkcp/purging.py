"""Released deletions until the site confirms them, then their subjects are purged.

Owns the set of (coordinates, owner uid, delete intent sequence) of deletions the
site-unavailable timeout released: the RKCP is gone, its delete intent waits in the stream.
Each is checked every ``interval`` seconds, and at once when a message for its coordinates
arrives (``poke``): the last message of the intent, status and secret subjects is read
(``common.bus``), ``hub.reconcile.rkcp.released.decide`` says whether the site confirmed, and the
released owner's messages are purged, each up to its own sequence, then the entry is dropped.

Nothing here is the record: the streams are. At start-up, ``scan`` finds the intent subjects no
RKCP maps to whose latest intent is a delete (a released deletion of an earlier hub process);
intents that name earlier owners (``replaces``) are tracked by the controller as it reads or
publishes them. Talks to NATS only, through ``common.bus``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from common import aiotasks, bus, logs
from common.bus import errors as bus_errors
from hub.controllers.deps import Deps, Settings
from hub.reconcile.rkcp import released
from protocol import errors as protocol_errors
from protocol import messages, streams, subjects
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)

CHECK_INTERVAL = 5.0
"""Seconds between checks of each released deletion (a message for it checks it at once)."""
REMEMBERED = 4096
"""Confirmed deletions remembered, so an intent that still names one (until its owner's next
publish) does not make the hub read the subjects again every time it reads the intent."""


class ReleasedDeletions:
    def __init__(
        self,
        settings: Settings,
        deps: Deps,
        *,
        on_purged: Callable[[Coordinates], None],
        interval: float = CHECK_INTERVAL,
    ) -> None:
        self.settings = settings
        self.deps = deps
        self.on_purged = on_purged
        """Told the coordinates whose subjects lost messages (the caller drops what it holds)."""
        self.interval = interval
        self._pending: dict[tuple[Coordinates, str], int] = {}
        """(coordinates, released owner uid) → sequence of the intent that released it."""
        self._at: dict[Coordinates, int] = {}
        """How many released owners each coordinates have pending (``poke`` is asked per message)."""
        self._done: dict[tuple[Coordinates, str], None] = {}
        """The last ``REMEMBERED`` confirmed ones, oldest first."""
        self._wake = asyncio.Event()

    def __contains__(self, coords: Coordinates) -> bool:
        return coords in self._at

    def __len__(self) -> int:
        return len(self._pending)

    def track(self, coords: Coordinates, uid: str, seq: int) -> None:
        key = (coords, uid)
        if uid and key not in self._pending and key not in self._done:
            self._pending[key] = seq
            self._at[coords] = self._at.get(coords, 0) + 1
            self.deps.metrics.released_pending.set(len(self._pending))
            self._wake.set()

    def _drop(self, key: tuple[Coordinates, str]) -> None:
        if self._pending.pop(key, None) is None:
            return
        coords = key[0]
        self._at[coords] -= 1
        if not self._at[coords]:
            del self._at[coords]
        self._done[key] = None
        while len(self._done) > REMEMBERED:
            del self._done[next(iter(self._done))]
        self.deps.metrics.released_pending.set(len(self._pending))

    def poke(self, coords: Coordinates) -> None:
        """A message for ``coords`` arrived: check its released deletions now."""
        if coords in self:
            self._wake.set()

    async def run(self, *, ready: asyncio.Event, maps: Callable[[Coordinates], bool]) -> None:
        """Forever: scan once ``ready`` (the RKCPs are listed), then check every interval."""
        await ready.wait()
        while True:
            try:
                await self.scan(maps)
                break
            except bus_errors.BusError as exc:
                log.warning("scanning the intent stream for released deletions failed: %s; retrying", exc)
                await asyncio.sleep(self.interval)
        while True:
            self._wake.clear()
            try:
                await self.check_all()
            except Exception:
                # The controller's other tasks must outlive a bug in handling one odd message.
                log.exception("checking released deletions failed; next check in %.0fs", self.interval)
            await aiotasks.wait_event(self._wake, self.interval)

    async def scan(self, maps: Callable[[Coordinates], bool]) -> None:
        """Track the delete intents no RKCP maps to: deletions released before this process."""
        stream = streams.stream_name(subjects.Kind.INTENT, prefix=self.settings.prefix)
        found = await bus.subjects_of(
            self.deps.conn, stream, subjects.globbed(subjects.Kind.INTENT, prefix=self.settings.prefix)
        )
        for subject in sorted(found):
            try:
                parsed = subjects.parse(subject, prefix=self.settings.prefix)
            except protocol_errors.SubjectError:
                continue
            coords = Coordinates(parsed.site, parsed.namespace, parsed.name)
            if maps(coords) or not self.deps.holds(coords.site):
                continue  # the RKCP's reconcile reads it, and tracks what it names; or another replica's
            stored = await bus.last_message(self.deps.conn, stream, subject)
            intent = _reduce(stored, _intent)
            if intent is not None and intent.op == "delete":
                self.track(coords, intent.owner_uid, intent.seq)
            if intent is not None:
                for uid in intent.replaces:
                    self.track(coords, uid, intent.seq)

    async def check_all(self) -> None:
        for (coords, uid), seq in list(self._pending.items()):
            try:
                done = await self.check(coords, uid, seq)
            except bus_errors.BusError as exc:
                about = logs.about_tcp(coords, seq=seq)
                log.warning(
                    "checking the released deletion of %s (uid %s): %s",
                    "/".join(coords),
                    uid,
                    exc,
                    extra=about,
                )
                continue
            if done:
                self._drop((coords, uid))

    async def check(self, coords: Coordinates, uid: str, seq: int) -> bool:
        """Purge what is left of owner ``uid`` at ``coords`` once the site confirmed; True when done."""
        site_stream = streams.site_stream_name(coords.site, prefix=self.settings.prefix)
        intent_stream = streams.stream_name(subjects.Kind.INTENT, prefix=self.settings.prefix)
        read = {
            kind: await bus.last_message(
                self.deps.conn,
                intent_stream if kind is subjects.Kind.INTENT else site_stream,
                subjects.control_plane(kind, *coords, prefix=self.settings.prefix),
            )
            for kind in (subjects.Kind.INTENT, subjects.Kind.STATUS, subjects.Kind.SECRET)
        }
        decision = released.decide(
            uid,
            seq,
            intent=_reduce(read[subjects.Kind.INTENT], _intent),
            status=_reduce(read[subjects.Kind.STATUS], _status),
            secret=_reduce(read[subjects.Kind.SECRET], _secret),
        )
        for purge in decision.purge:
            stream = intent_stream if purge.kind is subjects.Kind.INTENT else site_stream
            subject = subjects.control_plane(purge.kind, *coords, prefix=self.settings.prefix)
            await bus.purge_subject(self.deps.conn, stream, subject, up_to=purge.seq)
        if decision.purge:
            log.info(
                "site %s confirmed the released deletion of %s (owner uid %s): purged its %s",
                coords.site,
                "/".join(coords),
                uid,
                ", ".join(p.kind.value for p in decision.purge),
                extra=logs.about_tcp(coords, seq=seq),
            )
            self.deps.metrics.released_purged.inc()
            self.on_purged(coords)
        return decision.done


def _reduce(
    stored: bus.StoredMessage | None, reduce: Callable[[bytes, int], released.Stored]
) -> released.Stored | None:
    """The last message of a subject as the decision needs it; undecodable: no owner."""
    if stored is None:
        return None
    try:
        return reduce(stored.data, stored.seq)
    except protocol_errors.DecodeError:
        return released.Stored(seq=stored.seq, owner_uid="")


def _intent(data: bytes, seq: int) -> released.Stored:
    i = messages.decode_intent(data)
    return released.Stored(seq=seq, owner_uid=i.owner.uid, op=i.op, replaces=tuple(i.replaces))


def _status(data: bytes, seq: int) -> released.Stored:
    s = messages.decode_status(data)
    return released.Stored(
        seq=seq, owner_uid=s.owner_uid, phase=s.phase, reason=s.reason, intent_seq=s.intent_seq
    )


def _secret(data: bytes, seq: int) -> released.Stored:
    return released.Stored(seq=seq, owner_uid=messages.decode_sealed_secrets(data).owner_uid)
