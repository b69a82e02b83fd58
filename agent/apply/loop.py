"""The apply loop's consuming side: bind, replay at start, fetch, one worker per TCP.

Talks to NATS (the ``agent-<site>`` durable consumer, through ``common.bus``). Messages for
different TCPs are handled concurrently; messages for one TCP strictly in order, by one worker
per subject, each handing its deliveries to ``applying.Applier`` (verify, observe, decide,
execute, report, settle). Every delivery it holds, queued or being applied, is kept its own by
``keeper.Keeper``'s in-progress acks (the consumer's ack wait is short, so a dead agent's
intents come back fast).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable

from agent.apply import applying, keeper
from agent.deps import Deps
from agent.settings import AgentSettings
from common import backoff, bus, logs
from common.bus import errors as bus_errors
from protocol import streams

log = logging.getLogger(__name__)

READY_CHECK = "consumer"
REPLAY_ATTEMPTS = 3
"""Tries of the replay at start while the server is unavailable (then the resync remains)."""


def retry_delay(failures: int, *, cap: float, jitter: bool = True) -> float:
    """Seconds before the next bind after ``failures`` failures in a row: a tenth of ``cap``,
    doubling, at most ``cap`` (0.5 to 1.0 times that with ``jitter``)."""
    return backoff.delay(max(1, failures), base=cap / 10, cap=cap, jitter=jitter)


class ApplyLoop:
    def __init__(
        self,
        settings: AgentSettings,
        deps: Deps,
        *,
        on_delete: Callable[[str, str, int], None],
        known: applying.Known,
        bind_retry: float = 5.0,
        max_in_flight: int = 512,
    ) -> None:
        self.settings = settings
        self.deps = deps
        self.max_in_flight = max_in_flight
        self.bind_retry = bind_retry
        self.applier = applying.Applier(
            settings, deps, on_delete=on_delete, superseded=self.superseded, known=known
        )
        """Handles each delivery the workers take from the queues."""
        self.definition = streams.agent_consumer(settings.site, prefix=settings.prefix)
        self.last_seq = 0
        """Highest stream sequence handled (for the heartbeat)."""
        self.idle = False
        """True when the last fetch came back empty and no intent is in flight (caught up)."""
        self._queues: dict[str, collections.deque[bus.Delivery]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self.keeper = keeper.Keeper(deps.conn)
        """The deliveries held (fetched, not yet settled), kept from redelivery while held."""
        self._failures = 0
        """Binds and fetches that failed in a row (``_retry_delay``)."""
        self.deps.readiness.declare(READY_CHECK)

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
        self.deps.readiness.set(READY_CHECK, False, reason)
        (log.error if error else log.warning)("%s", reason, extra=logs.about(site=self.settings.site))

    async def _bind(self) -> bus.Consumer:
        d = self.definition
        while True:
            try:
                consumer = await bus.bind(self.deps.conn, d)
            except bus_errors.ConsumerNotFound as exc:
                self._not_ready(str(exc))
            except bus_errors.PermissionDenied as exc:
                self._not_ready(f"configuration error: {exc}", error=True)
                await asyncio.sleep(self.bind_retry * 5)
            except bus_errors.BusError as exc:
                self._not_ready(f"cannot bind consumer {d.durable_name}: {exc}")
            else:
                self.deps.readiness.set(READY_CHECK, True, f"bound to {d.stream}/{d.durable_name}")
                return consumer
            await asyncio.sleep(self._retry_delay())

    def _retry_delay(self) -> float:
        """Seconds to wait before binding again, after one more failure in a row: from a tenth of
        ``bind_retry`` doubling up to it, with jitter. Why not a fixed pause: a lost NATS node
        makes the consumer and its stream elect a leader, over in seconds, and a fixed
        ``bind_retry`` would add up to its whole length after every failed try; the jitter keeps
        the agents of many sites from coming back in step."""
        self._failures += 1
        return retry_delay(self._failures, cap=self.bind_retry)

    async def _replay(self) -> None:
        """Once per process, at the first bind: every current intent delivered again.

        Our relist: what changed at the site while no agent ran (a TCP deleted or edited by
        hand) sent no event to anyone, and the intents it concerns were acknowledged long ago.
        Applying an intent whose TCP is as it says changes nothing. When the server cannot (a
        server before 2.14, or unavailable REPLAY_ATTEMPTS times), the periodic resync remains.
        """
        d = self.definition
        where = f"{d.stream}/{d.durable_name}"
        about = logs.about(site=self.settings.site)
        for attempt in range(1, REPLAY_ATTEMPTS + 1):
            try:
                seq = await bus.replay(self.deps.conn, d)
            except (bus_errors.Unavailable, bus_errors.BusTimeout) as exc:
                log.warning("replay of %s at start failed (attempt %d): %s", where, attempt, exc, extra=about)
                await asyncio.sleep(self._retry_delay())
                continue
            except bus_errors.BusError as exc:  # PermissionDenied or an older server's refusal
                log.warning("cannot replay %s at start (%s); relying on the resync", where, exc, extra=about)
                return
            log.info("replaying the current intents of %s from stream seq %d", where, seq, extra=about)
            return
        log.warning("gave up replaying %s at start; relying on the resync", where, extra=about)

    async def _consume(self, consumer: bus.Consumer) -> None:
        while True:
            if self.in_flight >= self.max_in_flight:
                await asyncio.wait(list(self._workers.values()), return_when=asyncio.FIRST_COMPLETED)
                continue
            deliveries = await consumer.fetch(self.settings.fetch_batch, timeout=2.0)
            self._failures = 0
            self.idle = not deliveries and not self._workers
            for delivery in deliveries:
                self._enqueue(delivery)
            if deliveries:
                self.deps.metrics.consumer_pending.set(deliveries[-1].num_pending)
            else:
                self.deps.metrics.consumer_pending.set(0)

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
                self.last_seq = max(self.last_seq, delivery.stream_seq)
                try:
                    await self.applier.handle(delivery)
                except bus_errors.BusError as exc:
                    # Settling failed (connection lost): the server redelivers; applying is idempotent.
                    about = logs.about_subject(subject, prefix=self.settings.prefix, seq=delivery.stream_seq)
                    log.warning("intent on %s: %s; it will be redelivered", subject, exc, extra=about)
                finally:
                    self.keeper.release(delivery)
        finally:
            self._workers.pop(subject, None)
            if not queue:
                self._queues.pop(subject, None)

    def superseded(self, subject: str) -> bool:
        """A newer message for this TCP is waiting: stop working on the older one."""
        return bool(self._queues.get(subject))
