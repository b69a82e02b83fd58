"""The apply loop's shell: bind, fetch, verify, observe, decide, execute, report, settle.

Talks to NATS (the ``agent-<site>`` durable consumer, through ``common.bus``) and to the site's
API server (``common.kube``). Messages for different TCPs are handled concurrently; messages for
one TCP strictly in order, by one worker per subject. Deciding is ``intents.decide``'s job; this
module only performs what it decides and never acks before the API has persisted the change.
Every delivery it holds, queued or being applied, is kept its own by ``keeper.Keeper``'s
in-progress acks (the consumer's ack wait is short, so a dead agent's intents come back fast).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import random
import time
from collections.abc import Callable, Collection, Mapping

import nacl.signing

from agent import metrics as agent_metrics
from agent import publishing, tcps
from agent.apply import intents, keeper
from common import backoff, bus, health
from common.bus import errors as bus_errors
from common.kube import Kube
from common.kube import errors as kerrors
from protocol import messages, streams, subjects

log = logging.getLogger(__name__)

READY_CHECK = "consumer"
REPLAY_ATTEMPTS = 3
"""Tries of the replay at start while the server is unavailable (then the resync remains)."""


def retry_delay(failures: int, *, cap: float) -> float:
    """Seconds before the next bind after ``failures`` failures in a row (jitter aside): a tenth
    of ``cap``, doubling, at most ``cap``."""
    return backoff.delay(max(1, failures), base=cap / 10, cap=cap, jitter=False)


class ApplyLoop:
    def __init__(
        self,
        *,
        conn: bus.Connection,
        kube: Kube,
        publisher: publishing.Publisher,
        ctx: intents.Context,
        trusted: Mapping[str, nacl.signing.VerifyKey],
        metrics: agent_metrics.Metrics,
        readiness: health.Readiness,
        retired: Collection[str] = (),
        prefix: str = subjects.DEFAULT_PREFIX,
        batch: int = 64,
        max_in_flight: int = 512,
        bind_retry: float = 5.0,
        on_delete: Callable[[str, str, int], None] | None = None,
    ) -> None:
        self.conn = conn
        self.kube = kube
        self.publisher = publisher
        self.ctx = ctx
        self.trusted = dict(trusted)
        self.retired = frozenset(retired)
        """Key ids the hub retired: an intent naming one is refused as ``retired_key``."""
        self.metrics = metrics
        self.readiness = readiness
        self.prefix = prefix
        self.batch = batch
        self.max_in_flight = max_in_flight
        self.bind_retry = bind_retry
        self.on_delete = on_delete
        """Told (namespace, name, intent seq) before a TCP is deleted for a delete intent; when set,
        whoever it is (the status loop) reports the Deleted once the TCP is gone, not this loop."""
        self.definition = streams.agent_consumer(ctx.site, prefix=prefix)
        self.last_seq = 0
        """Highest stream sequence handled (for the heartbeat)."""
        self.idle = False
        """True when the last fetch came back empty and no intent is in flight (caught up)."""
        self._queues: dict[str, collections.deque[bus.Delivery]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self.keeper = keeper.Keeper(conn)
        """The deliveries held (fetched, not yet settled), kept from redelivery while held."""
        self._failures = 0
        """Binds and fetches that failed in a row (``_retry_delay``)."""
        readiness.declare(READY_CHECK)

    @property
    def in_flight(self) -> int:
        return sum(len(q) for q in self._queues.values()) + len(self._workers)

    async def run(self) -> None:
        """Forever: bind (the hub creates the consumer; we never do), then consume."""
        keeping = asyncio.get_running_loop().create_task(self.keeper.run())
        try:
            replayed = False
            while True:
                consumer = await self._bind()
                if not replayed:
                    await self._replay()
                    replayed = True
                # The server's ack wait, or ours if shorter: a hub upgraded while we stay bound
                # shortens it without telling us, and touching early costs nothing.
                self.keeper.ack_wait = min(consumer.ack_wait, self.definition.ack_wait)
                try:
                    await self._consume(consumer)
                except bus_errors.PermissionDenied as exc:
                    self._not_ready(f"configuration error: {exc}", error=True)
                    await asyncio.sleep(self.bind_retry * 6)  # not a tight loop: a human must act
                except bus_errors.BusError as exc:
                    self._not_ready(f"fetching intents failed: {exc}")
                    await asyncio.sleep(self._retry_delay())
                finally:
                    await consumer.unsubscribe()
        finally:
            for task in (*self._workers.values(), keeping):
                task.cancel()
            await asyncio.gather(*self._workers.values(), keeping, return_exceptions=True)

    def _not_ready(self, reason: str, *, error: bool = False) -> None:
        self.readiness.set(READY_CHECK, False, reason)
        (log.error if error else log.warning)("%s", reason)

    async def _bind(self) -> bus.Consumer:
        d = self.definition
        while True:
            try:
                consumer = await bus.bind(self.conn, d)
            except bus_errors.ConsumerNotFound as exc:
                self._not_ready(str(exc))
            except bus_errors.PermissionDenied as exc:
                self._not_ready(f"configuration error: {exc}", error=True)
                await asyncio.sleep(self.bind_retry * 5)
            except bus_errors.BusError as exc:
                self._not_ready(f"cannot bind consumer {d.durable_name}: {exc}")
            else:
                self.readiness.set(READY_CHECK, True, f"bound to {d.stream}/{d.durable_name}")
                return consumer
            await asyncio.sleep(self._retry_delay())

    def _retry_delay(self) -> float:
        """Seconds to wait before binding again, after one more failure in a row: from a tenth of
        ``bind_retry`` doubling up to it, with jitter. Why not a fixed pause: a lost NATS node
        makes the consumer and its stream elect a leader, over in seconds, and a fixed
        ``bind_retry`` would add up to its whole length after every failed try; the jitter keeps
        the agents of many sites from coming back in step."""
        self._failures += 1
        return retry_delay(self._failures, cap=self.bind_retry) * random.uniform(0.5, 1.0)

    async def _replay(self) -> None:
        """Once per process, at the first bind: every current intent delivered again.

        Our relist: what changed at the site while no agent ran (a TCP deleted or edited by
        hand) sent no event to anyone, and the intents it concerns were acknowledged long ago.
        Applying an intent whose TCP is as it says changes nothing. When the server cannot (a
        server before 2.14, or unavailable REPLAY_ATTEMPTS times), the periodic resync remains.
        """
        d = self.definition
        where = f"{d.stream}/{d.durable_name}"
        for attempt in range(1, REPLAY_ATTEMPTS + 1):
            try:
                seq = await bus.replay(self.conn, d)
            except (bus_errors.Unavailable, bus_errors.BusTimeout) as exc:
                log.warning("replay of %s at start failed (attempt %d): %s", where, attempt, exc)
                await asyncio.sleep(self._retry_delay())
                continue
            except bus_errors.BusError as exc:  # PermissionDenied or an older server's refusal
                log.warning("cannot replay %s at start (%s); relying on the resync", where, exc)
                return
            log.info("replaying the current intents of %s from stream seq %d", where, seq)
            return
        log.warning("gave up replaying %s at start; relying on the resync", where)

    async def _consume(self, consumer: bus.Consumer) -> None:
        while True:
            if self.in_flight >= self.max_in_flight:
                await asyncio.wait(list(self._workers.values()), return_when=asyncio.FIRST_COMPLETED)
                continue
            deliveries = await consumer.fetch(self.batch, timeout=2.0)
            self._failures = 0
            self.idle = not deliveries and not self._workers
            for delivery in deliveries:
                self._enqueue(delivery)
            if deliveries:
                self.metrics.consumer_pending.set(deliveries[-1].num_pending)
            else:
                self.metrics.consumer_pending.set(0)

    def _enqueue(self, delivery: bus.Delivery) -> None:
        self.keeper.hold(delivery)
        queue = self._queues.setdefault(delivery.subject, collections.deque())
        queue.append(delivery)
        if delivery.subject not in self._workers:
            task = asyncio.get_running_loop().create_task(self._work(delivery.subject))
            self._workers[delivery.subject] = task

    async def _work(self, subject: str) -> None:
        queue = self._queues[subject]
        try:
            while queue:
                delivery = queue.popleft()
                try:
                    await self.handle(delivery)
                except bus_errors.BusError as exc:
                    # Settling failed (connection lost): the server redelivers; applying is idempotent.
                    log.warning("intent on %s: %s; it will be redelivered", subject, exc)
                finally:
                    self.keeper.release(delivery)
        finally:
            self._workers.pop(subject, None)
            if not queue:
                self._queues.pop(subject, None)

    def superseded(self, subject: str) -> bool:
        """A newer message for this TCP is waiting: stop working on the older one."""
        return bool(self._queues.get(subject))

    async def handle(self, delivery: bus.Delivery) -> None:
        """Process one delivery and settle it (ack only once the outcome is persisted and reported)."""
        started = time.perf_counter()
        self.last_seq = max(self.last_seq, delivery.stream_seq)
        intent = await self._verified(delivery)
        if intent is None:
            return
        decision = await self.process(intent, delivery)
        await self._settle(delivery, decision)
        self.metrics.intents.labels(op=intent.op, result=decision.result).inc()
        if decision.settle == "term":
            self.metrics.intents_rejected.labels(reason=decision.result).inc()
        self.metrics.apply_seconds.observe(time.perf_counter() - started)
        log.info(
            "intent %s seq %d (%s, generation %d): %s%s",
            delivery.subject,
            delivery.stream_seq,
            intent.op,
            intent.generation,
            decision.result,
            f" ({decision.report.reason})" if decision.report else "",
        )

    async def process(self, intent: messages.Intent, delivery: bus.Delivery) -> intents.Decision:
        """Observe, decide, execute and report; the caller settles the message."""
        try:
            observed = await self.kube.get_or_none(tcps.TCP, intent.name, namespace=intent.namespace)
        except kerrors.KubeError as exc:
            decision = intents.after_error(intent, exc, num_delivered=delivery.num_delivered, ctx=self.ctx)
        else:
            decision = intents.decide(intent, delivery.stream_seq, observed, ctx=self.ctx)
            if decision.action is not None:
                decision = await self._execute(decision, intent, delivery)
        if decision.report is not None:
            try:
                await self._report(intent, delivery, decision.report)
            except bus_errors.BusError as exc:
                log.warning(
                    "reporting %s for %s failed (%s); retrying the intent",
                    decision.report.phase,
                    delivery.subject,
                    exc,
                )
                decision = intents.Decision(
                    "retry", settle="nak", delay=intents.redelivery_delay(delivery.num_delivered)
                )
        return decision

    async def _report(
        self, intent: messages.Intent, delivery: bus.Delivery, report: intents.Report | None
    ) -> None:
        if report is not None:
            await self.publisher.status(
                self._status(intent, delivery.stream_seq, report), about=f"intent-{delivery.stream_seq}"
            )

    async def _verified(self, delivery: bus.Delivery) -> messages.Intent | None:
        found = intents.intake(
            delivery.data,
            delivery.subject,
            trusted=self.trusted,
            retired=self.retired,
            ctx=self.ctx,
            prefix=self.prefix,
        )
        if isinstance(found, intents.Refusal):
            log.warning(
                "refused intent on %s (seq %d): %s: %s; terminated",
                delivery.subject,
                delivery.stream_seq,
                found.reason,
                found.message,
            )
            self.metrics.intents.labels(op="unknown", result=found.result).inc()
            self.metrics.intents_rejected.labels(reason=found.reason).inc()
            await delivery.term()
            return None
        return found

    async def _execute(
        self, decision: intents.Decision, intent: messages.Intent, delivery: bus.Delivery
    ) -> intents.Decision:
        action = decision.action
        try:
            if isinstance(action, intents.Create):
                await self.kube.create(tcps.TCP, action.body, namespace=intent.namespace)
            elif isinstance(action, intents.Patch):
                await self.kube.patch(tcps.TCP, intent.name, action.patch, namespace=intent.namespace)
            elif isinstance(action, intents.Delete) and action.replacing:
                # The report (Provisioning/ReplacingPreviousOwner, for the new owner) goes out
                # first: Kamaji's finalizers may hold the old TCP for a while.
                try:
                    await self._report(intent, delivery, decision.report)
                except bus_errors.BusError as exc:
                    log.warning(
                        "reporting the replacement of %s failed (%s); retrying", delivery.subject, exc
                    )
                    return intents.Decision(
                        "retry", settle="nak", delay=intents.redelivery_delay(delivery.num_delivered)
                    )
                await self.kube.delete(
                    tcps.TCP, intent.name, namespace=intent.namespace, uid=action.uid or None
                )
                if not await self._wait_gone(intent, uid=action.uid, delivery=delivery):
                    return intents.Decision("superseded")
                log.warning(
                    "TenantControlPlane %s/%s of a previous owner deleted for intent seq %d (owner uid %s)",
                    intent.namespace,
                    intent.name,
                    delivery.stream_seq,
                    intent.owner.uid,
                )
                return dataclasses.replace(decision, report=None)
            elif isinstance(action, intents.Delete):
                if self.on_delete is not None:
                    self.on_delete(intent.namespace, intent.name, delivery.stream_seq)
                await self.kube.delete(
                    tcps.TCP, intent.name, namespace=intent.namespace, uid=action.uid or None
                )
                if not await self._wait_gone(intent, uid=action.uid, delivery=delivery):
                    return intents.Decision("superseded")
                if self.on_delete is not None:
                    return dataclasses.replace(decision, report=None)
        except kerrors.KubeError as exc:
            return intents.after_error(intent, exc, num_delivered=delivery.num_delivered, ctx=self.ctx)
        return decision

    async def _wait_gone(self, intent: messages.Intent, *, uid: str, delivery: bus.Delivery) -> bool:
        """Wait until Kamaji's finalizers let the TCP go; False when a newer intent superseded this one.

        The delivery stays held meanwhile: the keeper's in-progress acks keep it ours."""
        interval = 0.2
        while True:
            found = await self.kube.get_or_none(tcps.TCP, intent.name, namespace=intent.namespace)
            if found is None or tcps.meta(found).get("uid") != uid:
                return True
            if self.superseded(delivery.subject):
                return False
            await asyncio.sleep(interval)
            interval = min(2.0, interval * 1.5)

    def _status(self, intent: messages.Intent, seq: int, report: intents.Report) -> messages.Status:
        return messages.Status(
            site=intent.site,
            namespace=intent.namespace,
            name=intent.name,
            owner_uid=intent.owner.uid,
            observed_generation=(
                intent.generation if report.observed_generation is None else report.observed_generation
            ),
            intent_seq=seq,
            phase=report.phase,
            reason=report.reason,
            message=report.message,
            observed_at=messages.utcnow(),
        )

    async def _settle(self, delivery: bus.Delivery, decision: intents.Decision) -> None:
        if decision.settle == "ack":
            await delivery.ack()
        elif decision.settle == "nak":
            await delivery.nak(delay=decision.delay)
        else:
            await delivery.term()
