"""The latest intent per control plane: the hub's record of each intent subject, and publishing.

Owns the record (``hub.reconcile.rkcp.published.Published`` or None per coordinates) and when
each entry was last read from, or written to, the stream. An entry is read from the stream once,
then kept current by our own publishes and purges (one leader writes); a control plane whose
subject is not in KB_INTENTS' subject list (taken in one request, ``hub.ingest.held``) starts as
None without a read of its own. ``publish`` is fenced on the sequence the record says is last,
and a fenced publish that fails drops the entry, so the next reconcile reads the stream (a
message another writer put there after the list was taken is found so). An entry is read again
when the site answers a sequence it does not hold (``intents.recheck_published``) or when the
survey of the stream (``surveying``) finds it was written, purged or deleted behind the hub's
back. The owners an intent names as replaced are handed to ``purging.ReleasedDeletions`` when it
is recorded (read or published). Talks to NATS only (``common.bus``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
from collections.abc import Callable, Iterator

from common import bus, logs
from common.bus import errors as bus_errors
from hub.api import rkcp as api
from hub.controllers.deps import Deps, Settings
from hub.controllers.rkcp import purging as released_deletions
from hub.ingest import held as holdings
from hub.mapping import tcp
from hub.reconcile.rkcp import intents, vocabulary
from hub.reconcile.rkcp.published import Op, Published
from protocol import errors as protocol_errors
from protocol import keys as protocol_keys
from protocol import messages, signing, streams, subjects
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)

INTENT_HOLDINGS_LIMIT = 50_000
"""Intent subjects known at most. Below the 100,000 subjects nats-server lists in one answer,
so a truncated list is never taken for the whole: past it, every first look reads."""


class PublishedIntents:
    def __init__(
        self,
        settings: Settings,
        deps: Deps,
        *,
        released: released_deletions.ReleasedDeletions,
    ) -> None:
        self.settings = settings
        self.deps = deps
        self.signing_key_id = protocol_keys.key_id(bytes(deps.signer.verify_key))
        self._own_keys = {**deps.earlier_keys, self.signing_key_id: deps.signer.verify_key}
        """Every key an intent of the hub's may be signed by: the current one and earlier, trusted ones."""
        self.released = released
        self._published_cache: dict[Coordinates, Published | None] = {}
        """The latest intent per control plane (the record the module docstring describes)."""
        self._published_checked: dict[Coordinates, float] = {}
        """Loop time each record was last read from, or written to, the stream."""
        self._holdings = holdings.Holdings(limit=INTENT_HOLDINGS_LIMIT)
        """The intent subjects KB_INTENTS holds (one subject list, ``_learn``), kept current by
        ``record`` and ``drop``: a control plane with no record and no subject is recorded as
        having no intent, as of when the list was taken, without a read of its own."""
        self._learning = asyncio.Lock()
        self.own_seqs: set[int] = set()
        """Sequences this hub published since the last survey (``surveying``): any other
        sequence in KB_INTENTS was written by someone else."""
        self.writing: collections.Counter[Coordinates] = collections.Counter()
        """Subjects this hub is publishing to or purging right now (``write``): what the survey
        sees of them may be the hub's own write, not yet recorded."""

    @contextlib.contextmanager
    def write(self, coords: Coordinates) -> Iterator[None]:
        """Around a write of the hub's own to ``coords``' intent subject, until it is recorded."""
        self.writing[coords] += 1
        try:
            yield
        finally:
            self.writing -= collections.Counter([coords])  # dropped at zero

    def record(self, coords: Coordinates, published: Published | None, *, at: float | None = None) -> None:
        """What the stream holds at ``coords`` as of loop time ``at`` (now by default): as our own
        write left it, or as read. The one place an intent's ``replaces`` (earlier owners whose
        released deletion it carries on) reach ``purging.ReleasedDeletions``."""
        self._published_cache[coords] = published
        self._published_checked[coords] = asyncio.get_running_loop().time() if at is None else at
        subject = subjects.intent(*coords, prefix=self.settings.prefix)
        if published is None:
            self._holdings.discard(subject)
            return
        self._holdings.add(subject)
        for uid in published.replaces:
            self.released.track(coords, uid, published.seq)

    def drop(self, coords: Coordinates) -> None:
        """Forget ``coords``: the next ``get`` reads the stream (its subject counts as held)."""
        self._published_cache.pop(coords, None)
        self._published_checked.pop(coords, None)
        self._holdings.add(subjects.intent(*coords, prefix=self.settings.prefix))

    def recorded(self) -> list[tuple[Coordinates, Published | None, float]]:
        """Every record: its coordinates, what it holds and the loop time it was last read or written."""
        return [(c, p, self._published_checked.get(c, -math.inf)) for c, p in self._published_cache.items()]

    def retain(self, mapped: Callable[[Coordinates], bool]) -> None:
        """Drop every entry no RKCP maps to (one was deleted): the record never outgrows the RKCPs."""
        for coords in [c for c in self._published_cache if not mapped(c)]:
            self.drop(coords)

    async def get(self, coords: Coordinates, status: messages.Status | None) -> Published | None:
        now = asyncio.get_running_loop().time()
        if coords not in self._published_cache:
            await self._learn(now)
            if self._holdings.holds(subjects.intent(*coords, prefix=self.settings.prefix)) is False:
                # No intent when the subject list was taken, and none published since: the
                # record is as old as the list, which the next survey compares it with.
                self.record(coords, None, at=self._holdings.taken_at)
        known = coords in self._published_cache
        held = self._published_cache.get(coords)
        if known and not intents.recheck_published(held, status):
            return held
        found = await self._read_published(coords)
        if known and found != held:
            log.warning(
                "intent subject of %s changed behind the hub's back: held seq %s, the stream has seq %s",
                coords,
                held.seq if held else "none",
                found.seq if found else "none",
                extra=logs.about_tcp(coords, seq=found.seq if found else None),
            )
        self.record(coords, found, at=now)
        return found

    async def _learn(self, now: float) -> None:
        """Take KB_INTENTS' subject list again once it is half ``intent_check_interval`` old (one
        request, however many control planes are new; one caller asks, the others wait). A
        failure, or a list past the limit, leaves nothing known until the next one is due: every
        first look reads meanwhile, as before."""
        max_age = self.settings.intent_check_interval / 2
        if now - self._holdings.taken_at < max_age:
            return
        async with self._learning:
            if asyncio.get_running_loop().time() - self._holdings.taken_at < max_age:
                return  # another caller took it meanwhile
            try:
                await self._list()
            except bus_errors.BusError as exc:
                stream = streams.stream_name(subjects.Kind.INTENT, prefix=self.settings.prefix)
                log.warning("cannot list the subjects of %s (%s); reading each intent subject", stream, exc)

    async def subject_list(self) -> tuple[set[str], float]:
        """KB_INTENTS' subject list and the loop time it was taken at (what the first looks
        learn from is refreshed by it too); a ``BusError`` when it cannot be taken."""
        async with self._learning:
            return await self._list()

    async def _list(self) -> tuple[set[str], float]:
        self._holdings.learning()  # a publish or drop meanwhile is kept on top of the list
        taken = asyncio.get_running_loop().time()
        stream = streams.stream_name(subjects.Kind.INTENT, prefix=self.settings.prefix)
        try:
            found = set(await bus.subjects_of(self.deps.conn, stream, ">"))
        except bus_errors.BusError:
            self._holdings.failed(at=taken)
            raise
        self._holdings.seed(found, at=taken)
        return found, taken

    async def _read_published(self, coords: Coordinates) -> Published | None:
        prefix = self.settings.prefix
        stream = streams.stream_name(subjects.Kind.INTENT, prefix=prefix)
        stored = await bus.last_message(self.deps.conn, stream, subjects.intent(*coords, prefix=prefix))
        if stored is None:
            return None
        try:
            i = messages.decode_intent(stored.data)
        except protocol_errors.DecodeError as exc:
            log.error(
                "undecodable intent on %s: %s",
                stored.subject,
                exc,
                extra=logs.about_tcp(coords, seq=stored.seq),
            )
            return Published.undecodable(stored.seq)
        try:
            signing.verify(stored.data, self._own_keys)
            signed = True
        except (protocol_errors.DecodeError, protocol_errors.SignatureError) as exc:
            about = logs.about_tcp(coords, seq=stored.seq)
            log.warning(
                "intent on %s (seq %d) is not the hub's: %s", stored.subject, stored.seq, exc, extra=about
            )
            signed = False
        return Published(
            seq=stored.seq,
            op=Op(i.op),
            generation=i.generation,
            owner_uid=i.owner.uid,
            spec_digest=intents.spec_digest(i.spec, {"labels": i.labels, "annotations": i.annotations}),
            kubeconfig_key=i.kubeconfig_key,
            key_id=i.key_id,
            signed=signed,
            replaces=tuple(i.replaces),
            owner_object=(i.owner.namespace, i.owner.name),
        )

    async def publish(
        self, action: vocabulary.Publish, r: api.RemoteKamajiControlPlane, o: vocabulary.Observed
    ) -> bool:
        """Sign and publish ``action``'s intent, fenced on ``action.expected_last_seq``, and record
        it; False when another writer moved the subject on (the entry is dropped: the next reconcile
        reads the stream). A ``BusError`` drops the entry too (the publish may have landed)."""
        coords = tcp.coordinates(r)
        with self.write(coords):
            return await self._publish(action, r, o, coords)

    async def _publish(
        self,
        action: vocabulary.Publish,
        r: api.RemoteKamajiControlPlane,
        o: vocabulary.Observed,
        coords: Coordinates,
    ) -> bool:
        body = messages.encode(signing.sign(intents.message(action, r, o, coords), self.deps.signer))
        digest = intents.spec_digest(action.spec, action.metadata)
        try:
            ack = await bus.publish(
                self.deps.conn,
                subjects.intent(*coords, prefix=self.settings.prefix),
                body,
                msg_id=self._msg_id(action, r, o, digest),
                expected_last_subject_seq=action.expected_last_seq,
            )
        except bus_errors.WrongLastSequence as exc:
            log.info(
                "intent for %s/%s not published: %s (another writer; observing again)",
                r.metadata.namespace,
                r.metadata.name,
                exc,
                extra=logs.about(namespace=r.metadata.namespace, name=r.metadata.name, site=coords.site),
            )
            self.drop(coords)
            return False
        except bus_errors.BusError:
            # The outcome is unknown (the publish may have landed): read the stream next time.
            self.drop(coords)
            raise
        self.own_seqs.add(ack.seq)
        self.deps.sites.published_to(coords.site)
        self.record(coords, self._published(action, r, o, ack.seq, digest))
        self.deps.metrics.intents_published.labels(site=coords.site, op=action.op).inc()
        log.info(
            "published %s intent for %s/%s (generation %d) as seq %d",
            action.op,
            r.metadata.namespace,
            r.metadata.name,
            r.metadata.generation,
            ack.seq,
            extra=logs.about(
                namespace=r.metadata.namespace, name=r.metadata.name, site=coords.site, seq=ack.seq
            ),
        )
        return True

    def _msg_id(
        self, action: vocabulary.Publish, r: api.RemoteKamajiControlPlane, o: vocabulary.Observed, digest: str
    ) -> str:
        # The sequence it is fenced on is part of the id: publishing the same intent again over a
        # replayed or purged one is a new message, which the duplicate window must not drop; a
        # retry of this very publish (same fence) still is one. The key id too: the same intent signed
        # again after a rotation is a new message.
        return (
            f"intent:{o.owner_uid}:{r.metadata.generation}:{action.op}:{digest[:16]}"
            f":{action.expected_last_seq}:{self.signing_key_id}"
        )

    def _published(
        self,
        action: vocabulary.Publish,
        r: api.RemoteKamajiControlPlane,
        o: vocabulary.Observed,
        seq: int,
        digest: str,
    ) -> Published:
        """The record of the intent just published as ``seq``."""
        return Published(
            seq=seq,
            op=Op(action.op),
            generation=r.metadata.generation,
            owner_uid=o.owner_uid,
            spec_digest=digest,
            kubeconfig_key=r.spec.kubeconfig_secret_key,
            key_id=self.signing_key_id,
            replaces=action.replaces,
            owner_object=(r.metadata.namespace, r.metadata.name),
        )
