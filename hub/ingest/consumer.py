"""The hub's consumer of what sites send: statuses and sealed secrets, into ``hub.ingest.observations``.

Talks to NATS through ``common.bus`` only: the durable consumer ``hub`` on every known site's
own stream (``KB_SITE_<site>``), which the controller creates (``EnsureTopology``) before this
binds; until then it waits. Checking, decoding and recording are ``hub.ingest.record``'s, shared with
the reads of the streams' last messages.

Listens to nothing and emits two things: the coordinates whose observation changed
(``Deps.on_change``; the RKCP controller requeues what maps to them) and each heartbeat
delivered (``Deps.heartbeat``: ``hub.ingest.liveness`` keeps it; no poll reads them). It asks ``Deps.sites``
which streams to consume and ``Deps.maps`` whether an RKCP maps to a message's coordinates: one
no RKCP maps to is counted, never decoded, opened or kept (the stream is the compacted log and
keeps it, and ``Intake.load`` reads it back when an RKCP appears), so a site cannot grow the
hub's memory by publishing. The rest is recorded and announced; what cannot be used
is counted and dropped.

Nothing is acknowledged: the consumer has no acks (``protocol.streams.hub_consumer``), so the
server sends each message once. What the hub knows stays complete because every delivery is
checked to follow the one before it (consumer sequences). A gap (a message lost in flight when
a connection broke, a batch taken by another process holding the same credentials, a consumer
created again) makes the hub forget what it held for that site and read the stream again.
Every subject delivered is also added to what ``Intake`` knows the stream holds, learnt from
the stream's subject list at each bind (so a control plane with no message needs no read).

Memory: a site's messages are at most ``protocol.streams.MAX_MSG_SIZE`` (the server refuses
larger ones), and each site's consumer fetches at most ``batch`` at a time, so messages in
flight are bounded by sites * batch * message size; what is kept of them is bounded by the
RKCPs, and the subjects known per site stream by ``hub.ingest.record.HOLDINGS_LIMIT`` (the stream's own
quota bounds what a site can make it hold).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable
from typing import Any

from common import aiotasks, backoff, bus, logs
from common.bus import errors as bus_errors
from hub.ingest import gaps, record
from protocol import errors as protocol_errors
from protocol import messages, streams, subjects
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)
INGEST = "ingest "
"""The name of a site's task: this, then the site."""

