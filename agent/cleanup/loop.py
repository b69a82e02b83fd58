"""The cleanup (anti-entropy) loop's shell: observe, decide once, execute.

A pass lists this site's managed TCPs (label selector, per target namespace or cluster-wide),
reads the latest intent on each TCP's subject (``reading.IntentReader``: Direct Get, verified),
asks whether the consumer is caught up, lets the pure ``orphans.decide`` choose, and performs
it: a server-side apply that reverts drift (``reapplying``), a Warning Event then a
uid-preconditioned delete for an orphan (policy ``delete``), or a log line, a metric and an
Event (policy ``report``). Then it asks the status loop to republish. Every intent it reads
is recorded in ``agent.tcp.desires``, what the status loop measures drift from.

Passes run at start, every ``interval`` seconds (with jitter) and on ``trigger()`` (on every
NATS reconnect); a failed one is logged. Between passes, the status loop's watch calls
``restore`` (a TCP deleted by hand) and ``revert`` (a TCP edited by hand) for one TCP.

Talks to: the site's API server (list and delete TCPs, create Events; ``reapplying`` applies)
and NATS through
``reading`` (Direct Get of the site's own intent subjects) and the ``caught_up`` it is given
(``reading.consumer_caught_up``). Logs name TCPs and field paths, never values.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agent.cleanup import orphans, reading, reapplying
from agent.deps import Deps
from agent.settings import AgentSettings
from agent.tcp import managed
from common import aiotasks, logs, objects
from common.bus import errors as bus_errors
from common.kube import errors as kerrors
from common.kube import resources
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)


class CleanupLoop:
    def __init__(
        self,
        settings: AgentSettings,
        deps: Deps,
        *,
        caught_up: Callable[[], Awaitable[bool]],
        republish: Callable[[], Awaitable[object]],
    ) -> None:
        self.kube = deps.kube
        self.desires = deps.desires
        self.metrics = deps.metrics
        self.site = settings.site
        self.intents = reading.IntentReader(settings, deps)
        self.caught_up = caught_up
        """Whether every intent for this site has been applied (see ``reading.consumer_caught_up``)."""
        self.policy: orphans.Policy = settings.orphan_policy
        self.grace = settings.orphan_grace
        """Seconds a TCP must stay without an intent (consumer caught up) before the policy acts."""
        self.interval = settings.resync_interval
        """Seconds between passes (jittered by ±10 %, so sites that restarted together spread out)."""
        self.namespaces = settings.target_namespaces
        """Target namespaces; empty means all (one cluster-wide list)."""
        self.republish = republish
        """The status loop's ``republish_all``, called at the end of each pass."""
        self.reapplier = reapplying.Reapplier(deps, site=self.site, grace=self.grace, policy=self.policy)
        self.clocks = orphans.Clocks()
        """Orphan clocks and reported orphans, carried from pass to pass."""
        self.passes = 0
        """Passes completed (failed ones excluded)."""
        self._wake = asyncio.Event()

    # Public API

    def trigger(self) -> None:
        """Run a pass as soon as possible (coalesced: many triggers during a pass make one more)."""
        self._wake.set()

    async def on_reconnect(self) -> None:
        """For ``bus.Connection.on_reconnect``, which takes coroutine functions."""
        self.trigger()

    async def restore(self, namespace: str, name: str, vanished: managed.Applied | None) -> bool:
        """Recreate a TCP that vanished from the site while its latest intent still says provision.

        Called by the status loop from its watch (so within a second, not at the next pass) for
        a TCP that no delete intent removed. True when the TCP was created again.
        Raises BusError (Direct Get) or KubeError (create) when it could not tell or could not act.
        """
        latest = await self.intents.latest(namespace, name)
        body = orphans.recreate(latest, vanished)
        if body is None:
            return False
        assert isinstance(latest, orphans.Latest)
        try:
            # By apply, so that the agent owns its fields; the dry run refuses a TCP of that
            # name made meanwhile, which the apply would take over.
            await self.kube.create(managed.TCP, body, namespace=namespace, dry_run=True)
            await self.kube.apply(managed.TCP, body, manager=managed.MANAGER, namespace=namespace)
            self.desires.record(latest.intent, seq=latest.seq)
        except kerrors.Conflict as exc:
            if exc.reason != "AlreadyExists":
                raise
            return False  # another's of that name: the Deleted is reported, the hub decides
        self.metrics.drift_reverted.inc()
        about = logs.about_tcp(Coordinates(self.site, namespace, name), seq=latest.seq)
        what = "was deleted at the site while intent seq %d still says provision: recreated"
        log.warning(f"TenantControlPlane %s/%s {what}", namespace, name, latest.seq, extra=about)
        return True

    async def revert(self, namespace: str, name: str) -> bool:
        """Apply the latest intent again to a TCP whose fields we own were changed at the site.

        Called by the status loop from its watch (within a second of the edit, not
        at the next pass). Only the intent the TCP already runs is applied again; a newer one is
        the apply loop's. True when a patch reverted something.
        Raises BusError (Direct Get) or KubeError (the patch kept conflicting, or failed).
        """
        tcp = await self.kube.get_or_none(managed.TCP, name, namespace=namespace)
        if tcp is None:
            return False
        latest = await self.intents.latest(namespace, name)
        if not isinstance(latest, orphans.Latest):
            return False
        self.desires.record(latest.intent, seq=latest.seq)
        action = self.reapplier.redecide(tcp, latest)
        if action is None:
            return False
        await self.reapplier.reapply(action, f"TenantControlPlane {namespace}/{name}", latest=latest)
        return True

    async def run(self) -> None:
        """A pass at start, then every ``interval`` seconds and on every ``trigger()``, forever."""
        while True:
            # Cleared before the pass: a trigger during the pass (a reconnect) asks for another.
            self._wake.clear()
            try:
                await self.run_once()
            except (bus_errors.BusError, kerrors.KubeError) as exc:
                log.warning("anti-entropy pass failed: %s; next one in about %.0fs", exc, self.interval)
            except Exception:
                # Anti-entropy must outlive a bug in handling one odd object.
                log.exception("anti-entropy pass failed unexpectedly")
            await self._sleep()

    async def run_once(self, now: float | None = None) -> orphans.Plan:
        """One pass. ``now`` (seconds, any monotonic origin) drives the orphan clocks in tests.

        Raises BusError/KubeError when the pass cannot observe (listing, Direct Get); failures of
        single actions are logged and do not stop the others.
        """
        now = time.monotonic() if now is None else now
        found = await self._managed()
        latest = await self.intents.latest_of(found)
        # Asked after the subjects were read: an intent published after a read shows up as
        # pending here, so an empty read can never be acted on while its intent is in flight.
        caught_up = await self._caught_up()
        plan = orphans.decide(
            [orphans.Observed(tcp=t, latest=f) for t, f in zip(found, latest, strict=True)],
            site=self.site,
            caught_up=caught_up,
            clocks=self.clocks,
            now=now,
            grace=self.grace,
            policy=self.policy,
        )
        self.clocks = plan.clocks
        verified = {
            objects.key(t): f for t, f in zip(found, latest, strict=True) if isinstance(f, orphans.Latest)
        }
        for f in verified.values():
            self.desires.record(f.intent, seq=f.seq)
        for action in plan.actions:
            await self._execute(action, latest=verified)
        if plan.waiting:
            log.info(
                "%d managed TCP(s) have no intent; waiting (%s)",
                plan.waiting,
                f"grace {self.grace:.0f}s" if caught_up else "intents pending",
            )
        try:
            await self.republish()
        except (bus_errors.BusError, kerrors.KubeError) as exc:
            log.warning("republishing statuses failed: %s", exc)
        self.passes += 1
        log.debug("anti-entropy pass: %d TCP(s), %d action(s)", len(found), len(plan.actions))
        return plan

    # Observing

    async def _managed(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for namespace in self.namespaces or (None,):
            listing = await self.kube.list(
                managed.TCP, namespace=namespace, label_selector=managed.selector(self.site)
            )
            found.extend(listing.items)
        return found

    async def _caught_up(self) -> bool:
        try:
            return await self.caught_up()
        except bus_errors.BusError as exc:
            # Unknown counts as "not caught up": orphans wait, drift is still reverted.
            log.warning("cannot tell whether intents are pending (%s); orphans wait", exc)
            return False

    # Executing

    async def _execute(
        self, action: orphans.Action, *, latest: Mapping[tuple[str, str], orphans.Latest]
    ) -> None:
        where, about = f"TenantControlPlane {action.namespace}/{action.name}", self._about(action)
        try:
            if isinstance(action, orphans.Reapply):
                await self.reapplier.reapply(action, where, latest=latest[(action.namespace, action.name)])
            elif isinstance(action, orphans.DeleteOrphan):
                await self._delete(action, where)
            else:
                await self._report(action, where)
        except kerrors.Conflict as exc:
            why = exc.message or exc
            log.info("%s changed meanwhile (%s); the next pass looks again", where, why, extra=about)
        except (kerrors.KubeError, bus_errors.BusError) as exc:
            log.warning("anti-entropy on %s failed: %s; the next pass tries again", where, exc, extra=about)

    def _about(self, action: orphans.Action) -> dict[str, Any]:
        seq = action.seq if isinstance(action, orphans.Reapply) else None
        return logs.about_tcp(Coordinates(self.site, action.namespace, action.name), seq=seq)

    async def _delete(self, action: orphans.DeleteOrphan, where: str) -> None:
        # Deleting is the one irreversible step: read the subject once more right before it.
        if await self.intents.present(action.namespace, action.name):
            log.info("%s has an intent again; not deleting it", where, extra=self._about(action))
            return
        await self._event(action, where)
        if (
            await self.kube.delete(managed.TCP, action.name, namespace=action.namespace, uid=action.uid)
            is None
        ):
            return  # already gone
        self.metrics.orphans.labels(action="deleted").inc()
        log.warning("deleted orphan: %s", action.message, extra=self._about(action))

    async def _report(self, action: orphans.ReportOrphan, where: str) -> None:
        self.metrics.orphans.labels(action="reported").inc()
        log.warning("orphan: %s", action.message, extra=self._about(action))
        await self._event(action, where)

    async def _event(self, action: orphans.DeleteOrphan | orphans.ReportOrphan, where: str) -> None:
        """A Warning Event on the TCP; a failure is logged, never blocks the action it reports."""
        event = orphans.new_event(action, site=self.site, now=dt.datetime.now(dt.UTC))
        try:
            await self.kube.create(resources.EVENT, event, namespace=action.namespace)
        except kerrors.KubeError as exc:
            log.warning(
                "cannot record event %s on %s: %s", event["reason"], where, exc, extra=self._about(action)
            )

    async def _sleep(self) -> None:
        delay = self.interval * random.uniform(0.9, 1.1)
        await aiotasks.wait_event(self._wake, delay)
