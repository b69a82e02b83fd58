"""Applying a TCP's intent again where it drifted: the cleanup loop's pass, and its ``revert``.

``Reapplier.reapply`` performs one ``orphans.Reapply``: the handover of an older agent's fields
first (``agent.tcp.legacy``), then a forced server-side apply fenced by the resourceVersion it
read. A Conflict (Kamaji writes status often) is decided again on a fresh read, a few times
per pass. Talks to the site's API server only (get, patch and apply TCPs).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from agent.cleanup import orphans
from agent.deps import Deps
from agent.tcp import managed
from common import logs
from common.kube import errors as kerrors
from protocol.coordinates import Coordinates

log = logging.getLogger(__name__)

REAPPLY_ATTEMPTS: Final = 3
"""Patches of one drifted TCP per pass while its resourceVersion keeps moving (then: next pass)."""


class Reapplier:
    def __init__(self, deps: Deps, *, site: str, grace: float, policy: orphans.Policy) -> None:
        self.kube = deps.kube
        self.metrics = deps.metrics
        self.site = site
        self.grace = grace
        self.policy = policy

    def _about(self, action: orphans.Reapply) -> dict[str, Any]:
        return logs.about_tcp(Coordinates(self.site, action.namespace, action.name), seq=action.seq)

    async def reapply(self, action: orphans.Reapply, where: str, *, latest: orphans.Latest) -> None:
        for attempt in range(1, REAPPLY_ATTEMPTS + 1):
            try:
                if action.handover is not None:
                    await self._hand_over(action, where)
                await self.kube.apply(
                    managed.TCP, action.body, manager=managed.MANAGER, namespace=action.namespace
                )
                break
            except kerrors.Conflict:
                # Kamaji writes status often (every write bumps the resourceVersion), so a stale
                # precondition is usually harmless: decide again on a fresh read. If the apply loop
                # moved the TCP to a newer intent meanwhile, ``decide`` now says to leave it.
                if attempt == REAPPLY_ATTEMPTS:
                    raise
            fresh = await self.kube.get_or_none(managed.TCP, action.name, namespace=action.namespace)
            again = self.redecide(fresh, latest)
            if again is None:
                return
            action = again
        seq, fields, about = action.seq, ", ".join(action.fields), self._about(action)
        if not action.fields:
            log.info("%s: applied its labels and annotations again (intent seq %d)", where, seq, extra=about)
            return
        self.metrics.drift_reverted.inc()
        log.warning("reverted drift of %s to intent seq %d: %s", where, seq, fields, extra=about)

    async def _hand_over(self, action: orphans.Reapply, where: str) -> None:
        """Give an older agent's fields to our Apply; the apply is then fenced by the new version.
        Said at once: the apply after it may find the apply loop was there first."""
        assert action.handover is not None
        patched = await self.kube.patch(managed.TCP, action.name, action.handover, namespace=action.namespace)
        action.body["metadata"]["resourceVersion"] = managed.meta(patched)["resourceVersion"]
        what = "took over the fields an older agent applied"
        log.info("%s: %s (intent seq %d)", where, what, action.seq, extra=self._about(action))

    def redecide(self, tcp: Mapping[str, Any] | None, latest: orphans.Latest) -> orphans.Reapply | None:
        if tcp is None:
            return None
        plan = orphans.decide(
            [orphans.Observed(tcp=tcp, latest=latest)],
            site=self.site,
            caught_up=False,
            clocks=orphans.Clocks(),
            now=0.0,
            grace=self.grace,
            policy=self.policy,
        )
        return next((a for a in plan.actions if isinstance(a, orphans.Reapply)), None)