INTERNAL_ERROR = "InternalError"
"""``kb_hub_bus_rejected`` reason of a message the hub failed on (a bug, logged with its trace)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    batch: int = 16
    """Messages per fetch and site: with 64 KiB messages, 16 keep 1 MiB in flight per site."""
    fetch_timeout: float = 120.0
    """Seconds a fetch waits for messages before it asks again: one request per site per this
    at rest, besides the top-ups the heartbeats take (a message ends the wait at once, and so
    does a reconnect)."""
    max_backoff: float = 10.0
    """Seconds, at most, between attempts to bind or fetch after NATS errors."""
    rescan_interval: float = 2.0
    """Seconds between looks at ``Deps.sites`` (a new site's consumer is bound within this)."""
    retain_interval: float = 60.0
    """Seconds between sweeps of what is held for control planes no RKCP maps to any more (a
    deleted one's last status): one pass over everything held, so not at every rescan."""
    check_interval: float = 300.0
    """Seconds between checks of a quiet stream's delivered count (``hub.ingest.gaps``): the
    longest a lost last message of a quiet site goes unnoticed (at once after a reconnect, when
    a message is lost in flight; past this only when another process took it)."""


@dataclasses.dataclass(frozen=True)
class Deps:
    intake: record.Intake
    sites: Callable[[], Iterable[str]]
    """The sites whose streams are consumed (the controller's ``known_sites``)."""
    maps: Callable[[Coordinates], bool]
    """Whether an RKCP maps to these coordinates: only then is a message decoded and kept."""
    on_change: Callable[[Coordinates], None]
    """Told the coordinates of every recorded change (the controller's ``on_observation``)."""
    ensured: Callable[[str], bool]
    """Whether the hub has made the site's stream and consumers (the controller's ``ensured``):
    until then a missing consumer is the normal wait of a start, not worth a warning."""
    heartbeat: Callable[[str, bus.Delivery], None] | None = None
    """Told each heartbeat delivered, with its site (``hub.ingest.heartbeats.heartbeats``); None:
    heartbeats are passed over."""


class Ingest:
    def __init__(self, deps: Deps, settings: Settings = Settings()) -> None:
        self.deps = deps
        self.intake = deps.intake
        self.settings = settings
        self._continuity = gaps.Continuity(check_interval=settings.check_interval)

    async def run(self) -> None:
        """Forever: consume every known site's stream, each site in a supervised task of its
        own; sites that appear get a task, sites that go lose theirs. Also drops what is held for
        coordinates no RKCP maps to any more."""
        tasks = aiotasks.Group()
        loop = asyncio.get_running_loop()
        swept = loop.time()
        try:
            while True:
                self._rescan(tasks)
                if loop.time() - swept >= self.settings.retain_interval:
                    self.intake.observations.retain(self.deps.maps)
                    swept = loop.time()
                await asyncio.sleep(self.settings.rescan_interval)
        finally:
            await tasks.stop()

    def _rescan(self, tasks: aiotasks.Group) -> None:
        """A task per site, ``ingest <site>``."""
        running = {name.removeprefix(INGEST) for name in tasks.names()}
        try:
            names = set(self.deps.sites())
        except Exception:
            log.exception("listing the known sites failed; consuming the previous ones")
            names = running
        for site in sorted(running - names):
            tasks.cancel(INGEST + site)
        for site in sorted(names - running):
            try:
                definition = streams.hub_consumer(site, prefix=self.intake.prefix)
            except protocol_errors.SubjectError as exc:
                log.warning("site %r cannot be consumed: %s", site, exc, extra=logs.about(site=site))
                continue
            consume = functools.partial(self._consume, site, definition)
            tasks.supervise(INGEST + site, consume, max_backoff=self.settings.max_backoff)

    async def _consume(self, site: str, definition: streams.ConsumerDef) -> None:
        """``_follow`` until cancelled (the site went) or failing (a bug; supervised, it starts
        again): what the stream holds is forgotten then, since nothing keeps it current."""
        try:
            await self._follow(site, definition, about=logs.about(site=site))
        finally:
            self.intake.forget_holdings(definition.stream)

    async def _follow(self, site: str, definition: streams.ConsumerDef, *, about: dict[str, Any]) -> None:
        """Bind and fetch forever; NATS errors (expected) rebind after a backoff."""
        failures = 0
        while True:
            if failures:
                await asyncio.sleep(backoff.delay(failures + 1, base=0.25, cap=self.settings.max_backoff))
            try:
                consumer = await bus.bind(self.intake.deps.conn, definition)
            except bus_errors.ConsumerNotFound as exc:
                # The hub creates its consumers (at start-up, and when a site appears); until
                # then (or after someone deleted one) we wait rather than create it. Only the
                # second is news: every start binds before the controller has made them.
                failures += 1
                level = logging.WARNING if self.deps.ensured(site) else logging.DEBUG
                log.log(level, "%s; retrying", exc, extra=about)
                continue
            except bus_errors.BusError as exc:
                failures += 1
                log.warning(
                    "cannot bind %s/%s: %s; retrying",
                    definition.stream,
                    definition.durable_name,
                    exc,
                    extra=about,
                )
                continue
            try:
                await self.bound(definition.stream, consumer.delivered)
                while True:
                    deliveries = await consumer.fetch(
                        self.settings.batch, timeout=self.settings.fetch_timeout
                    )
                    failures = 0
                    if deliveries:
                        await self.handle(*deliveries)
                    else:
                        await self.idle(consumer)
            except bus_errors.BusError as exc:
                failures += 1
                where = (definition.stream, definition.durable_name)
                log.warning("consuming %s/%s: %s; rebinding", *where, exc, extra=about)
            finally:
                await consumer.unsubscribe()

    async def handle(self, *deliveries: bus.Delivery) -> None:
        """Record deliveries of a site's ``hub`` consumer in order and announce news. Nothing is
        acknowledged (the consumer has no acks); a delivery that does not follow the one before
        it means messages went by unseen, so the site's stream is read again first (``_lost``)."""
        for delivery in deliveries:
            why = self._continuity.delivered(delivery.stream, delivery.consumer_seq)
            if why is not None:
                await self._lost(delivery.stream, why)
            self.intake.landed(delivery.stream, delivery.subject)
            self._record_or_refuse(delivery)

    async def bound(self, stream: str, delivered: int) -> None:
        """A binding whose first delivery will follow consumer sequence ``delivered``: if this
        process saw another last, messages went elsewhere meanwhile (lost in flight, taken by
        another process, or the consumer was created again). Then learn what the stream holds."""
        why = self._continuity.bound(stream, delivered)
        if why is not None:
            await self._lost(stream, why)
        else:
            await self.intake.learn_holdings(stream)

    async def idle(self, consumer: bus.Consumer) -> None:
        """Nothing came: if a check is due, has the consumer delivered more than was seen? (The
        last message of a quiet stream, lost in flight, which no later delivery reveals.)"""
        stream, conn = consumer.definition.stream, self.intake.deps.conn
        now, reconnects = asyncio.get_running_loop().time(), conn.reconnects
        if not self._continuity.check_due(stream, now=now, reconnects=reconnects):
            return
        state = await consumer.info()
        why = self._continuity.checked(stream, state.delivered_consumer_seq, now=now, reconnects=reconnects)
        if why is not None:
            await self._lost(stream, why)

    async def _lost(self, stream: str, why: str) -> None:
        """Messages of ``stream`` were delivered but not seen: forget what is held for its site's
        control planes and what the stream holds, announce them (their RKCPs look again and read
        the stream, ``Intake.load``), then learn what it holds now (taken after the gap)."""
        log.warning("%s: messages went by unseen (%s); reading the stream again", stream, why)
        for coords in self.intake.lose_track(stream):
            self._announce(coords)
        await self.intake.learn_holdings(stream)

    def _record_or_refuse(self, delivery: bus.Delivery) -> record.Verdict:
        """``_record``; a message it fails on (a bug) is counted and refused, so it cannot hold
        back the rest of its batch nor come back forever. The stream keeps it: ``Intake.load``
        reads it again when this hub restarts."""
        try:
            return self._record(delivery)
        except Exception:
            stream, subject = delivery.stream, delivery.subject
            about = logs.about_subject(subject, prefix=self.intake.prefix, seq=delivery.stream_seq)
            log.exception(
                "recording %s (seq %d) failed; terminated", subject, delivery.stream_seq, extra=about
            )
            self.intake.deps.metrics.bus_rejected.labels(stream=stream, reason=INTERNAL_ERROR).inc()
            return record.Verdict.REFUSED

    def _record(self, delivery: bus.Delivery) -> record.Verdict:
        stream, subject, seq = delivery.stream, delivery.subject, delivery.stream_seq
        parsed = self.intake.parse(stream, subject)
        if parsed is not None and parsed.kind is subjects.Kind.SITE:
            if self.deps.heartbeat is not None:
                self.deps.heartbeat(parsed.site, delivery)
            return record.Verdict.KEPT
        if parsed is None or parsed.kind not in (subjects.Kind.STATUS, subjects.Kind.SECRET):
            return record.Verdict.REFUSED  # only what the filter lets through is delivered
        coords = Coordinates(parsed.site, parsed.namespace, parsed.name)
        if not self.deps.maps(coords):
            self._pass_over(coords, stream, subject)
            return record.Verdict.KEPT
        if parsed.kind is subjects.Kind.STATUS:
            status = self.intake.decode(messages.decode_status, stream, subject, delivery.data)
            if status is None:
                return record.Verdict.REFUSED
            self.intake.deps.metrics.status_received.inc()
            verdict = self.intake.record_status(coords, status, seq, stream=stream, subject=subject)
        else:
            sealed = self.intake.decode(messages.decode_sealed_secrets, stream, subject, delivery.data)
            if sealed is None:
                return record.Verdict.REFUSED
            verdict = self.intake.record_sealed(
                coords, sealed, seq, stream=stream, subject=subject, open_new=True
            )
        if verdict is record.Verdict.RECORDED:
            self._announce(coords)
        return verdict

    def _pass_over(self, coords: Coordinates, stream: str, subject: str) -> None:
        """A message for coordinates no RKCP maps to: kept by the stream, not by us (``load``
        reads it when an RKCP maps to them). Counted like a rejection, logged at debug: a site's
        messages for control planes the hub does not manage (yet) are normal after an RKCP's
        deletion and must not flood logs."""
        self.intake.observations.unload(coords)
        self.intake.deps.metrics.bus_rejected.labels(stream=stream, reason=record.UNMAPPED).inc()
        if log.isEnabledFor(logging.DEBUG):  # a hot path: no fields built for nothing
            about = logs.about_tcp(coords)
            log.debug("ignored message on %s (%s): no RKCP maps to it", subject, record.UNMAPPED, extra=about)

    def _announce(self, coords: Coordinates) -> None:
        try:
            self.deps.on_change(coords)
        except Exception:
            # A broken listener must not stop the bus being read; the observation is recorded
            # and the controller's resync will find it.
            log.exception("on_change for %s failed", coords, extra=logs.about_tcp(coords))
