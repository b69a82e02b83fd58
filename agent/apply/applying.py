"""Applying one intent delivery: verify, observe, decide, execute, report, settle.

The apply loop's workers hand each delivery to ``Applier.handle``. Deciding is
``intents.decide``'s job (verifying ``intake``'s); this module only performs what they decide
and never acks before the API has persisted the change and its Status was published.

Talks to the site's API server (``common.kube``: get, create (dry run), apply, delete TCPs, and
patch the managedFields of one an older agent wrote: ``agent.tcp.legacy``), NATS through
the delivery (ack, nak, term) and ``agent.publishing.Publisher`` (Status). Asks the status
loop's cache, through the ``Known`` it is given, whether there is a TCP to read at all.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from agent.apply import failures, intake, intents
from agent.apply.outcomes import Result, Settle
from agent.deps import Deps
from agent.settings import AgentSettings
from agent.tcp import managed
from common import backoff, bus, logs
from common.bus import errors as bus_errors
from common.kube import errors as kerrors
from protocol import messages
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)

Known = Callable[[str, str], bool | None]
"""(namespace, name) → True/False: the status loop's complete cache holds a live managed TCP of
that name, or not; None: it cannot say yet (not every watch has listed)."""


class Applier:
    def __init__(
        self,
        settings: AgentSettings,
        deps: Deps,
        *,
        on_delete: Callable[[str, str, int], None],
        superseded: Callable[[str], bool],
        known: Known,
    ) -> None:
        self.kube = deps.kube
        self.desires = deps.desires
        self.publisher = deps.publisher
        self.metrics = deps.metrics
        self.ctx = intents.Context(
            site=settings.site,
            namespaces=settings.target_namespaces,
            namespace_retry=settings.namespace_retry,
        )
        self.trusted = deps.hub_keys.verify_keys()
        self.retired = frozenset(deps.hub_keys.retired)
        """Key ids the hub retired: an intent naming one is refused as ``retired_key``."""
        self.prefix = settings.prefix
        self.on_delete = on_delete
        """Told (namespace, name, intent seq) before a TCP is deleted for a delete intent: the
        status loop reports the Deleted once the TCP is gone. One Deleted per TCP from one place:
        two publishers could reach the hub in either order, and it purges at the first."""
        self.superseded = superseded
        """Whether a newer message for the TCP of this subject waits (stop waiting on this one)."""
        self.known = known
        """Whether the status loop's cache holds a managed TCP (namespace, name): None while it
        is not complete. Only a hint: ``intents.observes_first`` says what it is good for."""

    async def handle(self, delivery: bus.Delivery) -> None:
        """Process one delivery and settle it (ack only once the outcome is persisted and reported)."""
        started = time.perf_counter()
        intent = await self._verified(delivery)
        if intent is None:
            return
        decision = await self.process(intent, delivery)
        await self._settle(delivery, decision)
        self.metrics.intents.labels(op=intent.op, result=decision.result).inc()
        if decision.settle is Settle.TERM:
            self.metrics.intents_rejected.labels(reason=decision.result).inc()
        self.metrics.apply_seconds.observe(time.perf_counter() - started)
        log.info(
            "intent %s seq %d (%s, generation %d): %s%s",
            delivery.subject,
            delivery.stream_seq,
            intent.op,
            intent.generation,
            decision.result,
            _detail(decision),
            extra=self._about(intent, delivery),
        )

    def _about(self, intent: messages.Intent, delivery: bus.Delivery) -> dict[str, Any]:
        """Log fields of the TCP an intent is about, and the intent's stream sequence."""
        coords = Coordinates(self.ctx.site, intent.namespace, intent.name)
        return logs.about_tcp(coords, seq=delivery.stream_seq)

    async def process(self, intent: messages.Intent, delivery: bus.Delivery) -> intents.Decision:
        """Observe, decide, execute and report; the caller settles the message."""
        decision = await self._applied(intent, delivery)
        if decision.report is not None and not await self._reported(intent, delivery, decision.report):
            decision = _retry(delivery)
        return decision

    async def _applied(self, intent: messages.Intent, delivery: bus.Delivery) -> intents.Decision:
        """Decide and execute: unread when the cache says there is no TCP to read
        (``intents.observes_first``), else (or when one exists after all) on what the API has."""
        unobserved = intents.decide_unobserved(intent, ctx=self.ctx)
        if unobserved is not None:
            return unobserved
        try:
            if not intents.observes_first(intent, self.known(intent.namespace, intent.name)):
                decision = await self._unread(intent, delivery)
                if decision is not None:
                    return decision
            observed = await self.kube.get_or_none(managed.TCP, intent.name, namespace=intent.namespace)
            decision = intents.decide(intent, delivery.stream_seq, observed, ctx=self.ctx)
            return await self._execute(decision, intent, delivery)
        except kerrors.KubeError as exc:
            return failures.after_error(intent, exc, num_delivered=delivery.num_delivered, ctx=self.ctx)

    async def _unread(self, intent: messages.Intent, delivery: bus.Delivery) -> intents.Decision | None:
        """Decide as if the TCP were absent and execute (a create); None when the create found
        one after all (``failures.exists_after_all``): then it is read and decided on."""
        decision = intents.decide(intent, delivery.stream_seq, None, ctx=self.ctx)
        try:
            return await self._execute(decision, intent, delivery)
        except kerrors.KubeError as exc:
            if not failures.exists_after_all(exc):
                raise
        about = self._about(intent, delivery)
        log.info(
            "TenantControlPlane %s/%s exists after all: reading it",
            intent.namespace,
            intent.name,
            extra=about,
        )
        return None

    async def _reported(
        self, intent: messages.Intent, delivery: bus.Delivery, report: intents.Report
    ) -> bool:
        """Publish the Status ``report`` says; False (logged) when the server did not take it."""
        status = intents.new_status(intent, delivery.stream_seq, report, now=messages.utcnow())
        try:
            await self.publisher.status(status, about=f"intent-{delivery.stream_seq}")
        except bus_errors.BusError as exc:
            log.warning(
                "reporting %s for %s failed (%s); retrying the intent",
                report.phase,
                delivery.subject,
                exc,
                extra=self._about(intent, delivery),
            )
            return False
        return True

    async def _verified(self, delivery: bus.Delivery) -> messages.Intent | None:
        found = intake.intake(
            delivery.data,
            delivery.subject,
            trusted=self.trusted,
            retired=self.retired,
            site=self.ctx.site,
            prefix=self.prefix,
        )
        if isinstance(found, intake.Refusal):
            log.warning(
                "refused intent on %s (seq %d): %s: %s; terminated",
                delivery.subject,
                delivery.stream_seq,
                found.reason,
                found.message,
                extra=logs.about_subject(delivery.subject, prefix=self.prefix, seq=delivery.stream_seq),
            )
            self.metrics.intents.labels(op="unknown", result=found.result).inc()
            self.metrics.intents_rejected.labels(reason=found.reason).inc()
            await delivery.term()
            return None
        return found

    async def _execute(
        self, decision: intents.Decision, intent: messages.Intent, delivery: bus.Delivery
    ) -> intents.Decision:
        """Perform the decision's action, if any; the API's refusal is raised (``KubeError``)."""
        action = decision.action
        if isinstance(action, intents.Create):
            # A dry run first: an apply would take over a TCP of that name that is not ours
            # (the cache knows only managed ones), a create is refused AlreadyExists (or Invalid).
            await self.kube.create(managed.TCP, action.body, namespace=intent.namespace, dry_run=True)
        if isinstance(action, intents.Apply) and action.handover is not None:
            await self.kube.patch(managed.TCP, intent.name, action.handover, namespace=intent.namespace)
            log.info(
                "TenantControlPlane %s/%s: took over the fields an older agent applied (intent seq %d)",
                intent.namespace,
                intent.name,
                delivery.stream_seq,
                extra=self._about(intent, delivery),
            )
        if isinstance(action, intents.Create | intents.Apply):
            await self.kube.apply(
                managed.TCP, action.body, manager=managed.MANAGER, namespace=intent.namespace
            )
            self.desires.record(intent, seq=delivery.stream_seq)
        elif isinstance(action, intents.Delete):
            return await self._delete(decision, action, intent, delivery)
        return decision

    async def _delete(
        self,
        decision: intents.Decision,
        action: intents.Delete,
        intent: messages.Intent,
        delivery: bus.Delivery,
    ) -> intents.Decision:
        """Delete the TCP and wait until Kamaji's finalizers let it go; no Status is sent after.

        For a delete intent the status loop, told first, reports the Deleted once the TCP is
        gone. For an earlier owner's TCP (``replacing``) the report (Provisioning/
        ReplacingPreviousOwner, for the new owner) goes out first, since the finalizers may hold
        the old TCP for a while; the redelivery (``nak``) then creates the intent owner's.
        """
        if not action.replacing:
            self.on_delete(intent.namespace, intent.name, delivery.stream_seq)
        elif decision.report is not None and not await self._reported(intent, delivery, decision.report):
            return _retry(delivery)
        await self.kube.delete(managed.TCP, intent.name, namespace=intent.namespace, uid=action.uid or None)
        if not await self._wait_gone(intent, uid=action.uid, delivery=delivery):
            return intents.Decision(Result.SUPERSEDED)
        self.desires.forget(intent.namespace, intent.name, up_to=delivery.stream_seq)
        if action.replacing:
            log.warning(
                "TenantControlPlane %s/%s of a previous owner deleted for intent seq %d (owner uid %s)",
                intent.namespace,
                intent.name,
                delivery.stream_seq,
                intent.owner.uid,
                extra=self._about(intent, delivery),
            )
        return dataclasses.replace(decision, report=None)

    async def _wait_gone(self, intent: messages.Intent, *, uid: str, delivery: bus.Delivery) -> bool:
        """Wait until Kamaji's finalizers let the TCP go; False when a newer intent superseded this one.

        The delivery stays held meanwhile: the keeper's in-progress acks keep it ours."""
        polls = 0
        while True:
            found = await self.kube.get_or_none(managed.TCP, intent.name, namespace=intent.namespace)
            if found is None or managed.uid(found) != uid:
                return True
            if self.superseded(delivery.subject):
                return False
            polls += 1
            await asyncio.sleep(backoff.delay(polls, base=0.2, cap=2.0, jitter=False))

    async def _settle(self, delivery: bus.Delivery, decision: intents.Decision) -> None:
        if decision.settle is Settle.ACK:
            await delivery.ack()
        elif decision.settle is Settle.NAK:
            await delivery.nak(delay=decision.delay)
        else:
            await delivery.term()


def _retry(delivery: bus.Delivery) -> intents.Decision:
    """Try the intent again on redelivery, after the backoff its delivery count calls for."""
    return intents.Decision(
        Result.RETRY,
        settle=Settle.NAK,
        delay=failures.redelivery_delay(delivery.num_delivered),
        why="its Status could not be sent",
    )


def _detail(decision: intents.Decision) -> str:
    """What the log line adds to the result: the report's reason, or why and when a retry."""
    if decision.report is not None:
        return f" ({decision.report.reason})"
    if decision.why:
        after = f" in {decision.delay:.1f} s" if decision.delay is not None else ""
        return f"{after}: {decision.why}"
    return ""
